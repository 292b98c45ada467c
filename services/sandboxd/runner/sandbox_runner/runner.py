"""The runner: listens on the unix socket, accepts sandboxd's connections, reads and
dispatches their frames (the connections thread) and runs the work of the main thread; main()
parses the command line."""

import os
import select
import signal
import sys
import threading
import time
import traceback
from _queue import SimpleQueue  # queue.py's Queue, and its module, are not needed here

from .common import (DEFAULT_TOOL_CALLS_IN_FLIGHT, RUNNER_VERSION, bind_unix_socket, log,
                     forget_runner_threads, on_a_runner_thread, start_bare_thread)
from .display import MPL_BACKEND, Displayer
from .egress import EgressRelay
from .executor import ExecState, Executor
from .interrupts import InterruptController
from .out_digest import out_digest
from .output import CapturedStream, OutputCapture
from .protocol import (FILE_FRAMES, ConnectionClosed, FrameConnection, ProtocolError,
                       check_file_frame, frame_field)
from .tool_calls import ToolCalls


def kill_other_processes():
    """End every process of this PID namespace but init and the runner (what user code
    left running: a fork bomb that never dies out, a forgotten server), then reap the
    runner's own dead children. kill(-1) reaches only this PID namespace."""
    def reap():
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    return
            except ChildProcessError:
                return

    for _ in range(100):                     # a bomb may fork while we kill
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:                      # ESRCH: nobody else is left
            break
        reap()
        time.sleep(0.01)                     # init reaps the orphans meanwhile
    reap()


