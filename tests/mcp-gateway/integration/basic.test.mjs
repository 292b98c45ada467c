// run_python end to end: a real SDK client -> mcp-gateway (HTTP) -> sandboxd (real Podman)
// -> upstream reference servers over stdio, Streamable HTTP and legacy SSE.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fs from "node:fs";
import path from "node:path";
import {
  EVERYTHING, FILESYSTEM, MEMORY, GatewayHttp, tempDir, Sandboxd, everythingStdio, runPython, startEverythingHttp,
  stopAll, text, writeConfig,
} from "./harness.mjs";

describe("run_python over Streamable HTTP", () => {
  let sandboxd, gateway, client, everythingHttp, everythingSse, shared;

  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    everythingHttp = await startEverythingHttp("streamableHttp");
    everythingSse = await startEverythingHttp("sse");
    shared = tempDir("gwfs-");
    fs.writeFileSync(path.join(shared, "notes.txt"), "from the host\n");
    const config = writeConfig({
      everything: everythingStdio({ UPSTREAM_SECRET: "s3cret-token" }),
      memory: { command: "node", args: [MEMORY], env: { MEMORY_FILE_PATH: "/tmp/gw-memory-test.json" } },
      "everything-http": { type: "http", url: everythingHttp.url },
      "everything-sse": { type: "sse", url: everythingSse.url },
      filesystem: { command: "node", args: [FILESYSTEM, shared] },
    });
    gateway = new GatewayHttp({ config, sandboxd: sandboxd.endpoint });
    await gateway.start();
    client = await gateway.client();
  });

  after(async () => {
    await client?.close();
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("tools/list offers run_python (and run_javascript) describing every upstream", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ["run_python", "run_javascript"]);
    const [tool] = tools;
    assert.deepEqual(tool.inputSchema.required, ["code"]);
    for (const p of ["code", "timeout_seconds", "session", "reset", "servers"]) {
      assert.ok(tool.inputSchema.properties[p], `input property ${p}`);
    }
    assert.equal(tool.outputSchema.type, "object");
    for (const name of ["everything", "memory", "everything-http", "everything-sse"]) {
      assert.match(tool.description, new RegExp(`- ${name} \\(mcp_`), name);
    }
    assert.match(tool.description, /echo\(message\) - Echoes back the input/);
    assert.match(tool.description, /_search/);
  });

  test("the namespace is kept across calls and structured content is returned", async () => {
    let r = await runPython(client, "x = 20\nprint('set')");
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, "set\n");
    r = await runPython(client, "x * 2 + 2");
    assert.equal(r.structuredContent.result, "42");
    assert.equal(r.structuredContent.status, "ok");
    assert.match(text(r), /\[result\] 42/);
  });

  test("the code runs on the isolation the suite asks for", async () => {
    // Pyodide reports sys.platform "emscripten"; CPython in the container "linux". Guards
    // the gateway_wasm_* copies against running on containers without noticing.
    const r = await runPython(client, "import sys\nsys.platform");
    assert.equal(r.isError, false, text(r));
    const want = process.env.SANDBOXD_TEST_ISOLATION === "wasm" ? "'emscripten'" : "'linux'";
    assert.equal(r.structuredContent.result, want);
  });

  test("each upstream transport is callable, and gather runs across servers", async () => {
    const r = await runPython(client, `
a = await mcp_everything.echo(message="stdio")
b = await mcp_everything_http.echo(message="http")
c = await mcp_everything_sse.echo(message="sse")
s, m = await asyncio.gather(mcp_everything.get_sum(a=2, b=3), mcp_memory.read_graph())
print(a, b, c, sep=" | ")
(s, sorted(m.keys()) if isinstance(m, dict) else type(m).__name__)
`);
    assert.equal(r.isError, false, text(r));
    assert.match(r.structuredContent.stdout, /stdio .*\| .*http.* \| .*sse/);
    assert.equal(r.structuredContent.tool_calls.length, 5);
    assert.ok(r.structuredContent.tool_calls.every((c) => c.ok), JSON.stringify(r.structuredContent.tool_calls));
    const servers = new Set(r.structuredContent.tool_calls.map((c) => c.server));
    assert.deepEqual([...servers].sort(), ["everything", "everything-http", "everything-sse", "memory"]);
  });

  test("server-filesystem: the sandbox reaches files only through the upstream tool", async () => {
    const r = await runPython(client, `
import os
listing = await mcp_filesystem.list_directory(path=${JSON.stringify(shared)})
content = await mcp_filesystem.read_text_file(path=${JSON.stringify(path.join(shared, "notes.txt"))})
print("notes.txt" in str(listing), content["content"].strip(), os.path.exists(${JSON.stringify(shared)}))
`);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, "True from the host False\n");
  });

  test("structured results and images come back as Python values", async () => {
    const r = await runPython(client, `
sc = await mcp_everything.get_structured_content(location="New York")
img = await mcp_everything.get_tiny_image()
images = [c for c in img if c["type"] == "image"]
(type(sc).__name__, sorted(sc)[:2], images[0]["mimeType"], len(images[0]["data"]) > 100)
`);
    assert.equal(r.isError, false, text(r));
    assert.match(r.structuredContent.result, /^\('dict', \[.*\], 'image\/png', True\)$/);
  });

  test("upstream errors raise ToolError naming server and tool; bad types fail before the call", async () => {
    const r = await runPython(client, `
for call in [lambda: mcp_everything.gzip_file_as_resource(name="x", data="file:///etc/passwd"),  # isError
             lambda: mcp_everything.get_resource_reference(resourceType="Nope"),              # JSON-RPC error
             lambda: call_tool("everything", "get-sum", {"a": "not a number", "b": 1})]:       # local TypeError
    try:
        await call()
    except ToolError as e:
        print("ToolError", e.server, e.tool, bool(e.message))
    except TypeError as e:
        print("TypeError")
`);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout,
      "ToolError everything gzip-file-as-resource True\nToolError everything get-resource-reference True\nTypeError\n");
    assert.equal(r.structuredContent.tool_calls.length, 2);
    assert.ok(r.structuredContent.tool_calls.every((c) => !c.ok));
  });

  test("exceptions are errors with a traceback, and isError is set", async () => {
    const r = await runPython(client, "def f():\n    return 1/0\nf()");
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, "error");
    assert.equal(r.structuredContent.error.type, "ZeroDivisionError");
    assert.match(text(r), /ZeroDivisionError/);
    assert.match(r.structuredContent.error.traceback, /return 1\/0/);
  });

  test("upstream credentials and env never reach the sandbox", async () => {
    const r = await runPython(client, `
import os
env = await mcp_everything.get_env()
(os.environ.get("UPSTREAM_SECRET"), "s3cret-token" in str(env))
`);
    assert.equal(r.structuredContent.result, "(None, True)");
  });

  test("stdout streams as progress notifications while the code runs", async () => {
    const updates = [];
    const r = await runPython(client, "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.3)",
      {}, { onprogress: (p) => updates.push(p) });
    assert.equal(r.isError, false, text(r));
    assert.ok(updates.length >= 2, `progress updates: ${JSON.stringify(updates)}`);
    assert.match(updates.map((u) => u.message).join(""), /tick 0\n.*tick 1\n/s);
    for (let i = 1; i < updates.length; i++) assert.ok(updates[i].progress > updates[i - 1].progress);
  });

  test("upstream progress is forwarded as progress of the run", async () => {
    const updates = [];
    const r = await runPython(client, "await mcp_everything.trigger_long_running_operation(duration=1, steps=3)",
      {}, { onprogress: (p) => updates.push(p) });
    assert.equal(r.isError, false, text(r));
    const messages = updates.map((u) => u.message).join("");
    assert.match(messages, /everything\.trigger-long-running-operation: .*\(\d+\/3\)/, messages);
  });

  test("cancellation interrupts the run and keeps the namespace", async () => {
    await runPython(client, "kept = 'yes'");
    // Cancelled once it runs (its output arrives as progress): a cancel that reached the
    // gateway before its call would be one for no request, and ignored.
    const controller = new AbortController();
    const started = runPython(client, "print('sleeping', flush=True)\nimport time\ntime.sleep(30)\nkept = 'no'", {},
      { signal: controller.signal, onprogress: () => controller.abort("test cancels") });
    await assert.rejects(started);
    const r = await runPython(client, "kept");
    assert.equal(r.structuredContent.result, "'yes'");
  });

  test("named sessions and the servers allowlist", async () => {
    await runPython(client, "y = 'main'");
    let r = await runPython(client, "'y' in globals()", { session: "scratch" });
    assert.equal(r.structuredContent.result, "False");
    r = await runPython(client, `
try:
    await mcp_memory.read_graph()
except Exception as e:
    print(type(e).__name__)
await mcp_everything.echo(message="allowed")
`, { servers: ["everything"] });
    assert.match(r.structuredContent.stdout, /NameError|ToolError/);
    assert.equal(r.isError, false, text(r));
    r = await runPython(client, "1", { servers: ["nope"] }).catch((e) => e);
    assert.ok(r instanceof Error || r.isError, "an unknown server in 'servers' is refused");
  });

  test("reset starts from an empty namespace", async () => {
    await runPython(client, "z = 1");
    const r = await runPython(client, "'z' in globals()", { reset: true });
    if (r.structuredContent.result !== "False") assert.fail(`${text(r)}\nrunners:\n${sandboxd.runnerLogs()}`);
  });
});
