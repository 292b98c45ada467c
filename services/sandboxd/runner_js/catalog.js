'use strict';
// The catalog of a `set_catalog` frame (docs/runner-protocol.md, "Catalog"): parseCatalog
// validates it on the main thread (a malformed catalog is a protocol error), and the argument
// checks the worker runs before any tool call (the rules of the Python runner's catalog.py:
// required properties, unknown properties, JSON types, JSON-serializable values).

const { ProtocolError } = require('./protocol');
const { MAX_ARGUMENT_DEPTH, MAX_ARGUMENT_VALUES } = require('./common');

// Captured when the module loads: in the worker, user code may replace the globals later.
const NativeMap = Map;

const PY_KEYWORDS = new Set(('False None True and as assert async await break class continue ' +
  'def del elif else except finally for from global if import in is lambda nonlocal not or ' +
  'pass raise return try while with yield').split(' '));
// Python's str.isidentifier(), which the wasm tier's Python checks the same names with.
const IDENTIFIER = /^[\p{XID_Start}_]\p{XID_Continue}*$/u;

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function text(obj, key, where, optional) {
  const value = obj[key];
  if ((value === undefined || value === null) && optional) return '';
  if (typeof value !== 'string' || (!optional && !value)) {
    throw new ProtocolError(`catalog: ${where}.${key} must be a non-empty string`);
  }
  return value;
}

// An identifier, not a keyword, spelt as Python's parser reads it (NFKC): sandboxd never
// names a parameter `ｆ`, which code typing it would send as `f`.
function isFreeName(value) {
  return typeof value === 'string' && IDENTIFIER.test(value) && !PY_KEYWORDS.has(value) &&
    value.normalize('NFKC') === value;
}

// Whether a tool's py_name names an attribute of the Python runner's server object itself
// (special names `__x__`, its state `_MCPServer__spec`/`_MCPServer__proxies`): sandboxd
// never sends one (codemode::PythonToolName).
function namesServerAttribute(pyName) {
  const special = pyName.length >= 5 && pyName.startsWith('__') && pyName.endsWith('__') &&
    pyName[pyName.length - 3] !== '_';
  return special || pyName === '_MCPServer__spec' || pyName === '_MCPServer__proxies';
}

function identifier(obj, key, where) {
  const value = text(obj, key, where, false);
  if (!isFreeName(value)) {
    throw new ProtocolError(`catalog: ${where}.${key} '${value}' is not an identifier`);
  }
  return value;
}

// The Python parameter names sandboxd computed (codemode::PythonParameterNames), checked as
// the Python runner's catalog.py checks them: the wasm tier's Python gets the catalog after
// this thread answered it. `py_params` names each parameter of the schema once, null or a
// free identifier, all distinct; `py_kwargs` is a free identifier, not one of them, exactly
// when some parameter has no name.
function checkParameterNames(raw, schema, where) {
  const params = [...schemaParams({ input_schema: schema }).keys()];
  const given = raw.py_params;
  if (!isObject(given) || Object.keys(given).length !== params.length ||
      !params.every((p) => Object.hasOwn(given, p))) {
    throw new ProtocolError(`catalog: ${where}.py_params must name each parameter of the ` +
                            'input schema once');
  }
  const taken = new Set();
  for (const name of params) {
    const pyName = given[name];
    if (pyName !== null && (!isFreeName(pyName) || taken.has(pyName))) {
      throw new ProtocolError(`catalog: ${where}.py_params['${name}'] is not a free identifier`);
    }
    taken.add(pyName);
  }
  const kwargs = raw.py_kwargs === undefined ? null : raw.py_kwargs;
  const needed = taken.has(null);
  if ((kwargs !== null) !== needed || (needed && (!isFreeName(kwargs) || taken.has(kwargs)))) {
    throw new ProtocolError(`catalog: ${where}.py_kwargs must be a free identifier exactly ` +
                            'when a parameter has no name');
  }
}

function parseTool(raw, where) {
  if (!isObject(raw)) throw new ProtocolError(`catalog: ${where} is not an object`);
  const schema = raw.input_schema;
  if (schema !== undefined && schema !== null && !isObject(schema)) {
    throw new ProtocolError(`catalog: ${where}.input_schema is not an object`);
  }
  checkParameterNames(raw, schema || {}, where);
  const pyName = identifier(raw, 'py_name', where);
  if (namesServerAttribute(pyName)) {
    throw new ProtocolError(`catalog: ${where}.py_name '${pyName}' names an attribute of the server object`);
  }
  return {
    name: text(raw, 'name', where, false), py_name: pyName,
    js_name: identifier(raw, 'js_name', where),
    description: text(raw, 'description', where, true),
    input_schema: schema || { type: 'object', properties: {} },
    output_schema: raw.output_schema === undefined ? null : raw.output_schema,
  };
}