class Runner:
    own_pid_namespace = False               # set by main(); see kill_other_processes

    def __init__(self, socket_path, workspace="/workspace"):
        self.socket_path = socket_path
        self._lock = threading.Lock()        # guards the fields below and ExecState flags
        self._conn = None                    # the connection being served
        self._current = None                 # ExecState of the running exec
        self._queued_execs = set()           # (conn, exec id) waiting in the work queue
        self._early_interrupts = set()       # interrupts for queued execs
        self._work = SimpleQueue()           # (conn, frame) for the main thread
        self.capture = OutputCapture()
        self.displayer = Displayer(self.capture.display)
        self.interrupts = InterruptController(self._lock)
        self.capture.user_handlers = self.interrupts.user_handlers_installed
        self.calls = ToolCalls(self)
        self.executor = Executor(self)
        self.workspace = workspace
        self._files = None                   # FileTransfers, made by the first file frame
        self.egress = None                   # EgressRelay, made by serve_forever
        self._pid = os.getpid()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self):
        """User code forked. The child shares sandboxd's socket, so it must never write a
        frame: its output is dropped, its connections send nowhere, and it exits when the
        cell's code returns to us. No wait of the runner's may keep it: the parent's other
        threads (the connections thread, the flusher) do not exist in the child, and one
        that waited for them forever would keep its process slot until the session ends.
        A child forked on a thread of the runner's own (by a finalizer of user code that
        ran there) would go on in the runner's loops, reading and answering sandboxd's
        connections: it exits at once."""
        if on_a_runner_thread():
            os._exit(0)
        forget_runner_threads()
        self.capture.after_fork_in_child()
        current = self._current
        for conn in {self._conn, current.conn if current is not None else None} - {None}:
            conn.after_fork_in_child()
        self._lock = threading.Lock()
        self.interrupts._lock = self._lock
        try:
            self.executor.loop_after_fork_in_child()
        except Exception as exc:             # a loop of user code's own making
            log(f"forked child keeps the parent's event loop: {exc!r}")
        self.calls.after_fork_in_child()

    def _exit_if_forked_child(self):
        if os.getpid() != self._pid:
            os._exit(0)

    def current_exec(self):
        with self._lock:
            return self._current

    # -- setup -----------------------------------------------------------------------

    def _prepare_process(self):
        # pyplot then draws with Agg and plt.show() displays (mpl_backend.py).
        os.environ["MPLBACKEND"] = MPL_BACKEND
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)                  # input() sees EOF instead of blocking
        os.close(devnull)
        on_return = self.interrupts.returning_to_user_code
        self._stdout = CapturedStream(self.capture, "stdout", on_return)
        self._stderr = CapturedStream(self.capture, "stderr", on_return)
        self._stdin = None
        self._restore_stdio()
        self.interrupts.install()

    def _restore_stdio(self):
        """Before every exec: undo what earlier user code did to sys.stdout/stderr/stdin
        (reassigned them, or closed stdin through exit())."""
        sys.stdout, sys.stderr = self._stdout, self._stderr
        if self._stdin is None or self._stdin.closed:
            self._stdin = open(os.devnull, encoding="utf-8")
        sys.stdin = self._stdin

    def _listen(self):
        listener = bind_unix_socket(self.socket_path)   # still single-threaded here
        listener.listen(4)
        return listener

    def serve_forever(self):
        # egress.sock before runner.sock: sandboxd seals the socket directory read-only
        # once it has connected.
        self.egress = EgressRelay(os.path.dirname(os.path.abspath(self.socket_path)))
        listener = self._listen()
        self._prepare_process()
        start_bare_thread(self._serve_connections, (listener,))
        while True:
            try:
                conn, frame = self._work.get()
                self._handle_work(conn, frame)
            except KeyboardInterrupt:
                continue                     # a stray SIGINT under a user-installed handler
            except Exception as exc:
                log(f"internal error: {exc!r}\n{traceback.format_exc()}")

    # -- main thread -----------------------------------------------------------------

    def _handle_work(self, conn, frame):
        kind = frame["type"]
        if kind == "exec":
            self._run_exec(conn, frame)
        elif not conn.alive:
            return                           # its reply could not be delivered anyway
        elif kind == "reset":
            if self.own_pid_namespace:
                kill_other_processes()
                self.egress.keep_running()   # the relay was one of them
            self.executor.reset()
            conn.send({"type": "reset_done", "id": frame["id"]})
        elif kind == "set_catalog":
            self.executor.set_catalog(frame["servers"])
            conn.send({"type": "catalog_set", "id": frame["id"]})

    def _run_exec(self, conn, frame):
        self.egress.keep_running()
        exec_id = frame["id"]
        state = ExecState(exec_id, conn,
                          frame.get("max_tool_calls_in_flight", DEFAULT_TOOL_CALLS_IN_FLIGHT))
        with self._lock:
            self._queued_execs.discard((conn, exec_id))
            early = (conn, exec_id) in self._early_interrupts
            self._early_interrupts.discard((conn, exec_id))
            if not conn.alive:
                return
            state.interrupt_requested = early
            self._current = state
        self.interrupts.begin(state)
        self._restore_stdio()
        self.capture.begin(conn, exec_id, frame["max_output_bytes"],
                           frame.get("max_display_bytes", 0))
        try:
            status, result, error = self.executor.run(state, frame["code"])
        except BaseException as exc:         # a runner bug; report it rather than hang
            # (or a handler's exception that cut the executor's pause short: pause first)
            self.interrupts.leave_user_code()
            self._exit_if_forked_child()
            log(f"exec failed internally: {exc!r}\n{traceback.format_exc()}")
            status, result = "error", None
            error = {"type": "RunnerError", "message": f"internal runner error: {exc!r}",
                     "traceback": ""}
        finally:
            self._exit_if_forked_child()
            counters = self.capture.finish()
            self.interrupts.end(state)
            with self._lock:
                self._current = None
            self.calls.fail("the execution ended before the tool result arrived",
                            exec_state=state)
            state.gate.close("the execution ended before the tool call was sent")
        done = {"type": "done", "id": exec_id, "status": status, "result": result,
                "error": error, **counters}
        try:
            digest = out_digest(self.workspace)
        except Exception as exc:             # a runner bug (or code that broke os): no hint
            log(f"out/ fingerprint failed: {exc!r}")
            digest = None
        if digest is not None:
            done["out_digest"] = digest
        conn.send(done)

    # -- connections -----------------------------------------------------------------

    def _serve_connections(self, listener):
        """The connections thread: accepts sandboxd's connections (a new one replaces the
        old) and reads the current one's frames. One thread does both, woken by poll(), so
        an idle session keeps no second thread (about 50 KiB of kernel and stack memory)
        blocked in accept(). A frame is read whole once its first bytes are there."""
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        conn = None
        listen_again_at = None               # accept() failed: the listener rests until then
        while True:
            timeout = None
            if listen_again_at is not None:
                timeout = max(0, (listen_again_at - time.monotonic()) * 1000)
            ready = {fd for fd, _ in poller.poll(timeout)}
            if listen_again_at is not None and time.monotonic() >= listen_again_at:
                poller.register(listener, select.POLLIN)
                listen_again_at = None
            if conn is not None and conn.fileno() in ready and not self._read_frame(conn):
                poller.unregister(conn.fileno())
                self._end_connection(conn)
                conn = None
            if listener.fileno() not in ready or listen_again_at is not None:
                continue
            try:
                sock, _ = listener.accept()
            except OSError as exc:
                log(f"accept failed: {exc!r}")
                poller.unregister(listener)      # e.g. EMFILE: try again in 0.1 s
                listen_again_at = time.monotonic() + 0.1
                continue
            new = FrameConnection(sock)
            with self._lock:
                self._conn = new
            if conn is not None:
                poller.unregister(conn.fileno())
                self._end_connection(conn)
            conn = new
            poller.register(conn.fileno(), select.POLLIN)
            conn.send({"type": "ready", "runner_version": RUNNER_VERSION,
                       "python": sys.version.split()[0], "pid": os.getpid(),
                       "execs": self.executor.exec_count})

    def _read_frame(self, conn):
        """Reads and dispatches one frame of `conn`; False when the connection is over
        (closed by either side, broken, or it broke the protocol)."""
        try:
            self._dispatch(conn, conn.read_frame())
            return conn.alive
        except ConnectionClosed:
            pass
        except ProtocolError as exc:
            log(f"closing connection: {exc}")
        except OSError as exc:
            if conn.alive:
                log(f"connection error: {exc!r}")
        except Exception as exc:
            log(f"reader failed: {exc!r}\n{traceback.format_exc()}")
        return False

    def _end_connection(self, conn):
        conn.close()
        self._connection_lost(conn)
        conn.release()

    def _dispatch(self, conn, frame):
        kind = frame["type"]
        if kind == "ping":
            conn.send({"type": "pong", "id": frame_field(frame, "id", int)})
        elif kind == "tool_result":
            call_id = frame_field(frame, "call_id", str)
            frame_field(frame, "ok", bool)
            self.calls.resolve(conn, call_id, frame)
        elif kind == "interrupt":
            self._interrupt(conn, frame_field(frame, "id", int))
        elif kind == "exec":
            exec_id = frame_field(frame, "id", int)
            frame_field(frame, "code", str)
            if frame_field(frame, "max_output_bytes", int) < 0:
                raise ProtocolError("exec.max_output_bytes must not be negative")
            if "max_display_bytes" in frame and \
                    frame_field(frame, "max_display_bytes", int) < 0:
                raise ProtocolError("exec.max_display_bytes must not be negative")
            if "max_tool_calls_in_flight" in frame and \
                    frame_field(frame, "max_tool_calls_in_flight", int) < 1:
                raise ProtocolError("exec.max_tool_calls_in_flight must be at least 1")
            with self._lock:
                self._queued_execs.add((conn, exec_id))
            self._work.put((conn, frame))
        elif kind == "reset":
            frame_field(frame, "id", int)
            self._work.put((conn, frame))
        elif kind == "egress":
            self._egress_on(conn, frame_field(frame, "id", int), frame.get("listener") is True)
        elif kind == "set_catalog":
            frame_field(frame, "id", int)
            # catalog.py loads with the first catalog: sandboxd sends none to a session
            # without tool servers.
            from .catalog import parse_catalog
            servers = parse_catalog(frame_field(frame, "catalog", dict))
            self._work.put((conn, {"type": "set_catalog", "id": frame["id"],
                                   "servers": servers}))
        elif kind in FILE_FRAMES:
            self._file_transfers().submit(conn, check_file_frame(frame))
        else:
            log(f"ignoring unknown frame type {kind!r}")

    def _egress_on(self, conn, frame_id, hand_over):
        """The `egress` frame, answered on the reader thread (never behind an exec); with
        `hand_over`, the loopback listener goes to sandboxd with the answer."""
        try:
            port, listener = self.egress.turn_on(hand_over)
        except RuntimeError as exc:
            conn.send({"type": "egress_on", "id": frame_id, "error": str(exc)})
            return
        reply = {"type": "egress_on", "id": frame_id, "port": port}
        if listener is None:
            conn.send(reply)
            return
        with listener:                       # sandboxd's alone once sent
            conn.send(dict(reply, listener=True), fds=[listener.fileno()])

    def _interrupt(self, conn, exec_id):
        with self._lock:
            state = self._current
            if state is None or state.conn is not conn or state.id != exec_id:
                if (conn, exec_id) in self._queued_execs:
                    self._early_interrupts.add((conn, exec_id))
                return
        self.interrupts.interrupt(state)

    def _connection_lost(self, conn):
        """Interrupt the exec of that connection, fail its tool calls; its remaining
        frames (output, done) are dropped because the connection is dead."""
        with self._lock:
            if self._conn is conn:
                self._conn = None
            state = self._current if self._current and self._current.conn is conn else None
            self._queued_execs = {k for k in self._queued_execs if k[0] is not conn}
            self._early_interrupts = {k for k in self._early_interrupts if k[0] is not conn}
            files = self._files
        self.calls.fail("sandboxd connection lost", conn=conn)
        if files is not None:
            files.connection_lost(conn)
        if state is not None:
            self.interrupts.interrupt(state)

    def _file_transfers(self):
        """The FileTransfers of the file frames, made (and files.py, with its thread, loaded)
        by the first: a session that moves no file never pays for them."""
        from .files import FileTransfers     # outside the lock: an import takes locks of its own
        with self._lock:
            if self._files is None:
                self._files = FileTransfers(self.workspace)
            return self._files


