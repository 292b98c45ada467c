"""Tests of the runner, services/sandboxd/runner/sandbox_runner/, as built: the zipapp
named by SANDBOXD_RUNNER_PYZ (ctest sets it; there is no fallback to the sources).

Every test starts the runner as a subprocess listening on a temporary unix socket and talks
the frame protocol of docs/runner-protocol.md to it, as sandboxd does. Every socket read
has a timeout, so a runner bug fails a test instead of hanging it.

Run from the repository root, after `cmake --build build`:

    SANDBOXD_RUNNER_PYZ=build/services/sandboxd/sandbox_runner.pyz \
        python3 -m unittest discover -s tests/sandboxd/runner -v
"""

import ast
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

if not os.environ.get("SANDBOXD_RUNNER_PYZ"):
    raise RuntimeError("SANDBOXD_RUNNER_PYZ is not set: it must name the built "
                       "sandbox_runner.pyz (ctest sets it)")
RUNNER = Path(os.environ["SANDBOXD_RUNNER_PYZ"]).resolve()
TIMEOUT = 10.0          # seconds for any single frame
MIB = 1024 * 1024

CATALOG = {"servers": [
    {"name": "everything", "py_name": "mcp_everything", "description": "Test server",
     "tools": [
         {"name": "echo", "py_name": "echo",
          "description": "Echoes back the input\nSecond line of the description.",
          "input_schema": {"type": "object",
                           "properties": {"message": {"type": "string",
                                                      "description": "Text to echo"}},
                           "required": ["message"]},
          "output_schema": None},
         {"name": "add", "py_name": "add", "description": "Adds two numbers",
          "input_schema": {"type": "object",
                           "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                           "required": ["a", "b"]},
          "output_schema": {"type": "object"}},
         {"name": "get-image", "py_name": "get_image", "description": "Returns a tiny image",
          "input_schema": {"type": "object", "properties": {}}, "output_schema": None},
         {"name": "search", "py_name": "search", "description": "Search documents by query",
          "input_schema": {"type": "object",
                           "properties": {
                               "limit": {"type": "integer", "default": 10,
                                         "description": "max results"},
                               "query": {"type": "string"},
                               "tags": {"type": ["array", "null"]},
                               "max-depth": {"type": "integer"}},
                           "required": ["query"]},
          "output_schema": None},
     ]},
    {"name": "memory", "py_name": "mcp_memory", "description": "Knowledge graph",
     "tools": [
         {"name": "search", "py_name": "search",
          "description": "Search the knowledge graph nodes",
          "input_schema": {"type": "object", "properties": {"query": {"type": "string"}},
                           "required": ["query"]},
          "output_schema": None},
         {"name": "read_graph", "py_name": "read_graph", "description": "Read the whole graph",
          "input_schema": {"type": "object"}, "output_schema": None},
     ]},
]}


def text_result(text):
    return {"content": [{"type": "text", "text": text}]}


class ExecResult:
    def __init__(self, done, chunks, calls, frames):
        self.done = done
        self.chunks = chunks            # merged [stream, text] in arrival order
        self.calls = calls              # tool_call frames
        self.frames = frames            # every frame received, in order

    @property
    def status(self):
        return self.done["status"]

    @property
    def result(self):
        return self.done["result"]

    @property
    def value(self):
        """The trailing expression's repr, evaluated back (for literals)."""
        return ast.literal_eval(self.done["result"])

    @property
    def error(self):
        return self.done["error"]

    def stream(self, name):
        return "".join(text for stream, text in self.chunks if stream == name)


class Client:
    """sandboxd's side of one runner connection."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.next_id = 100

    def close(self):
        self.sock.close()

    def send(self, frame):
        self.send_raw(json.dumps(frame).encode())

    def send_raw(self, body, length=None):
        length = len(body) if length is None else length
        self.sock.sendall(struct.pack(">I", length) + body)

    def _recv_exact(self, size):
        data = b""
        while len(data) < size:
            part = self.sock.recv(size - len(data))
            if not part:
                raise EOFError("runner closed the connection")
            data += part
        return data

    def recv(self, timeout=TIMEOUT):
        self.sock.settimeout(timeout)
        (length,) = struct.unpack(">I", self._recv_exact(4))
        assert length <= 16 * MIB, length
        frame = json.loads(self._recv_exact(length))
        assert isinstance(frame, dict) and isinstance(frame.get("type"), str), frame
        return frame

    def expect(self, kind, timeout=TIMEOUT):
        frame = self.recv(timeout)
        if frame["type"] != kind:
            raise AssertionError(f"expected {kind}, got {frame}")
        return frame

    def at_eof(self, timeout=TIMEOUT):
        """True when the runner closed this connection (frames before EOF are skipped)."""
        try:
            while True:
                self.recv(timeout)
        except (EOFError, ConnectionResetError):
            return True
        except socket.timeout:
            return False

    def new_id(self):
        self.next_id += 1
        return self.next_id

    def start_exec(self, code, max_output_bytes=MIB, max_tool_calls_in_flight=None):
        exec_id = self.new_id()
        frame = {"type": "exec", "id": exec_id, "code": code,
                 "max_output_bytes": max_output_bytes}
        if max_tool_calls_in_flight is not None:
            frame["max_tool_calls_in_flight"] = max_tool_calls_in_flight
        self.send(frame)
        return exec_id

    def finish_exec(self, exec_id, on_tool_call=None, timeout=TIMEOUT):
        """Collect frames of one exec until its done. on_tool_call(frame) returns the
        tool_result fields (without type/call_id) or None to leave the call unanswered."""
        chunks, calls, frames = [], [], []
        while True:
            frame = self.recv(timeout)
            frames.append(frame)
            if frame["type"] == "output":
                assert frame["id"] == exec_id, frame
                for stream, text in frame["chunks"]:
                    if chunks and chunks[-1][0] == stream:
                        chunks[-1][1] += text
                    else:
                        chunks.append([stream, text])
            elif frame["type"] == "tool_call":
                assert frame["id"] == exec_id, frame
                calls.append(frame)
                if on_tool_call is not None:
                    reply = on_tool_call(frame)
                    if reply is not None:
                        self.send(dict(reply, type="tool_result", call_id=frame["call_id"]))
            elif frame["type"] == "done":
                assert frame["id"] == exec_id, frame
                return ExecResult(frame, chunks, calls, frames)
            else:
                raise AssertionError(f"unexpected frame during exec: {frame}")

    def exec(self, code, max_output_bytes=MIB, on_tool_call=None, timeout=TIMEOUT,
             max_tool_calls_in_flight=None):
        exec_id = self.start_exec(code, max_output_bytes, max_tool_calls_in_flight)
        return self.finish_exec(exec_id, on_tool_call, timeout)

    def set_catalog(self, catalog):
        frame_id = self.new_id()
        self.send({"type": "set_catalog", "id": frame_id, "catalog": catalog})
        self.assert_reply("catalog_set", frame_id)

    def reset(self):
        frame_id = self.new_id()
        self.send({"type": "reset", "id": frame_id})
        self.assert_reply("reset_done", frame_id)

    def assert_reply(self, kind, frame_id):
        frame = self.expect(kind)
        assert frame["id"] == frame_id, frame


class RunnerTestCase(unittest.TestCase):
    """Starts a fresh runner per test; self.client is connected and has read `ready`."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="runner-test-")
        self.path = os.path.join(self.tmp.name, "runner.sock")
        self.log = open(os.path.join(self.tmp.name, "runner.log"), "w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-u", str(RUNNER), "--socket", self.path],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.clients = []
        self.client = self.connect()
        self.ready = self.client.expect("ready")

    def tearDown(self):
        for client in self.clients:
            client.close()
        self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        self.log.seek(0)
        log = self.log.read().decode(errors="replace")
        self.log.close()
        self.tmp.cleanup()
        # The runner logs its own problems to stderr; surface them when a test fails.
        if log.strip() and os.environ.get("RUNNER_TEST_LOG"):
            print(f"\n--- runner log of {self.id()} ---\n{log}", file=sys.stderr)

    def connect(self):
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                client = Client(self.path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.01)
        self.clients.append(client)
        return client

    def assertOk(self, res):
        self.assertEqual(res.status, "ok", res.error)


class BasicsTest(RunnerTestCase):
    def test_ready_frame(self):
        self.assertEqual(self.ready["runner_version"], 1)
        self.assertEqual(self.ready["pid"], self.proc.pid)
        self.assertEqual(self.ready["execs"], 0)
        self.assertRegex(self.ready["python"], r"^3\.\d+\.\d+")

    def test_socket_is_world_connectable(self):
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o777)

    def test_ping(self):
        self.client.send({"type": "ping", "id": 7})
        self.assertEqual(self.client.expect("pong")["id"], 7)

    def test_persistence_and_trailing_expression(self):
        res = self.client.exec("x = 1")
        self.assertOk(res)
        self.assertIsNone(res.result)
        res = self.client.exec("x + 1")
        self.assertOk(res)
        self.assertEqual(res.result, "2")
        self.assertIsNone(res.error)
        self.assertEqual(res.done["output_bytes"], 0)
        self.assertEqual(res.done["dropped_bytes"], 0)

    def test_trailing_none_is_null(self):
        res = self.client.exec("print('hi')")
        self.assertOk(res)
        self.assertIsNone(res.result)
        self.assertEqual(res.stream("stdout"), "hi\n")
        self.assertIsNone(self.client.exec("None").result)

    def test_namespace_basics(self):
        res = self.client.exec(
            "import sys\n"
            "[__name__, type(asyncio).__name__, json.dumps([1]), sys.stdin.read(),"
            " sys.stdout.isatty(), sys.stdout.encoding,"
            " sys.modules['__main__'].__dict__ is globals()]")
        self.assertOk(res)
        self.assertEqual(res.value, ["__main__", "module", "[1]", "", False, "utf-8", True])

    def test_result_repr_is_capped(self):
        res = self.client.exec("'a' * 100000")
        self.assertOk(res)
        self.assertTrue(res.result.startswith("'aaaa"))
        self.assertIn("...[truncated ", res.result)
        self.assertLess(len(res.result), 66 * 1024)

    def test_exec_count_in_ready_after_reconnect(self):
        self.client.exec("a = 1")
        self.client.exec("b = 2")
        self.client.close()
        client = self.connect()
        self.assertEqual(client.expect("ready")["execs"], 2)


