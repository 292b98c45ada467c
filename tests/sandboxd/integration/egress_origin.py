"""The origin server of the egress tests: HTTP and HTTPS on loopback, one log line per
request (and per TLS handshake, with its SNI), so a test can tell what reached it.

    python3 egress_origin.py DIR CERT KEY
writes DIR/ports ("HTTP_PORT HTTPS_PORT") once it listens and appends to DIR/requests.log.
GET /page answers "hello from origin"; GET /bytes/N answers N bytes; GET /wheels/ is a
pip find-links page listing WHEEL, a wheel of one module made at start, and GET
/wheels/WHEEL answers it; anything else 404.
"""
import http.server
import os
import socketserver
import ssl
import sys
import threading
import zipfile

DIR, CERT, KEY = sys.argv[1:4]
LOG = os.path.join(DIR, "requests.log")
lock = threading.Lock()


def log(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


WHEEL = "egress_probe-1.0-py3-none-any.whl"


def make_wheel():
    """The smallest wheel pip resolves: metadata, the WHEEL file, a RECORD and a module."""
    files = {
        "egress_probe.py": "VALUE = 'from the allowed index'\n",
        "egress_probe-1.0.dist-info/METADATA":
            "Metadata-Version: 2.1\nName: egress-probe\nVersion: 1.0\n",
        "egress_probe-1.0.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: egress_origin\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "egress_probe-1.0.dist-info/RECORD,,\n"
    files["egress_probe-1.0.dist-info/RECORD"] = record
    path = os.path.join(DIR, WHEEL)
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    with open(path, "rb") as f:
        return f.read()


WHEEL_BYTES = make_wheel()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        log(f"{self.server.scheme} {self.requestline} host={self.headers.get('Host')}")
        kind = "application/octet-stream"
        if self.path == "/page":
            body = b"hello from origin"
        elif self.path.startswith("/bytes/"):
            body = b"x" * min(int(self.path[7:]), 64 << 20)
        elif self.path == "/wheels/":
            body = f'<html><body><a href="{WHEEL}">{WHEEL}</a></body></html>'.encode()
            kind = "text/html"
        elif self.path == "/wheels/" + WHEEL:
            body = WHEEL_BYTES
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        log(f"{self.scheme} error {sys.exc_info()[1].__class__.__name__}")


plain = Server(("127.0.0.1", 0), Handler)
plain.scheme = "http"
secure = Server(("127.0.0.1", 0), Handler)
secure.scheme = "https"
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
context.sni_callback = lambda sock, name, ctx: log(f"tls sni={name}")
secure.socket = context.wrap_socket(secure.socket, server_side=True, do_handshake_on_connect=False)


class TlsHandler(Handler):
    def setup(self):
        try:
            self.request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            log(f"tls failed {e.__class__.__name__}")
            raise
        super().setup()


secure.RequestHandlerClass = TlsHandler
for server in (plain, secure):
    threading.Thread(target=server.serve_forever, daemon=True).start()
with open(os.path.join(DIR, "ports.tmp"), "w") as f:
    f.write(f"{plain.server_address[1]} {secure.server_address[1]}\n")
os.rename(os.path.join(DIR, "ports.tmp"), os.path.join(DIR, "ports"))
threading.Event().wait()
