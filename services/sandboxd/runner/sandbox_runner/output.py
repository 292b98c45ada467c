"""Output capture: what user code writes to sys.stdout / sys.stderr during an exec,
batched into `output` frames (OutputCapture), and the stream objects it writes through
(CapturedStream and its binary buffer)."""

import _thread
import codecs
import io
import json
import threading
import time

from .common import (OUTPUT_FLUSH_BYTES, OUTPUT_FLUSH_DELAY, OUTPUT_FLUSHER_IDLE,
                     OUTPUT_FRAME_CHARS, log)


def _utf8(text):
    """Return (text, utf-8 size); lone surrogates are escaped so the text stays sendable."""
    if text.isascii():                      # O(1) in CPython: the common case is cheap
        return text, len(text)
    try:
        return text, len(text.encode("utf-8"))
    except UnicodeEncodeError:
        data = text.encode("utf-8", "backslashreplace")
        return data.decode("utf-8"), len(data)


class OutputCapture:
    """Collects what user code writes to sys.stdout / sys.stderr during one exec.

    Chunks are kept in write order, consecutive writes to the same stream are merged, and
    an `output` frame goes out when OUTPUT_FLUSH_BYTES are buffered (by the writing thread:
    that gives natural backpressure), OUTPUT_FLUSH_DELAY after the first unflushed write
    (by the flusher thread), and before `done` (finish). The flusher runs only while
    output waits or has waited within OUTPUT_FLUSHER_IDLE: the first write that waits
    starts it, so an idle session holds no thread for it. Once `max_output_bytes` have been
    accepted, further output is only counted, which keeps a 100 MB print loop cheap.
    The lock is held while sending so that frames leave in the order the text was written.
    A signal handler of user code can run inside a send of the connection (any frame, on
    the thread that holds the socket's lock). What it writes then waits for the next
    flush: a flush there would wait for the socket's lock its own thread holds, and when
    another thread holds this lock (the flusher, waiting for that same send), the write
    is queued without waiting for it (_nested) and taken in by the next write or flush.

    Displays (rich outputs, display.py) are `["display", {mime: data}]` chunks among the
    text ones, so they keep their place relative to prints. They have a budget of their
    own, `max_display_bytes` of encoded JSON per exec; one that does not fit is dropped
    with a marker on stderr, and counted.
    """

    def __init__(self):
        self._lock = threading.RLock()       # re-entrant: a signal handler may print
        self._wake = threading.Condition(self._lock)
        self._active = False
        self._conn = None
        self._exec_id = None
        self._chunks = []                    # [[stream, [text, ...]], ...]
        self._buffered = 0
        self._first_write = None             # monotonic time of the first unflushed write
        self._budget = 0
        self._display_budget = 0
        self.output_bytes = 0
        self.dropped_bytes = 0
        self.displays = 0
        self.displays_dropped = 0
        self._flusher_running = False
        self._nested = []                    # writes of a handler inside a send

    def _start_flusher(self):
        """Starts the flusher thread (the lock is held). A bare thread: starting it does not
        wait for it to run, and hooks user code set with threading.settrace/setprofile do
        not reach it."""
        _thread.start_new_thread(self._flusher, ())

    def begin(self, conn, exec_id, max_output_bytes, max_display_bytes=0):
        with self._lock:
            self._active = True
            self._conn = conn
            self._exec_id = exec_id
            self._chunks = []
            self._buffered = 0
            self._first_write = None
            self._budget = max_output_bytes
            self._display_budget = max_display_bytes
            self.output_bytes = 0
            self.dropped_bytes = 0
            self.displays = 0
            self.displays_dropped = 0

    def finish(self):
        """Flush everything and stop capturing; returns the `done` frame's counters."""
        with self._lock:
            self._take_nested_locked()
            self._flush_locked()
            self._active = False
            self._conn = None
            return {"output_bytes": self.output_bytes, "dropped_bytes": self.dropped_bytes,
                    "displays": self.displays, "displays_dropped": self.displays_dropped}

    def display(self, bundle):
        """Queue one display ({mime: str}) in order with the text around it."""
        size = len(json.dumps(bundle, ensure_ascii=False).encode("utf-8", "replace"))
        if not self._acquire(lambda: self._display_locked(bundle, size)):
            return
        try:
            self._take_nested_locked()
            self._display_locked(bundle, size)
        finally:
            self._lock.release()

    def _display_locked(self, bundle, size):
        if not self._active:
            return
        if size > self._display_budget:
            self.displays_dropped += 1
            self.write("stderr", f"[display dropped: its {size} bytes are over the "
                                 f"{self._display_budget} bytes left of this "
                                 f"execution's display cap]\n")
            return
        self._display_budget -= size
        self.displays += 1
        self._chunks.append(["display", bundle])
        self._buffered_locked(size)

    def flush(self):
        with self._lock:
            self._take_nested_locked()
            self._flush_locked()

    def write(self, stream, text):
        if not text:
            return
        text, size = _utf8(text)
        if not self._acquire(lambda: self._write_locked(stream, text, size)):
            return
        try:
            self._take_nested_locked()
            self._write_locked(stream, text, size)
        finally:
            self._lock.release()

    def _acquire(self, nested_write):
        """Take the lock; inside a send of this thread (a signal handler), only if it is
        free at once: else queue `nested_write` for the lock's next holder and say no."""
        conn = self._conn
        if conn is None or conn.sending_thread != threading.get_ident():
            self._lock.acquire()
            return True
        if self._lock.acquire(blocking=False):
            return True
        self._nested.append(nested_write)
        return False

    def _take_nested_locked(self):
        while self._nested:
            self._nested.pop(0)()

    def _write_locked(self, stream, text, size):
        if not self._active:
            return                        # writes outside an exec are dropped
        self.output_bytes += size
        if self._budget <= 0:
            self.dropped_bytes += size
            return
        if size > self._budget:
            kept = text[:self._budget] if text.isascii() else \
                text.encode("utf-8")[:self._budget].decode("utf-8", "ignore")
            kept_size = len(kept.encode("utf-8"))
            self.dropped_bytes += size - kept_size
            text, size = kept, kept_size
            self._budget = 0
        else:
            self._budget -= size
        if not text:
            return
        if self._chunks and self._chunks[-1][0] == stream:
            self._chunks[-1][1].append(text)
        else:
            self._chunks.append([stream, [text]])
        self._buffered_locked(size)

    def _buffered_locked(self, size):
        """`size` more bytes wait: wake the flusher on the first, flush when enough."""
        self._buffered += size
        if self._first_write is None:
            self._first_write = time.monotonic()
            if self._flusher_running:
                self._wake.notify()
            else:
                try:
                    self._start_flusher()
                    self._flusher_running = True
                except RuntimeError as exc:  # no thread to be had (pids limit): the
                    log(f"output flusher: {exc}")  # output leaves at 8 KiB and at `done`
        if self._buffered >= OUTPUT_FLUSH_BYTES:
            self._flush_locked()

    def _flush_locked(self):
        conn = self._conn
        if conn is not None and conn.sending_thread == threading.get_ident():
            return          # a signal handler that runs inside a send of this thread
        chunks = self._chunks
        self._chunks = []
        self._buffered = 0
        self._first_write = None
        if not chunks or self._conn is None:
            return
        frame_chunks, frame_chars = [], 0
        for stream, parts in chunks:
            if stream == "display":          # a frame of its own: its size is capped apart
                if frame_chunks:
                    self._send(frame_chunks)
                    frame_chunks, frame_chars = [], 0
                self._send([["display", parts]])
                continue
            text = "".join(parts)
            start = 0
            while start < len(text):
                piece = text[start:start + OUTPUT_FRAME_CHARS - frame_chars]
                start += len(piece)
                frame_chunks.append([stream, piece])
                frame_chars += len(piece)
                if frame_chars >= OUTPUT_FRAME_CHARS:
                    self._send(frame_chunks)
                    frame_chunks, frame_chars = [], 0
        if frame_chunks:
            self._send(frame_chunks)

    def _send(self, frame_chunks):
        self._conn.send({"type": "output", "id": self._exec_id, "chunks": frame_chunks})

    def _flusher(self):
        with self._lock:
            try:
                self._flush_until_idle()
            finally:
                self._flusher_running = False

    def _flush_until_idle(self):
        idle_since = time.monotonic()
        while True:
            if self._first_write is None:
                idle = time.monotonic() - idle_since
                if idle >= OUTPUT_FLUSHER_IDLE:
                    return
                self._wake.wait(OUTPUT_FLUSHER_IDLE - idle)
                continue
            idle_since = time.monotonic()
            delay = self._first_write + OUTPUT_FLUSH_DELAY - idle_since
            if delay > 0:
                self._wake.wait(delay)
                continue
            try:
                self._flush_locked()
            except Exception as exc:  # never let the flusher die
                log(f"output flush failed: {exc!r}")


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
    """sys.stdout.buffer: bytes are decoded as UTF-8 (invalid bytes replaced)."""

    def __init__(self, text_stream, on_return):
        super().__init__()
        self._text = text_stream
        self._on_return = on_return
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        with self._lock:
            text = self._decoder.decode(data)
        if text:
            self._text.write_from_buffer(text)
        if self._on_return is not None:
            self._on_return()
        return len(data)

    def fileno(self):
        raise io.UnsupportedOperation("captured stream has no file descriptor")

    def close(self):
        pass