class OutputTest(RunnerTestCase):
    def test_order_across_streams(self):
        res = self.client.exec(
            "import sys\n"
            "print('a')\nprint('b')\n"
            "print('c', file=sys.stderr)\n"
            "sys.stdout.write('d\\n')\n"
            "sys.stderr.writelines(['e', 'f\\n'])\n")
        self.assertOk(res)
        self.assertEqual(res.chunks, [["stdout", "a\nb\n"], ["stderr", "c\n"],
                                      ["stdout", "d\n"], ["stderr", "ef\n"]])
        self.assertEqual(res.done["output_bytes"], 11)

    def test_writes_are_batched(self):
        res = self.client.exec("for i in range(1000):\n    print(i)")
        self.assertOk(res)
        self.assertEqual(res.stream("stdout"), "".join(f"{i}\n" for i in range(1000)))
        output_frames = [f for f in res.frames if f["type"] == "output"]
        self.assertLess(len(output_frames), 10)

    def test_output_arrives_before_done(self):
        exec_id = self.client.start_exec("import time\nprint('early')\ntime.sleep(1)")
        started = time.monotonic()
        frame = self.client.expect("output")
        self.assertLess(time.monotonic() - started, 0.8)
        self.assertEqual(frame["chunks"], [["stdout", "early\n"]])
        self.assertOk(self.client.finish_exec(exec_id))

    def test_output_cap_counts_dropped_bytes(self):
        res = self.client.exec("print('x' * 999)\nprint('tail')", max_output_bytes=100)
        self.assertOk(res)
        self.assertEqual(res.stream("stdout"), "x" * 100)
        self.assertEqual(res.done["output_bytes"], 1000 + 5)
        self.assertEqual(res.done["dropped_bytes"], 1005 - 100)

    def test_output_cap_counts_utf8_bytes(self):
        res = self.client.exec("print('é' * 100, end='')", max_output_bytes=51)
        self.assertOk(res)
        self.assertEqual(res.stream("stdout"), "é" * 25)
        self.assertEqual(res.done["output_bytes"], 200)
        self.assertEqual(res.done["dropped_bytes"], 150)

    def test_huge_output_is_dropped_cheaply(self):
        started = time.monotonic()
        res = self.client.exec(
            "import sys\n"
            "line = 'y' * 999\n"
            "for _ in range(50_000):\n    print(line)\n"          # 50 MB through print
            "chunk = 'z' * 1_000_000\n"
            "for _ in range(50):\n    sys.stdout.write(chunk)\n",  # 50 MB in big writes
            max_output_bytes=MIB, timeout=30)
        self.assertOk(res)
        self.assertLess(time.monotonic() - started, 20)
        self.assertEqual(res.done["output_bytes"], 100_000_000)
        self.assertEqual(len(res.stream("stdout")), MIB)
        self.assertEqual(res.done["dropped_bytes"], 100_000_000 - MIB)

    def test_writes_outside_an_exec_are_dropped(self):
        res = self.client.exec(
            "import threading, time\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()")
        self.assertOk(res)
        time.sleep(0.6)
        res = self.client.exec("1")
        self.assertEqual(res.chunks, [])

    def test_user_code_cannot_break_stdio_for_later_execs(self):
        self.assertOk(self.client.exec("import io, sys\nsys.stdout = io.StringIO()\n"
                                       "sys.stdin.close()\nsys.stderr.close()"))
        res = self.client.exec("import sys\nprint('back')\nprint('err', file=sys.stderr)\n"
                               "try:\n    input()\nexcept EOFError:\n    eof = True\neof")
        self.assertOk(res)
        self.assertEqual(res.chunks, [["stdout", "back\n"], ["stderr", "err\n"]])
        self.assertEqual(res.result, "True")

    def test_binary_buffer(self):
        res = self.client.exec("import sys\nsys.stdout.buffer.write('ü'.encode()[:1])\n"
                               "sys.stdout.buffer.write('ü!'.encode()[1:])")
        self.assertOk(res)
        self.assertEqual(res.stream("stdout"), "ü!")

    def test_lone_surrogates_do_not_break_frames(self):
        res = self.client.exec("print('a\\udc80b')\n'\\ud800'")
        self.assertOk(res)
        self.assertEqual(res.stream("stdout"), "a\\udc80b\n")
        self.assertIsInstance(res.result, str)


