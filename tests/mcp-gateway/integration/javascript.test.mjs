// run_javascript end to end: the TypeScript SDK client -> mcp-gateway (HTTP) -> sandboxd
// (real Podman, the Node.js runner) -> the npm reference servers `everything` and `memory`
// over stdio. Persistence across calls, the discovery globals, Promise.all of 100 tool
// calls, ToolError, the timeout of a synchronous loop (the session survives, its namespace
// reset), cancel, and a Python handle refused to run_javascript.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { MEMORY, everythingStdio, gatewaySuite, runPython, tempDir, text } from "./harness.mjs";

function runJs(client, code, extra = {}, options = {}) {
  return client.callTool({ name: "run_javascript", arguments: { code, ...extra } }, undefined,
    { timeout: 60000, ...options });
}

describe("run_javascript over Streamable HTTP", () => {
  const suite = gatewaySuite({ servers: {
    everything: everythingStdio(),
    memory: { command: "node", args: [MEMORY], env: { MEMORY_FILE_PATH: `${tempDir("gwjs-")}/memory.json` } },
  } });
  let client;
  before(async () => {
    client = await (await suite.startGateway()).client();
  });
  after(async () => client?.close());

  test("tools/list describes the upstream tools as TypeScript", async () => {
    const { tools } = await client.listTools();
    const js = tools.find((t) => t.name === "run_javascript");
    assert.ok(js, tools.map((t) => t.name).join(","));
    assert.match(js.description, /mcp_everything/);
    assert.match(js.description, /echo\(args: \{[^}]*message: string/s);
    assert.deepEqual(js.inputSchema.required, ["code"]);
    assert.match(js.description, /_search\("keyword"\); _schema\("server\.tool"\); _discover\(\)/);
  });

  test("the code finds tools and their schemas with _discover, _schema and _search", async () => {
    const r = await runJs(client, `console.log(JSON.stringify([_schema("everything.echo").input_schema.required,
  _schema("read_graph").call, _search("echo", 1).map((h) => h.server + "." + h.js_name),
  _discover().memory.some((t) => t.name === "read_graph" && t.js_name === "read_graph")]))`);
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(JSON.parse(r.structuredContent.stdout),
      [["message"], "await mcp_memory.read_graph()", ["everything.echo"], true]);
  });

  test("declarations persist across calls and the trailing expression is the result", async () => {
    let r = await runJs(client, "const base = 40;\nfunction add(n) { return base + n; }\nconsole.log('set')");
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, "set\n");
    r = await runJs(client, "({ sum: add(2), tag: (await mcp_everything.echo({ message: 'hi' })) })");
    assert.equal(r.isError, false, text(r));
    assert.match(r.structuredContent.result, /sum: 42/);
    assert.match(r.structuredContent.result, /Echo: hi/);
  });

  test("Promise.all of 100 echo calls", async () => {
    const started = Date.now();
    const r = await runJs(client, `
const out = await Promise.all(Array.from({ length: 100 }, (_, i) => mcp_everything.echo({ message: 'm' + i })));
out.filter((t, i) => t === 'Echo: m' + i).length`);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.result, "100");
    console.log(`# 100 concurrent echo calls: ${Date.now() - started} ms`);
  });

  test("an upstream error is a ToolError, and a bad argument a TypeError before any call", async () => {
    let r = await runJs(client, "await callTool('everything', 'no_such_tool', {})");
    assert.equal(r.structuredContent.error.type, "ToolError", text(r));
    r = await runJs(client, `
try { await mcp_everything.echo({}); } catch (e) { console.log(e.name, e instanceof TypeError); }
try { await callTool('everything', 'no_such_tool', {}); } catch (e) { console.log(e.name, e instanceof ToolError); }`);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, "TypeError true\nToolError true\n");
    r = await runJs(client, "null.x");
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.error.type, "TypeError");
    assert.match(r.structuredContent.error.traceback, /<cell-\d+>:1/);
    assert.doesNotMatch(r.structuredContent.error.traceback, /sandbox_runner|node:internal/);
    console.log(`# a JavaScript error as the model reads it:\n${text(r)}`);
  });

  test("a while(true){} times out, the session survives and says its namespace was reset", async () => {
    // A workspace file tells the same container from a new one; a global, the namespace.
    await runJs(client, "globalThis.before = 1; require('fs').writeFileSync('marker', 'x')");
    const r = await runJs(client, "while (true) {}", { timeout_seconds: 1 });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, "timeout", text(r));
    assert.match(r.structuredContent.stderr, /namespace was reset/);
    // The timeout's own words agree with the runner's: nothing says the variables are kept.
    assert.doesNotMatch(text(r), /variables are kept/, text(r));
    assert.match(text(r), /TimeoutError: .*namespace was reset/, text(r));
    console.log(`# a timeout as the model reads it:\n${text(r)}`);
    const after = await runJs(client, "[typeof before, require('fs').existsSync('marker')]");
    assert.equal(after.isError, false, text(after));
    assert.equal(after.structuredContent.result, "[ 'undefined', true ]", "the same sandbox, a fresh namespace");
  });

  test("cancel (an AbortSignal) stops a pending run and keeps the namespace", async () => {
    await runJs(client, "let kept = 'yes'");
    const controller = new AbortController();
    // Cancelled once it runs (its output arrives as progress), not before the gateway has
    // its call.
    const started = runJs(client, "console.log('waiting'); await new Promise((r) => setTimeout(r, 30000)); kept = 'no'",
      {}, { signal: controller.signal, onprogress: () => controller.abort("test cancels") });
    await assert.rejects(started);
    const r = await runJs(client, "kept");
    assert.equal(r.structuredContent.result, "'yes'");
  });

  test("the memory server's create_entities and read_graph", async () => {
    const r = await runJs(client, `
await mcp_memory.create_entities({ entities: [{ name: 'gw-js', entityType: 'test', observations: ['from node'] }] });
const graph = await mcp_memory.read_graph({});
graph.entities.filter((e) => e.name === 'gw-js').map((e) => e.observations[0])`);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.result, "[ 'from node' ]");
  });

  test("a Python sandbox's handle is refused to run_javascript, and the other way round", async () => {
    const py = await runPython(client, "x = 1");
    assert.equal(py.isError, false, text(py));
    let r = await runJs(client, "1", { sandbox: py.structuredContent.sandbox });
    assert.equal(r.isError, true);
    assert.match(text(r), /names a python sandbox: pass it to run_python/);
    const js = await runJs(client, "1");
    r = await runPython(client, "1", { sandbox: js.structuredContent.sandbox });
    assert.match(text(r), /names a javascript sandbox: pass it to run_javascript/);
  });

});
