"""The egress relay's process (egress.py starts it: `python3 -I -c "from
sandbox_runner.egress_relay import serve; ..."` with both listening sockets and the
runner's pid): one thread that pairs local clients with parked host connections and copies
bytes both ways (_Broker), and ends when the runner is gone. The runner itself never
imports this module: a session without egress does not hold its code."""

import collections
import os
import select
import socket
import sys
import time

from .common import log
from .egress import MAX_PARKED

MAX_WAITING = 256               # local clients not yet paired: before their first bytes,
                                # or waiting for a parked host connection
WAIT_SECONDS = 10.0             # how long after its accept a local client may stay unpaired
MIN_COPY_BYTES = 16 * 1024      # buffer of each direction of a pair, at first
MAX_COPY_BYTES = 256 * 1024     # ... doubled after each read that filled it, up to this
PUMP_ROUNDS = 16                # reads and writes of one direction per wakeup
PARENT_CHECK_MS = 1000          # how often the relay asks whether its runner still lives


def serve(host_fd, local_fd, runner_pid=None):
    """The relay process: brokers the two listening sockets it was given until killed, or
    until its parent is no longer the runner `runner_pid` (then it exits: a runner that
    died, whoever killed it, leaves no relay behind). None, from a runner that passes no
    pid (one started before this file was replaced): its parent now."""
    listeners = [socket.socket(fileno=fd) for fd in (host_fd, local_fd)]
    for listener in listeners:
        listener.setblocking(False)
    _Broker(*listeners, os.getppid() if runner_pid is None else runner_pid).run()


class _Broker:
    """One thread does all of the relay's work, whatever the number of connections (two
    threads per connection would spend the session's pids limit, 128 by default, at 64
    connections): it accepts on both listeners, keeps the parked host connections (closing
    those the host closed or that sent bytes before being handed out), pairs local clients
    with them in FIFO order, ends clients that waited WAIT_SECONDS and copies every pair
    both ways over non-blocking sockets (_Pair).

    A local client takes a parked connection only once it has sent bytes: the host counts a
    connection as parked until its first bytes arrive, so clients that connect and send
    nothing would otherwise hold every parked connection while the host dials no
    replacement. Until then it waits, polled for its first bytes, among the waiting (closed
    at EOF or error, and at its deadline like a client waiting for a host connection)."""

    def __init__(self, host_listener, local_listener, runner_pid):
        self.host_listener = host_listener
        self.local_listener = local_listener
        self.runner_pid = runner_pid
        self.parked = collections.deque()
        self.waiting = {}                        # client socket -> deadline, in accept order
        self.ready = {}                          # the waiting that sent bytes, in that order
        self.poller = select.poll()
        self.handlers = {}                       # fd -> (events polled for, handler(events))
        self.watch(host_listener, select.POLLIN, lambda _: self._accept_host())
        self.watch(local_listener, select.POLLIN, lambda _: self._accept_local())

    def watch(self, sock, mask, handler):
        """Polls `sock` for `mask` (not at all when 0: a socket with nothing to wait for
        must not wake the loop with POLLHUP) and passes its events to `handler`."""
        fd = sock.fileno()
        polled = self.handlers.get(fd, (0,))[0]
        if mask:
            if mask != polled:
                self.poller.register(fd, mask)
            self.handlers[fd] = (mask, handler)
        elif polled:
            del self.handlers[fd]
            self.poller.unregister(fd)

    def run(self):
        # An orphan is re-parented (to init or a subreaper), so its parent pid changes: asked
        # at least every PARENT_CHECK_MS, which works wherever the relay runs (a container,
        # gVisor, a host process). Not PR_SET_PDEATHSIG: that fires when the thread that
        # started the relay ends, and the runner starts it on a connection's reader thread,
        # which ends with sandboxd's connection while the runner lives on.
        while os.getppid() == self.runner_pid:
            try:
                self._turn()
            except Exception as exc:             # a bug here must not end the relay
                log(f"egress relay: {exc!r}")
                time.sleep(0.1)
        sys.exit(0)

    def _turn(self):
        timeout = PARENT_CHECK_MS
        if self.waiting:
            deadline = next(iter(self.waiting.values()))
            timeout = min(timeout, max(0, int((deadline - time.monotonic()) * 1000) + 1))
        for fd, events in self.poller.poll(timeout):
            # A handler of this turn may have closed the socket an event was for, and an
            # accept may have reused its fd: every handler copes with a stale event.
            entry = self.handlers.get(fd)
            if entry is not None:
                entry[1](events)
        now = time.monotonic()
        while self.waiting and next(iter(self.waiting.values())) <= now:
            self._leave(next(iter(self.waiting))).close()

    def _park(self, host):
        def dead(_):                             # EOF or bytes before its client
            if host in self.parked and not _quiet(host):
                self.parked.remove(host)
                self.watch(host, 0, None)
                host.close()
        self.parked.append(host)
        self.watch(host, select.POLLIN, dead)

    def _unpark(self):
        host = self.parked.popleft()
        self.watch(host, 0, None)
        return host

    def _leave(self, client):
        """Takes `client` out of the waiting, no longer polled."""
        del self.waiting[client]
        self.ready.pop(client, None)
        self.watch(client, 0, None)
        return client

    def _accept_host(self):
        host = _accept(self.host_listener)
        if host is None:
            return
        if self.ready:
            _Pair(self, self._leave(next(iter(self.ready))), host)
        elif len(self.parked) < MAX_PARKED:
            self._park(host)
        else:
            host.close()

    def _accept_local(self):
        client = _accept(self.local_listener)
        if client is None:
            return
        if len(self.waiting) >= MAX_WAITING:
            client.close()
            return
        self.waiting[client] = time.monotonic() + WAIT_SECONDS
        self.watch(client, select.POLLIN, lambda _: self._first_bytes(client))

    def _first_bytes(self, client):
        """`client` is readable: it has sent bytes (it is paired, or ready for the next host
        connection), or it is at EOF or failed (it is closed)."""
        if client not in self.waiting:
            return
        self.watch(client, 0, None)
        try:
            sent = client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            self.watch(client, select.POLLIN, lambda _: self._first_bytes(client))
            return
        except OSError:
            sent = b""
        if not sent:
            self._leave(client).close()
            return
        while self.parked:
            host = self._unpark()
            if _quiet(host):
                _Pair(self, self._leave(client), host)
                return
            host.close()
        self.ready[client] = None