class ErrorTest(RunnerTestCase):
    def test_exception_traceback_has_only_user_frames(self):
        self.assertOk(self.client.exec("def fail(n):\n    raise ValueError(f'bad {n}')"))
        res = self.client.exec("x = 1\nfail(x)")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "ValueError")
        self.assertEqual(res.error["message"], "bad 1")
        tb = res.error["traceback"]
        self.assertTrue(tb.startswith("Traceback (most recent call last):"), tb)
        self.assertIn('File "<cell-2>", line 2, in <module>\n    fail(x)', tb)
        self.assertIn("raise ValueError(f'bad {n}')", tb)
        self.assertTrue(tb.endswith("ValueError: bad 1\n"), tb)
        self.assertNotIn("sandbox_runner", tb)
        self.assertNotIn("asyncio", tb)

    def test_library_frames_below_user_code_are_kept(self):
        res = self.client.exec("json.loads('{')")
        self.assertEqual(res.error["type"], "JSONDecodeError")
        self.assertIn("<cell-1>", res.error["traceback"])
        self.assertIn("json", res.error["traceback"])
        self.assertNotIn("sandbox_runner", res.error["traceback"])

    def test_async_traceback(self):
        res = self.client.exec("await asyncio.sleep(0)\n1 / 0")
        self.assertEqual(res.error["type"], "ZeroDivisionError")
        tb = res.error["traceback"]
        self.assertIn("<cell-1>", tb)
        self.assertNotIn("sandbox_runner", tb)
        self.assertNotIn("base_events", tb)

    def test_syntax_error(self):
        res = self.client.exec("x = = 1")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "SyntaxError")
        self.assertIn("<cell-1>", res.error["traceback"])
        self.assertIn("x = = 1", res.error["traceback"])
        self.assertNotIn("sandbox_runner", res.error["traceback"])
        self.assertOk(self.client.exec("1"))

    def test_system_exit_is_an_error(self):
        res = self.client.exec("import sys\nsys.exit(3)")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "SystemExit")
        self.assertEqual(res.error["message"], "3")
        self.assertEqual(self.client.exec("2 * 21").result, "42")

    def test_repr_failure_is_an_error(self):
        res = self.client.exec(
            "class B:\n    def __repr__(self):\n        raise RuntimeError('no')\nB()")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "RuntimeError")


