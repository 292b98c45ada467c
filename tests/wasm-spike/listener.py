# The host's live listeners for experiment 4: TCP on 127.0.0.1:PORT and a unix socket, each
# answering "HELLO-FROM-HOST" to whoever connects. python3 listener.py PORT UNIX_PATH
import os, socket, sys, threading

def serve(sock):
    while True:
        conn, _ = sock.accept()
        try:
            if sock.family == socket.AF_INET:
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 15\r\n\r\nHELLO-FROM-HOST")
            else:
                conn.sendall(b"HELLO-FROM-HOST")
        finally:
            conn.close()

tcp = socket.create_server(("127.0.0.1", int(sys.argv[1])))
path = sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
unix = socket.socket(socket.AF_UNIX)
unix.bind(path)
os.chmod(path, 0o777)
unix.listen()
threading.Thread(target=serve, args=(unix,), daemon=True).start()
serve(tcp)
