#!/usr/bin/env python3
"""sandbox_runner: the Python process inside every sandboxd session container.

sandboxd starts it as

    python3 -I -u sandbox_runner.py --socket /run/sandboxd/runner.sock

The runner listens on that unix socket, serves one sandboxd connection at a time (a new
connection replaces the old one; the namespace survives) and speaks the length-prefixed
JSON frame protocol described in docs/runner-protocol.md (the wire contract; this file
follows it). It executes agent code in one persistent namespace with top-level `await`,
streams the code's output back in batches, and turns calls of the MCP tool proxies into
`tool_call` frames that sandboxd routes to the gateway.

Stdlib only; runs on Python 3.11 (Debian 12's 3.11.2 and newer).

Threads:
  * main thread      runs execs, `reset` and `set_catalog` from a queue, in arrival order
                     (signals are only delivered to the main thread, so user code runs here);
  * acceptor         accepts connections, sends `ready`, starts a reader per connection;
  * reader (per conn) reads frames, answers `ping`, resolves tool results, interrupts;
  * output flusher   sends buffered output 5 ms after the first unflushed write.

Nothing the user code does is trusted by sandboxd; the runner only tries hard to keep the
protocol intact for well-behaved code (no partial frames, no oversized frames).
"""

import argparse
import ast
import asyncio
import builtins
import codecs
import collections
import collections.abc
import difflib
import inspect
import io
import itertools
import json
import keyword
import linecache
import os
import platform
import queue
import re
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types

RUNNER_VERSION = 1

MAX_FRAME_BYTES = 16 * 1024 * 1024          # both directions (docs/runner-protocol.md)
OUTPUT_FLUSH_BYTES = 8 * 1024               # flush output when this much is buffered ...
OUTPUT_FLUSH_DELAY = 0.005                  # ... or this long after the first unflushed write
OUTPUT_FRAME_CHARS = 1024 * 1024            # text per output frame; JSON escaping stays < 16 MiB
RESULT_REPR_LIMIT = 64 * 1024               # chars of the trailing expression's repr
DEFAULT_TOOL_CALLS_IN_FLIGHT = 64           # when an `exec` frame does not say
ERROR_MESSAGE_LIMIT = 64 * 1024             # chars of str(exception)
TRACEBACK_LIMIT = 256 * 1024                # chars of a formatted traceback
LINECACHE_BUDGET = 32 * 1024 * 1024         # chars of cell sources kept for tracebacks
INTERRUPT_RESEND_INTERVAL = 0.02            # see InterruptController

RESULT_NAME = "__sandbox_cell_result__"     # hidden global that receives the trailing expression
CELL_PREFIX = "<cell-"                      # filenames of agent code: <cell-1>, <cell-2>, ...


def _log(message):
    """Diagnostics of the runner itself go to the container's real stderr (podman logs)."""
    stream = sys.__stderr__
    if stream is not None:
        try:
            stream.write(f"sandbox_runner: {message}\n")
            stream.flush()
        except (OSError, ValueError):
            pass


