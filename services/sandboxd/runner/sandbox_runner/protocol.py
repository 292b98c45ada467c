"""The frame protocol of docs/runner-protocol.md: 4-byte big-endian length, UTF-8 JSON
object with a string `type` (or, from sandboxd only, a binary file chunk: the length's top
bit set); FrameConnection (one sandboxd connection) and the errors of the protocol."""

import _thread
import json
import os
import socket
import threading

from .common import MAX_FRAME_BYTES

BINARY_FRAME = 0x80000000                    # length bit: a binary file_chunk frame


class ProtocolError(Exception):
    """sandboxd broke the frame protocol; the runner closes that connection."""


class ConnectionClosed(Exception):
    """The peer closed the connection (EOF)."""


class FrameTooLarge(ValueError):
    """An outgoing frame would exceed MAX_FRAME_BYTES (sandboxd would drop the session)."""

    def __init__(self, size):
        super().__init__(f"frame of {size} bytes exceeds the {MAX_FRAME_BYTES} byte cap")
        self.size = size


def encode_frame(frame, prefix=True):
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (from user strings) are not valid UTF-8; they only occur inside
        # JSON strings, so replacing them keeps the frame valid JSON.
        body = text.encode("utf-8", "replace")
    if len(body) > MAX_FRAME_BYTES:
        raise FrameTooLarge(len(body))
    return len(body).to_bytes(4, "big") + body if prefix else body


class _SendDepth(threading.local):
    depth = 0                                # sends this thread is inside


_here = _SendDepth()


def sending_here():
    """True while this thread is inside FrameConnection.send_body, from before it waits for
    the socket's lock until it has released it. A signal handler of user code that runs
    there must neither wait for that lock (its own thread holds it, or is about to) nor
    raise in the runner's frames (that would cut the frame being sent)."""
    return _here.depth > 0


class FrameConnection:
    """One accepted sandboxd connection: frame reads (connections thread only) and locked writes.

    `send` never raises on a broken socket: it marks the connection dead and returns False,
    so output written by user code can never fail because sandboxd went away.
    """

    def __init__(self, sock):
        self._sock = sock
        self._send_lock = threading.Lock()   # the one lock for all writes to this socket
        self._sender = None                  # the thread holding _send_lock
        self.alive = True

    def send(self, frame, fds=()):
        """Sends `frame`, with the descriptors `fds` attached to its first bytes (SCM_RIGHTS);
        False when the connection is dead. FrameTooLarge: nothing sent."""
        return self.send_body(encode_frame(frame, prefix=False), fds)

    def send_body(self, body, fds=()):
        """Send one encoded frame body (UTF-8 JSON); False when the connection is dead."""
        if len(body) > MAX_FRAME_BYTES:
            raise FrameTooLarge(len(body))
        data = len(body).to_bytes(4, "big") + body
        ident = _thread.get_ident()
        _here.depth += 1
        try:
            with self._send_lock:
                self._sender = ident
                try:
                    if not self.alive:
                        return False
                    if fds:
                        data = data[socket.send_fds(self._sock, [data], list(fds)):]
                    if data:
                        self._sock.sendall(data)
                except OSError:
                    self.close()
                    return False
                finally:
                    self._sender = None
        finally:
            _here.depth -= 1
        return True

    def after_fork_in_child(self):
        """In a child of user code's fork, which shares this socket with the parent: the
        descriptor becomes /dev/null, so a send the child finishes (a signal handler
        forked inside it) or starts fails there and never reaches sandboxd; and the lock
        that a thread the child lacks held at fork time is let go, as the child's one
        thread may be waiting for it."""
        self.alive = False
        fd = self._sock.fileno()
        if fd >= 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, fd, inheritable=False)
            os.close(devnull)
        if self._send_lock.locked() and self._sender != _thread.get_ident():
            self._send_lock.release()

    def read_frame(self):
        length = int.from_bytes(self._recv_exact(4), "big")
        if length & BINARY_FRAME:
            return self._read_binary_chunk(length & ~BINARY_FRAME)
        if length > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES} byte cap")
        body = self._recv_exact(length)
        try:
            frame = json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"frame is not valid UTF-8 JSON: {exc}") from None
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            raise ProtocolError("frame is not a JSON object with a string 'type'")
        return frame

    def _read_binary_chunk(self, length):
        """A file_chunk as raw bytes: an 8-byte big-endian upload id, then the data. It
        stands for {"type": "file_chunk", "id": id, "data": base64(data)} without the
        base64 and the JSON (a third fewer bytes, no decoding)."""
        if length < 8 or length > MAX_FRAME_BYTES:
            raise ProtocolError(f"binary frame of {length} bytes (8 to {MAX_FRAME_BYTES})")
        body = self._recv_exact(length)
        return {"type": "file_chunk", "id": int.from_bytes(body[:8], "big"),
                "data": memoryview(body)[8:]}

    def _recv_exact(self, size):
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self._sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionClosed()
            got += n
        return buf                           # no copy: a file chunk is a megabyte

    def close(self):
        """Mark dead and shut the socket down; this wakes a reader blocked in recv and a
        writer blocked in sendall. The connections thread closes the descriptor (release)."""
        self.alive = False
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def fileno(self):
        return self._sock.fileno()

    def release(self):
        self._sock.close()


def frame_field(frame, name, kind):
    """Type-checked access to a required inbound frame field (bool is not an int here)."""
    if name not in frame:
        raise ProtocolError(f"{frame['type']} frame lacks field {name!r}")
    value = frame[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ProtocolError(f"{frame['type']}.{name} must be {names}")
    return value


# Each file frame's fields (beyond `type` and the int `id`) and their types.
FILE_FRAMES = {
    "file_upload": {"path": str, "max_bytes": int},
    "file_chunk": {"data": (str, memoryview)},   # base64 text, or a binary frame's bytes
    "file_commit": {},
    "file_abort": {},
    "file_download": {"path": str, "max_bytes": int},
    "file_list": {"path": str, "max_entries": int},
}


def check_file_frame(frame):
    """The frame, its fields checked: a missing or mistyped one, or a negative count, is a
    protocol error (sandboxd sends well-formed frames; the path itself is checked later
    and refused with file_error)."""
    frame_field(frame, "id", int)
    for name, kind in FILE_FRAMES[frame["type"]].items():
        if frame_field(frame, name, kind) is not None and kind is int and frame[name] < 0:
            raise ProtocolError(f"{frame['type']}.{name} must not be negative")
    return frame