function parseServer(raw, where) {
  if (!isObject(raw)) throw new ProtocolError(`catalog: ${where} is not an object`);
  const server = {
    name: text(raw, 'name', where, false), py_name: identifier(raw, 'py_name', where),
    description: text(raw, 'description', where, true), tools: [],
  };
  const tools = raw.tools === undefined ? [] : raw.tools;
  if (!Array.isArray(tools)) throw new ProtocolError(`catalog: ${where}.tools is not a list`);
  const names = new Set();
  tools.forEach((rawTool, i) => {
    const tool = parseTool(rawTool, `${where}.tools[${i}]`);
    if (names.has(tool.name) || names.has(`py:${tool.py_name}`) ||
        names.has(`js:${tool.js_name}`)) {
      throw new ProtocolError(`catalog: duplicate tool '${tool.name}' in '${server.name}'`);
    }
    // A `then` method would make the server object a thenable (`await mcp_x` would call the
    // tool and never settle): sandboxd names that tool otherwise (codemode::JsMethodName).
    if (tool.js_name === 'then') {
      throw new ProtocolError(`catalog: tool '${tool.name}' in '${server.name}' is named 'then'`);
    }
    names.add(tool.name);
    names.add(`py:${tool.py_name}`);
    names.add(`js:${tool.js_name}`);
    server.tools.push(tool);
  });
  return server;
}

// The servers of a set_catalog catalog (plain JSON, posted to the worker as it is).
function parseCatalog(catalog) {
  if (!isObject(catalog) || !Array.isArray(catalog.servers)) {
    throw new ProtocolError("catalog must be an object with a 'servers' list");
  }
  const names = new Set();
  return catalog.servers.map((raw, i) => {
    const server = parseServer(raw, `servers[${i}]`);
    if (names.has(server.name) || names.has(`py:${server.py_name}`)) {
      throw new ProtocolError(`catalog: duplicate server '${server.name}'`);
    }
    names.add(server.name);
    names.add(`py:${server.py_name}`);
    return server;
  });
}

// ---- argument checks (worker side) -----------------------------------------------------

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function jsonTypeMatches(value, type) {
  switch (type) {
    case 'string': return typeof value === 'string';
    case 'integer': return Number.isInteger(value);
    case 'number': return typeof value === 'number' && Number.isFinite(value);
    case 'boolean': return typeof value === 'boolean';
    case 'array': return Array.isArray(value);
    case 'object': return isObject(value);
    case 'null': return value === null;
    default: return true;        // a type keyword we do not know must not block the call
  }
}

// Why `value` cannot go out as JSON, or null. `depth`: the arrays and objects around it.
// Deeper than MAX_ARGUMENT_DEPTH the tool_call frame would break sandboxd's nesting limit,
// and with more than MAX_ARGUMENT_VALUES values (counted in `budget`, which several values
// of one call share) its value limit.
function jsonProblem(value, depth, budget = { left: MAX_ARGUMENT_VALUES }) {
  if (--budget.left < 0) return `holds more than ${MAX_ARGUMENT_VALUES} values`;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : `${value} is not JSON`;
  if (typeof value !== 'object') return `a ${typeof value} is not JSON`;
  if (depth >= MAX_ARGUMENT_DEPTH) {
    return `nested deeper than ${MAX_ARGUMENT_DEPTH} levels (or circular)`;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = jsonProblem(value[i], depth + 1, budget);
      if (p) return p;
    }
    return null;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== null && proto !== Object.prototype) {
    return `a ${value.constructor && value.constructor.name || 'non-plain'} object is not JSON`;
  }
  for (const key of Object.keys(value)) {
    const p = jsonProblem(value[key], depth + 1, budget);
    if (p) return p;
  }
  return null;
}

function schemaParams(tool) {
  const schema = isObject(tool.input_schema) ? tool.input_schema : {};
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ?
    schema.required.filter((r) => typeof r === 'string') : [];
  const params = new NativeMap();
  for (const name of Object.keys(properties)) {
    const s = isObject(properties[name]) ? properties[name] : {};
    let types = typeof s.type === 'string' ? [s.type] : s.type;
    types = Array.isArray(types) ? types.filter((t) => typeof t === 'string') : [];
    params.set(name, { types, required: required.includes(name) });
  }
  for (const name of required) if (!params.has(name)) params.set(name, { types: [], required: true });
  return params;
}

function checkValue(owner, name, param, value) {
  if (param && param.types.length && !param.types.some((t) => jsonTypeMatches(value, t))) {
    throw new TypeError(`${owner}: argument '${name}' must be ${param.types.join(' or ')}, ` +
                        `not ${typeName(value)}`);
  }
  const problem = jsonProblem(value, 0);
  if (problem) throw new TypeError(`${owner}: argument '${name}' is not JSON-serializable: ${problem}`);
}

// The arguments object to send for a call of `tool` with `args`; TypeError for bad
// arguments. `strict` (the per-tool methods) refuses properties the schema does not name;
// callTool() passes them through (its escape hatch for schemas that do not say everything).
function checkArguments(owner, tool, args, strict) {
  if (args === undefined || args === null) args = {};
  if (!isObject(args)) throw new TypeError(`${owner}: arguments must be an object, not ${typeName(args)}`);
  const params = schemaParams(tool);
  const out = {};
  for (const name of Object.keys(args)) {
    const param = params.get(name);
    let value = args[name];
    if (!param && strict) {
      throw new TypeError(`${owner}: got an unexpected argument '${name}' ` +
                          `(arguments: ${[...params.keys()].join(', ') || 'none'})`);
    }
    if (value === undefined) continue;
    if (value === null && param && !param.required && param.types.length &&
        !param.types.includes('null')) continue;   // null for an optional one: not given
    checkValue(owner, name, param, value);
    out[name] = value;
  }
  for (const [name, param] of params) {
    if (param.required && !(name in out)) {
      throw new TypeError(`${owner}: missing a required argument: '${name}'`);
    }
  }
  return out;
}

module.exports = { parseCatalog, checkArguments, isObject, jsonProblem };
