"""The runner's Python side inside Pyodide (the wasm tier, docs/wasm-tier.md).

In a wasm session the JavaScript runner's main thread (runner_js) speaks the frame protocol
and this module runs in its worker thread, in Pyodide, in place of runner/protocol/
interrupts/files: no threads, no sockets. Messages are JSON texts both ways: the worker's
JavaScript (runner_js/worker_python.js) passes the main thread's messages to the function
start() returns, and this module posts its own through the JavaScript function start() is
given.

  in:  exec {id, code, filename, maxOut, maxDisplay}, result {k, frame | ok, message},
       interrupt {id}, catalog {raw}
  out: out {s, x}, display {b}, call {k, server, tool, args},
       done {id, status, result, error, outputBytes, droppedBytes, displays, displaysDropped}

Each cell runs as an asyncio task on Pyodide's event loop (top-level await, one persistent
namespace), with the executor's compilation, tracebacks and result rules. Tool calls post a
`call` and await a future the main thread's `result` resolves, so gathered calls run
concurrently. Interrupts: the main thread writes SIGINT into Pyodide's interrupt buffer
until the exec is done, and posts `interrupt`, which cancels the cell's task (an await).
"""

import asyncio
import itertools
import json
import os
import signal
import sys
import time

from .catalog import parse_catalog
from .common import (MAX_ARGUMENT_VALUES, MAX_JSON_DEPTH, OUTPUT_FLUSH_DELAY, as_sent_json,
                     is_runner_file, log)
from .display import Displayer
from .executor import Executor
from .output import CapturedStream, OutputCapture
from .swallowed import SwallowedInterrupt
from .tool_calls import ToolError, convert_tool_result

WORKSPACE = "/workspace"
SLEEP_SLICE = 0.02                           # seconds of time.sleep between interrupt checks
SIGNAL_CHECK_INTERVAL = 50                   # Python/emscripten_signal.c's
# What os.environ keeps of Pyodide's own environment (under the session's): what a
# container's image gives (HOME, PATH, LANG; Pyodide's values say nothing of the host) and
# the variable Pyodide's loader of shared libraries reads.
PYODIDE_ENVIRON = ("HOME", "PATH", "LANG", "LD_LIBRARY_PATH")
# Code of these folders is the host's (asyncio's loop, Pyodide's webloop): an interrupt
# that arrives there cancels the cell's task instead of raising in the middle of it.
_HOST_DIRS = tuple(os.path.dirname(m.__file__) + os.sep
                   for m in (asyncio, sys.modules.get("pyodide")) if m is not None)


def _host_frame(frame):
    filename = frame.f_code.co_filename
    return is_runner_file(filename) or filename.startswith(_HOST_DIRS) or \
        "/_pyodide/" in filename


class PostedOutput(OutputCapture):
    """OutputCapture without its flusher thread, line-buffered: what is buffered is posted
    when a write ends a line, at 8 KiB, for every display, and by an event-loop timer
    otherwise (a CPU-bound cell never lets the loop run, so a timer alone would hold text
    until the cell ends). The main thread batches the posts into `output` frames (8 KiB,
    5 ms) and caps them again, as for the JavaScript worker."""

    def __init__(self, post):
        self._post = post
        self._timer = None
        super().__init__()

    def _start_flusher(self):
        return False                         # the event loop's timer does its job

    def _buffered_locked(self, size):
        super()._buffered_locked(size)
        stream, parts = self._chunks[-1]
        if stream == "display" or parts[-1].endswith("\n"):
            self._flush_locked()
        elif self._timer is None:
            self._timer = asyncio.get_event_loop().call_later(OUTPUT_FLUSH_DELAY, self._timed)

    def _timed(self):
        self._timer = None
        self.flush()

    def _send(self, frame_chunks):
        for stream, value in frame_chunks:
            if stream == "display":
                self._post({"t": "display", "b": value})
            else:
                self._post({"t": "out", "s": stream, "x": value})


class PostedCalls:
    """Tool calls as `call` messages; the main thread numbers them, keeps the in-flight
    limit, sends the tool_call frames and answers with `result`: the tool_result frame's
    JSON text, converted here as the container runner does (json.loads keeps 5.0 a float and
    big integers exact), or a failure of its own."""

    def __init__(self, host):
        self._host = host
        self._pending = {}                   # k -> (future, exec state)
        self._ids = itertools.count(1)

    async def call(self, server, tool, arguments):
        state = self._host.current
        if state is None:
            raise ToolError("tool calls only work while an execution is running", server, tool)
        # What goes out is the checked copy (common.as_sent_json).
        arguments, problem = as_sent_json(arguments, MAX_JSON_DEPTH, MAX_ARGUMENT_VALUES, level=0)
        if problem:
            raise ToolError(f"arguments not sent: {problem}", server, tool)
        message = {"t": "call", "k": next(self._ids), "server": server, "tool": tool,
                   "args": arguments}
        text = json.dumps(message, allow_nan=False)
        future = asyncio.get_running_loop().create_future()
        self._pending[message["k"]] = (future, state)
        try:
            self._host.capture.flush()       # output printed before the call arrives first
            self._host.post_text(text)
            reply = await future
        finally:
            self._pending.pop(message["k"], None)
        if isinstance(reply.get("frame"), str):
            try:
                frame = json.loads(reply["frame"])
            except (ValueError, RecursionError):
                raise ToolError("malformed tool result", server, tool) from None
            return convert_tool_result(server, tool, frame)
        raise ToolError(str(reply.get("message") or "tool call failed"), server, tool)

    def resolve(self, k, reply):
        entry = self._pending.get(k)
        if entry is not None and not entry[0].done():
            entry[0].set_result(reply)

    def fail(self, state, message):
        for future, owner in list(self._pending.values()):
            if owner is state and not future.done():
                future.set_result({"ok": False, "message": message})