def _cap(text, limit):
    """Cut `text` to `limit` chars with a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[truncated {len(text) - limit} chars]"


# --------------------------------------------------------------------------------------
# Framing
# --------------------------------------------------------------------------------------

class ProtocolError(Exception):
    """sandboxd broke the frame protocol; the runner closes that connection."""


class ConnectionClosed(Exception):
    """The peer closed the connection (EOF)."""


class FrameTooLarge(ValueError):
    """An outgoing frame would exceed MAX_FRAME_BYTES (sandboxd would drop the session)."""

    def __init__(self, size):
        super().__init__(f"frame of {size} bytes exceeds the {MAX_FRAME_BYTES} byte cap")
        self.size = size


def encode_frame(frame):
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (from user strings) are not valid UTF-8; they only occur inside
        # JSON strings, so replacing them keeps the frame valid JSON.
        body = text.encode("utf-8", "replace")
    if len(body) > MAX_FRAME_BYTES:
        raise FrameTooLarge(len(body))
    return struct.pack(">I", len(body)) + body


class FrameConnection:
    """One accepted sandboxd connection: frame reads (reader thread only) and locked writes.

    `send` never raises on a broken socket: it marks the connection dead and returns False,
    so output written by user code can never fail because sandboxd went away.
    """

    def __init__(self, sock):
        self._sock = sock
        self._send_lock = threading.Lock()   # the one lock for all writes to this socket
        self.alive = True

    def send(self, frame):
        data = encode_frame(frame)           # may raise FrameTooLarge; nothing is sent then
        with self._send_lock:
            if not self.alive:
                return False
            try:
                self._sock.sendall(data)
            except OSError:
                self.close()
                return False
        return True

    def read_frame(self):
        (length,) = struct.unpack(">I", self._recv_exact(4))
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

    def _recv_exact(self, size):
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self._sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionClosed()
            got += n
        return bytes(buf)

    def close(self):
        """Mark dead and shut the socket down; this wakes a reader blocked in recv and a
        writer blocked in sendall. The reader thread closes the descriptor when it exits."""
        self.alive = False
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def release(self):
        self._sock.close()


def _field(frame, name, kind):
    """Type-checked access to a required inbound frame field (bool is not an int here)."""
    if name not in frame:
        raise ProtocolError(f"{frame['type']} frame lacks field {name!r}")
    value = frame[name]
    if isinstance(value, bool) and kind is not bool:
        raise ProtocolError(f"{frame['type']}.{name} must be {kind.__name__}")
    if not isinstance(value, kind):
        raise ProtocolError(f"{frame['type']}.{name} must be {kind.__name__}")
    return value


# --------------------------------------------------------------------------------------
# Output capture
# --------------------------------------------------------------------------------------

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
    (by the flusher thread), and before `done` (finish). Once `max_output_bytes` have been
    accepted, further output is only counted, which keeps a 100 MB print loop cheap.
    The lock is held while sending so that frames leave in the order the text was written.
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
        self.output_bytes = 0
        self.dropped_bytes = 0
        threading.Thread(target=self._flusher, name="output-flusher", daemon=True).start()

    def begin(self, conn, exec_id, max_output_bytes):
        with self._lock:
            self._active = True
            self._conn = conn
            self._exec_id = exec_id
            self._chunks = []
            self._buffered = 0
            self._first_write = None
            self._budget = max_output_bytes
            self.output_bytes = 0
            self.dropped_bytes = 0

    def finish(self):
        """Flush everything and stop capturing; returns (output_bytes, dropped_bytes)."""
        with self._lock:
            self._flush_locked()
            self._active = False
            self._conn = None
            return self.output_bytes, self.dropped_bytes

    def flush(self):
        with self._lock:
            self._flush_locked()

    def write(self, stream, text):
        if not text:
            return
        text, size = _utf8(text)
        with self._lock:
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
            self._buffered += size
            if self._first_write is None:
                self._first_write = time.monotonic()
                self._wake.notify()
            if self._buffered >= OUTPUT_FLUSH_BYTES:
                self._flush_locked()

    def _flush_locked(self):
        chunks = self._chunks
        self._chunks = []
        self._buffered = 0
        self._first_write = None
        if not chunks or self._conn is None:
            return
        frame_chunks, frame_chars = [], 0
        for stream, parts in chunks:
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
            while True:
                if self._first_write is None:
                    self._wake.wait()
                    continue
                delay = self._first_write + OUTPUT_FLUSH_DELAY - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                try:
                    self._flush_locked()
                except Exception as exc:  # never let the flusher die
                    _log(f"output flush failed: {exc!r}")


class CapturedStream(io.TextIOBase):
    """What user code gets as sys.stdout / sys.stderr: a thread-safe text file that feeds
    OutputCapture. It has no file descriptor, and close() is a no-op so user code cannot
    break the capture for later execs."""

    def __init__(self, capture, stream):
        super().__init__()
        self._capture = capture
        self._stream = stream
        self._binary = _CapturedBinary(self)

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
        return len(s)

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

    def __init__(self, text_stream):
        super().__init__()
        self._text = text_stream
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        with self._lock:
            text = self._decoder.decode(data)
        if text:
            self._text.write(text)
        return len(data)

    def fileno(self):
        raise io.UnsupportedOperation("captured stream has no file descriptor")

    def close(self):
        pass


# --------------------------------------------------------------------------------------
# Tool errors, tool calls and result conversion
# --------------------------------------------------------------------------------------

class ToolError(Exception):
    """An MCP tool call failed: the tool reported an error (isError), sandboxd or the
    gateway could not run it, or the connection to sandboxd was lost.

    Attributes: server, tool (catalog names, or None) and message.
    """

    def __init__(self, message, server=None, tool=None):
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool

    def __str__(self):
        if self.server and self.tool:
            return f"{self.server}.{self.tool}: {self.message}"
        return str(self.message)

    def __reduce__(self):
        return (type(self), (self.message, self.server, self.tool))


def convert_tool_result(server, tool, reply):
    """Turn a `tool_result` frame into the value the proxy returns (or raise ToolError)."""
    if not reply.get("ok"):
        error = reply.get("error")
        raise ToolError(error if isinstance(error, str) and error else "tool call failed",
                        server, tool)
    result = reply.get("result")
    if not isinstance(result, dict):
        raise ToolError("malformed tool result", server, tool)
    content = result.get("content")
    if content is None:
        content = []
    if not isinstance(content, list):
        raise ToolError("malformed tool result", server, tool)
    if result.get("isError"):
        texts = [block["text"] for block in content
                 if isinstance(block, dict) and isinstance(block.get("text"), str)]
        raise ToolError("\n".join(texts) or "the tool reported an error", server, tool)
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    if len(content) == 1 and isinstance(content[0], dict) and content[0].get("type") == "text" \
            and isinstance(content[0].get("text"), str):
        text = content[0]["text"]
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return text
    return content


class CallGate:
    """At most `limit` tool calls of one exec in flight; the others wait here, in order, and
    send nothing. This is the back-pressure that keeps `asyncio.gather` over 100,000 calls
    from flooding sandboxd and the gateway with calls they would only refuse: the caller
    says how many it answers at once (`exec.max_tool_calls_in_flight`).

    Awaited from any event loop (user code may run its own loops in threads), so waiters
    are futures completed with call_soon_threadsafe, never an asyncio.Semaphore."""

    def __init__(self, limit):
        self._lock = threading.Lock()
        self._free = max(1, limit)
        self._waiters = collections.deque()
        self._closed = None                  # the ToolError message once the exec ended

    async def acquire(self, server, tool):
        with self._lock:
            if self._closed is not None:
                raise ToolError(self._closed, server, tool)
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
        try:
            await future                     # resolves with the slot handed over
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove(future)
                    handed_over = False
                except ValueError:
                    handed_over = True       # granted just as it was cancelled
            if handed_over:
                self.release()
            raise

    def release(self):
        with self._lock:
            if not self._waiters:
                self._free += 1
                return
            future = self._waiters.popleft()

        def grant():
            if future.done():                # cancelled meanwhile: pass the slot on
                self.release()
            else:
                future.set_result(None)
        try:
            future.get_loop().call_soon_threadsafe(grant)
        except RuntimeError:                 # its loop is closed: nobody waits on it
            self.release()

    def close(self, message):
        """The exec ended: every waiter, and any later caller, gets ToolError(message)."""
        with self._lock:
            self._closed = message
            waiters, self._waiters = list(self._waiters), collections.deque()
        for future in waiters:
            _complete_threadsafe(future, error=ToolError(message))


class ToolCalls:
    """Pending tool calls: sends `tool_call` frames and resolves their futures when
    sandboxd answers. Futures live on the loop that awaits them and are only ever
    completed from that loop's thread (call_soon_threadsafe)."""

    def __init__(self, runner):
        self._runner = runner
        self._lock = threading.Lock()
        self._pending = {}                   # call_id -> (future, exec_state, server, tool)
        # Ids are unique for the process lifetime, not only per exec: a late tool_result
        # for an earlier exec can then never resolve a call of the current one.
        self._ids = itertools.count(1)

    async def call(self, server, tool, arguments):
        state = self._runner.current_exec()
        if state is None:
            raise ToolError("tool calls only work while an execution is running", server, tool)
        if not state.conn.alive:
            raise ToolError("sandboxd connection lost", server, tool)
        await state.gate.acquire(server, tool)
        try:
            return await self._call(state, server, tool, arguments)
        finally:
            state.gate.release()

    async def _call(self, state, server, tool, arguments):
        future = asyncio.get_running_loop().create_future()
        call_id = f"c{next(self._ids)}"
        with self._lock:
            self._pending[call_id] = (future, state, server, tool)
        try:
            self._runner.capture.flush()     # output printed before the call arrives first
            frame = {"type": "tool_call", "id": state.id, "call_id": call_id,
                     "server": server, "tool": tool, "arguments": arguments}
            try:
                sent = state.conn.send(frame)
            except FrameTooLarge as exc:
                raise ToolError(f"arguments too large ({exc.size} bytes; the frame cap is "
                                f"{MAX_FRAME_BYTES} bytes)", server, tool) from None
            if not sent:
                raise ToolError("sandboxd connection lost", server, tool)
            reply = await future
        finally:
            with self._lock:
                self._pending.pop(call_id, None)
        return convert_tool_result(server, tool, reply)

    def resolve(self, conn, call_id, reply):
        """Reader thread: a tool_result arrived. Unknown or late call ids are ignored."""
        with self._lock:
            entry = self._pending.get(call_id)
        if entry is None or entry[1].conn is not conn:
            return
        _complete_threadsafe(entry[0], result=reply)

    def fail(self, message, exec_state=None, conn=None):
        """Fail pending calls of one exec or of one connection with ToolError(message)."""
        with self._lock:
            entries = [e for e in self._pending.values()
                       if (exec_state is not None and e[1] is exec_state)
                       or (conn is not None and e[1].conn is conn)]
        for future, _, server, tool in entries:
            _complete_threadsafe(future, error=ToolError(message, server, tool))