USAGE = """usage: sandbox_runner.pyz --socket PATH [--workspace DIR] [--own-pid-namespace]

sandboxd code runner (see docs/runner-protocol.md)

  --socket PATH          unix socket path to listen on
  --workspace DIR        the directory file frames read and write (default /workspace)
  --own-pid-namespace    the container is ours alone: a reset also ends every process user
                         code left running (never set this outside a container)"""


def parse_args(argv):
    """{'socket', 'workspace', 'own_pid_namespace'} from `argv`. SystemExit(2) with the usage
    on a bad command line, SystemExit(0) after printing it for --help. Not argparse: its
    import (with gettext and textwrap) would cost every session 0.6 MiB for three options."""
    args = {"socket": None, "workspace": "/workspace", "own_pid_namespace": False}
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if word in ("-h", "--help"):
            print(USAGE)
            raise SystemExit(0)
        if word == "--own-pid-namespace":
            args["own_pid_namespace"] = True
        elif name in ("--socket", "--workspace"):
            if not eq:
                if not rest:
                    _usage_error(f"{name} needs a value")
                value = rest.pop(0)
            args[name[2:]] = value
        else:
            _usage_error(f"unknown argument {word!r}")
    if not args["socket"]:
        _usage_error("--socket is required")
    return args


def _usage_error(message):
    print(f"{USAGE}\n\nsandbox_runner: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    runner = Runner(args["socket"], args["workspace"])
    runner.own_pid_namespace = args["own_pid_namespace"]
    runner.serve_forever()
