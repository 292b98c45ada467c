'use strict';
// Worker side of tool calls: ToolError, one global object per catalog server with an async
// method per tool (`await mcp_everything.echo({message: 'hi'})`), callTool(server, tool,
// args), the discovery globals of worker_discovery.js (_discover, _schema, _search) and the
// calls waiting for their results. Arguments are checked against the input schema before
// anything is posted; the main thread sends the `tool_call` frames, holds the back-pressure
// (`max_tool_calls_in_flight`), numbers the calls and converts the results.

const { checkArguments } = require('./catalog');
const { Discovery } = require('./worker_discovery');

// Captured before user code runs: a cell that replaces the globals breaks only itself.
const NativePromise = Promise;
const objectCreate = Object.create;

class ToolError extends Error {
  constructor(message, server, tool) {
    super(server && tool ? `${server}.${tool}: ${message}` : String(message));
    this.server = server === undefined ? null : server;
    this.tool = tool === undefined ? null : tool;
  }

  get name() {
    return 'ToolError';
  }
}

// The entry of `list` named `name`, else the one whose py_name (then method name) is `name`.
function byName(list, name) {
  for (const key of ['name', 'py_name', 'js_name']) {
    for (const entry of list) if (entry[key] === name) return entry;
  }
  return undefined;
}

class WorkerTools {
  constructor(post) {
    this.post = post;
    this.pending = objectCreate(null);  // k -> {resolve, reject, server, tool, exec}
    this.nextKey = 1;
    this.execId = null;           // the exec whose calls are accepted
    this.installed = [];          // global names of the server objects
    this.servers = [];
    this.discovery = new Discovery(this, byName, ToolError);
  }

  // A call of the running exec: posted to the main thread, settled by settle().
  call(server, tool, args, strict, owner) {
    let checked;
    try {
      checked = checkArguments(owner, tool, args, strict);
    } catch (e) {
      return NativePromise.reject(e);
    }
    if (this.execId === null) {
      return NativePromise.reject(new ToolError('tool calls only work while an execution is running',
        server.name, tool.name));
    }
    const k = this.nextKey++;
    return new NativePromise((resolve, reject) => {
      this.pending[k] = { resolve, reject, server: server.name, tool: tool.name, exec: this.execId };
      try {
        this.post({ t: 'call', k, server: server.name, tool: tool.name, args: checked });
      } catch (e) {
        delete this.pending[k];
        reject(new TypeError(`${owner}: arguments cannot be sent: ${e.message}`));
      }
    });
  }

  // A result from the main thread: {k, ok, value} or {k, ok: false, message}.
  settle(message) {
    const entry = this.pending[message.k];
    if (!entry) return;
    delete this.pending[message.k];
    if (message.ok) entry.resolve(message.value);
    else entry.reject(new ToolError(message.message, entry.server, entry.tool));
  }

  // The exec ended: its calls still waiting fail in the code (if any) that awaits them.
  endExec(message) {
    for (const k in this.pending) {
      const entry = this.pending[k];
      if (entry.exec !== this.execId) continue;
      delete this.pending[k];
      entry.reject(new ToolError(message, entry.server, entry.tool));
    }
    this.execId = null;
  }

  // callTool's names: an entry whose real (MCP) name is `name` wins over one whose py_name
  // is (a tool 'a_b' and a tool 'a-b' with py_name 'a_b': 'a_b' is the first).
  find(serverName, toolName) {
    const server = byName(this.servers, serverName);
    if (!server) {
      throw new ToolError(`no MCP server '${serverName}' (servers: ` +
        `${this.servers.map((s) => s.name).join(', ') || 'none'})`);
    }
    const tool = byName(server.tools, toolName);
    if (!tool) {
      throw new ToolError(`MCP server '${server.name}' has no tool '${toolName}' (tools: ` +
        `${server.tools.map((t) => t.name).join(', ') || 'none'})`);
    }
    return [server, tool];
  }

  serverObject(server) {
    const obj = {};
    for (const tool of server.tools) {
      const owner = `${server.py_name}.${tool.js_name}()`;
      const tools = this;
      const method = { async [tool.js_name](args) {
        return tools.call(server, tool, args, true, owner);
      } }[tool.js_name];
      Object.defineProperty(obj, tool.js_name, { value: method, enumerable: true });
    }
    Object.defineProperty(obj, Symbol.for('nodejs.util.inspect.custom'), {
      value: () => `[MCP server '${server.name}': ${server.tools.map((t) => t.js_name).join(', ') ||
        'no tools'}]`,
    });
    return Object.freeze(obj);
  }

  // Install the catalog's globals (and remove those of servers that left it).
  install(servers) {
    for (const name of this.installed) delete globalThis[name];
    this.servers = servers;
    this.installed = servers.map((s) => s.py_name);
    for (const server of servers) {
      globalThis[server.py_name] = this.serverObject(server);
    }
    const tools = this;
    globalThis.callTool = async function callTool(server, tool, args) {
      const [s, t] = tools.find(server, tool);
      return tools.call(s, t, args, false, `callTool('${s.name}', '${t.name}')`);
    };
    globalThis.ToolError = ToolError;
    this.discovery.install();
  }
}

module.exports = { ToolError, WorkerTools };
