"""The modules `mcp`, `mcp.runtime`, `mcp.servers` and `mcp.servers.<alias>` of sandboxed
code: the sandbox API of mcp-server-code-execution-mode (elusznik), over the runner's
current toolbox, with the shapes its own code gives (docs/seed-compatibility.md).

mcp.runtime: call_tool, list_tools, list_servers, discovered_servers, describe_server,
list_loaded_server_metadata, query_tool_docs, search_tool_docs, their _sync forms,
capability_summary and MCPError. What is a coroutine there returns an awaitable value
here, so the plain call and `await` both work. mcp.servers.<alias>: one async function
per tool, plus TOOLS and TOOL_MAP. Both raise MCPError for failed calls and unknown names.

The functions are defined here; install_runtime_module() copies them into fresh modules
for sys.modules, so sandboxed code sees only the API."""

import functools
import types

from .tool_calls import MCPError, ToolError
from .toolbox import AwaitableDict, AwaitableList, AwaitableTuple

_get_toolbox = None     # set by install_runtime_module(): returns the current Toolbox


def _server(name):
    try:
        return _get_toolbox().find_server(name)
    except ValueError as exc:
        raise MCPError(str(exc)) from None


def _tool(server, tool):
    try:
        return _get_toolbox().find_tool(server, tool)
    except ValueError as exc:
        raise MCPError(str(exc)) from None


async def _raising_mcp_error(call):
    """Await `call` (a tool call); its ToolError comes out as MCPError."""
    try:
        return await call
    except MCPError:
        raise
    except ToolError as exc:
        raise MCPError(exc.message, exc.server, exc.tool) from None


def _doc_entry(tool, detail):
    entry = {"server": tool.server.name, "serverAlias": tool.server.alias,
             "tool": tool.name, "toolAlias": tool.py_name,
             "description": tool.description}
    if str(detail).lower() == "full":
        entry["inputSchema"] = tool.input_schema
        entry["outputSchema"] = tool.output_schema
    return entry


async def call_tool(server, tool, arguments=None):
    """await call_tool(server, tool, {...}): call a tool by its catalog names. Raises
    MCPError when the call fails or the server or tool is unknown."""
    spec = _tool(server, tool)
    return await _raising_mcp_error(
        _get_toolbox().call_tool(spec.server.name, spec.name, arguments))


def list_tools(server):
    """The tools of one server as MCP's tools/list gives them: [{"name", "description",
    "inputSchema", "outputSchema" (when there is one)}] (a list; awaiting it works too)."""
    return AwaitableList(t.mcp_tool() for t in _server(server).tools)


def list_tools_sync(server=None):
    """The metadata of one server's tools: ({"name", "alias", "description",
    "input_schema", ...}, ...)."""
    if server is None:
        raise MCPError("list_tools_sync(server) requires a server name")
    return tuple(t.info() for t in _server(server).tools)


def list_servers():
    """Names of the MCP servers (a tuple; awaiting it works too)."""
    return AwaitableTuple(s.name for s in _get_toolbox().servers)


def list_servers_sync():
    return tuple(s.name for s in _get_toolbox().servers)


def discovered_servers(detailed=False):
    """Names of the MCP servers available to this sandbox; detailed=True gives
    ({"name", "description"}, ...)."""
    servers = _get_toolbox().servers
    if detailed:
        return AwaitableTuple({"name": s.name, "description": s.description} for s in servers)
    return AwaitableTuple(s.name for s in servers)


def describe_server(name):
    """{"name", "alias", "py_name", "description", "cwd", "tools": [...]} of one server."""
    return AwaitableDict(_server(name).info())


def list_loaded_server_metadata():
    return AwaitableTuple(s.info() for s in _get_toolbox().servers)


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Docs of all tools of `server`, or of the one tool named (a list of one)."""
    if tool is not None:
        return [_doc_entry(_tool(server, tool), detail)]
    return [_doc_entry(t, detail) for t in _server(server).tools]


def query_tool_docs(server, tool=None, detail="summary"):
    """Docs of all tools of `server` (a list), or of one tool (a dict); awaiting works."""
    docs = query_tool_docs_sync(server, tool, detail)
    return AwaitableDict(docs[0]) if tool is not None else AwaitableList(docs)


def search_tool_docs_sync(query, limit=5, detail="summary"):
    """Tool docs ranked like _search(query, limit), each with its "score"."""
    return [_doc_entry(_tool(hit["server"], hit["tool"]), detail) | {"score": hit["score"]}
            for hit in _get_toolbox().search(query, limit)]


def search_tool_docs(query, limit=5, detail="summary"):
    return AwaitableList(search_tool_docs_sync(query, limit, detail))


def capability_summary():
    return ("Python sandbox with MCP tools: mcp_<server>.<tool>(...) proxies, "
            "tools['server.tool'], call_tool(), _discover(), _schema(), _search(); "
            "mcp.runtime offers list_servers(), list_tools(), describe_server(), "
            "query_tool_docs(), search_tool_docs(); from mcp.servers.<server> import <tool>.")


FUNCTIONS = [call_tool, list_servers, list_servers_sync, discovered_servers, list_tools,
             list_tools_sync, describe_server, list_loaded_server_metadata,
             query_tool_docs, query_tool_docs_sync, search_tool_docs,
             search_tool_docs_sync, capability_summary]
for _function in FUNCTIONS:
    _function.__module__ = "mcp.runtime"


def install_runtime_module(get_toolbox):
    """Build the modules `mcp`, `mcp.runtime` and `mcp.servers` (the caller puts them in
    sys.modules). The functions always use get_toolbox(), the current toolbox, so
    references taken before a set_catalog stay valid."""
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
    runtime.MCPError = MCPError
    runtime.__all__ = [f.__name__ for f in FUNCTIONS] + ["ToolError", "MCPError"]
    servers = types.ModuleType("mcp.servers", "One module per MCP server: "
                               "from mcp.servers.<server> import <tool>.")
    servers.__path__ = []
    servers.__all__ = []
    package.runtime = runtime
    package.servers = servers
    return package, runtime, servers


def _module_function(proxy, module_name):
    async def function(*args, **kwargs):
        return await _raising_mcp_error(proxy(*args, **kwargs))
    functools.update_wrapper(function, proxy)      # name, doc, signature (__wrapped__)
    function.__module__ = module_name
    function.__qualname__ = proxy.__name__
    return function


def install_server_modules(servers, toolbox, modules):
    """Make `servers` (the module mcp.servers) and `modules` (sys.modules) hold one module
    mcp.servers.<alias> per server of `toolbox`, in place of the previous catalog's."""
    for name in [n for n in modules if n.startswith("mcp.servers.")]:
        del modules[name]
    for alias in servers.__all__:
        servers.__dict__.pop(alias, None)
    servers.__all__ = []
    for server in toolbox.servers:
        name = f"mcp.servers.{server.alias}"
        module = types.ModuleType(name, f"MCP server {server.name!r} wrappers")
        module.__all__ = []
        for tool in server.tools:
            if not _is_dunder(tool.py_name):
                setattr(module, tool.py_name, _module_function(toolbox.proxies[tool], name))
                module.__all__.append(tool.py_name)
        module.TOOLS = [tool.info() for tool in server.tools]
        module.TOOL_MAP = {info["alias"]: info for info in module.TOOLS}
        if not _is_dunder(server.alias):
            setattr(servers, server.alias, module)
            servers.__all__.append(server.alias)
        modules[name] = module


def _is_dunder(name):
    """A name such as __all__ or __path__ that a module needs for itself."""
    return name.startswith("__") and name.endswith("__")