def _complete_threadsafe(future, result=None, error=None):
    def complete():
        if not future.done():
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
    try:
        future.get_loop().call_soon_threadsafe(complete)
    except RuntimeError:
        pass   # that loop is closed (reset replaced it); nobody awaits the future any more


# --------------------------------------------------------------------------------------
# Catalog: tool specs, signatures, proxies and discovery helpers
# --------------------------------------------------------------------------------------

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool,
               "array": list, "object": dict, "null": None}


def _json_type_matches(value, json_type):
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if json_type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "array":
        return isinstance(value, (list, tuple))
    if json_type == "object":
        return isinstance(value, dict)
    if json_type == "null":
        return value is None
    return True    # a type keyword we do not know must not block the call


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _tokens(text):
    return re.findall(r"[^\W_]+", text.lower())


class ParamSpec:
    """One property of a tool's input schema and the Python parameter that carries it."""

    def __init__(self, name, schema, required):
        self.name = name                      # property name sent to the tool
        self.py_name = None                   # parameter name; None -> passed via **kwargs
        self.schema = schema if isinstance(schema, dict) else {}
        self.required = required
        types_ = self.schema.get("type")
        if isinstance(types_, str):
            types_ = [types_]
        self.types = tuple(t for t in types_ if isinstance(t, str)) \
            if isinstance(types_, list) else ()
        self.has_default = "default" in self.schema
        self.default = self.schema.get("default")
        description = self.schema.get("description")
        self.description = description if isinstance(description, str) else ""

    @property
    def type_text(self):
        return " or ".join(self.types) if self.types else "any"

    @property
    def annotation(self):
        if not self.types or any(t not in _JSON_TYPES for t in self.types):
            return inspect.Parameter.empty
        py_types = [type(None) if t == "null" else _JSON_TYPES[t]
                    for t in dict.fromkeys(self.types)]
        if py_types == [type(None)]:
            return None
        annotation = py_types[0]
        for py_type in py_types[1:]:
            annotation = annotation | py_type     # shown as `str | None`
        return annotation

    def check(self, owner, value):
        if self.types and not any(_json_type_matches(value, t) for t in self.types):
            raise TypeError(f"{owner}(): argument {self.name!r} must be {self.type_text}, "
                            f"not {type(value).__name__}")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise TypeError(f"{owner}(): argument {self.name!r} is not JSON-serializable: "
                            f"{exc}") from None


def _parameter_name(name, taken):
    """A Python parameter name for a schema property, or None when there is none
    (the property is then only reachable through **kwargs)."""
    if name.isidentifier() and not keyword.iskeyword(name):
        candidate = name
    else:
        candidate = re.sub(r"\W", "_", name) or "_"
        if candidate[0].isdigit():
            candidate = "_" + candidate
        if keyword.iskeyword(candidate):
            candidate += "_"
    if not candidate.isidentifier() or keyword.iskeyword(candidate) or candidate in taken:
        return None
    return candidate


