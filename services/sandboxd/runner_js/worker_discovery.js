'use strict';
// The discovery globals of the worker: _discover(), _schema(name) and _search(text, limit),
// the JavaScript side of the Python runner's toolbox.py discover/schema/resolve/search, with
// the same results and ranking. They read the catalog the worker already holds (no tool
// call): plain synchronous functions returning fresh plain objects and arrays, so code that
// changes a result changes nothing in the catalog the argument checks use. Where they
// differ from Python (marked "Python:" below): every result also names the tool's
// JavaScript method (`js_name`, `then_` for a tool named then), `call` is a JavaScript
// call, names are also looked up by js_name, and errors are this runner's ToolError and
// TypeError rather than KeyError.

// Captured when the module loads: user code may replace the globals later.
const clone = structuredClone;
const StringCtor = String;
const defineProperty = Object.defineProperty;
const stringify = JSON.stringify;
const NumberCtor = Number;
const { trunc, max } = Math;

const LINE_BREAK = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/;   // str.splitlines()'s
const WORD = /[\p{L}\p{N}]+/gu;          // Python's [^\W_]+: letters and digits, no '_'
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function firstLine(text) {
  for (const line of StringCtor(text || '').split(LINE_BREAK)) {
    if (line.trim()) return line.trim();
  }
  return '';
}

function tokens(text) {
  return text.toLowerCase().match(WORD) || [];
}

// An own, enumerable property even for a key such as '__proto__' (a server may be named so).
function put(obj, key, value) {
  defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  return obj;
}

// How code calls the tool: "await mcp_everything.echo({ message: ... })" with the required
// properties. Python: its call hint also lists the optional parameters with their defaults;
// here they are left out (one object argument, optional properties are simply not given).
function callHint(server, tool) {
  const schema = tool.input_schema;
  const required = Array.isArray(schema.required) ?
    schema.required.filter((r) => typeof r === 'string') : [];
  const keys = required.map((r) => `${IDENTIFIER.test(r) ? r : stringify(r)}: ...`);
  return `await ${server.py_name}.${tool.js_name}(${keys.length ? `{ ${keys.join(', ')} }` : ''})`;
}

// The lookups and results, over `tools` (a WorkerTools: its servers, byName and ToolError).
class Discovery {
  constructor(tools, byName, ToolError) {
    this.tools = tools;
    this.byName = byName;
    this.ToolError = ToolError;
  }

  // {server: [{name, js_name, description (first line), call}]} for every tool.
  discover() {
    const out = {};
    for (const server of this.tools.servers) {
      put(out, server.name, server.tools.map((tool) => ({ name: tool.name, js_name: tool.js_name,
        description: firstLine(tool.description), call: callHint(server, tool) })));
    }
    return out;
  }

  // "server.tool" (MCP, py or JavaScript names; tool names may contain dots) or an
  // unambiguous bare tool name -> [server, tool]; real names win, as in Python's resolve().
  resolve(name) {
    if (typeof name !== 'string') {
      throw new TypeError(`_schema(): tool names are strings, not ${name === null ? 'null' : typeof name}`);
    }
    const servers = this.tools.servers;
    for (const key of ['name', 'py_name']) {
      for (const server of servers) {
        const prefix = `${server[key]}.`;
        const tool = name.startsWith(prefix) ? this.byName(server.tools, name.slice(prefix.length)) : undefined;
        if (tool) return [server, tool];
      }
    }
    for (const key of ['name', 'py_name', 'js_name']) {
      const matches = [];
      for (const server of servers) {
        for (const tool of server.tools) if (tool[key] === name) matches.push([server, tool]);
      }
      if (matches.length === 1) return matches[0];
      if (matches.length) {
        throw new this.ToolError(`tool name '${name}' is ambiguous: ` +
          `${matches.map(([s, t]) => `${s.name}.${t.name}`).join(', ')}`);
      }
    }
    // Python: suggests close matches (difflib); here the message says where to look.
    throw new this.ToolError(`no tool named '${name}' (_discover() lists every tool, ` +
      '_search(text) finds tools)');
  }

  // The full schema of one tool (copies: changing them changes nothing in the catalog).
  schema(name) {
    const [server, tool] = this.resolve(name);
    return { name: `${server.name}.${tool.name}`, server: server.name, tool: tool.name,
      js_name: tool.js_name, description: tool.description,
      input_schema: clone(tool.input_schema), output_schema: clone(tool.output_schema),
      call: callHint(server, tool) };
  }

  // Tools ranked by how many words of `text` occur in their names (weight 3) and
  // descriptions (weight 1), case-insensitive: [{server, tool, js_name, description,
  // score}], best first, then by server and tool name. `limit` null: every match. Python:
  // no js_name; a limit that is not a number raises there (a TypeError here), Infinity
  // raises there (every match here); names sort by UTF-16 code units here, code points there.
  search(text, limit = 10) {
    if (text === undefined) throw new TypeError('_search(): missing the text to search for');
    const words = tokens(StringCtor(text));
    let n = Infinity;
    if (limit !== null) {
      n = trunc(NumberCtor(limit));
      if (Number.isNaN(n)) throw new TypeError(`_search(): limit must be a number or null, not ${StringCtor(limit)}`);
    }
    if (!words.length) return [];
    const results = [];
    for (const server of this.tools.servers) {
      for (const tool of server.tools) {
        const names = `${server.name} ${tool.name} ${tool.py_name}`.toLowerCase();
        const description = tool.description.toLowerCase();
        let score = 0;
        for (const w of words) score += 3 * names.includes(w) + description.includes(w);
        if (score) {
          results.push({ server: server.name, tool: tool.name, js_name: tool.js_name,
            description: firstLine(tool.description), score });
        }
      }
    }
    const order = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
    results.sort((a, b) => b.score - a.score || order(a.server, b.server) || order(a.tool, b.tool));
    return results.slice(0, max(0, n));
  }

  // The globals: functions that close over this object, not over other globals, so code
  // that replaces or deletes one (or any other global) breaks only that one, until the next
  // catalog installs them again.
  install() {
    const d = this;
    globalThis._discover = function _discover() {
      return d.discover();
    };
    globalThis._schema = function _schema(name) {
      return d.schema(name);
    };
    globalThis._search = function _search(text, limit = 10) {
      return d.search(text, limit);
    };
  }
}

module.exports = { Discovery, firstLine, tokens };
