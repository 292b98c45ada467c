"""The egress relay (docs/egress.md, "The relay inside"; docs/runner-protocol.md, "Egress
relay"). The session has no network; sandboxd's proxy dials into `egress.sock`, a unix
socket in the socket directory, and keeps connections parked there. Once sandboxd turns
egress on (the `egress` frame), the relay listens on 127.0.0.1 (the kernel picks the port),
pairs each local client, once it has sent its first bytes, with the oldest parked host
connection and copies bytes both ways. Every check is the host's: the relay neither reads
nor limits what it copies.

The copying runs in a process of its own (`python3 -I -c ...`, given both listening
sockets and the runner's pid, and ending when the runner is gone), not in the runner's
threads: there it would contend for the interpreter lock with the user code reading what
it fetched (a proxied 1 MiB HTTPS GET ran at half the host's speed). That process has one
thread for all connections (egress_relay.py). A reset ends every other process of the
sandbox, the relay too: the runner starts it again on the same sockets, and before each
exec if it died.

In a new runc container sandboxd asks for the loopback listener itself (`egress` with
`listener`): the runner passes it over and runs no relay, and sandboxd's proxy accepts the
code's connections directly. The relay runs where that cannot be (gVisor, whose sockets are
not the host's) and after a sandboxd restart, on the same port.

A session without egress pays for one bound socket: no listen(), no process, no variable,
and the runner never loads the relay's code (egress_relay.py), which only its process runs."""

import _socket
import os
import socket
import subprocess
import sys
import threading

from .common import INTERRUPTIBLE_RUNNER_CODE, bind_unix_socket, log

SOCKET_NAME = "egress.sock"
MAX_PARKED = 64                 # host connections kept parked
NO_PROXY = "localhost,127.0.0.1,::1"
RELAY_RECEIVE_BUFFER = 1 << 20  # SO_RCVBUF of user code's sockets to the relay (below)


def proxy_environment(port):
    """The variables that point HTTP clients at the relay on `port`."""
    url = f"http://127.0.0.1:{port}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}


class EgressRelay:
    """Bound at start beside the runner's socket (connectable by any uid: the umask at bind
    time, as runner.sock); turn_on() listens and starts the relay process."""

    def __init__(self, socket_dir):
        self.path = os.path.join(socket_dir, SOCKET_NAME)
        self.error = None               # why egress.sock could not be made
        self.port = None
        self._lock = threading.Lock()
        self._host_listener = None
        self._local_listener = None
        self._process = None
        self._handed_over = False       # sandboxd holds the listener on self.port
        try:
            self._host_listener = bind_unix_socket(self.path)
        except OSError as exc:
            self.error = f"cannot create {self.path}: {exc}"
            log(self.error)

    def turn_on(self, hand_over=False):
        """(port, listener): the relay's port, the same one again on later calls, and with
        `hand_over` on the first call the loopback listener itself, for sandboxd to accept
        on (the caller sends and closes it): then no relay runs. A later call (sandboxd
        restarted, and the listener went with it) listens on that port again and relays.
        Raises RuntimeError with the reason when the relay cannot run."""
        with self._lock:
            if self.port is not None and not self._handed_over:
                return self.port, None
            if self._host_listener is None:
                raise RuntimeError(self.error or "the relay has no socket")
            local = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                # A later listener takes the port of the proxy variables while connections
                # the earlier one accepted wait out TIME_WAIT: both need SO_REUSEADDR.
                local.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                local.bind(("127.0.0.1", self.port or 0))
                local.listen(128)
                if not hand_over or self.port is not None:
                    self._host_listener.listen(MAX_PARKED)
            except OSError as exc:
                local.close()
                raise RuntimeError(f"cannot listen: {exc}") from exc
            port = local.getsockname()[1]
            if hand_over and self.port is None:
                self._handed_over = True
                self._set_port(port)
                return port, local
            self._handed_over = False
            self._local_listener = local
            self._spawn()
            self._set_port(port)
            _give_relay_clients_a_receive_buffer(port)
            return port, None

    def _set_port(self, port):
        os.environ.update(proxy_environment(port))
        self.port = port

    def keep_running(self):
        """Starts the relay process again when it is gone (a reset ended it, or user code
        did); nothing when egress is off."""
        with self._lock:
            if self._process is not None and self._process.poll() is not None:
                self._spawn()

    def _spawn(self):
        fds = (self._host_listener.fileno(), self._local_listener.fileno())
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c",
             "import sys; sys.path.insert(0, sys.argv[1]); "
             "from sandbox_runner.egress_relay import serve; "
             "serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))",
             package_root, str(fds[0]), str(fds[1]), str(os.getpid())],
            pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            close_fds=True)


def _give_relay_clients_a_receive_buffer(port):
    """From now on a socket of user code that connects to the relay's 127.0.0.1:`port` gets
    an explicit SO_RCVBUF first. gVisor's loopback TCP (its own network stack, the one
    every gVisor session relays through) stalls a bulk answer for 200 ms, a retransmission
    timeout, in about a quarter of the fetches when the receiving socket tunes its own
    window; a socket with a set receive buffer does not tune it and meets none. Only the
    code's side of the connection can carry it, so socket.socket's connect() and
    connect_ex() set it (also in a container session that relays after a sandboxd restart,
    on the kernel's TCP), through _socket's own methods, unless the socket has one set
    already. Other sockets are not touched; the arguments are checked as by the methods
    they wrap (one, positional), and a connect that blocks stays interruptible
    (INTERRUPTIBLE_RUNNER_CODE). Once per runner: the port never changes."""
    global _relay_clients_tuned
    if _relay_clients_tuned:
        return
    _relay_clients_tuned = True
    relay = ("127.0.0.1", port)
    plain = _socket.socket
    with socket.socket() as fresh:
        kernels = fresh.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    def tune(sock, address):
        if type(address) is tuple and address == relay:
            try:
                if plain.getsockopt(sock, socket.SOL_SOCKET, socket.SO_RCVBUF) == kernels:
                    plain.setsockopt(sock, socket.SOL_SOCKET, socket.SO_RCVBUF,
                                     RELAY_RECEIVE_BUFFER)
            except (OSError, TypeError):
                pass                          # the wrapped method says what is wrong

    def connect(self, address, /):
        tune(self, address)
        return plain.connect(self, address)

    def connect_ex(self, address, /):
        tune(self, address)
        return plain.connect_ex(self, address)

    for function in (connect, connect_ex):
        function.__qualname__ = f"socket.{function.__name__}"
        INTERRUPTIBLE_RUNNER_CODE.add(function.__code__)
    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex


_relay_clients_tuned = False