class ToolSpec:
    """One tool of the catalog, with its Python signature and argument validation."""

    def __init__(self, server, name, py_name, description, input_schema, output_schema):
        self.server = server
        self.name = name
        self.py_name = py_name
        self.description = description
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.qualname = f"{server.py_name}.{py_name}"
        self._build_params()
        self.doc = self._build_doc()

    def _build_params(self):
        schema = self.input_schema if isinstance(self.input_schema, dict) else {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        required = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        required_set = set(required)
        # Required properties first (schema order, then required names the schema forgot to
        # describe), then optional ones. With that order every parameter can stay
        # positional-or-keyword: no parameter without a default follows one with a default.
        names = [n for n in properties if n in required_set]
        names += [n for n in dict.fromkeys(required) if n not in properties]
        names += [n for n in properties if n not in required_set]
        self.params = [ParamSpec(n, properties.get(n), n in required_set) for n in names]
        # Properties that are identifiers keep their name; the others get a sanitised
        # one (`max-results` -> `max_results`, `from` -> `from_`) unless that collides.
        taken = set()
        for param in self.params:
            if param.name.isidentifier() and not keyword.iskeyword(param.name):
                param.py_name = param.name
                taken.add(param.name)
        for param in self.params:
            if param.py_name is None:
                param.py_name = _parameter_name(param.name, taken)
                if param.py_name:
                    taken.add(param.py_name)
        self._by_py_name = {p.py_name: p for p in self.params if p.py_name}
        self._extra = {p.name: p for p in self.params if not p.py_name}
        self._var_keyword = None
        parameters = []
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        for param in self.params:
            if not param.py_name:
                continue
            default = inspect.Parameter.empty if param.required else param.default
            parameters.append(inspect.Parameter(param.py_name, kind, default=default,
                                                annotation=param.annotation))
        if self._extra:
            self._var_keyword = next(n for n in ("kwargs", "extra", "_kwargs", "__kwargs")
                                     if n not in taken)
            parameters.append(inspect.Parameter(self._var_keyword,
                                                inspect.Parameter.VAR_KEYWORD))
        self.signature = inspect.Signature(parameters)

    def _build_doc(self):
        lines = [self.description.strip() or f"MCP tool {self.name!r}.", ""]
        lines.append(f"MCP tool {self.name!r} of server {self.server.name!r}; "
                     f"call: {self.call_hint()}")
        if self.params:
            lines += ["", "Parameters:"]
            for param in self.params:
                label = param.py_name or param.name
                facts = [param.type_text, "required" if param.required else "optional"]
                if param.has_default:
                    facts.append(f"default {json.dumps(param.default)}")
                if param.py_name != param.name:
                    facts.append(f"sent as {param.name!r}")
                text = f"    {label} ({', '.join(facts)})"
                if param.description:
                    text += f": {param.description}"
                lines.append(text)
        else:
            lines += ["", "No parameters."]
        if self._extra:
            lines.append(f"Properties that are not identifiers go in **{self._var_keyword}.")
        if self.output_schema is not None:
            lines += ["", "Returns the tool's structured content (see _schema() for its "
                          "output schema)."]
        lines += ["", "Raises ToolError when the tool fails; TypeError for bad arguments."]
        return "\n".join(lines)

    def call_hint(self):
        args = []
        for param in self.params:
            label = param.py_name or repr(param.name)
            if param.required:
                args.append(label if param.py_name else f"**{{{label}: ...}}")
            elif param.py_name:
                args.append(f"{label}={param.default!r}")
        return f"await {self.server.py_name}.{self.py_name}({', '.join(args)})"

    def bind(self, args, kwargs):
        """Validate a Python call; returns the arguments object to send (only the
        arguments that were given). Raises TypeError, like a real function would."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.qualname}(): {exc}") from None
        arguments = {}
        for py_name, value in bound.arguments.items():
            if py_name == self._var_keyword:
                for name, extra_value in value.items():
                    param = self._extra.get(name)
                    if param is None:
                        raise TypeError(f"{self.qualname}(): got an unexpected keyword "
                                        f"argument {name!r}")
                    param.check(self.qualname, extra_value)
                    arguments[name] = extra_value
                continue
            param = self._by_py_name[py_name]
            if value is None and not param.required and param.types and "null" not in param.types:
                continue   # an explicit None for an optional parameter means "not given"
            param.check(self.qualname, value)
            arguments[param.name] = value
        for name, param in self._extra.items():
            if param.required and name not in arguments:
                raise TypeError(f"{self.qualname}(): missing a required argument: {name!r}")
        return arguments

    def validate_dict(self, arguments):
        """Checks for the generic call_tool(): required properties present and known
        properties well typed. Unknown keys pass through (it is the escape hatch for
        schemas that do not describe everything)."""
        by_name = {p.name: p for p in self.params}
        owner = f"call_tool({self.server.name!r}, {self.name!r})"
        for param in self.params:
            if param.required and param.name not in arguments:
                raise TypeError(f"{owner}: missing a required argument: {param.name!r}")
        for name, value in arguments.items():
            if not isinstance(name, str):
                raise TypeError(f"{owner}: argument names must be strings, not {name!r}")
            if name in by_name:
                by_name[name].check(owner, value)
            else:
                try:
                    json.dumps(value, allow_nan=False)
                except (TypeError, ValueError, RecursionError) as exc:
                    raise TypeError(f"{owner}: argument {name!r} is not JSON-serializable: "
                                    f"{exc}") from None
        return dict(arguments)

    def info(self):
        return {"name": self.name, "py_name": self.py_name, "description": self.description,
                "input_schema": self.input_schema, "output_schema": self.output_schema,
                "call": self.call_hint()}


class ServerSpec:
    def __init__(self, name, py_name, description):
        self.name = name
        self.py_name = py_name
        self.description = description
        self.tools = []

    def info(self):
        return {"name": self.name, "py_name": self.py_name, "description": self.description,
                "tools": [tool.info() for tool in self.tools]}


def parse_catalog(catalog):
    """Validate a set_catalog catalog (reader thread); a malformed one is a protocol error."""
    def text(obj, key, where, optional=False):
        value = obj.get(key)
        if value is None and optional:
            return ""
        if not isinstance(value, str) or (not optional and not value):
            raise ProtocolError(f"catalog: {where}.{key} must be a non-empty string")
        return value

    def identifier(obj, key, where):
        value = text(obj, key, where)
        if not value.isidentifier() or keyword.iskeyword(value):
            raise ProtocolError(f"catalog: {where}.{key} {value!r} is not a Python identifier")
        return value

    if not isinstance(catalog, dict) or not isinstance(catalog.get("servers"), list):
        raise ProtocolError("catalog must be an object with a 'servers' list")
    servers, names, py_names = [], set(), set()
    for index, raw in enumerate(catalog["servers"]):
        where = f"servers[{index}]"
        if not isinstance(raw, dict):
            raise ProtocolError(f"catalog: {where} is not an object")
        server = ServerSpec(text(raw, "name", where), identifier(raw, "py_name", where),
                            text(raw, "description", where, optional=True))
        if server.name in names or server.py_name in py_names:
            raise ProtocolError(f"catalog: duplicate server {server.name!r}")
        names.add(server.name)
        py_names.add(server.py_name)
        tools = raw.get("tools", [])
        if not isinstance(tools, list):
            raise ProtocolError(f"catalog: {where}.tools is not a list")
        tool_names, tool_py_names = set(), set()
        for tool_index, raw_tool in enumerate(tools):
            tool_where = f"{where}.tools[{tool_index}]"
            if not isinstance(raw_tool, dict):
                raise ProtocolError(f"catalog: {tool_where} is not an object")
            input_schema = raw_tool.get("input_schema")
            if input_schema is not None and not isinstance(input_schema, dict):
                raise ProtocolError(f"catalog: {tool_where}.input_schema is not an object")
            tool = ToolSpec(server, text(raw_tool, "name", tool_where),
                            identifier(raw_tool, "py_name", tool_where),
                            text(raw_tool, "description", tool_where, optional=True),
                            input_schema or {"type": "object", "properties": {}},
                            raw_tool.get("output_schema"))
            if tool.name in tool_names or tool.py_name in tool_py_names:
                raise ProtocolError(f"catalog: duplicate tool {tool.name!r} in {server.name!r}")
            tool_names.add(tool.name)
            tool_py_names.add(tool.py_name)
            server.tools.append(tool)
        servers.append(server)
    return servers


def _make_proxy(spec, calls):
    """A real `async def` per tool, so inspect.signature(), help() and
    asyncio.iscoroutinefunction() behave as for any other async function."""
    async def proxy(*args, **kwargs):
        arguments = spec.bind(args, kwargs)          # TypeError before any RPC
        return await calls.call(spec.server.name, spec.name, arguments)

    proxy.__name__ = spec.py_name
    proxy.__qualname__ = spec.qualname
    proxy.__module__ = "mcp.runtime"
    proxy.__doc__ = spec.doc
    proxy.__signature__ = spec.signature
    return proxy


class ToolNotFoundError(KeyError):
    """KeyError whose message is readable (KeyError normally shows the repr of its key)."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def _suggest(name, candidates):
    matches = difflib.get_close_matches(name, list(candidates), n=5, cutoff=0.5)
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


class MCPServer:
    """The tools of one MCP server: each attribute is an async tool proxy."""

    def __init__(self, spec, proxies):
        self.__spec = spec
        self.__proxies = proxies              # tool py_name -> proxy
        for py_name, proxy in proxies.items():
            setattr(self, py_name, proxy)
        self.__doc__ = (f"MCP server {spec.name!r}. {spec.description}".strip()
                        + f"\nTools: {', '.join(proxies) or '(none)'}")

    def __dir__(self):
        return sorted(self.__proxies)

    def __repr__(self):
        tools = ", ".join(self.__proxies) or "no tools"
        return f"<MCP server {self.__spec.name!r} ({self.__spec.py_name}): {tools}>"

    def __getattr__(self, name):
        # Only called when normal lookup failed: an unknown tool.
        if name.startswith("__") or name.startswith("_MCPServer__"):
            raise AttributeError(name)
        raise AttributeError(f"MCP server {self.__spec.name!r} has no tool {name!r}"
                             f"{_suggest(name, self.__proxies)} "
                             f"Tools: {', '.join(self.__proxies) or '(none)'}")

    def __getitem__(self, name):
        """Look a tool up by its original MCP name (or its Python name)."""
        for tool in self.__spec.tools:
            if name in (tool.name, tool.py_name):
                return self.__proxies[tool.py_name]
        raise ToolNotFoundError(f"MCP server {self.__spec.name!r} has no tool {name!r}"
                                f"{_suggest(name, [t.name for t in self.__spec.tools])}")


class ToolDirectory(collections.abc.Mapping):
    """`tools`: "server.tool" -> proxy for every tool, plus the bare "tool" when that
    tool name is unique across servers."""

    def __init__(self, entries):
        self._entries = entries

    def __getitem__(self, key):
        try:
            return self._entries[key]
        except (KeyError, TypeError):
            pass
        raise ToolNotFoundError(f"no tool named {key!r}{_suggest(str(key), self._entries)} "
                                f"(list(tools) shows all names, _search(text) finds tools)")

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)

    def __repr__(self):
        return f"<tools: {', '.join(self._entries) or 'none'}>"