class PyodideExecutor(Executor):
    """The executor on Pyodide's one event loop: cells are awaited, never run to completion
    with run_until_complete (which cannot block on the webloop)."""

    def _new_loop(self):
        self.loop = asyncio.get_event_loop()

    async def run_cell(self, state, source, filename):
        code = self.begin_cell(source, filename)
        if not hasattr(code, "co_flags"):
            return code
        try:
            self._displayer.begin_cell()
            value = eval(code, self.module.__dict__)
            if asyncio.iscoroutine(value):
                await value
            return "ok", self.cell_result(), None
        except BaseException as exc:         # KeyboardInterrupt must not leave the task
            return self.cell_failed(state, exc)

    def cell_failed(self, state, exc):
        """An interrupt delivered while Pyodide converts a value for a call into JavaScript
        (the stack switch of Pyodide's time.sleep is one) surfaces as a pyodide.ffi error
        whose cause is that KeyboardInterrupt: the cell was interrupted, not failed."""
        cause = exc.__cause__
        if state.delivered and isinstance(cause, KeyboardInterrupt) and \
                type(exc).__module__.startswith("pyodide"):
            exc = cause
        return super().cell_failed(state, exc)


class ExecState:
    def __init__(self, exec_id):
        self.id = exec_id
        self.interrupt_requested = False
        self.delivered = False               # a KeyboardInterrupt was raised in user code
        self.deferred = False                # a SIGINT arrived in the host's frames
        self.task = None
        self.started = False                 # the task took its first step (Host._run)


