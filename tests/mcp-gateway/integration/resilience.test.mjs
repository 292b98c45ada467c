// Failures around the gateway: an upstream killed mid-call, sandboxd restarted or gone.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import {
  Client, GatewayHttp, Sandboxd, everythingStdio, runPython, stopAll, text, writeConfig,
} from "./harness.mjs";

function childPids(pid) {
  try {
    return execFileSync("pgrep", ["-P", String(pid)]).toString().split("\n").filter(Boolean).map(Number);
  } catch { return []; }
}

const FAKE_SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "upstream",
  "fixtures", "fake_mcp_server.py");

// A TCP proxy in front of the gateway that cuts the first connection carrying a tools/call
// once a progress notification went through it; it records what clients sent.
async function cuttingProxy(port) {
  let sent = "";
  let cut = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(port, "127.0.0.1");
    let isCall = false;
    client.on("data", (d) => {
      sent += d;
      if (/"method":"tools\/call"/.test(String(d))) isCall = true;
      upstream.write(d);
    });
    upstream.on("data", (d) => {
      client.write(d);
      if (!cut && isCall && /notifications\/progress/.test(String(d))) {
        cut = true;
        client.destroy();
        upstream.destroy();
      }
    });
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { server, get sent() { return sent; }, get cut() { return cut; }, port: server.address().port };
}

describe("resilience", () => {
  let sandboxd, gateway, client;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    gateway = new GatewayHttp({ config: writeConfig({ everything: everythingStdio() }), sandboxd: sandboxd.endpoint });
    await gateway.start();
    client = await gateway.client();
  });
  after(async () => {
    await client?.close();
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("an upstream killed mid-call raises ToolError, and the next call restarts it", async () => {
    // Kill the upstream once the call is demonstrably in flight: its first progress
    // notification has come through the gateway.
    let killed = false;
    let inFlight;
    const reached = new Promise((resolve) => { inFlight = resolve; });
    const running = runPython(client, `
try:
    await mcp_everything.trigger_long_running_operation(duration=20, steps=20)
    print("finished?")
except ToolError as e:
    print("ToolError:", e.message)
`, {}, {
      onprogress: (p) => { if (/trigger-long-running-operation/.test(p.message || "")) inFlight(); },
    });
    await reached;
    const upstreams = childPids(gateway.proc.pid);
    assert.ok(upstreams.length > 0, "the gateway runs server-everything as a child");
    for (const pid of upstreams) process.kill(pid, "SIGKILL");
    killed = true;
    const r = await running;
    if (r.isError) console.log("GATEWAY LOG\n" + gateway.log + "\nSANDBOXD LOG\n" + sandboxd.log);
    assert.ok(killed);
    assert.match(r.structuredContent.stdout, /^ToolError:/, text(r) + "\n" + gateway.log);
    const again = await runPython(client, "await mcp_everything.echo(message='back')");
    assert.equal(again.isError, false, text(again));
    assert.match(again.structuredContent.result, /back/);
  });

  // MCP 2025-11-25 resumability with the TypeScript SDK as the client: the connection of a
  // run_python call drops mid-run; the SDK resumes with GET + Last-Event-ID, and the run
  // goes on (not cancelled) and its result arrives.
  test("a tools/call whose connection drops is resumed by the SDK with Last-Event-ID", async () => {
    const { StreamableHTTPClientTransport } = await import(
      new URL("@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js",
        `file://${process.env.NODE_PEERS}/`).href);
    const proxy = await cuttingProxy(gateway.port);
    const resuming = new Client({ name: "resuming", version: "1" });
    await resuming.connect(new StreamableHTTPClientTransport(
      new URL(`http://127.0.0.1:${proxy.port}/mcp`),
      { requestInit: { headers: gateway.authHeaders },
        reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000,
          reconnectionDelayGrowFactor: 1.5, maxRetries: 5 } }));
    try {
      const r = await runPython(resuming,
        "import asyncio\nprint('before', flush=True)\nawait asyncio.sleep(1.5)\nprint('after')",
        {}, { onprogress: () => {} });
      assert.ok(proxy.cut, "the proxy never cut the call's connection");
      assert.equal(r.isError, false, text(r));
      assert.match(r.structuredContent.stdout, /before\nafter/, text(r));
      // (Only a GET carries Last-Event-ID.)
      assert.match(proxy.sent, /\r\nlast-event-id: \d+-\d+\r\n/i);
    } finally {
      await resuming.close();
      proxy.server.close();
    }
  });

  // Upstream servers are started with PR_SET_PDEATHSIG (base/process.h): a gateway that
  // is killed outright leaves none of them running.
  test("a gateway killed with SIGKILL leaves no upstream server behind", async () => {
    // A server that does not exit when its stdin closes (many do, which would hide this).
    const stubborn = { command: "python3", args: [FAKE_SERVER, "stdio", "--ignore-eof"] };
    const doomed = new GatewayHttp({ config: writeConfig({ stubborn }), sandboxd: sandboxd.endpoint });
    await doomed.start();
    const c = await doomed.client("doomed");
    await c.listTools();
    const upstreams = childPids(doomed.proc.pid);
    assert.ok(upstreams.length > 0, "the gateway runs server-everything as a child");
    const exited = new Promise((r) => doomed.proc.once("exit", r));
    doomed.proc.kill("SIGKILL");
    await exited;
    const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
    for (let i = 0; i < 100 && upstreams.some(alive); i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(upstreams.filter(alive), [], "upstream servers outlived the gateway");
  });

  test("sandboxd restarted under a live gateway: the session is re-attached", async () => {
    await runPython(client, "survivor = 'still here'");
    await sandboxd.stop();
    await sandboxd.start();
    const r = await runPython(client, "survivor");
    assert.equal(r.structuredContent.result, "'still here'", text(r));
  });

  test("a lost sandbox session is replaced and the result says the state was reset", async () => {
    await runPython(client, "gone = 1");
    // Kill every session container of this sandboxd behind its back.
    const sessions = sandboxd.sessions();
    assert.ok(sessions.length > 0);
    for (const s of sessions) execFileSync("podman", ["rm", "-f", "-t", "0", s.container]);
    await new Promise((r) => setTimeout(r, 500));
    const r = await runPython(client, "'gone' in globals()");
    assert.equal(r.structuredContent.result, "False", text(r));
    assert.equal(r.structuredContent.session_reset, true);
    assert.match(text(r), /state|lost|new session/i);
  });

  test("sandboxd unreachable gives an error naming the socket; service resumes when it returns", async () => {
    await sandboxd.stop();
    const r = await runPython(client, "1 + 1");
    assert.equal(r.isError, true);
    assert.match(text(r), new RegExp(sandboxd.socket.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
    await sandboxd.start();
    const ok = await runPython(client, "1 + 1");
    assert.equal(ok.structuredContent.result, "2", text(ok));
  });
});