class Toolbox:
    """Everything the agent's code sees for one catalog: server objects, proxies, `tools`,
    `mcp_servers`, call_tool() and the discovery helpers. Built again on reset and
    set_catalog (cheap), so user code cannot leave modified helpers behind."""

    def __init__(self, servers, calls):
        self.servers = servers
        self._calls = calls
        self.server_objects = {}                 # py_name -> MCPServer
        self.mcp_servers = {}                    # original name -> MCPServer
        entries, bare = {}, {}
        for server in servers:
            proxies = {tool.py_name: _make_proxy(tool, calls) for tool in server.tools}
            obj = MCPServer(server, proxies)
            self.server_objects[server.py_name] = obj
            self.mcp_servers[server.name] = obj
            for tool in server.tools:
                entries[f"{server.name}.{tool.name}"] = proxies[tool.py_name]
                bare.setdefault(tool.name, []).append(proxies[tool.py_name])
        for name, proxies in bare.items():
            if len(proxies) == 1 and name not in entries:
                entries[name] = proxies[0]
        self.tools = ToolDirectory(entries)

    def namespace_globals(self):
        names = dict(self.server_objects)
        names.update({"tools": self.tools, "mcp_servers": self.mcp_servers,
                      "call_tool": self.call_tool, "_discover": self.discover,
                      "_schema": self.schema, "_search": self.search})
        return names

    # -- lookups ---------------------------------------------------------------------

    def find_server(self, name):
        for server in self.servers:
            if name in (server.name, server.py_name):
                return server
        raise ValueError(f"unknown MCP server {name!r}"
                         f"{_suggest(str(name), [s.name for s in self.servers])} "
                         f"(servers: {', '.join(s.name for s in self.servers) or 'none'})")

    def find_tool(self, server_name, tool_name):
        server = self.find_server(server_name)
        for tool in server.tools:
            if tool_name in (tool.name, tool.py_name):
                return tool
        raise ValueError(f"MCP server {server.name!r} has no tool {tool_name!r}"
                         f"{_suggest(str(tool_name), [t.name for t in server.tools])}")

    def resolve(self, name):
        """"server.tool" (original or Python names; tool names may contain dots) or an
        unambiguous bare tool name -> ToolSpec; KeyError otherwise."""
        if not isinstance(name, str):
            raise ToolNotFoundError(f"tool names are strings, not {type(name).__name__}")
        for server in self.servers:
            for prefix in (server.name + ".", server.py_name + "."):
                if name.startswith(prefix):
                    rest = name[len(prefix):]
                    for tool in server.tools:
                        if rest in (tool.name, tool.py_name):
                            return tool
        matches = [t for s in self.servers for t in s.tools if name in (t.name, t.py_name)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            options = ", ".join(f"{t.server.name}.{t.name}" for t in matches)
            raise ToolNotFoundError(f"tool name {name!r} is ambiguous: {options}")
        everything = [f"{s.name}.{t.name}" for s in self.servers for t in s.tools]
        raise ToolNotFoundError(f"no tool named {name!r}{_suggest(name, everything)}")

    # -- helpers visible to user code ------------------------------------------------

    async def call_tool(self, server, tool, arguments=None):
        """Call any tool by server and tool name: await call_tool("server", "tool", {...}).

        Names are the catalog names (Python names work too). Returns what the proxies
        return; raises ValueError for unknown names and ToolError when the call fails."""
        spec = self.find_tool(server, tool)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise TypeError(f"call_tool(): arguments must be a dict, not "
                            f"{type(arguments).__name__}")
        arguments = spec.validate_dict(arguments)
        return await self._calls.call(spec.server.name, spec.name, arguments)

    def discover(self):
        """{server: [{"name", "description" (first line), "call"}]} for every tool."""
        return {server.name: [{"name": tool.name,
                               "description": _first_line(tool.description),
                               "call": tool.call_hint()} for tool in server.tools]
                for server in self.servers}

    def schema(self, name):
        """Full schema of "server.tool" (or an unambiguous bare tool name)."""
        tool = self.resolve(name)
        return {"name": f"{tool.server.name}.{tool.name}", "server": tool.server.name,
                "tool": tool.name, "description": tool.description,
                "input_schema": tool.input_schema, "output_schema": tool.output_schema,
                "call": tool.call_hint()}

    def search(self, text, limit=10):
        """Tools ranked by how many words of `text` occur in their names (weight 3) and
        descriptions (weight 1), case-insensitive: [{"server", "tool", "description",
        "score"}]."""
        words = _tokens(str(text))
        if not words:
            return []
        results = []
        for server in self.servers:
            for tool in server.tools:
                names = f"{server.name} {tool.name} {tool.py_name}".lower()
                description = tool.description.lower()
                score = sum(3 * (word in names) + (word in description) for word in words)
                if score:
                    results.append({"server": server.name, "tool": tool.name,
                                    "description": _first_line(tool.description),
                                    "score": score})
        results.sort(key=lambda r: (-r["score"], r["server"], r["tool"]))
        return results if limit is None else results[:max(0, int(limit))]


# Classes user code sees: show them as part of mcp.runtime in help() and reprs.
MCPServer.__module__ = ToolDirectory.__module__ = "mcp.runtime"


# -- mcp.runtime (API of the elusznik mcp-server-code-execution-mode bridge) -------------

class _AwaitableList(list):
    """A list that can also be awaited: the bridge made some of these helpers async,
    and code written for it says `await runtime.list_servers()`."""

    def __await__(self):
        return list(self)
        yield  # pragma: no cover  (makes __await__ a generator)


class _AwaitableDict(dict):
    def __await__(self):
        return dict(self)
        yield  # pragma: no cover


def install_runtime_module(get_toolbox):
    """Install the modules `mcp` and `mcp.runtime` in sys.modules. The functions always
    use the current toolbox, so references taken before a set_catalog stay valid."""
    package = types.ModuleType("mcp", "MCP helpers available inside the sandbox.")
    package.__path__ = []
    runtime = types.ModuleType("mcp.runtime", "MCP tool access from sandboxed code.\n\n"
                               "call_tool, list_servers, list_tools, describe_server, "
                               "discovered_servers, query_tool_docs, search_tool_docs.")

    def doc_entry(tool, detail):
        entry = {"server": tool.server.name, "serverAlias": tool.server.py_name,
                 "tool": tool.name, "toolAlias": tool.py_name,
                 "description": tool.description}
        if detail == "full":
            entry["inputSchema"] = tool.input_schema
            entry["outputSchema"] = tool.output_schema
        return entry

    async def call_tool(server, tool, args=None):
        """await call_tool(server, tool, {...}): call a tool by its catalog names."""
        return await get_toolbox().call_tool(server, tool, args)

    def list_servers():
        """Names of the MCP servers (a list; awaiting it works too)."""
        return _AwaitableList(s.name for s in get_toolbox().servers)

    def list_servers_sync():
        return [s.name for s in get_toolbox().servers]

    def discovered_servers():
        """Names of the MCP servers available to this sandbox."""
        return _AwaitableList(s.name for s in get_toolbox().servers)

    def list_tools(server):
        """Tools of one server: [{"name", "py_name", "description", "input_schema",
        "output_schema", "call"}] (a list; awaiting it works too)."""
        return _AwaitableList(t.info() for t in get_toolbox().find_server(server).tools)

    def list_tools_sync(server):
        return [t.info() for t in get_toolbox().find_server(server).tools]

    def describe_server(name):
        """{"name", "py_name", "description", "tools": [...]} of one server."""
        return _AwaitableDict(get_toolbox().find_server(name).info())

    def list_loaded_server_metadata():
        return _AwaitableList(s.info() for s in get_toolbox().servers)

    def query_tool_docs_sync(server, tool=None, detail="summary"):
        """Docs of all tools of `server`, or of one tool (then a single dict)."""
        if tool is not None:
            return doc_entry(get_toolbox().find_tool(server, tool), detail)
        return [doc_entry(t, detail) for t in get_toolbox().find_server(server).tools]

    def query_tool_docs(server, tool=None, detail="summary"):
        result = query_tool_docs_sync(server, tool, detail)
        return _AwaitableDict(result) if isinstance(result, dict) else _AwaitableList(result)

    def search_tool_docs_sync(query, limit=5, detail="summary"):
        """Tool docs ranked like _search(query, limit)."""
        toolbox = get_toolbox()
        return [doc_entry(toolbox.find_tool(hit["server"], hit["tool"]), detail)
                | {"score": hit["score"]} for hit in toolbox.search(query, limit)]

    def search_tool_docs(query, limit=5, detail="summary"):
        return _AwaitableList(search_tool_docs_sync(query, limit, detail))

    def capability_summary():
        return ("Python sandbox with MCP tools: mcp_<server>.<tool>(...) proxies, "
                "tools['server.tool'], call_tool(), _discover(), _schema(), _search(); "
                "mcp.runtime offers list_servers(), list_tools(), describe_server(), "
                "query_tool_docs(), search_tool_docs().")

    functions = [call_tool, list_servers, list_servers_sync, discovered_servers, list_tools,
                 list_tools_sync, describe_server, list_loaded_server_metadata,
                 query_tool_docs, query_tool_docs_sync, search_tool_docs,
                 search_tool_docs_sync, capability_summary]
    for function in functions:
        function.__module__ = "mcp.runtime"
        setattr(runtime, function.__name__, function)
    runtime.ToolError = ToolError
    runtime.MCPError = ToolError
    runtime.__all__ = [f.__name__ for f in functions] + ["ToolError", "MCPError"]
    package.runtime = runtime
    return package, runtime


# --------------------------------------------------------------------------------------
# Interrupts
# --------------------------------------------------------------------------------------

class ExecState:
    """One running exec, shared between the main thread and the reader threads."""

    def __init__(self, exec_id, conn, max_tool_calls_in_flight=DEFAULT_TOOL_CALLS_IN_FLIGHT):
        self.id = exec_id
        self.conn = conn
        self.gate = CallGate(max_tool_calls_in_flight)
        self.interrupt_requested = False
        self.finished = False
        self.loop = None
        self.task = None                      # set while a coroutine cell runs on the loop
        self.resender = False
        self.deferred = False                 # a SIGINT arrived while the runner was busy
        self.delivered = False                # a KeyboardInterrupt was raised in user code


def _runner_code_filename():
    return _runner_code_filename.__code__.co_filename


RUNNER_FILE = _runner_code_filename()
_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep
_SELECTORS_FILE = __import__("selectors").__file__


class InterruptController:
    """Turns an `interrupt` frame into a KeyboardInterrupt in user code.

    interrupt() sets a flag, sends SIGINT to the main thread (that breaks time.sleep and
    pure-Python loops) and cancels the cell's task when one runs on the loop.

    The SIGINT handler raises KeyboardInterrupt only while user code runs, and never in a
    frame of the runner itself (nor in asyncio's own frames during a coroutine cell, where
    the task cancellation does the job): a KeyboardInterrupt there could cut a frame in
    half or corrupt the event loop. A declined signal is marked "deferred" and a helper
    thread sends it again every INTERRUPT_RESEND_INTERVAL until user code gets it or the
    exec ends. Signals that arrive outside an exec are ignored. This is the default SIGINT
    behaviour made safe for the runner; user code may still replace the handler (sandboxd
    then kills the container after its grace period).
    """

    def __init__(self, lock):
        self._lock = lock                     # the runner's state lock
        self._main_ident = threading.main_thread().ident
        self._state = None
        self._async_cell = False
        self.user_code_active = False         # written by the main thread only

    def install(self):
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum, frame):
        state = self._state
        if not self.user_code_active or state is None:
            return
        if frame is not None:
            filename = frame.f_code.co_filename
            if filename == RUNNER_FILE or (self._async_cell and (
                    filename.startswith(_ASYNCIO_DIR) or filename == _SELECTORS_FILE)):
                state.deferred = True
                return
        state.delivered = True
        raise KeyboardInterrupt

    # -- main thread -------------------------------------------------------------------

    def begin(self, state):
        self._state = state

    def end(self, state):
        with self._lock:
            state.finished = True
        self._state = None

    def enter_user_code(self, state, async_cell):
        self._async_cell = async_cell
        self.user_code_active = True
        # An interrupt that arrived before user code started (say during compile) found
        # nothing to interrupt; honour it now.
        if state.interrupt_requested:
            state.delivered = True
            raise KeyboardInterrupt

    def leave_user_code(self):
        self.user_code_active = False

    def attach_task(self, state, loop, task):
        with self._lock:
            state.loop, state.task = loop, task
            cancel_now = state.interrupt_requested
        if cancel_now:
            task.cancel()

    def detach_task(self, state):
        with self._lock:
            state.task = None

    # -- any thread --------------------------------------------------------------------

    def interrupt(self, state):
        with self._lock:
            if state.finished:
                return
            state.interrupt_requested = True
            loop, task = state.loop, state.task
            start_resender = not state.resender
            state.resender = True
        signal.pthread_kill(self._main_ident, signal.SIGINT)
        if task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass
        if start_resender:
            threading.Thread(target=self._resend, args=(state,), name="interrupt-resend",
                             daemon=True).start()

    def _resend(self, state):
        while True:
            time.sleep(INTERRUPT_RESEND_INTERVAL)
            with self._lock:
                if state.finished or state.delivered:
                    return
                resend = state.deferred
                state.deferred = False
            if resend:
                signal.pthread_kill(self._main_ident, signal.SIGINT)


