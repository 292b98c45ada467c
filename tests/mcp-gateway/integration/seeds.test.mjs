// Code written for the systems the gateway replaces runs unchanged (issue 42): the usage
// examples of codemode-lite's and mcp-server-code-execution-mode's READMEs (and their
// GUIDE's lines on the sandbox API), verbatim, through an SDK client -> mcp-gateway (HTTP)
// -> sandboxd (real Podman) -> the npm reference servers. Only names of servers and tools
// we do not have, with their arguments, and one host path are changed; the mapping is in
// docs/seed-compatibility.md, which lists both APIs line by line.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { FILESYSTEM, MEMORY, everythingStdio, gatewaySuite, runPython, tempDir, text } from "./harness.mjs";

const shared = tempDir("gwseeds-");
fs.writeFileSync(path.join(shared, "test.txt"), "TODO: from the host\n");

// Runs `code` and returns its whole stdout; the run must succeed.
async function stdoutOf(client, code, extra = {}) {
  const r = await runPython(client, code, extra);
  assert.equal(r.isError, false, text(r).slice(0, 2000));
  assert.equal(r.structuredContent.status, "ok", text(r).slice(0, 2000));
  assert.equal(r.structuredContent.output_truncated, false);
  return r.structuredContent.stdout;
}

// The line of `out` that starts with `prefix` (short messages: the metadata lines are long).
function line(out, prefix) {
  const found = out.split("\n").find((l) => l.startsWith(prefix));
  assert.ok(found !== undefined, `no line starts with ${JSON.stringify(prefix)}`);
  return found;
}

