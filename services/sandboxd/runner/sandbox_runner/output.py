"""Output capture: what user code writes to sys.stdout / sys.stderr during an exec,
batched into `output` frames (OutputCapture), and the stream objects it writes through
(CapturedStream and its binary buffer)."""

import _thread
import codecs
import collections
import io
import json
import threading
import time

from .common import (OUTPUT_FLUSH_BYTES, OUTPUT_FLUSH_DELAY, OUTPUT_FLUSHER_IDLE,
                     OUTPUT_FRAME_CHARS, let_go_in_child, log, start_bare_thread)
from .protocol import sending_here

_MAIN_THREAD = threading.main_thread().ident
NESTED_ENTRY_BYTES = 256                     # what a queued write costs at least, in memory


def _utf8(text):
    """Return (text, utf-8 size); lone surrogates are escaped so the text stays sendable."""
    if text.isascii():                      # O(1) in CPython: the common case is cheap
        return text, len(text)
    try:
        return text, len(text.encode("utf-8"))
    except UnicodeEncodeError:
        data = text.encode("utf-8", "backslashreplace")
        return data.decode("utf-8"), len(data)


class _NestedTally:
    """One budget's share of the writes a signal handler queued in OutputCapture._nested:
    the cost queued and what it dropped (text bytes, or displays), written by the main
    thread only; the cost taken in and the drops counted, written under the lock only.
    Each field has one writer, so neither side needs the other's lock."""

    __slots__ = ("queued", "dropped", "taken", "counted")

    def __init__(self):
        self.queued = self.dropped = self.taken = self.counted = 0


