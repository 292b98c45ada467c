"""What the runner tests share: a runner started the way sandboxd starts it, and the
sandboxd side of its frame protocol (docs/runner-protocol.md).

The runner under test is the built zipapp named by the environment variable
SANDBOXD_RUNNER_PYZ (ctest sets it to build/services/sandboxd/sandbox_runner.pyz); there is
no fallback to the sources. Each test starts it as `python3 -I -u sandbox_runner.pyz
--socket PATH` on a temporary unix socket. Every socket read has a timeout, so a runner bug
fails a test instead of hanging it.

By hand, from the repository root, after `cmake --build build`:

    SANDBOXD_RUNNER_PYZ=build/services/sandboxd/sandbox_runner.pyz \
        python3 -m unittest discover -s tests/sandboxd/runner -v
"""

import ast
import importlib
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

# The package's sources, for tests that import its modules directly (pure functions).
RUNNER_SOURCE_DIR = Path(__file__).resolve().parents[3] / "services" / "sandboxd" / "runner"
PACKAGE_DIR = RUNNER_SOURCE_DIR / "sandbox_runner"


def import_runner_module(name):
    """sandbox_runner.<name> from the sources (not the zipapp), for tests of pure functions."""
    if str(RUNNER_SOURCE_DIR) not in sys.path:
        sys.path.insert(0, str(RUNNER_SOURCE_DIR))
    return importlib.import_module(f"sandbox_runner.{name}")


def _runner_pyz():
    value = os.environ.get("SANDBOXD_RUNNER_PYZ")
    if not value:
        raise RuntimeError("SANDBOXD_RUNNER_PYZ is not set: it must name the built "
                           "sandbox_runner.pyz (ctest sets it; see tests/sandboxd/runner/"
                           "harness.py)")
    path = Path(value).resolve()
    if not path.is_file():
        raise RuntimeError(f"SANDBOXD_RUNNER_PYZ={value}: no such file (build it first: "
                           "cmake --build build --target sandbox_runner_pyz)")
    return path


RUNNER = _runner_pyz()

# SANDBOXD_RUNNER_WASM=1: the same tests against the wasm tier's runner, sandbox_runner.js
# --language python (Python in Pyodide) on deploy/wasm's Node, started as sandboxd's
# WasmRuntime starts it: an empty environment, the contract's node flags (reads of the
# runtime, the runner files, the Python packages and the workspace, writes of the
# workspace) and fd 3 a unix socket bound and listening before the start. Needs
# SANDBOXD_RUNNER_JS (the built bundle), `npm ci` in deploy/wasm (SANDBOXD_WASM_RUNTIME names
# another node_modules) and the Python packages beside it (scripts/wasm-python-packages.sh).
# The snapshot is made once per test process.
WASM = os.environ.get("SANDBOXD_RUNNER_WASM") == "1"
_wasm_snapshot = []


def _wasm_files():
    runtime = Path(os.environ.get("SANDBOXD_WASM_RUNTIME") or
                   Path(__file__).resolve().parents[3] / "deploy" / "wasm" / "node_modules")
    bundle = os.environ.get("SANDBOXD_RUNNER_JS")
    node = runtime / "node" / "bin" / "node"
    if not node.is_file() or not (runtime / "pyodide" / "pyodide.js").is_file():
        raise RuntimeError(f"{runtime} lacks node/bin/node or pyodide (npm ci in deploy/wasm)")
    if not bundle or not Path(bundle).is_file():
        raise RuntimeError("SANDBOXD_RUNNER_WASM=1 needs SANDBOXD_RUNNER_JS, the built "
                           "sandbox_runner.js")
    return runtime, node, Path(bundle).resolve()


def wasm_node_flags(reads, workspace):
    return (["--permission"] + [f"--allow-fs-read={p}" for p in reads] +
            [f"--allow-fs-write={workspace}", "--allow-worker", "--allow-net",
             "--disallow-code-generation-from-strings", "--disable-proto=delete"])


def _wasm_snapshot_file():
    if not _wasm_snapshot:
        runtime, node, bundle = _wasm_files()
        out_dir = tempfile.mkdtemp(prefix="runner-wasm-snap-")
        out = os.path.join(out_dir, "python.snap")
        subprocess.run([str(node), *wasm_node_flags([runtime, bundle, RUNNER], out_dir),
                        str(bundle), "--make-snapshot", out, "--pyodide",
                        str(runtime / "pyodide"), "--python-runner", str(RUNNER)],
                       env={}, check=True, stdout=subprocess.DEVNULL, timeout=120)
        _wasm_snapshot.append(out)
    return _wasm_snapshot[0]


