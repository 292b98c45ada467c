"""The egress relay (docs/egress.md, "The relay inside"; docs/runner-protocol.md, "Egress
relay"). The session has no network; sandboxd's proxy dials into `egress.sock`, a unix
socket in the socket directory, and keeps connections parked there. Once sandboxd turns
egress on (the `egress` frame), the relay listens on 127.0.0.1 (the kernel picks the port),
pairs each local client with the oldest parked host connection and copies bytes both ways.
Every check is the host's: the relay neither reads nor limits what it copies.

The copying runs in a process of its own (`python3 -I -c ...`, given both listening
sockets), not in the runner's threads: there it would contend for the interpreter lock
with the user code reading what it fetched (a proxied 1 MiB HTTPS GET ran at half the
host's speed). A reset ends every other process of the sandbox, the relay too: the runner
starts it again on the same sockets, and before each exec if it died.

A session without egress pays for one bound socket: no listen(), no process, no variable."""

import collections
import os
import select
import socket
import subprocess
import sys
import threading
import time

from .common import bind_unix_socket, log

SOCKET_NAME = "egress.sock"
MAX_PARKED = 64                 # host connections kept parked
MAX_WAITING = 256               # local clients waiting for a parked host connection
WAIT_SECONDS = 10.0             # how long a local client waits for one
COPY_BYTES = 64 * 1024
NO_PROXY = "localhost,127.0.0.1,::1"


def proxy_environment(port):
    """The variables that point HTTP clients at the relay on `port`."""
    url = f"http://127.0.0.1:{port}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}


class EgressRelay:
    """Bound at start beside the runner's socket (connectable by any uid: the umask at bind
    time, as runner.sock); turn_on() listens and starts the broker thread."""

    def __init__(self, socket_dir):
        self.path = os.path.join(socket_dir, SOCKET_NAME)
        self.error = None               # why egress.sock could not be made
        self.port = None
        self._lock = threading.Lock()
        self._host_listener = None
        self._local_listener = None
        self._process = None
        try:
            self._host_listener = bind_unix_socket(self.path)
        except OSError as exc:
            self.error = f"cannot create {self.path}: {exc}"
            log(self.error)

    def turn_on(self):
        """The relay's port; the same one again on later calls. Raises RuntimeError with
        the reason when the relay cannot run."""
        with self._lock:
            if self.port is not None:
                return self.port
            if self._host_listener is None:
                raise RuntimeError(self.error or "the relay has no socket")
            local = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                local.bind(("127.0.0.1", 0))
                local.listen(128)
                self._host_listener.listen(MAX_PARKED)
            except OSError as exc:
                local.close()
                raise RuntimeError(f"cannot listen: {exc}") from exc
            self._local_listener = local
            self._spawn()
            port = local.getsockname()[1]
            os.environ.update(proxy_environment(port))
            self.port = port
            return port

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
             "from sandbox_runner.egress import serve; serve(int(sys.argv[2]), int(sys.argv[3]))",
             package_root, str(fds[0]), str(fds[1])],
            pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            close_fds=True)


def serve(host_fd, local_fd):
    """The relay process: brokers the two listening sockets it was given until killed."""
    _Broker(socket.socket(fileno=host_fd), socket.socket(fileno=local_fd)).run()


class _Broker:
    """One thread: accepts on both listeners, keeps the parked host connections (closing
    those the host closed or that sent bytes before being handed out), pairs local clients
    with them in FIFO order, and ends clients that waited WAIT_SECONDS."""

    def __init__(self, host_listener, local_listener):
        self.host_listener = host_listener
        self.local_listener = local_listener
        self.parked = collections.deque()
        self.waiting = collections.deque()       # (client socket, deadline)

    def run(self):
        while True:
            try:
                self._turn()
            except Exception as exc:             # a bug here must not end the relay
                log(f"egress relay: {exc!r}")
                time.sleep(0.1)

    def _turn(self):
        poller = select.poll()
        fds = {}
        for sock in (self.host_listener, self.local_listener, *self.parked):
            fds[sock.fileno()] = sock
            poller.register(sock, select.POLLIN)
        timeout = None
        if self.waiting:
            timeout = max(0, int((self.waiting[0][1] - time.monotonic()) * 1000) + 1)
        for fd, _ in poller.poll(timeout):
            sock = fds[fd]
            if sock is self.host_listener:
                self._accept_host()
            elif sock is self.local_listener:
                self._accept_local()
            elif sock in self.parked:            # EOF or bytes before its client: dead
                self.parked.remove(sock)
                sock.close()
        now = time.monotonic()
        while self.waiting and self.waiting[0][1] <= now:
            self.waiting.popleft()[0].close()

    def _accept_host(self):
        host = _accept(self.host_listener)
        if host is None:
            return
        if self.waiting:
            _start_copy(self.waiting.popleft()[0], host)
        elif len(self.parked) < MAX_PARKED:
            self.parked.append(host)
        else:
            host.close()

    def _accept_local(self):
        client = _accept(self.local_listener)
        if client is None:
            return
        while self.parked:
            host = self.parked.popleft()
            if _quiet(host):
                _start_copy(client, host)
                return
            host.close()
        if len(self.waiting) < MAX_WAITING:
            self.waiting.append((client, time.monotonic() + WAIT_SECONDS))
        else:
            client.close()


def _quiet(sock):
    """Whether a parked connection is still live: not readable (EOF or bytes before its
    client), which the poll of this turn may not have seen yet."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)


def _accept(listener):
    try:
        return listener.accept()[0]
    except OSError as exc:
        log(f"egress relay: accept failed: {exc!r}")
        return None


def _start_copy(client, host):
    pair = _Pair(client, host)
    for source, sink in ((client, host), (host, client)):
        threading.Thread(target=pair.copy, args=(source, sink), name="egress-copy",
                         daemon=True).start()


class _NoSplice(Exception):
    """splice(2) is not available for these sockets (before any byte moved)."""


def _splice(source, sink):
    """Copies until EOF through a pipe, in the kernel: no byte enters this process."""
    if not hasattr(os, "splice"):
        raise _NoSplice()
    r, w = os.pipe()
    try:
        first = True
        while True:
            try:
                n = os.splice(source.fileno(), w, COPY_BYTES)
            except OSError:
                if first:
                    raise _NoSplice()
                raise
            first = False
            if n == 0:
                sink.shutdown(socket.SHUT_WR)
                return
            while n:
                n -= os.splice(r, sink.fileno(), n)
    finally:
        os.close(r)
        os.close(w)


def _copy_through_userspace(source, sink):
    buf = bytearray(COPY_BYTES)
    view = memoryview(buf)
    while True:
        n = source.recv_into(buf)
        if n == 0:
            sink.shutdown(socket.SHUT_WR)
            return
        sink.sendall(view[:n])


class _Pair:
    """Two sockets copied both ways by two threads: EOF of one direction half-closes the
    other socket; an error shuts both down; the thread that ends last closes both."""

    def __init__(self, a, b):
        self.sockets = (a, b)
        self._lock = threading.Lock()
        self._running = 2

    def copy(self, source, sink):
        try:
            try:
                _splice(source, sink)
            except _NoSplice:
                _copy_through_userspace(source, sink)
        except OSError:
            for sock in self.sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        with self._lock:
            self._running -= 1
            last = self._running == 0
        if last:
            for sock in self.sockets:
                sock.close()
