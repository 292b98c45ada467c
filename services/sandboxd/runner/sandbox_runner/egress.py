"""The egress relay (docs/egress.md, "The relay inside"; docs/runner-protocol.md, "Egress
relay"). The session has no network; sandboxd's proxy dials into `egress.sock`, a unix
socket in the socket directory, and keeps connections parked there. Once sandboxd turns
egress on (the `egress` frame), the relay listens on 127.0.0.1 (the kernel picks the port),
pairs each local client with the oldest parked host connection and copies bytes both ways.
Every check is the host's: the relay neither reads nor limits what it copies.

A session without egress pays for one bound socket: no listen(), no thread, no variable."""

import collections
import os
import select
import socket
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
            port = local.getsockname()[1]
            threading.Thread(target=_Broker(self._host_listener, local).run,
                             name="egress-broker", daemon=True).start()
            os.environ.update(proxy_environment(port))
            self.port = port
            return port


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


class _Pair:
    """Two sockets copied both ways by two threads: EOF of one direction half-closes the
    other socket; an error shuts both down; the thread that ends last closes both."""

    def __init__(self, a, b):
        self.sockets = (a, b)
        self._lock = threading.Lock()
        self._running = 2

    def copy(self, source, sink):
        buf = bytearray(COPY_BYTES)
        view = memoryview(buf)
        try:
            while True:
                n = source.recv_into(buf)
                if n == 0:
                    sink.shutdown(socket.SHUT_WR)
                    break
                sink.sendall(view[:n])
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
