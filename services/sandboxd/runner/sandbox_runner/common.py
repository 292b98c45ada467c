"""What every module of the runner shares: the limits (docs/runner-protocol.md), the
runner's own log, and which code is the runner's (for tracebacks and interrupts)."""

import _signal
import _thread
import json
import os
import socket
import sys

RUNNER_VERSION = 2                          # 2: binary file_chunk frames

MAX_FRAME_BYTES = 16 * 1024 * 1024          # both directions (docs/runner-protocol.md)
OUTPUT_FLUSH_BYTES = 8 * 1024               # flush output when this much is buffered ...
OUTPUT_FLUSH_DELAY = 0.005                  # ... or this long after the first unflushed write
OUTPUT_FLUSHER_IDLE = 1.0                   # the flusher thread ends after this long idle
OUTPUT_FRAME_CHARS = 1024 * 1024            # text per output frame; JSON escaping stays < 16 MiB
RESULT_REPR_LIMIT = 64 * 1024               # chars of the trailing expression's repr
DEFAULT_TOOL_CALLS_IN_FLIGHT = 64           # when an `exec` frame does not say
ERROR_MESSAGE_LIMIT = 64 * 1024             # chars of str(exception)
TRACEBACK_LIMIT = 256 * 1024                # chars of a formatted traceback
LINECACHE_BUDGET = 32 * 1024 * 1024         # chars of cell sources kept for tracebacks
INTERRUPT_RESEND_INTERVAL = 0.02            # see InterruptController
RUNNER_RECURSION_LIMIT = 1000               # the least the runner's own code runs with
# Lists and dicts a tool-call argument (or a display's JSON) may nest: the tool_call frame
# adds two levels (the frame, `arguments`), and sandboxd refuses JSON deeper than 128.
MAX_JSON_DEPTH = 120
# JSON values (dicts, lists, strings, numbers, ...) one tool call's arguments may hold:
# sandboxd refuses a frame of more than one value per 128 bytes of its 16 MiB cap (131,072;
# docs/runner-protocol.md), and the frame's own fields are a few more.
MAX_ARGUMENT_VALUES = 131072 - 16
# JSON values a display's application/json data may hold: sandboxd parses it with its
# default budget for untrusted JSON (codemode::JsonLimits::max_values).
MAX_DISPLAY_JSON_VALUES = 1 << 20

RESULT_NAME = "__sandbox_cell_result__"     # hidden global that receives the trailing expression
CELL_PREFIX = "<cell-"                      # filenames of agent code: <cell-1>, <cell-2>, ...


def start_bare_thread(function, args=()):
    """Starts a thread of the runner's own: a bare one (_thread), so that hooks user code
    set with threading.settrace/setprofile never run in it, with the platform's default
    stack whatever threading.stack_size user code set, and with every signal blocked, so
    that a signal sent to the process goes to the main thread (or a thread of user code),
    as in plain Python. RuntimeError: no thread to be had."""
    stack = _thread.stack_size(0)
    mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, ())
    try:
        _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
        return _thread.start_new_thread(_runner_thread, (function, args))
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
        _thread.stack_size(stack)


_runner_threads = set()                     # idents of the runner's threads while they run


def _runner_thread(function, args):
    ident = _thread.get_ident()
    _runner_threads.add(ident)
    try:
        function(*args)
    finally:
        _runner_threads.discard(ident)


def forget_runner_threads():
    """In a child of fork(): the parent's runner threads are not there, and a thread the
    child starts may get one of their idents."""
    _runner_threads.clear()


def on_a_runner_thread():
    """True on a thread start_bare_thread started (user code can run there too: a
    finalizer the garbage collector calls, say)."""
    return _thread.get_ident() in _runner_threads