def _quiet(sock):
    """Whether a parked connection is still live: not readable (EOF or bytes before its
    client), which the poll of this turn may not have seen yet."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)


def _accept(listener):
    try:
        return listener.accept()[0]
    except BlockingIOError:                      # the client left before its accept
        return None
    except OSError as exc:
        log(f"egress relay: accept failed: {exc!r}")
        return None


class _Direction:
    """Bytes from `source` to `sink` through a buffer: [start, end) is what was read and not
    yet sent. The buffer doubles (MIN_COPY_BYTES to MAX_COPY_BYTES) once a read filled it
    and it was sent: a bulk transfer moves in a few large calls (the copy's cost is in its
    calls, not its bytes), while a session's many small connections keep small buffers."""

    def __init__(self, source, sink):
        self.source = source
        self.sink = sink
        self.buffer = memoryview(bytearray(MIN_COPY_BYTES))
        self.start = self.end = 0
        self.full = False                        # a read filled the buffer
        self.eof = False                         # the source sent EOF
        self.done = False                        # ... and the sink was shut for writing

    def wants_read(self):
        return not self.eof and self.end < len(self.buffer)

    def wants_write(self):
        return self.start < self.end

    def pump(self):
        """Moves what it can without blocking (a bounded amount, so that one busy pair
        does not starve the others); OSError when either socket failed."""
        readable = writable = True
        for _ in range(PUMP_ROUNDS):
            if readable and self.wants_read():
                try:
                    n = self.source.recv_into(self.buffer[self.end:])
                except BlockingIOError:
                    readable = False
                else:
                    self.end += n
                    self.eof = n == 0
                    self.full = self.full or self.end == len(self.buffer)
            if writable and self.wants_write():
                try:
                    self.start += self.sink.send(self.buffer[self.start:self.end])
                except BlockingIOError:
                    writable = False
                if self.start == self.end:
                    self.start = self.end = 0
                    if self.full and len(self.buffer) < MAX_COPY_BYTES:
                        self.buffer = memoryview(bytearray(2 * len(self.buffer)))
                    self.full = False
            if not (readable and self.wants_read() or writable and self.wants_write()):
                break
        if self.eof and not self.done and not self.wants_write():
            self.sink.shutdown(socket.SHUT_WR)
            self.done = True


class _Pair:
    """A local client and its host connection, copied both ways by the broker's thread:
    EOF of one direction half-closes the other socket once that direction's buffer is
    sent; an error closes both; so does the end of both directions."""

    def __init__(self, broker, client, host):
        self.broker = broker
        self.sockets = (client, host)
        self.directions = (_Direction(client, host), _Direction(host, client))
        self._handlers = tuple(lambda events, i=i: self._events(i, events) for i in (0, 1))
        for sock in self.sockets:
            sock.setblocking(False)
        self._step(self.directions)

    def _events(self, index, events):
        """`events` on sockets[index]: reading it feeds directions[index], writing it
        drains the other direction (an error or hangup lets both find out)."""
        moved = []
        if events & (select.POLLIN | select.POLLERR | select.POLLHUP):
            moved.append(self.directions[index])
        if events & (select.POLLOUT | select.POLLERR | select.POLLHUP):
            moved.append(self.directions[1 - index])
        self._step(moved)

    def _step(self, directions):
        try:
            for direction in directions:
                direction.pump()
        except OSError:
            return self._close()
        if all(d.done for d in self.directions):
            return self._close()
        for index, sock in enumerate(self.sockets):
            mask = 0
            if self.directions[index].wants_read():
                mask |= select.POLLIN
            if self.directions[1 - index].wants_write():
                mask |= select.POLLOUT
            self.broker.watch(sock, mask, self._handlers[index])

    def _close(self):
        for sock in self.sockets:
            self.broker.watch(sock, 0, None)
            sock.close()
