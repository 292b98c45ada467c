"""sandbox_runner: the Python process inside every sandboxd session container.

The package ships as one zipapp, sandbox_runner.pyz (built by ../build_pyz.py), and
sandboxd starts it as

    python3 -I -u sandbox_runner.pyz --socket /run/sandboxd/runner.sock

The runner listens on that unix socket, serves one sandboxd connection at a time (a new
connection replaces the old one; the namespace survives) and speaks the length-prefixed
JSON frame protocol described in docs/runner-protocol.md (the wire contract; this package
follows it). It executes agent code in one persistent namespace with top-level `await`,
streams the code's output back in batches, and turns calls of the MCP tool proxies into
`tool_call` frames that sandboxd routes to the gateway.

Stdlib only; runs on Python 3.11 (Debian 12's 3.11.2 and newer).

Modules:
  common          limits, the runner's own log, which code is the runner's
  protocol        frames, FrameConnection and the protocol errors
  output          OutputCapture and the sys.stdout / sys.stderr user code gets
  tool_calls      ToolError, tool results, CallGate (calls in flight) and ToolCalls
  catalog         ParamSpec, ToolSpec, ServerSpec and parse_catalog
  toolbox         tool proxies, MCPServer, ToolDirectory and Toolbox (what user code sees)
  runtime_module  the modules `mcp`, `mcp.runtime` and `mcp.servers.<alias>` of sandboxed code
  interrupts      InterruptController: an `interrupt` frame as a KeyboardInterrupt
  executor        ExecState, Executor (namespace, event loop, cells), error reports
  runner          Runner (socket, connections, dispatch), kill_other_processes, main
  __main__        the entry point (python3 -m sandbox_runner, and the zipapp's)

Threads:
  * main thread      runs execs, `reset` and `set_catalog` from a queue, in arrival order
                     (signals are only delivered to the main thread, so user code runs here);
  * acceptor         accepts connections, sends `ready`, starts a reader per connection;
  * reader (per conn) reads frames, answers `ping`, resolves tool results, interrupts;
  * output flusher   sends buffered output 5 ms after the first unflushed write.

Nothing the user code does is trusted by sandboxd; the runner only tries hard to keep the
protocol intact for well-behaved code (no partial frames, no oversized frames).
"""