def wasm_runner_argv(socket_path, workspace):
    """The launcher (binds socket_path as fd 3, then execs node) and the runner's argv."""
    runtime, node, bundle = _wasm_files()
    snapshot = _wasm_snapshot_file()
    launch = ("import os, socket, sys\n"
              "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
              "s.bind(sys.argv[1]); s.listen(8)\n"
              "if s.fileno() != 3: os.dup2(s.fileno(), 3)\n"
              "os.set_inheritable(3, True)\n"
              "os.execv(sys.argv[2], sys.argv[2:])\n")
    packages = runtime.parent / "python-packages"
    if not (packages / ".recipe").is_file():
        raise RuntimeError(f"{packages} is missing (scripts/wasm-python-packages.sh)")
    reads = [runtime, bundle, RUNNER, os.path.dirname(snapshot), workspace, packages]
    return [sys.executable, "-c", launch, socket_path, str(node),
            *wasm_node_flags(reads, workspace), str(bundle), "--listen-fd", "3",
            "--workspace", workspace, "--language", "python", "--heap-mb", "512",
            "--pyodide", str(runtime / "pyodide"), "--python-runner", str(RUNNER),
            "--snapshot", snapshot, "--python-packages", str(packages)]

TIMEOUT = 10.0          # seconds for any single frame
MIB = 1024 * 1024

CATALOG = {"servers": [
    {"name": "everything", "py_name": "mcp_everything", "description": "Test server",
     "tools": [
         {"name": "echo", "py_name": "echo", "js_name": "echo",
          "py_params": {"message": "message"}, "py_kwargs": None,
          "description": "Echoes back the input\nSecond line of the description.",
          "input_schema": {"type": "object",
                           "properties": {"message": {"type": "string",
                                                      "description": "Text to echo"}},
                           "required": ["message"]},
          "output_schema": None},
         {"name": "add", "py_name": "add", "js_name": "add", "description": "Adds two numbers",
          "py_params": {"a": "a", "b": "b"}, "py_kwargs": None,
          "input_schema": {"type": "object",
                           "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                           "required": ["a", "b"]},
          "output_schema": {"type": "object"}},
         {"name": "get-image", "py_name": "get_image", "js_name": "get_image",
          "description": "Returns a tiny image", "py_params": {}, "py_kwargs": None,
          "input_schema": {"type": "object", "properties": {}}, "output_schema": None},
         {"name": "search", "py_name": "search", "js_name": "search",
          "description": "Search documents by query",
          "py_params": {"limit": "limit", "query": "query", "tags": "tags",
                        "max-depth": "max_depth"}, "py_kwargs": None,
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
         {"name": "search", "py_name": "search", "js_name": "search",
          "description": "Search the knowledge graph nodes",
          "py_params": {"query": "query"}, "py_kwargs": None,
          "input_schema": {"type": "object", "properties": {"query": {"type": "string"}},
                           "required": ["query"]},
          "output_schema": None},
         {"name": "read_graph", "py_name": "read_graph", "js_name": "read_graph",
          "description": "Read the whole graph", "py_params": {}, "py_kwargs": None,
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

    @property
    def displays(self):
        """The {mime: data} bundles displayed, in order."""
        return [bundle for stream, bundle in self.chunks if stream == "display"]


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
        self.passed = []                    # descriptors that came with frames (SCM_RIGHTS)

    def close(self):
        self.sock.close()
        for fd in self.passed:
            os.close(fd)

    def send(self, frame):
        self.send_raw(json.dumps(frame).encode())

    def send_raw(self, body, length=None):
        length = len(body) if length is None else length
        self.sock.sendall(struct.pack(">I", length) + body)

    def _recv_exact(self, size):
        data = b""
        while len(data) < size:
            part, fds, _, _ = socket.recv_fds(self.sock, size - len(data), 4)
            self.passed.extend(fds)
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

    def start_exec(self, code, max_output_bytes=MIB, max_tool_calls_in_flight=None,
                   max_display_bytes=MIB):
        exec_id = self.new_id()
        frame = {"type": "exec", "id": exec_id, "code": code,
                 "max_output_bytes": max_output_bytes, "max_display_bytes": max_display_bytes}
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
                    if stream == "display":
                        chunks.append([stream, text])    # a {mime: data} bundle
                    elif chunks and chunks[-1][0] == stream:
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
             max_tool_calls_in_flight=None, max_display_bytes=MIB):
        exec_id = self.start_exec(code, max_output_bytes, max_tool_calls_in_flight,
                                  max_display_bytes)
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
        self.workspace = os.path.join(self.tmp.name, "workspace")   # file frames' root
        os.mkdir(self.workspace)
        argv = wasm_runner_argv(self.path, self.workspace) if WASM else \
            [sys.executable, "-I", "-u", str(RUNNER), "--socket", self.path,
             "--workspace", self.workspace]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, env={} if WASM else None)
        self.clients = []
        self.problems_before = self._problems()
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
        # The runner logs its own problems to stderr; surface them when a test fails (or
        # always, with RUNNER_TEST_LOG set).
        if log.strip() and (self._problems() > self.problems_before or
                            os.environ.get("RUNNER_TEST_LOG")):
            print(f"\n--- runner log of {self.id()} ---\n{log}", file=sys.stderr)

    def _problems(self):
        """Failures and errors the running unittest result holds so far."""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        return len(getattr(result, "failures", ())) + len(getattr(result, "errors", ()))

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


class CatalogTestCase(RunnerTestCase):
    """A runner that has CATALOG."""

    def setUp(self):
        super().setUp()
        self.client.set_catalog(CATALOG)
