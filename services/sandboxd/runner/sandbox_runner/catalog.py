"""The catalog of a `set_catalog` frame: servers and tools (ServerSpec, ToolSpec), the
Python signature and argument checks of each tool (ParamSpec), and parse_catalog, which
validates the frame's catalog."""

import inspect
import json
import keyword

from .common import MAX_ARGUMENT_VALUES, MAX_JSON_DEPTH, as_sent_json
from .protocol import ProtocolError


_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool,
               "array": list, "object": dict, "null": None}


def _json_problem(value):
    """Why `value` cannot go out in a tool_call frame, or None."""
    return as_sent_json(value, MAX_JSON_DEPTH, MAX_ARGUMENT_VALUES)[1]


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
        problem = _json_problem(value)
        if problem:
            raise TypeError(f"{owner}(): argument {self.name!r} is not JSON-serializable: "
                            f"{problem}")


def _is_free_name(value):
    """An identifier, not a keyword, spelt as the parser reads it (NFKC): sandboxd never
    names a parameter `ｆ`, which code typing it would send as `f`."""
    if not isinstance(value, str) or not value.isidentifier() or keyword.iskeyword(value):
        return False
    if value.isascii():
        return True
    import unicodedata  # only for non-ASCII names, which few catalogs have
    return unicodedata.is_normalized("NFKC", value)


def _parameter_names(params, py_params, py_kwargs, where):
    """Checks the names sandboxd computed for `params` (codemode::PythonParameterNames):
    one entry per parameter, each a free identifier or None, all distinct, and a ** name
    exactly when some parameter has none. Returns {name: py_name or None}."""
    if not isinstance(py_params, dict) or set(py_params) != {p.name for p in params}:
        raise ProtocolError(f"catalog: {where}.py_params must name each parameter of the "
                            f"input schema once")
    taken = set()
    for name, py_name in py_params.items():
        if py_name is not None and (not _is_free_name(py_name) or py_name in taken):
            raise ProtocolError(f"catalog: {where}.py_params[{name!r}] {py_name!r} is not a "
                                f"free Python identifier")
        taken.add(py_name)
    needs_kwargs = None in py_params.values()
    if (py_kwargs is not None) != needs_kwargs or \
            (needs_kwargs and (not _is_free_name(py_kwargs) or py_kwargs in taken)):
        raise ProtocolError(f"catalog: {where}.py_kwargs {py_kwargs!r} must be a free Python "
                            f"identifier exactly when a parameter has no py_name")
    return py_params


class ToolSpec:
    """One tool of the catalog, with its Python signature and argument validation."""

    def __init__(self, server, name, py_name, description, input_schema, output_schema,
                 py_params, py_kwargs, where="tool"):
        self.server = server
        self.name = name
        self.py_name = py_name
        self.description = description
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.qualname = f"{server.py_name}.{py_name}"
        self._build_params(py_params, py_kwargs, where)
        self.doc = self._build_doc()

    def _build_params(self, py_params, py_kwargs, where):
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
        # The parameter names are sandboxd's (set_catalog's py_params and py_kwargs).
        names = _parameter_names(self.params, py_params, py_kwargs, where)
        for param in self.params:
            param.py_name = names[param.name]
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
            self._var_keyword = py_kwargs
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
            elif (problem := _json_problem(value)):
                raise TypeError(f"{owner}: argument {name!r} is not JSON-serializable: "
                                f"{problem}")
        return dict(arguments)

    def info(self):
        """The tool in server metadata (`alias` is mcp-server-code-execution-mode's name
        for py_name)."""
        return {"name": self.name, "alias": self.py_name, "py_name": self.py_name,
                "description": self.description, "input_schema": self.input_schema,
                "output_schema": self.output_schema, "call": self.call_hint()}

    def mcp_tool(self):
        """The tool as MCP's tools/list gives it (what list_tools() returns)."""
        tool = {"name": self.name, "description": self.description,
                "inputSchema": self.input_schema}
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        return tool


class ServerSpec:
    def __init__(self, name, py_name, description):
        self.name = name
        self.py_name = py_name
        self.description = description
        self.tools = []

    @property
    def alias(self):
        """py_name without its `mcp_` (`mcp_everything` -> `everything`): the module
        mcp.servers.<alias>, and the `alias` of mcp-server-code-execution-mode's metadata."""
        return self.py_name[4:] if self.py_name.startswith("mcp_") else self.py_name

    def info(self):
        """The server's metadata; `cwd` (the upstream's working directory there) is
        unknown inside the sandbox: None."""
        return {"name": self.name, "alias": self.alias, "py_name": self.py_name,
                "description": self.description, "cwd": None,
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
        if not _is_free_name(value):
            raise ProtocolError(f"catalog: {where}.{key} {value!r} is not a Python identifier")
        return value

    def tool_name(obj, where):
        # sandboxd renames these (codemode::PythonToolName): as attributes of MCPServer they
        # would fail to install or replace the object's own.
        value = identifier(obj, "py_name", where)
        special = len(value) >= 5 and value.startswith("__") and value.endswith("__") \
            and value[-3] != "_"
        if special or value in ("_MCPServer__spec", "_MCPServer__proxies"):
            raise ProtocolError(f"catalog: {where}.py_name {value!r} names an attribute of "
                                f"the server object")
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
                            tool_name(raw_tool, tool_where),
                            text(raw_tool, "description", tool_where, optional=True),
                            input_schema or {"type": "object", "properties": {}},
                            raw_tool.get("output_schema"), raw_tool.get("py_params"),
                            raw_tool.get("py_kwargs"), tool_where)
            if tool.name in tool_names or tool.py_name in tool_py_names:
                raise ProtocolError(f"catalog: duplicate tool {tool.name!r} in {server.name!r}")
            tool_names.add(tool.name)
            tool_py_names.add(tool.py_name)
            server.tools.append(tool)
        servers.append(server)
    return servers
