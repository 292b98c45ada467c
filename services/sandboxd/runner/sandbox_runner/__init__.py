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
  pip_in_cell     pip's main() called in a cell keeps the session's logging as it was
  ssl_on_demand   asyncio without ssl until TLS is used (import_asyncio)
  typing_on_demand  asyncio without typing until code uses it (import_asyncio's)
  __main__        the entry point (python3 -m sandbox_runner, and the zipapp's)

Threads:
  * main thread      runs execs, `reset` and `set_catalog` from a queue, in arrival order
                     (signals are only delivered to the main thread, so user code runs here);
  * connections      accepts connections (sends `ready`) and reads the current one's
                     frames: answers `ping`, resolves tool results, interrupts;
  * output flusher   sends buffered output 5 ms after the first unflushed write; started
                     by the first write that waits, it ends once nothing has waited for
                     OUTPUT_FLUSHER_IDLE, so an idle session has no flusher.

Nothing the user code does is trusted by sandboxd; the runner only tries hard to keep the
protocol intact for well-behaved code (no partial frames, no oversized frames).
"""

import sys
import zipimport


class _ArchiveImporter(zipimport.zipimporter):
    """The package's importer inside sandbox_runner.pyz. The archive holds each module's
    bytecode beside its source (build_pyz.py), and zipimport would name code loaded from
    bytecode as it was compiled ("sandbox_runner/x.py"); this names it, and __file__, after
    the module's place in the archive, as code compiled from the source would be, so that
    RUNNER_DIR (common.py) and tracebacks see the same paths either way."""

    def _source_path(self, fullname):
        leaf = "__init__" if self.is_package(fullname) else fullname.rpartition(".")[2]
        return f"{self.archive}/{self.prefix}{leaf}.py"

    def get_filename(self, fullname):
        self.get_source(fullname)            # ZipImportError when it is not here
        return self._source_path(fullname)

    def get_code(self, fullname):
        code = super().get_code(fullname)
        path = self._source_path(fullname)
        if code.co_filename != path:
            _fix_co_filename(code, path)
        return code


def _install_archive_importer():
    spec = globals().get("__spec__")
    if spec is None or not isinstance(spec.loader, zipimport.zipimporter):
        return                               # run from the source tree
    for entry in __path__:                   # the archive's sandbox_runner/ folder
        sys.path_importer_cache[entry] = _ArchiveImporter(entry)


try:
    from _imp import _fix_co_filename        # what importlib's own loaders use
except ImportError:                          # another Python: the archive's sources serve
    pass
else:
    _install_archive_importer()