def let_go_in_child(rlock):
    """In a child of fork(): releases `rlock` if a thread the child lacks held it at fork
    time, so that the child's one thread can take it, a wait already begun included.
    (_release_save is the release of threading.RLock that does not check the owner.) A
    thread may also have taken the lock underneath without being its owner yet (it waited
    for the GIL to say so): then the lock is made anew."""
    if not rlock._is_owned():
        try:
            rlock._release_save()
        except RuntimeError:                 # no owner recorded
            rlock._at_fork_reinit()


def log(message):
    """Diagnostics of the runner itself go to the container's real stderr (podman logs)."""
    stream = sys.__stderr__
    if stream is not None:
        try:
            stream.write(f"sandbox_runner: {message}\n")
            stream.flush()
        except (OSError, ValueError):
            pass


def as_sent_json(value, max_depth, max_values, level=1):
    """(`value` as the plain JSON it goes out as, None) or (None, why sandboxd would refuse
    it). The plain copy is what json.dumps writes, read back: dicts, lists, strings, numbers,
    whatever subclasses, methods or other threads did to the original, so the checks below
    hold for the very bytes sent. Refused: what json.dumps refuses; nesting deeper than
    `max_depth` levels of dicts and lists; more than `max_values` values (itself, and every
    dict value and list item within; keys are not values); an integer beyond a double's
    range (sandboxd reads a number as a 64-bit integer or a double). `value` itself is at
    nesting `level` (0: its own dict or list is not counted, as for a call's arguments)."""
    try:
        plain = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        return None, str(exc)
    stack = [(plain, level)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_values:
            return None, f"holds more than {max_values} values"
        if isinstance(item, (dict, list)):
            if depth > max_depth:
                return None, f"nested deeper than {max_depth} levels"
            stack.extend((child, depth + 1)
                         for child in (item.values() if isinstance(item, dict) else item))
        elif type(item) is int and item.bit_length() > 64:
            try:
                float(item)
            except OverflowError:
                return None, (f"holds an integer of {len(str(abs(item)))} digits, beyond the "
                              f"range of a double (about 1.8e308)")
    return plain, None


def _runner_code_filename():
    return _runner_code_filename.__code__.co_filename


# The folder of this package as its code objects name it: inside the zipapp that is
# ".../sandbox_runner.pyz/sandbox_runner/", run from the source tree the source folder.
RUNNER_DIR = os.path.dirname(_runner_code_filename()) + os.sep


def is_runner_file(filename):
    """True for a code filename of any module of the runner (never for user cells)."""
    return filename.startswith(RUNNER_DIR)


# Code objects of runner functions that user code calls and that hold no state of the
# runner's (egress.py's socket.connect): an interrupt lands in them as in user code, so a
# call that blocks inside one stays interruptible.
INTERRUPTIBLE_RUNNER_CODE = set()


class _WorkDepth(_thread._local):
    depth = 0


_work = _WorkDepth()


class uninterruptible:
    """`with uninterruptible():` runner work in progress on this thread that calls library
    code (logging's, say) and that an interrupt would leave half done: the runner's SIGINT
    handler declines to raise in the main thread while it is inside one, and the resender
    sends the interrupt again, so it lands once the section ends. A signal handler of user
    code may still raise inside."""

    def __enter__(self):
        _work.depth += 1

    def __exit__(self, *exc_info):
        _work.depth -= 1


def in_uninterruptible():
    """True while this thread is inside uninterruptible()."""
    return _work.depth > 0


def end_uninterruptible():
    """Leaves every uninterruptible() section of this thread: called as each exec begins,
    so that one user code entered (the runner's modules are importable) and never left
    lasts no longer than its cell."""
    _work.depth = 0


def bind_unix_socket(path):
    """A unix stream socket bound at `path` (a stale socket file there is removed), not yet
    listening. Rootless podman maps the container uid to another host uid than sandboxd's,
    so the socket is made 0777 by the umask at bind time (gVisor refuses chmod on a socket
    it creates on the host). The umask is process-wide: call it while single-threaded."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0)
    try:
        sock.bind(path)
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    return sock