# --------------------------------------------------------------------------------------
# Executing cells
# --------------------------------------------------------------------------------------

def _strip_runner_frames(te):
    """Remove the runner's frames from a TracebackException (and its chain): everything
    before the first <cell-N> frame (runner and asyncio dispatch), runner frames below
    it (tool proxies, helpers) and library frames those runner frames called."""
    seen = set()
    todo = [te]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        kept, in_user_code, hidden = [], False, False
        for frame in current.stack:
            if frame.filename.startswith(CELL_PREFIX):
                in_user_code, hidden = True, False
                kept.append(frame)
            elif frame.filename == RUNNER_FILE:
                hidden = True
            elif in_user_code and not hidden:
                kept.append(frame)
        current.stack = traceback.StackSummary.from_list(kept)
        todo += [current.__cause__, current.__context__]
        todo += getattr(current, "exceptions", None) or []


def _safe_str(exc):
    try:
        return str(exc)
    except BaseException:  # a broken __str__ must not break the runner
        return f"<unprintable {type(exc).__name__} object>"


def describe_exception(exc):
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
        _strip_runner_frames(te)
        text = "".join(te.format())
    except BaseException as format_error:
        text = f"{type(exc).__name__}: <traceback unavailable: {format_error!r}>\n"
    if len(text) > TRACEBACK_LIMIT:
        head, tail = TRACEBACK_LIMIT // 4, TRACEBACK_LIMIT * 3 // 4
        text = (f"{text[:head]}\n...[truncated {len(text) - head - tail} chars]...\n"
                f"{text[-tail:]}")
    return {"type": type(exc).__name__, "message": _cap(_safe_str(exc), ERROR_MESSAGE_LIMIT),
            "traceback": text}


