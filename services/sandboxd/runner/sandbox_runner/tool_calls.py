"""Tool calls of user code: ToolError, how a `tool_result` becomes the proxy's return
value (convert_tool_result), the per-exec limit of calls in flight (CallGate) and the
pending calls waiting for sandboxd's answers (ToolCalls)."""

import asyncio
import collections
import itertools
import json
import threading

from .common import MAX_ARGUMENT_VALUES, MAX_FRAME_BYTES, MAX_JSON_DEPTH, as_sent_json
from .protocol import FrameTooLarge


class ToolError(RuntimeError):
    """An MCP tool call failed: the tool reported an error (isError), sandboxd or the
    gateway could not run it, or the connection to sandboxd was lost. A RuntimeError, as
    the failures of mcp-server-code-execution-mode's proxies are.

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


# User code's tracebacks end in "ToolError: ...", with no module before the name, as when
# the runner was one script run as __main__; pickle finds ToolError in the user namespace
# (the __main__ of sandboxed code), which always holds it.
ToolError.__module__ = "__main__"


class MCPError(ToolError):
    """What mcp.runtime and the mcp.servers.<alias> functions raise, as
    mcp-server-code-execution-mode's do: for a failed call and for an unknown server or
    tool. A ToolError, so code that catches either name works."""


MCPError.__module__ = "mcp.runtime"          # pickle finds it there (sys.modules)


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
            # Checked before (TypeError), but the values may have changed since, and
            # sandboxd ends the session over a frame it cannot read: what goes out is the
            # checked copy.
            arguments, problem = as_sent_json(arguments, MAX_JSON_DEPTH, MAX_ARGUMENT_VALUES,
                                              level=0)
            if problem:
                raise ToolError(f"arguments not sent: {problem}", server, tool)
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

    def after_fork_in_child(self):
        """A child of fork() has no connection to sandboxd: its pending calls fail now
        instead of waiting for an answer that cannot come (later ones find the connection
        dead)."""
        self._lock = threading.Lock()        # the parent's may have been held at fork time
        pending, self._pending = self._pending, {}
        for future, _, server, tool in pending.values():
            _complete_threadsafe(future, error=ToolError("tool calls do not work in a "
                                                         "forked process", server, tool))

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