class AsyncTest(RunnerTestCase):
    def test_top_level_await(self):
        res = self.client.exec("await asyncio.sleep(0.01)\nv = 40\nv + 2")
        self.assertOk(res)
        self.assertEqual(res.result, "42")
        self.assertOk(self.client.exec("async def f():\n    return v + 1"))
        self.assertEqual(self.client.exec("await f()").result, "41")

    def test_one_persistent_loop(self):
        self.client.exec("async def get():\n    return asyncio.get_running_loop()\n"
                         "first = await get()")
        self.assertEqual(self.client.exec("(await get()) is first").result, "True")

    def test_background_task_survives_between_execs(self):
        self.assertOk(self.client.exec(
            "async def later():\n    await asyncio.sleep(0.05)\n    return 'done'\n"
            "t = asyncio.ensure_future(later())\nawait asyncio.sleep(0)"))
        self.assertEqual(self.client.exec("await t").result, "'done'")


class InterruptTest(RunnerTestCase):
    def interrupt_when_started(self, code):
        exec_id = self.client.start_exec("print('started')\n" + code)
        self.client.expect("output")
        time.sleep(0.1)
        started = time.monotonic()
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=5)
        self.assertLess(time.monotonic() - started, 3)
        self.assertEqual(res.status, "interrupted", res.error)
        self.assertEqual(res.error["type"], "KeyboardInterrupt")
        self.assertEqual(res.error["message"], "execution interrupted")
        self.assertNotIn("sandbox_runner", res.error["traceback"])
        return res

    def assertStillUsable(self):
        self.assertEqual(self.client.exec("1 + 1").result, "2")
        self.assertEqual(self.client.exec("await asyncio.sleep(0.01)\n'async ok'").result,
                         "'async ok'")

    def test_interrupt_busy_loop(self):
        self.client.exec("kept = 'yes'")
        self.interrupt_when_started("while True:\n    pass")
        self.assertStillUsable()
        self.assertEqual(self.client.exec("kept").result, "'yes'")

    def test_interrupt_sleep(self):
        self.interrupt_when_started("import time\ntime.sleep(100)")
        self.assertStillUsable()

    def test_interrupt_async_sleep(self):
        self.interrupt_when_started("await asyncio.sleep(100)")
        self.assertStillUsable()

    def test_interrupt_async_busy_loop(self):
        self.interrupt_when_started("await asyncio.sleep(0)\nwhile True:\n    pass")
        self.assertStillUsable()

    def test_interrupt_pending_tool_call(self):
        self.client.set_catalog(CATALOG)
        exec_id = self.client.start_exec("await mcp_everything.echo(message='hang')")
        call = self.client.expect("tool_call")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=5)
        self.assertEqual(res.status, "interrupted")
        # A late result for the abandoned call is ignored.
        self.client.send({"type": "tool_result", "call_id": call["call_id"], "ok": True,
                          "result": text_result("late")})
        self.assertStillUsable()

    def test_interrupt_of_print_loop_keeps_frames_intact(self):
        # KeyboardInterrupt must never cut an output frame in half: the test client's
        # frame decoder would fail on a corrupt stream.
        self.interrupt_when_started("while True:\n    print('x' * 100)")
        self.interrupt_when_started("import sys\nwhile True:\n    sys.stderr.write('é')")
        self.assertStillUsable()

    def test_interrupt_caught_by_user_code(self):
        exec_id = self.client.start_exec(
            "import time\nprint('started')\n"
            "try:\n    time.sleep(100)\nexcept KeyboardInterrupt:\n    caught = True\n"
            "'survived'")
        self.client.expect("output")
        self.client.send({"type": "interrupt", "id": exec_id})
        res = self.client.finish_exec(exec_id, timeout=5)
        self.assertOk(res)
        self.assertEqual(res.result, "'survived'")

    def test_interrupt_before_exec_starts(self):
        first = self.client.start_exec("import time\ntime.sleep(0.3)")
        second = self.client.start_exec("while True:\n    pass")
        self.client.send({"type": "interrupt", "id": second})
        self.assertOk(self.client.finish_exec(first))
        self.assertEqual(self.client.finish_exec(second, timeout=5).status, "interrupted")
        self.assertStillUsable()

    def test_user_raised_keyboard_interrupt_is_an_error(self):
        res = self.client.exec("raise KeyboardInterrupt")
        self.assertEqual(res.status, "error")
        self.assertEqual(res.error["type"], "KeyboardInterrupt")

    def test_interrupt_for_other_exec_is_ignored(self):
        exec_id = self.client.start_exec("import time\ntime.sleep(0.3)\n'finished'")
        self.client.send({"type": "interrupt", "id": exec_id + 1000})
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.result, "'finished'")