class Executor:
    """Owns the namespace, the event loop and the catalog; runs cells on the main thread."""

    def __init__(self, runner):
        self._runner = runner
        self._interrupts = runner.interrupts
        self.exec_count = 0                  # execs in this namespace (`ready.execs`)
        self._cell = 0
        self._sources = []                   # (filename, size) of cells in linecache
        self._source_chars = 0
        self.loop = None
        self.module = None
        self.catalog = []
        self.toolbox = Toolbox([], runner.calls)
        self._installed = {}                 # global name -> server object we put there
        self._mcp_package, self._mcp_runtime = install_runtime_module(lambda: self.toolbox)
        self.reset()

    # -- namespace -------------------------------------------------------------------

    def reset(self):
        """Fresh namespace (same catalog) and a fresh event loop: tasks the old namespace
        left on the loop must not keep running in later execs."""
        if self.loop is not None:
            for task in asyncio.all_tasks(self.loop):
                task._log_destroy_pending = False   # no "Task was destroyed" noise later
                task.cancel()
            self.loop.close()
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        # The namespace is the __dict__ of a real module registered as __main__, so
        # pickle, `import __main__` and classes defined in cells behave as in a script.
        self.module = types.ModuleType("__main__")
        self.module.__dict__.update({"__builtins__": builtins, "asyncio": asyncio, "json": json,
                                     "ToolError": ToolError})
        sys.modules["__main__"] = self.module
        self._installed = {}
        self.exec_count = 0
        self._install_toolbox(self.catalog)

    def set_catalog(self, servers):
        self.catalog = servers
        self._install_toolbox(servers)

    def _install_toolbox(self, servers):
        namespace = self.module.__dict__
        self.toolbox = Toolbox(servers, self._runner.calls)
        new_globals = self.toolbox.namespace_globals()
        for name, obj in self._installed.items():
            if name not in new_globals and namespace.get(name) is obj:
                del namespace[name]          # a server that left the catalog
        namespace.update(new_globals)
        namespace["ToolError"] = ToolError
        self._installed = {name: obj for name, obj in self.toolbox.server_objects.items()}
        sys.modules["mcp"] = self._mcp_package
        sys.modules["mcp.runtime"] = self._mcp_runtime

    # -- cells -----------------------------------------------------------------------

    def _remember_source(self, filename, source):
        """Register the cell in linecache so tracebacks (and inspect.getsource) show its
        lines; the oldest cells are forgotten once LINECACHE_BUDGET chars are kept."""
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        self._sources.append((filename, len(source)))
        self._source_chars += len(source)
        while self._source_chars > LINECACHE_BUDGET and len(self._sources) > 1:
            old, size = self._sources.pop(0)
            linecache.cache.pop(old, None)
            self._source_chars -= size

    @staticmethod
    def _compile(source, filename):
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(source, filename, "exec", flags=flags | ast.PyCF_ONLY_AST,
                       dont_inherit=True)
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            # Notebook semantics: the trailing expression's value is the cell's result.
            last = tree.body[-1]
            target = ast.Name(id=RESULT_NAME, ctx=ast.Store())
            tree.body[-1] = ast.copy_location(ast.Assign(targets=[target], value=last.value),
                                              last)
            ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec", flags=flags, dont_inherit=True)

    def run(self, state, source):
        """Run one cell; returns the `done` fields status, result and error."""
        self.exec_count += 1
        self._cell += 1
        filename = f"{CELL_PREFIX}{self._cell}>"
        self._remember_source(filename, source)
        try:
            code = self._compile(source, filename)
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
            return "error", None, describe_exception(exc)
        namespace = self.module.__dict__
        namespace.pop(RESULT_NAME, None)
        async_cell = bool(code.co_flags & inspect.CO_COROUTINE)
        try:
            try:
                self._interrupts.enter_user_code(state, async_cell)
                if async_cell:
                    self._run_on_loop(state, eval(code, namespace))
                else:
                    eval(code, namespace)
                value = namespace.pop(RESULT_NAME, None)
                result = None if value is None else _cap(repr(value), RESULT_REPR_LIMIT)
            finally:
                self._interrupts.leave_user_code()
        except BaseException as exc:
            namespace.pop(RESULT_NAME, None)
            error = describe_exception(exc)
            if state.interrupt_requested and isinstance(exc, (KeyboardInterrupt,
                                                              asyncio.CancelledError)):
                error.update(type="KeyboardInterrupt", message="execution interrupted")
                return "interrupted", None, error
            return "error", None, error
        return "ok", result, None

    def _run_on_loop(self, state, coroutine):
        """Run a top-level-await cell as a Task on the one persistent loop."""
        if self.loop.is_closed():            # user code closed it; the namespace lives on
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        loop = self.loop
        task = loop.create_task(coroutine)
        self._interrupts.attach_task(state, loop, task)
        try:
            while True:
                try:
                    return loop.run_until_complete(task)
                except KeyboardInterrupt:
                    if task.done():
                        raise                 # raised inside the cell's own code
                    # Raised in a callback outside the task: cancel the task and keep
                    # the loop running so the cell's finally blocks run.
                    task.cancel()
        finally:
            self._interrupts.detach_task(state)
            if task.done() and not task.cancelled():
                task.exception()              # mark retrieved: no "never retrieved" log


