"""What user code sees of the catalog: one async proxy per tool, an MCPServer object per
server, the `tools` mapping, call_tool() and the discovery helpers _discover(), _schema()
and _search(), held together by a Toolbox; and the awaitable results of the helpers."""

import collections.abc
import re


class _Awaitable:
    """A helper's result that `await` also takes, giving a plain copy. The helpers answer
    from the catalog at once, so they are plain calls; code written for the systems this
    one replaces, where they are coroutines (`tools_list = await _discover()` in
    codemode-lite, `await runtime.list_servers()` in mcp-server-code-execution-mode), runs
    unchanged. Pickled and copied as the plain builtin."""

    __slots__ = ()
    _plain = None                            # the builtin base class

    def __await__(self):
        return self._plain(self)
        yield  # pragma: no cover  (makes __await__ a generator)

    def __reduce__(self):
        return self._plain, (self._plain(self),)


class AwaitableDict(_Awaitable, dict):
    __slots__ = ()
    _plain = dict


class AwaitableList(_Awaitable, list):
    __slots__ = ()
    _plain = list


class AwaitableTuple(_Awaitable, tuple):
    __slots__ = ()
    _plain = tuple


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _tokens(text):
    return re.findall(r"[^\W_]+", text.lower())


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


ToolNotFoundError.__module__ = "__main__"   # no module in tracebacks, like ToolError


def _by_name(entries, name):
    """The server or tool whose MCP name is `name`, else the one whose py_name is, else
    None: a real name wins (the tool 'a_b' over the tool 'a-b' whose py_name is 'a_b')."""
    for attr in ("name", "py_name"):
        for entry in entries:
            if getattr(entry, attr) == name:
                return entry
    return None


def _suggest(name, candidates):
    import difflib  # only when a name is wrong: a session that never errs never pays for it
    matches = difflib.get_close_matches(name, list(candidates), n=5, cutoff=0.5)
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


class MCPServer:
    """The tools of one MCP server: each attribute is an async tool proxy. list_tools()
    lists them as MCP does (mcp-server-code-execution-mode's proxies have it), unless the
    server has a tool of that name: then the tool wins, and runtime.list_tools(server)
    gives the list."""

    def __init__(self, spec, proxies):
        # The catalog never names a tool __x__, _MCPServer__spec or _MCPServer__proxies
        # (catalog.parse_catalog, codemode::PythonToolName): the setattr below cannot fail
        # or replace these.
        self.__spec = spec
        self.__proxies = proxies              # tool py_name -> proxy
        if "list_tools" not in proxies:
            def list_tools():
                """The server's tools as MCP's tools/list gives them: [{"name",
                "description", "inputSchema", "outputSchema" (when there is one)}]
                (a list; awaiting it works too)."""
                return AwaitableList(tool.mcp_tool() for tool in spec.tools)
            list_tools.__qualname__ = f"{spec.py_name}.list_tools"
            list_tools.__module__ = "mcp.runtime"
            self.list_tools = list_tools
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
        tool = _by_name(self.__spec.tools, name)
        if tool is not None:
            return self.__proxies[tool.py_name]
        raise ToolNotFoundError(f"MCP server {self.__spec.name!r} has no tool {name!r}"
                                f"{_suggest(name, [t.name for t in self.__spec.tools])}")


class ToolDirectory(collections.abc.Mapping):
    """`tools`: "server.tool" -> proxy for every tool, plus the bare "tool" when that
    tool name is unique across servers. `tools["_discover"]` (and "_schema", "_search")
    give the discovery helpers, as codemode-lite's `tools` does, unless a tool has that
    name; they are not listed."""

    def __init__(self, entries, helpers):
        self._entries = entries
        self._helpers = helpers

    def __getitem__(self, key):
        try:
            return self._entries[key]
        except (KeyError, TypeError):
            pass
        if isinstance(key, str) and key in self._helpers:
            return self._helpers[key]
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
        self.proxies = {}                        # ToolSpec -> proxy
        entries, bare = {}, {}
        for server in servers:
            proxies = {tool.py_name: _make_proxy(tool, calls) for tool in server.tools}
            self.proxies.update((tool, proxies[tool.py_name]) for tool in server.tools)
            obj = MCPServer(server, proxies)
            self.server_objects[server.py_name] = obj
            self.mcp_servers[server.name] = obj
            for tool in server.tools:
                entries[f"{server.name}.{tool.name}"] = proxies[tool.py_name]
                bare.setdefault(tool.name, []).append(proxies[tool.py_name])
        for name, proxies in bare.items():
            if len(proxies) == 1 and name not in entries:
                entries[name] = proxies[0]
        self.helpers = {"_discover": self.discover, "_schema": self.schema,
                        "_search": self.search}
        self.tools = ToolDirectory(entries, self.helpers)

    def namespace_globals(self):
        names = dict(self.server_objects)
        names.update({"tools": self.tools, "mcp_servers": self.mcp_servers,
                      "LOADED_MCP_SERVERS": tuple(s.name for s in self.servers),
                      "call_tool": self.call_tool})
        names.update(self.helpers)
        return names

    # -- lookups ---------------------------------------------------------------------

    def find_server(self, name):
        server = _by_name(self.servers, name)
        if server is not None:
            return server
        raise ValueError(f"unknown MCP server {name!r}"
                         f"{_suggest(str(name), [s.name for s in self.servers])} "
                         f"(servers: {', '.join(s.name for s in self.servers) or 'none'})")

    def find_tool(self, server_name, tool_name):
        server = self.find_server(server_name)
        tool = _by_name(server.tools, tool_name)
        if tool is not None:
            return tool
        raise ValueError(f"MCP server {server.name!r} has no tool {tool_name!r}"
                         f"{_suggest(str(tool_name), [t.name for t in server.tools])}")

    def resolve(self, name):
        """"server.tool" (original or Python names; tool names may contain dots) or an
        unambiguous bare tool name -> ToolSpec; KeyError otherwise."""
        if not isinstance(name, str):
            raise ToolNotFoundError(f"tool names are strings, not {type(name).__name__}")
        for attr in ("name", "py_name"):        # real names first, as _by_name
            for server in self.servers:
                prefix = getattr(server, attr) + "."
                tool = _by_name(server.tools, name[len(prefix):]) \
                    if name.startswith(prefix) else None
                if tool is not None:
                    return tool
        for attr in ("name", "py_name"):
            matches = [t for s in self.servers for t in s.tools if getattr(t, attr) == name]
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
        return AwaitableDict({server.name: [{"name": tool.name,
                               "description": _first_line(tool.description),
                               "call": tool.call_hint()} for tool in server.tools]
                              for server in self.servers})

    def schema(self, name):
        """Full schema of "server.tool" (or an unambiguous bare tool name)."""
        tool = self.resolve(name)
        return AwaitableDict(
            {"name": f"{tool.server.name}.{tool.name}", "server": tool.server.name,
             "tool": tool.name, "description": tool.description,
             "input_schema": tool.input_schema, "output_schema": tool.output_schema,
             "call": tool.call_hint()})

    def search(self, text, limit=10):
        """Tools ranked by how many words of `text` occur in their names (weight 3) and
        descriptions (weight 1), case-insensitive: [{"server", "tool", "description",
        "score"}]."""
        words = _tokens(str(text))
        if not words:
            return AwaitableList()
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
        return AwaitableList(results if limit is None else results[:max(0, int(limit))])


# Classes user code sees: show them as part of mcp.runtime in help() and reprs.
for _cls in (MCPServer, ToolDirectory, AwaitableDict, AwaitableList, AwaitableTuple):
    _cls.__module__ = "mcp.runtime"
del _cls