class Host:
    def __init__(self, post_text):
        self.post_text = post_text
        self.current = None
        self.capture = PostedOutput(self.post)
        self.displayer = Displayer(self.capture.display)
        self.interrupts = None               # Executor.run is not used here
        self.calls = PostedCalls(self)
        self.executor = PyodideExecutor(self)
        self._stdout = CapturedStream(self.capture, "stdout")
        self._stderr = CapturedStream(self.capture, "stderr")
        self._stdin = None
        self.swallowed = SwallowedInterrupt(self._is_user_frame, self._on_swallowed,
                                            self._deliver_if_due)
        signal.signal(signal.SIGINT, self._on_sigint)
        self.swallowed.install()

    def post(self, message):
        self.post_text(json.dumps(message))

    def on_message(self, text):
        m = json.loads(text)
        kind = m["t"]
        if kind == "exec":
            self._start(m)
        elif kind == "result":
            self.calls.resolve(m["k"], m)
        elif kind == "interrupt":
            state = self.current
            if state is not None and state.id == m["id"]:
                state.interrupt_requested = True
                if state.started:            # else _run reports it as it starts
                    state.task.cancel()
        elif kind == "catalog":
            try:
                self.executor.set_catalog(parse_catalog(m["raw"]))
            except Exception as exc:         # checked by the main thread already
                log(f"catalog refused: {exc!r}")

    # The interrupt buffer's SIGINT: one KeyboardInterrupt in the cell's own code (as the
    # container runner delivers one: code that catches it and goes on is ended by the main
    # thread's grace), a cancellation of the cell's task everywhere else (the host's frames,
    # asyncio's, a task user code started); outside an exec nothing.
    def _on_sigint(self, signum, frame):
        state = self.current
        if state is None or state.task is None or state.task.done() or state.delivered:
            return
        state.interrupt_requested = True     # the main thread writes only to interrupt
        if not state.started:
            return                           # _run reports it as it starts
        current = asyncio.current_task()
        if current is None or frame is None or not self._is_user_frame(frame):
            # In the host's frames: an awaiting cell is cancelled; one whose step is
            # suspended in a stack switch (Pyodide's time.sleep) is not reached by that, so
            # the sleep raises when it resumes (state.deferred).
            state.deferred = True
            if not state.task.get_coro().cr_running:
                state.task.cancel()
            return
        if current is state.task:
            self.deliver(state, frame)
        state.task.cancel()
        raise asyncio.CancelledError()

    def _is_user_frame(self, frame):
        code = frame.f_code
        return (code is _sliced_sleep.__code__ or not _host_frame(frame)) and \
            not self.swallowed.is_finalizer(code)

    # An interrupt Python ignored in a finalizer is due again: at the next line of the
    # user frame below it (SwallowedInterrupt), or as a sleep slice ends (state.deferred).
    def _on_swallowed(self):
        state = self.current
        if state is not None:
            state.delivered = False
            state.deferred = True

    def _deliver_if_due(self, frame):
        state = self.current
        if state is not None and not state.delivered and \
                asyncio.current_task() is state.task:
            self.deliver(state, frame)

    def deliver(self, state, frame=None):
        """Raises the exec's one KeyboardInterrupt in user code (`frame`, when known)."""
        state.delivered = True
        raise self.swallowed.interrupt(frame)

    def _restore_stdio(self):
        sys.stdout, sys.stderr = self._stdout, self._stderr
        if self._stdin is None or self._stdin.closed:
            self._stdin = open(os.devnull, encoding="utf-8")
        sys.stdin = self._stdin

    def _start(self, m):
        state = ExecState(m["id"])
        self.current = state
        self.swallowed.reset()
        self._restore_stdio()
        self.capture.begin(self, state.id, m["maxOut"], m.get("maxDisplay", 0))
        state.task = asyncio.ensure_future(self._run(state, m["code"], m["filename"]))

    # A task cancelled before its first step never runs its coroutine (no `done` would be
    # posted): an interrupt that comes before is only noted (state.started) and ends the
    # cell here, before any of its code runs.
    async def _run(self, state, code, filename):
        state.started = True
        try:
            if state.interrupt_requested:
                status, result, error = self.executor.cell_failed(state, KeyboardInterrupt())
            else:
                status, result, error = await self.executor.run_cell(state, code, filename)
        except BaseException as exc:         # a runner bug; report it rather than hang
            log(f"exec failed internally: {exc!r}")
            status, result = "error", None
            error = {"type": "RunnerError", "message": f"internal runner error: {exc!r}",
                     "traceback": ""}
        counters = self.capture.finish()
        self.current = None
        self.swallowed.reset()
        self.calls.fail(state, "the execution ended before the tool result arrived")
        self.post({"t": "done", "id": state.id, "status": status, "result": result,
                   "error": error, "outputBytes": counters["output_bytes"],
                   "droppedBytes": counters["dropped_bytes"],
                   "displays": counters["displays"],
                   "displaysDropped": counters["displays_dropped"]})


_blocking_sleep = time.sleep
_hosts = []                                  # the Host, once start() made it


def _sliced_sleep(seconds):
    """time.sleep for user code, in slices of at most SLEEP_SLICE: Pyodide's suspends the
    cell's stack (JSPI) and runs the event loop meanwhile, so the interrupt buffer's SIGINT
    is handled in the host's frames and only noted (state.deferred); the slice raises it
    when it resumes. Without JSPI the sleep blocks, and CPython on Emscripten reads the
    buffer once every 50 eval-breaker checks (backward jumps, calls), hence the empty loop
    after each slice; the SIGINT then lands in this frame, as in user code. One that lands
    here during the stack switch itself comes out of it as a pyodide.ffi error caused by the
    KeyboardInterrupt: the KeyboardInterrupt is raised instead, so that code catching it
    does."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        try:
            _blocking_sleep(min(left, SLEEP_SLICE))
        except Exception as exc:
            cause = exc.__cause__
            if isinstance(cause, KeyboardInterrupt) and type(exc).__module__.startswith("pyodide"):
                raise cause from None
            raise
        deliver_noted_interrupt()
        for _ in range(SIGNAL_CHECK_INTERVAL):
            pass


def deliver_noted_interrupt():
    """Raises the exec's KeyboardInterrupt when its SIGINT was only noted in the host's
    frames (state.deferred) while the cell's stack was suspended: for the runner's own waits
    in user code's stead (_sliced_sleep, pyodide_egress's TLS handshake)."""
    state = _hosts[0].current if _hosts else None
    if state is not None and state.deferred and not state.delivered:
        _hosts[0].deliver(state)


def set_environ(environment):
    """os.environ (and the C environment) as exactly `environment` over PYODIDE_ENVIRON:
    none of Emscripten's other defaults (its `_` names the runner's file on the host)."""
    kept = {k: os.environ[k] for k in PYODIDE_ENVIRON if k in os.environ}
    os.environ.clear()
    os.environ.update({**kept, **environment})


def start(post_text, environment_json="{}"):
    """Called once by worker_python.js after Pyodide is up: the host, with the workspace
    as the working directory and the session's environment (a JSON object); returns the
    function that takes the main thread's messages."""
    set_environ(json.loads(environment_json))
    os.chdir(WORKSPACE)
    time.sleep = _sliced_sleep
    host = Host(post_text)
    _hosts.append(host)
    return host.on_message
