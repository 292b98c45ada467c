"""The module `mcp.runtime` of sandboxed code: the API of the elusznik
mcp-server-code-execution-mode bridge (call_tool, list_servers, list_tools, describe_server,
discovered_servers, query_tool_docs, search_tool_docs) over the runner's current toolbox.

The functions are defined here; install_runtime_module() copies them into fresh modules
named `mcp` and `mcp.runtime` for sys.modules, so sandboxed code sees only the API."""

import types

from .tool_calls import ToolError

_get_toolbox = None     # set by install_runtime_module(): returns the current Toolbox


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


def _doc_entry(tool, detail):
    entry = {"server": tool.server.name, "serverAlias": tool.server.py_name,
             "tool": tool.name, "toolAlias": tool.py_name,
             "description": tool.description}
    if detail == "full":
        entry["inputSchema"] = tool.input_schema
        entry["outputSchema"] = tool.output_schema
    return entry


async def call_tool(server, tool, args=None):
    """await call_tool(server, tool, {...}): call a tool by its catalog names."""
    return await _get_toolbox().call_tool(server, tool, args)


def list_servers():
    """Names of the MCP servers (a list; awaiting it works too)."""
    return _AwaitableList(s.name for s in _get_toolbox().servers)


def list_servers_sync():
    return [s.name for s in _get_toolbox().servers]


def discovered_servers():
    """Names of the MCP servers available to this sandbox."""
    return _AwaitableList(s.name for s in _get_toolbox().servers)


def list_tools(server):
    """Tools of one server: [{"name", "py_name", "description", "input_schema",
    "output_schema", "call"}] (a list; awaiting it works too)."""
    return _AwaitableList(t.info() for t in _get_toolbox().find_server(server).tools)


def list_tools_sync(server):
    return [t.info() for t in _get_toolbox().find_server(server).tools]


def describe_server(name):
    """{"name", "py_name", "description", "tools": [...]} of one server."""
    return _AwaitableDict(_get_toolbox().find_server(name).info())


def list_loaded_server_metadata():
    return _AwaitableList(s.info() for s in _get_toolbox().servers)


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Docs of all tools of `server`, or of one tool (then a single dict)."""
    if tool is not None:
        return _doc_entry(_get_toolbox().find_tool(server, tool), detail)
    return [_doc_entry(t, detail) for t in _get_toolbox().find_server(server).tools]


def query_tool_docs(server, tool=None, detail="summary"):
    result = query_tool_docs_sync(server, tool, detail)
    return _AwaitableDict(result) if isinstance(result, dict) else _AwaitableList(result)


def search_tool_docs_sync(query, limit=5, detail="summary"):
    """Tool docs ranked like _search(query, limit)."""
    toolbox = _get_toolbox()
    return [_doc_entry(toolbox.find_tool(hit["server"], hit["tool"]), detail)
            | {"score": hit["score"]} for hit in toolbox.search(query, limit)]


def search_tool_docs(query, limit=5, detail="summary"):
    return _AwaitableList(search_tool_docs_sync(query, limit, detail))


def capability_summary():
    return ("Python sandbox with MCP tools: mcp_<server>.<tool>(...) proxies, "
            "tools['server.tool'], call_tool(), _discover(), _schema(), _search(); "
            "mcp.runtime offers list_servers(), list_tools(), describe_server(), "
            "query_tool_docs(), search_tool_docs().")


FUNCTIONS = [call_tool, list_servers, list_servers_sync, discovered_servers, list_tools,
             list_tools_sync, describe_server, list_loaded_server_metadata,
             query_tool_docs, query_tool_docs_sync, search_tool_docs,
             search_tool_docs_sync, capability_summary]
for _function in FUNCTIONS:
    _function.__module__ = "mcp.runtime"


def install_runtime_module(get_toolbox):
    """Build the modules `mcp` and `mcp.runtime` (the caller puts them in sys.modules).
    The functions always use get_toolbox(), the current toolbox, so references taken
    before a set_catalog stay valid."""
    global _get_toolbox
    _get_toolbox = get_toolbox
    package = types.ModuleType("mcp", "MCP helpers available inside the sandbox.")
    package.__path__ = []
    runtime = types.ModuleType("mcp.runtime", "MCP tool access from sandboxed code.\n\n"
                               "call_tool, list_servers, list_tools, describe_server, "
                               "discovered_servers, query_tool_docs, search_tool_docs.")
    for function in FUNCTIONS:
        setattr(runtime, function.__name__, function)
    runtime.ToolError = ToolError
    runtime.MCPError = ToolError
    runtime.__all__ = [f.__name__ for f in FUNCTIONS] + ["ToolError", "MCPError"]
    package.runtime = runtime
    return package, runtime