class OutputCapture:
    """Collects what user code writes to sys.stdout / sys.stderr during one exec.

    Chunks are kept in write order, consecutive writes to the same stream are merged, and
    an `output` frame goes out when OUTPUT_FLUSH_BYTES are buffered (the writer waits for
    it: that gives natural backpressure), OUTPUT_FLUSH_DELAY after the first unflushed
    write, and before `done` (finish). A chunk leaves the queue only once its frame is
    sent, so an exception that cuts a flush short loses nothing, and the lock is held
    while sending so that frames leave in the order the text was written.

    The flusher thread sends the timed frames and, during an exec, every frame of the
    main thread's writes: Python runs signal handlers only on the main thread, and one of
    user code that raises while that thread is inside a send would cut the frame. The
    flusher runs only while output waits or has waited within OUTPUT_FLUSHER_IDLE: the
    first write that waits starts it, so an idle session holds no thread for it. Without
    one (no thread to be had) every writer sends itself.

    A signal handler of user code can run while the main thread is inside the capture
    (waiting for the lock or the flusher, or changing the queue) or inside a send of a
    frame (a tool call's, protocol.sending_here). What it writes there is never waited
    on: in the first case it goes to _nested, taken in by whoever next holds the lock;
    in the second it is queued at once if the lock is free, and goes to _nested if not
    (the flusher holds it, waiting for that send). _nested holds at most the output
    budget left. Once `max_output_bytes` have been accepted, further output is only
    counted, which keeps a 100 MB print loop cheap.

    Displays (rich outputs, display.py) are `["display", {mime: data}]` chunks among the
    text ones, so they keep their place relative to prints. They have a budget of their
    own, `max_display_bytes` of encoded JSON per exec; one that does not fit is dropped
    with a marker on stderr, and counted.
    """

    def __init__(self):
        self._lock = threading.RLock()       # re-entrant: a signal handler may print
        self._wake = threading.Condition(self._lock)      # the flusher waits here
        self._active = False
        self._conn = None
        self._exec_id = None
        self._chunks = []                    # [[stream, [text, ...]], ...]
        self._head_sent = 0                  # chars of the first chunk already sent
        self._buffered = 0
        self._first_write = None             # monotonic time of the first unflushed write
        self._flushing = False
        self._budget = 0
        self._display_budget = 0
        self.output_bytes = 0
        self.dropped_bytes = 0
        self.displays = 0
        self.displays_dropped = 0
        self._flusher_running = False
        self.user_handlers = lambda: False   # True while user code has a signal handler
        self._main_depth = 0                 # main thread calls inside _run
        self._waiter = None                  # a lock the main thread waits on
        self._nested = collections.deque()   # (action, args, cost, tally): a handler's
        self._nested_text = _NestedTally()   # writes, and what they cost of each budget
        self._nested_displays = _NestedTally()

    def _start_flusher(self):
        """Starts the flusher thread (the lock is held); True when it runs. Starting it
        does not wait for it to run."""
        start_bare_thread(self._flusher)
        return True

    def after_fork_in_child(self):
        """A child of user code's fork writes no frame (it shares sandboxd's socket): it
        captures nothing. It has no flusher: the lock the flusher held at fork time is let
        go, and so is a main thread waiting for the flusher (a signal handler forked)."""
        let_go_in_child(self._lock)
        self._wake = threading.Condition(self._lock)
        self._flusher_running = False
        self._active = False
        self._conn = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and waiter.locked():
            waiter.release()

    def begin(self, conn, exec_id, max_output_bytes, max_display_bytes=0):
        with self._lock:
            self._active = True
            self._conn = conn
            self._exec_id = exec_id
            self._chunks = []
            self._head_sent = 0
            self._buffered = 0
            self._first_write = None
            self._budget = max_output_bytes
            self._display_budget = max_display_bytes
            self.output_bytes = 0
            self.dropped_bytes = 0
            self.displays = 0
            self.displays_dropped = 0
            self._main_depth = 0
            self._nested.clear()
            self._nested_text = _NestedTally()
            self._nested_displays = _NestedTally()

    def finish(self):
        """Flush everything and stop capturing; returns the `done` frame's counters."""
        with self._lock:
            self._take_nested_locked()
            self._flush_locked()
            self._active = False
            self._conn = None
            return {"output_bytes": self.output_bytes, "dropped_bytes": self.dropped_bytes,
                    "displays": self.displays, "displays_dropped": self.displays_dropped}

    def write(self, stream, text):
        if text:
            if type(text) is not str:          # a str subclass's own len or isascii
                text = str.__str__(text)       # must not decide its size
            text, size = _utf8(text)
            self._run(self._write_locked, (stream, text, size), size)

    def display(self, bundle):
        """Queue one display ({mime: str}) in order with the text around it."""
        size = len(json.dumps(bundle, ensure_ascii=False).encode("utf-8", "replace"))
        self._run(self._display_locked, (bundle, size), size)

    def flush(self):
        """Send what is queued before going on (a tool call's frame follows it)."""
        self._run(None, (), 0, limit=0)

    def _run(self, action, args, size, limit=OUTPUT_FLUSH_BYTES):
        """Runs action(*args) (`size` bytes of output) under the lock, then lets the queue
        go under `limit` bytes before the writer goes on (backpressure).

        The main thread, where signal handlers run, sends nothing itself while user code
        has one installed: it waits, holding no lock, for the flusher to send, and a
        handler that raises then costs nothing written before it. A handler's write
        while the main thread is in here, or inside a send of any frame, only goes to
        _nested, for the flusher (or the main thread's next write) to take in: this call
        is not re-entered, and a wait there could be for the socket's lock its own
        thread holds."""
        if threading.get_ident() != _MAIN_THREAD:
            with self._lock:
                self._take_nested_locked()
                if action is not None:
                    action(*args)
                if self._buffered > limit:
                    self._flush_locked()
            return
        if self._main_depth or sending_here():
            self._queue_nested(action, args, size)
            return
        self._main_depth += 1                # no signal handler runs between this and try
        try:
            if self._nested:                 # a handler's earlier writes go first
                self._let_flusher(self._nested_waits_locked)
            with self._lock:
                if action is not None:
                    action(*args)
                if self._buffered <= limit:
                    return
            self._let_flusher(lambda: self._buffered > limit)
        finally:
            self._main_depth -= 1

    def _nested_waits_locked(self):
        return bool(self._nested)

    def _let_flusher(self, waits):
        """Main thread: until waits() is false (under the lock), wakes the flusher and
        waits for its next round, holding no lock. It does the flusher's job itself when
        no signal handler of user code is installed (none can run in its frames: the
        runner's own SIGINT handler never raises there), and when there is no thread to
        be had for a flusher.

        With a handler installed and no flusher known to run, it starts one here: the
        start in _buffered_locked is a call a handler can cut short (before the thread
        starts, or after it started and before _flusher_running is set). A second
        flusher that this starts then is harmless: every round runs under the lock."""
        while True:
            with self._lock:
                if not waits() or self._conn is None:
                    return
                if not self._flusher_running and self.user_handlers():
                    self._flusher_running = self._try_start_flusher()
                if not self._flusher_running or not self.user_handlers():
                    self._take_nested_locked()
                    self._flush_locked()
                    return
                waiter = _thread.allocate_lock()
                waiter.acquire()
                self._waiter = waiter
                self._wake.notify()
            waiter.acquire()                 # released by the flusher

    def _queue_nested(self, action, args, size):
        """Main thread only. Bounded by the budget left, the output's or the displays'
        (each entry counted at NESTED_ENTRY_BYTES at least): beyond it the write is only
        counted, and the display is dropped with a marker."""
        if action is None:
            return
        cost = max(size, NESTED_ENTRY_BYTES)
        if action == self._display_locked:
            tally, budget, dropped = self._nested_displays, self._display_budget, 1
        else:
            tally, budget, dropped = self._nested_text, self._budget, size
        if tally.queued + cost - tally.taken > budget:
            tally.dropped += dropped
            return
        tally.queued += cost
        self._nested.append((action, args, cost, tally))

    def _take_nested_locked(self):
        while self._nested:
            action, args, cost, tally = self._nested.popleft()
            tally.taken += cost
            action(*args)
        text, displays = self._nested_text, self._nested_displays
        dropped = text.dropped - text.counted
        dropped_displays = displays.dropped - displays.counted
        if dropped or dropped_displays:
            text.counted += dropped
            displays.counted += dropped_displays
            if self._active:
                self.output_bytes += dropped
                self.dropped_bytes += dropped
                self.displays_dropped += dropped_displays
            if self._active and dropped_displays:
                marker = (f"[{dropped_displays} displays dropped: over this execution's "
                          "display cap]\n")
                self._write_locked("stderr", marker, len(marker))

    def _display_locked(self, bundle, size):
        if not self._active:
            return
        if size > self._display_budget:
            self.displays_dropped += 1
            marker = (f"[display dropped: its {size} bytes are over the "
                      f"{self._display_budget} bytes left of this execution's display cap]\n")
            self._write_locked("stderr", marker, len(marker))
            return
        self._display_budget -= size
        self.displays += 1
        self._chunks.append(["display", bundle])
        self._buffered_locked(size)

    def _write_locked(self, stream, text, size):
        if not self._active:
            return                        # writes outside an exec are dropped
        kept, kept_size, budget = text, size, self._budget - size
        if budget < 0:
            budget = 0
            if self._budget <= 0:
                kept, kept_size = "", 0
            else:
                kept = text[:self._budget] if text.isascii() else \
                    text.encode("utf-8")[:self._budget].decode("utf-8", "ignore")
                kept_size = len(kept.encode("utf-8"))
        # No call from here to the append: a signal handler cannot run in between, so the
        # counters never count a write the queue does not hold.
        self.output_bytes += size
        self.dropped_bytes += size - kept_size
        self._budget = budget
        if not kept:
            return
        chunks = self._chunks
        if chunks and chunks[-1][0] == stream:
            chunks[-1][1].append(kept)
        else:
            chunks.append([stream, [kept]])
        self._buffered_locked(kept_size)

    def _buffered_locked(self, size):
        """`size` more bytes wait: on the first, wake the flusher (or start it)."""
        self._buffered += size
        if self._first_write is None:
            self._first_write = time.monotonic()
            if self._flusher_running:
                self._wake.notify()
            else:
                self._flusher_running = self._try_start_flusher()

    def _try_start_flusher(self):
        """Starts the flusher (the lock is held); False when it does not run. With no
        thread to be had (the pids limit) the writers send, and `done` does."""
        try:
            return self._start_flusher()
        except RuntimeError as exc:
            log(f"output flusher: {exc}")
            return False

    def _flush_locked(self):
        """Sends the queue a frame at a time. Not re-entered: a signal handler that writes
        during a flush of its own thread leaves its text for the next one."""
        if self._flushing or sending_here():
            return
        if self._conn is None:               # no exec: nothing to send it to
            self._chunks, self._head_sent = [], 0
            self._buffered, self._first_write = 0, None
            return
        self._flushing = True
        try:
            while self._chunks:
                frame_chunks, taken, head_sent = self._next_frame_locked()
                self._send(frame_chunks)
                del self._chunks[:taken]
                self._head_sent = head_sent
            self._buffered = 0
            self._first_write = None
        finally:
            self._flushing = False

    def _next_frame_locked(self):
        """The first frame's chunks (text up to OUTPUT_FRAME_CHARS, or one display: its
        size is capped apart), how many queued chunks it takes whole, and how much of the
        next one it sends."""
        frame_chunks, chars, offset = [], 0, self._head_sent
        for index, (stream, parts) in enumerate(self._chunks):
            if stream == "display":
                return (frame_chunks, index, 0) if frame_chunks else \
                    ([["display", parts]], 1, 0)
            if len(parts) > 1:
                parts[:] = ["".join(parts)]
            text = parts[0]
            piece = text[offset:offset + OUTPUT_FRAME_CHARS - chars]
            frame_chunks.append([stream, piece])
            chars += len(piece)
            if offset + len(piece) < len(text):
                return frame_chunks, index, offset + len(piece)
            offset = 0
            if chars >= OUTPUT_FRAME_CHARS:
                return frame_chunks, index + 1, 0
        return frame_chunks, len(self._chunks), 0

    def _send(self, frame_chunks):
        self._conn.send({"type": "output", "id": self._exec_id, "chunks": frame_chunks})

    def _flusher(self):
        with self._lock:
            try:
                self._flush_until_idle()
            finally:
                self._flusher_running = False
                self._release_waiter_locked()

    def _release_waiter_locked(self):
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.release()

    def _flush_until_idle(self):
        idle_since = time.monotonic()
        while True:
            self._take_nested_locked()
            if self._first_write is None and self._waiter is None:
                idle = time.monotonic() - idle_since
                if idle >= OUTPUT_FLUSHER_IDLE:
                    return
                self._wake.wait(OUTPUT_FLUSHER_IDLE - idle)
                continue
            idle_since = time.monotonic()
            if self._waiter is None and self._buffered <= OUTPUT_FLUSH_BYTES:
                delay = self._first_write + OUTPUT_FLUSH_DELAY - idle_since
                if delay > 0:
                    self._wake.wait(delay)
                    continue
            try:
                self._flush_locked()
            except Exception as exc:  # never let the flusher die, nor spin on a frame
                log(f"output flush failed: {exc!r}")
                self._chunks, self._head_sent = [], 0
                self._buffered, self._first_write = 0, None
            self._release_waiter_locked()