class ResetTest(RunnerTestCase):
    def test_reset_clears_variables(self):
        self.client.set_catalog(CATALOG)
        self.client.exec("x = 1\nimport os")
        self.client.reset()
        res = self.client.exec("x")
        self.assertEqual(res.error["type"], "NameError")
        res = self.client.exec("[type(mcp_everything).__name__, 'os' in globals(),"
                               " json.dumps(1), __name__]")
        self.assertEqual(res.value, ["MCPServer", False, "1", "__main__"])
        self.client.close()
        client = self.connect()
        self.assertEqual(client.expect("ready")["execs"], 2)   # counted since the reset


class CatalogTest(RunnerTestCase):
    def setUp(self):
        super().setUp()
        self.client.set_catalog(CATALOG)

    def test_signatures_and_docs(self):
        res = self.client.exec(
            "import inspect\n"
            "[str(inspect.signature(mcp_everything.echo)),"
            " str(inspect.signature(mcp_everything.search)),"
            " str(inspect.signature(mcp_memory.read_graph)),"
            " mcp_everything.echo.__name__, mcp_everything.echo.__qualname__,"
            " inspect.iscoroutinefunction(mcp_everything.get_image)]")
        self.assertOk(res)
        self.assertEqual(res.value, [
            "(message: str)",
            "(query: str, limit: int = 10, tags: list | None = None, max_depth: int = None)",
            "()", "echo", "mcp_everything.echo", True])
        res = self.client.exec("mcp_everything.search.__doc__")
        doc = res.value
        self.assertIn("Search documents by query", doc)
        self.assertIn("query (string, required)", doc)
        self.assertIn("limit (integer, optional, default 10): max results", doc)
        self.assertIn("max_depth (integer, optional, sent as 'max-depth')", doc)
        res = self.client.exec("help(mcp_everything.echo)")
        self.assertOk(res)
        self.assertIn("echo(message: str)", res.stream("stdout"))
        self.assertIn("Echoes back the input", res.stream("stdout"))

    def test_server_objects(self):
        res = self.client.exec("[dir(mcp_everything), repr(mcp_memory), sorted(mcp_servers),"
                               " mcp_servers['memory'] is mcp_memory,"
                               " mcp_everything['get-image'] is mcp_everything.get_image]")
        self.assertOk(res)
        dir_, repr_, servers, same, by_name = res.value
        self.assertEqual(dir_, ["add", "echo", "get_image", "search"])
        self.assertIn("search", repr_)
        self.assertIn("read_graph", repr_)
        self.assertEqual(servers, ["everything", "memory"])
        self.assertTrue(same and by_name)
        res = self.client.exec("mcp_everything.ecko")
        self.assertEqual(res.error["type"], "AttributeError")
        self.assertIn("'echo'", res.error["message"])

    def test_bad_arguments_raise_type_error_without_rpc(self):
        cases = [
            "mcp_everything.echo()",                              # missing
            "mcp_everything.echo(message='a', extra=1)",           # unknown
            "mcp_everything.echo('a', 'b')",                      # too many
            "mcp_everything.echo(message=5)",                     # wrong type
            "mcp_everything.add(a=True, b=1)",                    # bool is not a number
            "mcp_everything.search(query='q', limit=1.5)",        # not an integer
            "mcp_everything.search(query='q', tags='x')",         # not an array
            "mcp_everything.echo(message=object())",              # wrong type
            "call_tool('everything', 'echo', {'message': 1})",    # generic path too
        ]
        for code in cases:
            with self.subTest(code=code):
                res = self.client.exec(f"await {code}")
                self.assertEqual(res.status, "error")
                self.assertEqual(res.error["type"], "TypeError", res.error)
                self.assertEqual(res.calls, [])
                self.assertNotIn("sandbox_runner", res.error["traceback"])
        res = self.client.exec("await mcp_everything.echo(message=5)")
        self.assertIn("'message' must be string, not int", res.error["message"])
        self.assertIn("mcp_everything.echo()", res.error["message"])

    def test_only_given_arguments_are_sent(self):
        answer = lambda frame: {"ok": True, "result": text_result("[]")}  # noqa: E731
        res = self.client.exec(
            "await mcp_everything.search('q', max_depth=2)\n"
            "await mcp_everything.search(query='q', limit=None, tags=None)\n"
            "await mcp_everything.search(query='q', limit=3, tags=('a',))",
            on_tool_call=answer)
        self.assertOk(res)
        self.assertEqual([c["arguments"] for c in res.calls], [
            {"query": "q", "max-depth": 2},
            {"query": "q", "tags": None},
            {"query": "q", "limit": 3, "tags": ["a"]},
        ])
        self.assertEqual({(c["server"], c["tool"]) for c in res.calls},
                         {("everything", "search")})

    def test_result_conversions(self):
        results = {
            "structured": {"ok": True, "result": {"content": [{"type": "text", "text": "x"}],
                                                  "structuredContent": {"k": 1}}},
            "json": {"ok": True, "result": text_result('{"a": [1, 2]}')},
            "plain": {"ok": True, "result": text_result("hello world")},
            "image": {"ok": True, "result": {"content": [
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}},
            "two": {"ok": True, "result": {"content": [{"type": "text", "text": "a"},
                                                       {"type": "text", "text": "b"}]}},
            "iserror": {"ok": True, "result": {"content": [{"type": "text", "text": "boom"}],
                                               "isError": True}},
            "notok": {"ok": False, "error": "upstream down"},
            "malformed": {"ok": True, "result": "not an object"},
        }
        res = self.client.exec(
            "out, errors = {}, {}\n"
            f"for name in {list(results)!r}:\n"
            "    try:\n"
            "        out[name] = await mcp_everything.echo(message=name)\n"
            "    except ToolError as e:\n"
            "        errors[name] = [e.server, e.tool, e.message, str(e)]\n"
            "[out, errors]",
            on_tool_call=lambda frame: results[frame["arguments"]["message"]])
        self.assertOk(res)
        out, errors = res.value
        self.assertEqual(out, {
            "structured": {"k": 1},
            "json": {"a": [1, 2]},
            "plain": "hello world",
            "image": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            "two": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        })
        self.assertEqual(errors, {
            "iserror": ["everything", "echo", "boom", "everything.echo: boom"],
            "notok": ["everything", "echo", "upstream down",
                      "everything.echo: upstream down"],
            "malformed": ["everything", "echo", "malformed tool result",
                          "everything.echo: malformed tool result"],
        })
        call_ids = [c["call_id"] for c in res.calls]
        self.assertEqual(len(set(call_ids)), len(call_ids))

    def test_uncaught_tool_error(self):
        res = self.client.exec(
            "r = await mcp_everything.echo(message='x')",
            on_tool_call=lambda frame: {"ok": False, "error": "nope"})
        self.assertEqual(res.error["type"], "ToolError")
        self.assertEqual(res.error["message"], "everything.echo: nope")
        tb = res.error["traceback"]
        self.assertIn("<cell-1>", tb)
        self.assertNotIn("sandbox_runner", tb)
        self.assertTrue(tb.endswith("ToolError: everything.echo: nope\n"), tb)

    def test_gather_is_concurrent(self):
        exec_id = self.client.start_exec(
            "print('before')\n"
            "results = await asyncio.gather(*(mcp_everything.add(a=i, b=1)"
            " for i in range(20)))\nresults")
        calls = []
        while len(calls) < 20:     # no result is sent until all 20 calls arrived
            frame = self.client.recv()
            if frame["type"] == "tool_call":
                calls.append(frame)
            else:
                self.assertEqual(frame["type"], "output")
        for call in reversed(calls):
            total = call["arguments"]["a"] + call["arguments"]["b"]
            self.client.send({"type": "tool_result", "call_id": call["call_id"], "ok": True,
                              "result": {"content": [{"type": "text", "text": str(total)}],
                                         "structuredContent": {"sum": total}}})
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.value, [{"sum": i + 1} for i in range(20)])

    def test_calls_past_the_in_flight_limit_wait_in_the_runner(self):
        # 30 gathered calls, 4 answered at a time: never more than 4 tool_call frames are
        # unanswered, and every call completes (back-pressure, not errors), in order.
        exec_id = self.client.start_exec(
            "rs = await asyncio.gather(*(mcp_everything.add(a=i, b=1) for i in range(30)))\n"
            "[r['sum'] for r in rs]", max_tool_calls_in_flight=4)
        seen = []
        while len(seen) < 30:
            burst = [self.client.expect("tool_call")]
            try:
                while True:                        # whatever else the runner sends now
                    burst.append(self.client.recv(0.3))
            except socket.timeout:
                pass
            self.assertTrue(all(f["type"] == "tool_call" for f in burst), burst)
            self.assertLessEqual(len(burst), 4)
            for call in burst:
                seen.append(call["arguments"]["a"])
                total = call["arguments"]["a"] + call["arguments"]["b"]
                self.client.send({"type": "tool_result", "call_id": call["call_id"], "ok": True,
                                  "result": {"content": [], "structuredContent":
                                             {"sum": total}}})
        self.assertEqual(seen, list(range(30)))
        res = self.client.finish_exec(exec_id)
        self.assertOk(res)
        self.assertEqual(res.value, [i + 1 for i in range(30)])

    def test_held_back_calls_fail_when_the_exec_ends_and_the_limit_is_fresh_next_time(self):
        # Background tasks waiting for a slot get ToolError once their exec is over, and
        # the next exec starts with its own limit.
        res = self.client.exec(
            "async def one(i):\n"
            "    try:\n        return await mcp_everything.add(a=i, b=1)\n"
            "    except ToolError as e:\n        return str(e)\n"
            "held = [asyncio.ensure_future(one(i)) for i in range(3)]\n"
            "await asyncio.sleep(0.2)\n", on_tool_call=lambda frame: None,
            max_tool_calls_in_flight=1)
        self.assertOk(res)
        self.assertEqual(len(res.calls), 1)          # limit 1 from below; two held back
        res = self.client.exec("await asyncio.sleep(0.05)\n"
                               "[h.result() if h.done() else 'pending' for h in held]")
        self.assertOk(res)
        self.assertTrue(all("ended before" in r for r in res.value), res.value)
        res = self.client.exec(
            "await asyncio.gather(*(mcp_everything.add(a=i, b=1) for i in range(3)))",
            on_tool_call=lambda f: {"ok": True, "result": {"content": [], "structuredContent":
                                                           {"sum": 0}}})
        self.assertOk(res)
        self.assertEqual(len(res.calls), 3)

    def test_exec_frame_with_a_bad_in_flight_limit_is_a_protocol_error(self):
        self.client.send({"type": "exec", "id": self.client.new_id(), "code": "1",
                          "max_output_bytes": MIB, "max_tool_calls_in_flight": 0})
        self.assertTrue(self.client.at_eof(5))

    def test_tools_mapping(self):
        res = self.client.exec(
            "[sorted(tools), tools['everything.echo'] is mcp_everything.echo,"
            " tools['echo'] is mcp_everything.echo, 'search' in tools,"
            " tools['memory.search'] is mcp_memory.search,"
            " tools['get-image'] is mcp_everything.get_image]")
        self.assertOk(res)
        keys, *checks = res.value
        self.assertEqual(keys, sorted([
            "everything.echo", "everything.add", "everything.get-image", "everything.search",
            "memory.search", "memory.read_graph", "echo", "add", "get-image", "read_graph"]))
        self.assertEqual(checks, [True, True, False, True, True])
        res = self.client.exec("tools['everything.ecoh']")
        self.assertEqual(res.error["type"], "ToolNotFoundError")
        self.assertIn("everything.echo", res.error["message"])
        res = self.client.exec("try:\n    tools['x']\nexcept KeyError:\n    caught = 1\ncaught")
        self.assertEqual(res.result, "1")

    def test_call_tool_generic(self):
        res = self.client.exec(
            "await call_tool('memory', 'read_graph')",
            on_tool_call=lambda frame: {"ok": True, "result": text_result('{"nodes": []}')})
        self.assertOk(res)
        self.assertEqual(res.value, {"nodes": []})
        self.assertEqual(res.calls[0]["arguments"], {})
        res = self.client.exec("await call_tool('memroy', 'read_graph')")
        self.assertEqual(res.error["type"], "ValueError")
        self.assertIn("'memory'", res.error["message"])
        res = self.client.exec("await call_tool('memory', 'read_graph', [1])")
        self.assertEqual(res.error["type"], "TypeError")
        self.assertEqual(res.calls, [])

    def test_discover_schema_search(self):
        res = self.client.exec("_discover()")
        self.assertOk(res)
        discovered = res.value
        self.assertEqual(sorted(discovered), ["everything", "memory"])
        echo = next(t for t in discovered["everything"] if t["name"] == "echo")
        self.assertEqual(echo["description"], "Echoes back the input")
        self.assertEqual(echo["call"], "await mcp_everything.echo(message)")

        schema = self.client.exec("_schema('everything.echo')").value
        self.assertEqual(schema["name"], "everything.echo")
        self.assertEqual(schema["input_schema"]["required"], ["message"])
        self.assertIsNone(schema["output_schema"])
        self.assertEqual(self.client.exec("_schema('read_graph')['name']").value,
                         "memory.read_graph")
        res = self.client.exec("_schema('search')")
        self.assertEqual(res.error["type"], "ToolNotFoundError")
        self.assertIn("ambiguous", res.error["message"])

        # "graph" in a tool name weighs more than "graph" and "nodes" in a description.
        hits = self.client.exec("_search('GRAPH nodes')").value
        self.assertEqual([(h["server"], h["tool"], h["score"]) for h in hits],
                         [("memory", "read_graph", 4), ("memory", "search", 2)])
        hits = self.client.exec("_search('search')").value
        self.assertEqual([(h["server"], h["tool"]) for h in hits][:2],
                         [("everything", "search"), ("memory", "search")])
        self.assertTrue(all(set(h) == {"server", "tool", "description", "score"} for h in hits))
        self.assertEqual(len(self.client.exec("_search('search', limit=1)").value), 1)
        self.assertEqual(self.client.exec("_search('zzz')").value, [])

    def test_mcp_runtime_module(self):
        res = self.client.exec(
            "import mcp.runtime\nfrom mcp import runtime\n"
            "{'same': runtime is mcp.runtime,"
            " 'servers': list(runtime.list_servers()),"
            " 'awaited': await runtime.list_servers(),"
            " 'tools': [t['name'] for t in runtime.list_tools('memory')],"
            " 'describe': runtime.describe_server('everything')['py_name'],"
            " 'discovered': list(runtime.discovered_servers()),"
            " 'docs': runtime.query_tool_docs('memory', 'search')['tool'],"
            " 'search': [d['tool'] for d in runtime.search_tool_docs('graph')],"
            " 'call': await runtime.call_tool('memory', 'read_graph', {}),"
            " 'error': runtime.ToolError is ToolError}",
            on_tool_call=lambda frame: {"ok": True, "result": text_result("graph")})
        self.assertOk(res)
        self.assertEqual(res.value, {
            "same": True, "servers": ["everything", "memory"],
            "awaited": ["everything", "memory"], "tools": ["search", "read_graph"],
            "describe": "mcp_everything", "discovered": ["everything", "memory"],
            "docs": "search", "search": ["read_graph", "search"], "call": "graph",
            "error": True})

    def test_set_catalog_replaces_servers(self):
        self.client.exec("keep = 1")
        smaller = {"servers": [CATALOG["servers"][1]]}
        self.client.set_catalog(smaller)
        res = self.client.exec("['mcp_everything' in globals(), sorted(mcp_servers),"
                               " sorted(tools), keep]")
        self.assertOk(res)
        self.assertEqual(res.value, [False, ["memory"], sorted(
            ["memory.search", "memory.read_graph", "search", "read_graph"]), 1])

    def test_tool_call_outside_an_exec_fails(self):
        self.client.exec(
            "import threading\nbox = []\n"
            "def later():\n"
            "    import time\n    time.sleep(0.3)\n"
            "    try:\n        asyncio.run(mcp_memory.read_graph())\n"
            "    except ToolError as e:\n        box.append(str(e))\n"
            "th = threading.Thread(target=later)\nth.start()")
        time.sleep(0.6)
        res = self.client.exec("th.join(5)\nbox")
        self.assertEqual(res.value, ["memory.read_graph: tool calls only work while an "
                                     "execution is running"])
        self.assertEqual(res.calls, [])