describe("the seeds' README examples", () => {
  const suite = gatewaySuite({ servers: {
    everything: everythingStdio(),
    memory: { command: "node", args: [MEMORY], env: { MEMORY_FILE_PATH: `${tempDir("gwseeds-mem-")}/memory.json` } },
    filesystem: { command: "node", args: [FILESYSTEM, shared] },
  } });
  let client;
  before(async () => {
    // The whole stdout comes back (the metadata the examples print is long).
    client = await (await suite.startGateway(["--spill_stdout_bytes=0"])).client();
  });
  after(async () => client?.close());

  // Its examples name only what works written either way (plain or awaited, ToolError or
  // MCPError); the seeds' own names do not make it longer.
  test("run_python's description keeps to the names both styles share", async () => {
    const { tools } = await client.listTools();
    const { description } = tools.find((t) => t.name === "run_python");
    assert.match(description, /_search\("keyword"\); _schema\("server\.tool"\); help\(mcp_server\.tool_name\)/);
    assert.match(description, /A failing tool raises ToolError\./);
    for (const name of ["MCPError", "mcp.runtime", "mcp.servers", "LOADED_MCP_SERVERS", "list_tools"]) {
      assert.ok(!description.includes(name), name);
    }
  });

  // README "Usage" (Calendar's list-events and create-event -> everything's echo and
  // get-sum, GitHub's search_repositories -> memory's search_nodes), "Discovery helpers"
  // and "Server-scoped proxies".
  test("codemode-lite", async () => {
    const out = await stdoutOf(client, `# Top-level await — no wrapper function needed (Podman backend)
import json

# Discover available tools
tools_list = await _discover()
print(tools_list)

# Get a tool's schema before calling it
schema = await _schema('get-sum')
print(schema)

# Call tools
events = await tools['echo'](message='primary')
repos = await tools['search_nodes'](query='my-project')

# Parallel execution
import asyncio
results = await asyncio.gather(
    tools['echo'](message='primary'),
    tools['search_nodes'](query='test')
)

# Variables persist between calls (Podman only)
print(json.dumps(events, indent=2))
`);
    assert.match(out, /'everything': \[\{'name': 'echo'/);
    assert.match(out, /'name': 'everything\.get-sum'/);
    assert.match(out, /"Echo: primary"\n$/);
    const more = await stdoutOf(client, `print(type(await _search('keyword')).__name__, repos, results[0])
# Instead of tools['list-events'], group by server:
await mcp_everything.echo(message='primary')
await mcp_memory.search_nodes(query='test')
`);
    assert.equal(more, "list {'entities': [], 'relations': []} Echo: primary\n");
  });

  // README "Inspect Available Servers" and "Fuzzy search across servers", both verbatim.
  test("mcp-server-code-execution-mode: the runtime helpers", async () => {
    const out = await stdoutOf(client, `from mcp import runtime

print("Discovered:", runtime.discovered_servers())
print("Cached servers:", runtime.list_servers_sync())
print("Loaded metadata:", runtime.list_loaded_server_metadata())
print("Selectable via RPC:", await runtime.list_servers())

# Peek at tool docs for a server that's already loaded in this run
loaded = runtime.list_loaded_server_metadata()
if loaded:
  first = runtime.describe_server(loaded[0]["name"])
  for tool in first["tools"]:
    print(tool["alias"], "→", tool.get("description", ""))

# Ask for summaries or full schemas only when needed
if loaded:
  summaries = await runtime.query_tool_docs(loaded[0]["name"])
  detailed = await runtime.query_tool_docs(
    loaded[0]["name"],
    tool=summaries[0]["toolAlias"],
    detail="full",
  )
  print("Summaries:", summaries)
  print("Cached tools:", runtime.list_tools_sync(loaded[0]["name"]))
  print("Detailed doc:", detailed)

# Fuzzy search across loaded servers without rehydrating every schema
results = await runtime.search_tool_docs("calendar events", limit=3)
for result in results:
  print(result["server"], result["tool"], result.get("description", ""))

# Synchronous helpers for quick answers without extra awaits
print("Capability summary:", runtime.capability_summary())
print("Docs from cache:", runtime.query_tool_docs_sync(loaded[0]["name"]) if loaded else [])
print("Search from cache:", runtime.search_tool_docs_sync("calendar"))
`);
    const servers = "('everything', 'memory', 'filesystem')";
    assert.equal(line(out, "Discovered: "), `Discovered: ${servers}`);
    assert.equal(line(out, "Cached servers: "), `Cached servers: ${servers}`);
    assert.equal(line(out, "Selectable via RPC: "), `Selectable via RPC: ${servers}`);
    assert.match(line(out, "Loaded metadata: ").slice(0, 80), /^Loaded metadata: \(\{'name': 'everything', 'alias': 'everything'/);
    assert.equal(line(out, "echo → "), "echo → Echoes back the input string");
    assert.match(line(out, "Summaries: ").slice(0, 80), /^Summaries: \[\{'server': 'everything', 'serverAlias': 'everything'/);
    assert.match(line(out, "Cached tools: ").slice(0, 80), /^Cached tools: \(\{'name': 'echo', 'alias': 'echo'/);
    assert.match(line(out, "Detailed doc: "), /^Detailed doc: \{'server': 'everything', .*'tool': 'echo', .*'inputSchema': \{/);
    assert.match(line(out, "Capability summary: "), /mcp\.runtime/);
    assert.match(line(out, "Docs from cache: ").slice(0, 80), /^Docs from cache: \[\{'server': 'everything'/);
    assert.equal(line(out, "Search from cache: "), "Search from cache: []");
    const search = await stdoutOf(client, `from mcp import runtime

matches = await runtime.search_tool_docs("calendar events", limit=5)
for hit in matches:
    print(hit["server"], hit["tool"], hit.get("description", ""))
matches = await runtime.search_tool_docs("read file", limit=5)
for hit in matches:
    print(hit["server"], hit["tool"], hit.get("description", ""))
`);
    assert.match(search, /^filesystem read_file /m);
  });

  // README "Execute Code" (the path: a file of the filesystem server's), "Load Servers
  // Explicitly" (serena -> memory) and "Multiple access patterns" (server -> filesystem);
  // GUIDE "Tool Discovery Flow" and the cwd example (serena -> memory).
  test("mcp-server-code-execution-mode: proxies, modules and servers", async () => {
    const file = path.join(shared, "test.txt");
    let out = await stdoutOf(client, `# Use MCP tools in sandboxed code
result = await mcp_filesystem.read_file(path=${JSON.stringify(file)})
print(result)`);
    assert.match(out, /TODO: from the host/);
    out = await stdoutOf(client, "print(await mcp_memory.search_nodes(query='latest AI papers'))",
      { servers: ["memory", "filesystem"] });
    assert.equal(out, "{'entities': [], 'relations': []}\n");
    out = await stdoutOf(client, `mcp_servers["filesystem"]           # Dynamic lookup
mcp_filesystem                 # Attribute access
from mcp.servers.filesystem import * # Module import
print(await read_text_file(path=${JSON.stringify(file)}), LOADED_MCP_SERVERS)
print([t["name"] for t in await mcp_filesystem.list_tools()][:2])
print(await mcp.runtime.discovered_servers())
from mcp import runtime

desc = runtime.describe_server('memory')
cdir = desc.get('cwd') or 'bridge-default'
print('Server cwd:', cdir)
`);
    const lines = out.split("\n");
    assert.match(lines[0], /TODO: from the host.* \(.*'filesystem'.*\)$/);
    assert.equal(lines[1], "['read_file', 'read_text_file']");
    assert.match(lines[2], /^\(.*'memory'.*\)$/);
    assert.equal(lines[3], "Server cwd: bridge-default");
  });
});