class CapturedStream(io.TextIOBase):
    """What user code gets as sys.stdout / sys.stderr: a thread-safe text file that feeds
    OutputCapture. It has no file descriptor, and close() is a no-op so user code cannot
    break the capture for later execs. `on_return`, when given, is called at the end of
    every write (InterruptController.returning_to_user_code)."""

    def __init__(self, capture, stream, on_return=None):
        super().__init__()
        self._capture = capture
        self._stream = stream
        self._on_return = on_return
        self._binary = _CapturedBinary(self, on_return)

    @property
    def name(self):
        return f"<{self._stream}>"

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "backslashreplace"

    @property
    def buffer(self):
        return self._binary

    line_buffering = False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self._capture.write(self._stream, s)
        if self._on_return is not None:
            self._on_return()
        return len(s)

    def write_from_buffer(self, s):
        """write() without on_return, for the binary buffer, which calls it itself."""
        self._capture.write(self._stream, s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def writable(self):
        return True

    def flush(self):
        pass   # output leaves within OUTPUT_FLUSH_DELAY anyway; a frame per flush is wasteful

    def isatty(self):
        return False

    def fileno(self):
        raise io.UnsupportedOperation("captured stream has no file descriptor")

    def close(self):
        pass


class _CapturedBinary(io.RawIOBase):
    """sys.stdout.buffer: bytes are decoded as UTF-8 (invalid bytes replaced). A signal
    handler's write inside the decode of its own thread is decoded on its own."""

    def __init__(self, text_stream, on_return):
        super().__init__()
        self._text = text_stream
        self._on_return = on_return
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.RLock()
        self._decoding = False

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        with self._lock:
            if self._decoding:               # a signal handler inside this thread's decode
                text = data.decode("utf-8", "replace")
            else:
                try:
                    self._decoding = True
                    text = self._decoder.decode(data)
                finally:
                    self._decoding = False
        if text:
            self._text.write_from_buffer(text)
        if self._on_return is not None:
            self._on_return()
        return len(data)

    def fileno(self):
        raise io.UnsupportedOperation("captured stream has no file descriptor")

    def close(self):
        pass