class ConnectionTest(RunnerTestCase):
    def test_reconnect_keeps_namespace(self):
        self.client.exec("x = 5")
        self.client.close()
        client = self.connect()
        self.assertEqual(client.expect("ready")["execs"], 1)
        self.assertEqual(client.exec("x").result, "5")

    def test_new_connection_replaces_old(self):
        self.client.exec("y = 'old'")
        second = self.connect()
        second.expect("ready")
        self.assertTrue(self.client.at_eof(timeout=5))
        self.assertEqual(second.exec("y").result, "'old'")

    def test_garbage_frame_closes_connection(self):
        self.client.exec("z = 3")
        self.client.send_raw(b"this is not json")
        self.assertTrue(self.client.at_eof(timeout=5))
        client = self.connect()
        client.expect("ready")
        self.assertEqual(client.exec("z").result, "3")

    def test_malformed_frames_close_connection(self):
        bad_frames = [
            (b"[1, 2]", None),                                   # not an object
            (b'{"id": 1}', None),                                # no type
            (b'{"type": "exec", "id": "1", "code": "1", "max_output_bytes": 1}', None),
            (b'{"type": "set_catalog", "id": 1, "catalog": {"servers": [{}]}}', None),
            (b"", 16 * MIB + 1),                                 # over the cap
        ]
        client = self.client
        for body, length in bad_frames:
            with self.subTest(body=body, length=length):
                client.send_raw(body, length)
                self.assertTrue(client.at_eof(timeout=5))
                client = self.connect()
                client.expect("ready")
        self.assertEqual(client.exec("'alive'").result, "'alive'")

    def test_connection_loss_during_exec(self):
        self.client.set_catalog(CATALOG)
        self.client.start_exec(
            "async def guarded():\n"
            "    try:\n        await mcp_everything.echo(message='x')\n"
            "    except ToolError as e:\n        return str(e)\n"
            "t = asyncio.ensure_future(guarded())\n"
            "await asyncio.sleep(100)")
        self.client.expect("tool_call")
        self.client.close()
        client = self.connect()
        client.expect("ready")
        res = client.exec("t.result()")
        self.assertOk(res)
        self.assertEqual(res.value, "everything.echo: sandboxd connection lost")
        self.assertEqual(client.exec("1 + 2").result, "3")

    def test_connection_loss_interrupts_busy_exec(self):
        exec_id = self.client.start_exec("print('go')\nwhile True:\n    pass")
        self.client.expect("output")
        self.client.close()
        client = self.connect()
        client.expect("ready")
        client.next_id = exec_id + 1000
        res = client.exec("'after'")          # runs only once the old exec was interrupted
        self.assertEqual(res.result, "'after'")   # and the old exec's done was dropped


if __name__ == "__main__":
    unittest.main()
