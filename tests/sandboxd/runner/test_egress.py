"""The egress relay (docs/runner-protocol.md, "Egress relay"): egress.sock is bound before
`ready` and not listening until the `egress` frame; then sandboxd's side (played here)
parks connections on it and user code reaches them through the proxy variables."""

import os
import signal
import socket
import threading
import time

from harness import TIMEOUT, RunnerTestCase

PROXY = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
            b"Connection: close\r\n\r\nhello relay")


def read_head(sock):
    """Bytes up to and including the blank line after a request head."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(4096)
        if not part:
            raise AssertionError(f"EOF after {data!r}")
        data += part
    return data


def relays(runner_pid):
    """{pid: thread count} of the relay processes, the runner's children running `serve`."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == runner_pid and b"sandbox_runner.egress_relay import serve" in cmdline:
            found[int(entry)] = int(status.split("\nThreads:")[1].split()[0])
    return found


def the_relay(runner_pid):
    """(pid, thread count) of the runner's one relay process, waited for: Popen returns
    once the child's close-on-exec descriptors are closed, which the kernel does before it
    sets up the new program's arguments, so for a moment the relay's cmdline is empty."""
    deadline = time.monotonic() + TIMEOUT
    while not (found := relays(runner_pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    if len(found) != 1:
        raise AssertionError(f"{len(found)} relay processes under the runner {runner_pid}")
    return next(iter(found.items()))


def relay_threads(runner_pid):
    """The thread count of the runner's one relay process."""
    return the_relay(runner_pid)[1]


def running_relay(pid):
    """Whether process `pid` is a relay that has not exited (a zombie nobody reaped has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and b"sandbox_runner.egress_relay import serve" in cmdline


def read_to_eof(sock):
    data = b""
    while (part := sock.recv(65536)):
        data += part
    return data


class EgressTest(RunnerTestCase):
    def connect(self):
        client = super().connect()
        if not hasattr(self, "egress_path"):    # the first connection: before its ready
            self.egress_path = os.path.join(self.tmp.name, "egress.sock")
            self.egress_existed = os.path.exists(self.egress_path)
        return client

    def park(self, count=1):
        """`count` host connections to egress.sock, as sandboxd's parked dialer makes."""
        parked = []
        for _ in range(count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT)
            sock.connect(self.egress_path)
            parked.append(sock)
        self.addCleanup(lambda: [s.close() for s in parked])
        return parked

    def egress_on(self):
        frame_id = self.client.new_id()
        self.client.send({"type": "egress", "id": frame_id})
        reply = self.client.expect("egress_on")
        self.assertEqual(reply["id"], frame_id)
        self.assertNotIn("error", reply)
        return reply["port"]

    def test_socket_is_bound_before_ready_and_closed_until_egress(self):
        self.assertTrue(self.egress_existed)
        self.assertEqual(os.stat(self.egress_path).st_mode & 0o777, 0o777)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            with self.assertRaises(ConnectionRefusedError):
                sock.connect(self.egress_path)
        res = self.client.exec("import os\n[k for k in os.environ if 'proxy' in k.lower()]")
        self.assertEqual(res.value, [])

    def test_egress_frame_is_idempotent_and_checked(self):
        port = self.egress_on()
        self.assertIsInstance(port, int)
        self.assertEqual(self.egress_on(), port)
        res = self.client.exec("import os\n[os.environ[k] for k in "
                               f"{PROXY!r} + ('NO_PROXY', 'no_proxy')]")
        url = f"http://127.0.0.1:{port}"
        self.assertEqual(res.value, [url] * 4 + ["localhost,127.0.0.1,::1"] * 2)
        self.client.send({"type": "egress", "id": "1"})
        self.assertTrue(self.client.at_eof())

    def test_egress_is_answered_while_an_exec_runs(self):
        """The exec runs (it has printed) until the test opens its gate, which it does only
        once `egress_on` has come: an egress frame that waited for the exec would time out."""
        gate = os.path.join(self.tmp.name, "gate")
        exec_id = self.client.start_exec(
            f"import os, time\nprint('running', flush=True)\n"
            f"while not os.path.exists({gate!r}):\n    time.sleep(0.01)")
        self.client.expect("output")
        self.egress_on()
        open(gate, "w").close()
        self.assertOk(self.client.finish_exec(exec_id))

    def get_through_a_parked_connection(self):
        """User code's urllib GET reaches a parked connection, and its answer the code."""
        [host] = self.park()
        exec_id = self.client.start_exec(
            "import urllib.request\n"
            "urllib.request.urlopen('http://example.test/r', timeout=10).read().decode()")
        self.assertTrue(read_head(host).startswith(b"GET http://example.test/r "))
        host.sendall(RESPONSE)
        self.assertEqual(self.client.finish_exec(exec_id).value, "hello relay")

    def hand_over(self):
        """`egress` asking for the listener: (port, the listener sandboxd now holds)."""
        frame_id = self.client.new_id()
        self.client.send({"type": "egress", "id": frame_id, "listener": True})
        reply = self.client.expect("egress_on")
        self.assertEqual((reply["id"], reply.get("listener")), (frame_id, True), reply)
        self.assertEqual(len(self.client.passed), 1, "one descriptor with egress_on")
        listener = socket.socket(fileno=self.client.passed.pop())
        self.addCleanup(listener.close)
        return reply["port"], listener

    def test_a_handed_over_listener_takes_the_code_s_connections(self):
        """The proxy accepts the code's connections itself: the runner keeps no copy of the
        listener, runs no relay and does not listen on egress.sock."""
        port, listener = self.hand_over()
        self.assertEqual(listener.getsockname(), ("127.0.0.1", port))
        self.assertEqual(listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN), 1)
        self.assertEqual(relays(self.proc.pid), {}, "a relay process")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            with self.assertRaises(ConnectionRefusedError):
                sock.connect(self.egress_path)
        res = self.client.exec(f"import os\nsorted(os.listdir('/proc/{self.proc.pid}/fd'))")
        runner_fds = len(res.value)
        exec_id = self.client.start_exec(
            "import urllib.request\n"
            "urllib.request.urlopen('http://example.test/h', timeout=10).read().decode()")
        listener.settimeout(TIMEOUT)
        conn, _ = listener.accept()
        with conn:
            self.assertTrue(read_head(conn).startswith(b"GET http://example.test/h "))
            conn.sendall(RESPONSE)
        self.assertEqual(self.client.finish_exec(exec_id).value, "hello relay")
        res = self.client.exec(f"import os\nsorted(os.listdir('/proc/{self.proc.pid}/fd'))")
        self.assertEqual(len(res.value), runner_fds, "the runner holds no new descriptor")

    def test_the_relay_ends_when_its_runner_dies(self):
        """A runner killed outright (a test's tearDown, the host-process runtime's runner
        when its daemon goes) leaves no relay running as an orphan."""
        self.egress_on()
        relay, _ = the_relay(self.proc.pid)
        self.addCleanup(lambda: running_relay(relay) and os.kill(relay, signal.SIGKILL))
        self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while running_relay(relay) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(running_relay(relay), f"the relay {relay} outlived its runner")

    def test_after_a_handover_a_later_egress_relays_on_the_same_port(self):
        """sandboxd restarted: the listener went with it, and the relay takes its port."""
        port, listener = self.hand_over()
        listener.close()
        self.assertEqual(self.egress_on(), port)
        self.assertEqual(self.client.passed, [])
        relay_threads(self.proc.pid)
        self.get_through_a_parked_connection()

    def test_the_code_s_sockets_to_the_relay_get_a_receive_buffer_of_their_own(self):
        """gVisor's loopback TCP stalls bulk answers to a socket that tunes its own receive
        window: the code's sockets to the relay get a set one, every other socket keeps the
        kernel's."""
        port = self.egress_on()
        res = self.client.exec(
            "import socket\nother = socket.socket()\nother.bind(('127.0.0.1', 0))\n"
            "other.listen()\n"
            "def buffer(address, ex=False):\n    with socket.socket() as sock:\n"
            "        (sock.connect_ex if ex else sock.connect)(address)\n"
            "        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)\n"
            f"relay = ('127.0.0.1', {port})\n"
            "with socket.socket() as fresh:\n"
            "    default = fresh.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)\n"
            "[buffer(relay), buffer(relay, True), buffer(other.getsockname()), default]")
        relay, relay_ex, other, default = res.value
        self.assertEqual(relay, relay_ex)
        self.assertNotEqual(relay, default)
        self.assertEqual(other, default)
        # As the methods they wrap: one positional argument, the socket's own options, and
        # a receive buffer the code set stays.
        res = self.client.exec(
            "class Mine(socket.socket):\n    def setsockopt(self, *args):\n"
            "        raise ValueError('called')\n"
            "with socket.socket() as sock:\n    try:\n        sock.connect(address=relay)\n"
            "    except TypeError:\n        keywords = 'refused'\n"
            "with Mine() as sock:\n    sock.connect(relay)\n"
            "with socket.socket() as sock:\n"
            "    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)\n"
            "    before = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)\n"
            "    sock.connect(relay)\n"
            "    kept = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == before\n"
            "[keywords, kept]")
        self.assertEqual(res.value, ["refused", True], res.error)

    def test_a_connect_that_blocks_stays_interruptible_once_relaying(self):
        """socket.socket.connect() is the runner's then: an interrupt still lands while
        the call blocks (a listener whose queue is full drops the handshake)."""
        self.egress_on()
        exec_id = self.client.start_exec(
            "import socket\nfull = socket.socket()\nfull.bind(('127.0.0.1', 0))\n"
            "full.listen(0)\nqueued = []\nfor _ in range(4):\n"
            "    sock = socket.socket()\n    sock.setblocking(False)\n"
            "    sock.connect_ex(full.getsockname())\n    queued.append(sock)\n"
            "print('connecting', flush=True)\n"
            "socket.socket().connect(full.getsockname())")
        self.client.expect("output")
        time.sleep(0.3)
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=5)
        self.assertEqual(res.status, "interrupted", res.error)
        self.assertNotIn("sandbox_runner", res.error["traceback"])

    def test_http_request_goes_to_a_parked_connection(self):
        self.egress_on()
        [host] = self.park()
        exec_id = self.client.start_exec(
            "import urllib.request\n"
            "urllib.request.urlopen('http://example.test/x?y=1', timeout=10).read().decode()")
        head = read_head(host)
        self.assertTrue(head.startswith(b"GET http://example.test/x?y=1 HTTP/1.1\r\n"), head)
        self.assertIn(b"\r\nHost: example.test\r\n", head)
        host.sendall(RESPONSE)
        host.shutdown(socket.SHUT_WR)
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.value, "hello relay")
        self.assertEqual(host.recv(10), b"")       # the relay ended its side too

    def test_connect_tunnel_copies_both_ways(self):
        self.egress_on()
        [host] = self.park()
        exec_id = self.client.start_exec(
            "import http.client, os, socket\n"
            "c = http.client.HTTPConnection('127.0.0.1', int(os.environ['HTTPS_PROXY']"
            ".rsplit(':', 1)[1]), timeout=10)\n"
            "c.set_tunnel('example.test', 443)\n"
            "c.connect()\n"
            "c.sock.sendall(b'ping' * 1000)\n"
            "c.sock.shutdown(socket.SHUT_WR)\n"
            "got = b''\n"
            "while (part := c.sock.recv(65536)): got += part\n"
            "got")
        head = read_head(host)
        self.assertRegex(head, rb"^CONNECT example.test:443 HTTP/1\.[01]\r\n")
        host.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        data = b""
        while len(data) < 4000:
            part = host.recv(65536)
            self.assertTrue(part, data)
            data += part
        self.assertEqual(data, b"ping" * 1000)
        self.assertEqual(host.recv(10), b"")       # the code's half-close reached us
        host.sendall(b"pong" * 5000)
        host.shutdown(socket.SHUT_WR)
        tunnel = self.client.finish_exec(exec_id)
        self.assertOk(tunnel)
        self.assertEqual(tunnel.value, b"pong" * 5000)

    def test_closed_parked_connections_are_skipped(self):
        self.egress_on()
        dead = self.park(2)
        [live] = self.park()
        for sock in dead:
            sock.close()
        time.sleep(0.2)
        exec_id = self.client.start_exec(
            "import urllib.request\n"
            "urllib.request.urlopen('http://example.test/', timeout=10).read().decode()")
        self.assertTrue(read_head(live).startswith(b"GET http://example.test/ HTTP/1.1"))
        live.sendall(RESPONSE)
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.value, "hello relay")

    def test_client_waits_for_a_parked_connection(self):
        self.egress_on()
        exec_id = self.client.start_exec(
            "import urllib.request\n"
            "urllib.request.urlopen('http://example.test/late', timeout=10).read().decode()")
        time.sleep(0.5)
        [host] = self.park()
        self.assertTrue(read_head(host).startswith(b"GET http://example.test/late "))
        host.sendall(RESPONSE)
        self.assertEqual(self.client.finish_exec(exec_id).value, "hello relay")

    def test_reset_keeps_the_relay_and_the_variables(self):
        port = self.egress_on()
        self.client.reset()
        res = self.client.exec("import os\nos.environ['HTTP_PROXY']")
        self.assertEqual(res.value, f"http://127.0.0.1:{port}")
        self.get_through_a_parked_connection()
        self.assertEqual(self.egress_on(), port)

    def test_relay_uses_one_thread_for_many_connections(self):
        """Threads count against the session's pids limit (128 by default): 100 open pairs
        must not cost a thread each."""
        port = self.egress_on()
        pairs = []
        for i in range(100):
            [host] = self.park()
            client = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            self.addCleanup(client.close)
            client.sendall(b"%03d" % i)
            self.assertEqual(host.recv(3), b"%03d" % i)     # FIFO: the one parked
            host.sendall(b"<%03d>" % i)
            self.assertEqual(client.recv(5), b"<%03d>" % i)
            pairs.append((client, host))
        self.assertLessEqual(relay_threads(self.proc.pid), 4)
        for i, (client, host) in enumerate(pairs):
            client.sendall(b"up %03d" % i)
            client.shutdown(socket.SHUT_WR)
            host.sendall(b"down %03d" % i)
            host.shutdown(socket.SHUT_WR)
        for i, (client, host) in enumerate(pairs):
            self.assertEqual(read_to_eof(host), b"up %03d" % i)
            self.assertEqual(read_to_eof(client), b"down %03d" % i)

    def test_a_bulk_transfer_arrives_whole_both_ways(self):
        """8 MiB each way at once, through buffers that grow while it runs: every byte
        arrives, once and in order (the throughput is sandboxd_bench's to measure)."""
        port = self.egress_on()
        [host] = self.park()
        up = b"".join(b"%d," % i for i in range(1200000))
        down = up.replace(b",", b";")
        received = {}

        def pump(sock, data, key):
            sender = threading.Thread(target=lambda: (sock.sendall(data), sock.shutdown(socket.SHUT_WR)))
            sender.start()
            received[key] = read_to_eof(sock)
            sender.join(TIMEOUT)

        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as client:
            client.sendall(up[:1])                 # the client speaks first, as a proxy's does
            self.assertEqual(host.recv(1), up[:1])
            at_host = threading.Thread(target=pump, args=(host, down, "host"))
            at_host.start()
            pump(client, up[1:], "client")
            at_host.join(TIMEOUT)
        self.assertGreater(len(up), 8 << 20)
        self.assertTrue(up[:1] + received["host"] == up, "the host got other bytes than were sent")
        self.assertTrue(received["client"] == down, "the client got other bytes than were sent")

    def test_idle_clients_hold_no_parked_connection(self):
        """A client takes a parked connection at its first bytes: clients that connect and
        send nothing (a pool that pre-connects) leave the parked ones to the next request."""
        port = self.egress_on()
        parked = self.park(2)
        time.sleep(0.2)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) for _ in range(3)]
        for sock in idle:
            self.addCleanup(sock.close)
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as client:
            client.sendall(b"GET http://example.test/ HTTP/1.1\r\n\r\n")
            parked[0].settimeout(1.0)
            self.assertEqual(read_head(parked[0]), b"GET http://example.test/ HTTP/1.1\r\n\r\n")
            idle[1].sendall(b"later")
            parked[1].settimeout(1.0)
            self.assertEqual(parked[1].recv(5), b"later")

    def test_idle_client_is_closed_after_the_wait(self):
        """A client that sends nothing is closed WAIT_SECONDS (10 s) after its accept; one
        that closes first is dropped at once and takes no parked connection."""
        port = self.egress_on()
        [host] = self.park()
        time.sleep(0.2)
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=15) as idle:
            self.assertEqual(idle.recv(10), b"")
            waited = time.monotonic() - started
        self.assertGreater(waited, 9.5)
        self.assertLess(waited, 12.0)
        host.settimeout(0.2)
        with self.assertRaises(socket.timeout):
            host.recv(10)                          # still parked, never handed out