# --------------------------------------------------------------------------------------
# The runner: socket, connections, dispatch
# --------------------------------------------------------------------------------------

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

    def __init__(self, socket_path):
        self.socket_path = socket_path
        self._lock = threading.Lock()        # guards the fields below and ExecState flags
        self._conn = None                    # the connection being served
        self._current = None                 # ExecState of the running exec
        self._queued_execs = set()           # (conn, exec id) waiting in the work queue
        self._early_interrupts = set()       # interrupts for queued execs
        self._work = queue.Queue()           # (conn, frame) for the main thread
        self.capture = OutputCapture()
        self.interrupts = InterruptController(self._lock)
        self.calls = ToolCalls(self)
        self.executor = Executor(self)
        self._pid = os.getpid()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self):
        """User code forked. The child shares sandboxd's socket, so it must never write a
        frame: its output is dropped, and it exits when the cell's code returns to us.
        Every lock it may take on that way back is replaced: the parent's may have been
        held by another thread (the reader, the flusher) at fork time, and a child that
        waits for it forever would keep its process slot until the session ends."""
        self.capture._lock = threading.RLock()
        self.capture._active = False
        self.capture._conn = None
        self._lock = threading.Lock()
        self.interrupts._lock = self._lock

    def _exit_if_forked_child(self):
        if os.getpid() != self._pid:
            os._exit(0)

    def current_exec(self):
        with self._lock:
            return self._current

    # -- setup -----------------------------------------------------------------------

    def _prepare_process(self):
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)                  # input() sees EOF instead of blocking
        os.close(devnull)
        self._stdout = CapturedStream(self.capture, "stdout")
        self._stderr = CapturedStream(self.capture, "stderr")
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
        try:
            os.unlink(self.socket_path)      # stale socket of an earlier runner
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        # Rootless podman maps the container uid to another host uid than sandboxd's.
        os.chmod(self.socket_path, 0o777)
        listener.listen(4)
        return listener

    def serve_forever(self):
        listener = self._listen()
        self._prepare_process()
        threading.Thread(target=self._accept_loop, args=(listener,), name="acceptor",
                         daemon=True).start()
        while True:
            try:
                conn, frame = self._work.get()
                self._handle_work(conn, frame)
            except KeyboardInterrupt:
                continue                     # a stray SIGINT under a user-installed handler
            except Exception as exc:
                _log(f"internal error: {exc!r}\n{traceback.format_exc()}")

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
            self.executor.reset()
            conn.send({"type": "reset_done", "id": frame["id"]})
        elif kind == "set_catalog":
            self.executor.set_catalog(frame["servers"])
            conn.send({"type": "catalog_set", "id": frame["id"]})

    def _run_exec(self, conn, frame):
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
        self.capture.begin(conn, exec_id, frame["max_output_bytes"])
        try:
            status, result, error = self.executor.run(state, frame["code"])
            self._exit_if_forked_child()
        except Exception as exc:             # a runner bug; report it rather than hang
            self._exit_if_forked_child()
            _log(f"exec failed internally: {exc!r}\n{traceback.format_exc()}")
            status, result = "error", None
            error = {"type": "RunnerError", "message": f"internal runner error: {exc!r}",
                     "traceback": ""}
        finally:
            self._exit_if_forked_child()
            output_bytes, dropped_bytes = self.capture.finish()
            self.interrupts.end(state)
            with self._lock:
                self._current = None
            self.calls.fail("the execution ended before the tool result arrived",
                            exec_state=state)
            state.gate.close("the execution ended before the tool call was sent")
        conn.send({"type": "done", "id": exec_id, "status": status, "result": result,
                   "error": error, "output_bytes": output_bytes,
                   "dropped_bytes": dropped_bytes})

    # -- acceptor and readers --------------------------------------------------------

    def _accept_loop(self, listener):
        while True:
            try:
                sock, _ = listener.accept()
            except OSError as exc:
                _log(f"accept failed: {exc!r}")
                time.sleep(0.1)
                continue
            conn = FrameConnection(sock)
            with self._lock:
                old, self._conn = self._conn, conn
            if old is not None:
                old.close()                  # its reader handles the loss
            conn.send({"type": "ready", "runner_version": RUNNER_VERSION,
                       "python": platform.python_version(), "pid": os.getpid(),
                       "execs": self.executor.exec_count})
            threading.Thread(target=self._read_loop, args=(conn,), name="reader",
                             daemon=True).start()

    def _read_loop(self, conn):
        try:
            while conn.alive:
                self._dispatch(conn, conn.read_frame())
        except ConnectionClosed:
            pass
        except ProtocolError as exc:
            _log(f"closing connection: {exc}")
        except OSError as exc:
            if conn.alive:
                _log(f"connection error: {exc!r}")
        except Exception as exc:
            _log(f"reader failed: {exc!r}\n{traceback.format_exc()}")
        finally:
            conn.close()
            self._connection_lost(conn)
            conn.release()

    def _dispatch(self, conn, frame):
        kind = frame["type"]
        if kind == "ping":
            conn.send({"type": "pong", "id": _field(frame, "id", int)})
        elif kind == "tool_result":
            call_id = _field(frame, "call_id", str)
            _field(frame, "ok", bool)
            self.calls.resolve(conn, call_id, frame)
        elif kind == "interrupt":
            self._interrupt(conn, _field(frame, "id", int))
        elif kind == "exec":
            exec_id = _field(frame, "id", int)
            _field(frame, "code", str)
            if _field(frame, "max_output_bytes", int) < 0:
                raise ProtocolError("exec.max_output_bytes must not be negative")
            if "max_tool_calls_in_flight" in frame and \
                    _field(frame, "max_tool_calls_in_flight", int) < 1:
                raise ProtocolError("exec.max_tool_calls_in_flight must be at least 1")
            with self._lock:
                self._queued_execs.add((conn, exec_id))
            self._work.put((conn, frame))
        elif kind == "reset":
            _field(frame, "id", int)
            self._work.put((conn, frame))
        elif kind == "set_catalog":
            _field(frame, "id", int)
            servers = parse_catalog(_field(frame, "catalog", dict))
            self._work.put((conn, {"type": "set_catalog", "id": frame["id"],
                                   "servers": servers}))
        else:
            _log(f"ignoring unknown frame type {kind!r}")

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
        self.calls.fail("sandboxd connection lost", conn=conn)
        if state is not None:
            self.interrupts.interrupt(state)


def main(argv=None):
    parser = argparse.ArgumentParser(description="sandboxd code runner "
                                                 "(see docs/runner-protocol.md)")
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--own-pid-namespace", action="store_true",
                        help="the container is ours alone: a reset also ends every process "
                             "user code left running (never set this outside a container)")
    args = parser.parse_args(argv)
    # Keep the runner's own module importable under a stable name: __main__ becomes the
    # user namespace (Executor.reset).
    sys.modules["sandbox_runner"] = sys.modules[__name__]
    runner = Runner(args.socket)
    runner.own_pid_namespace = args.own_pid_namespace
    runner.serve_forever()


if __name__ == "__main__":
    main()
