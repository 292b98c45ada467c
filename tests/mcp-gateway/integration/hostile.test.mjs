// The gateway against hostile peers, with the real binaries: MCP clients that send what
// no client should, upstream servers that answer what no server should, and sandboxed
// code that floods tool calls. Each case checks that the gateway stays up, that its memory
// stays bounded, and that a well-behaved client is still served.
import assert from "node:assert/strict";
import net from "node:net";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  everythingStdio, gatewaySuite, procStatus, rawStdioGateway, runPython, text, waitFor, writeConfig,
} from "./harness.mjs";

const HOSTILE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "hostile_upstream.py");
const INIT = {
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};
const NESTED = "[".repeat(200000) + "]".repeat(200000);

const rssMiB = (pid) => procStatus(pid, "VmRSS");
const peakMiB = (pid) => procStatus(pid, "VmHWM");

function hostile(mode) {
  return { command: "python3", args: [HOSTILE, mode] };
}

// A client that behaves: run_python still reaches the well-behaved upstream.
async function assertServes(gateway) {
  const client = await gateway.client("witness");
  try {
    const r = await runPython(client, "r = await mcp_everything.echo(message='still here')\nprint(r)");
    assert.match(text(r), /still here/, text(r));
  } finally {
    await client.close();
  }
}

describe("hostile input to the gateway", () => {
  const suite = gatewaySuite();
  const startGateway = (servers, extraArgs = []) => suite.startGateway(extraArgs, { servers });

  test("client: 200,000 nested arrays in an HTTP POST get a parse error, not a crash", async () => {
    const gateway = await startGateway({ everything: everythingStdio() });
    const r = await fetch(gateway.url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
        ...gateway.authHeaders },
      body: NESTED,
    });
    assert.equal(r.status, 400);
    const body = await r.json();
    assert.equal(body.error.code, -32700);
    assert.match(body.error.message, /nests deeper/);
    assert.equal(gateway.proc.exitCode, null, gateway.log);
    await assertServes(gateway);
  });

  test("client: 200,000 nested arrays on a stdio line get a parse error, not a crash", async () => {
    const config = writeConfig({ everything: everythingStdio() });
    const { proc, lines, send } = rawStdioGateway({ config, sandboxd: suite.sandboxd.endpoint });
    send(NESTED);
    send(JSON.stringify(INIT));
    await waitFor(() => lines.length >= 2, "two replies");
    const [error, init] = lines.map((l) => JSON.parse(l));
    assert.equal(error.error.code, -32700);
    assert.match(error.error.message, /nests deeper/);
    assert.equal(init.result.protocolVersion, "2025-06-18");
    assert.equal(proc.exitCode, null);
    proc.stdin.end();
    await new Promise((r) => proc.once("exit", r));
  });

  for (const mode of ["protocol-number", "nested-line", "flood-lines"]) {
    test(`upstream (${mode}): the gateway stays up and the other upstreams keep working`, async () => {
      const gateway = await startGateway({ hostile: hostile(mode), everything: everythingStdio() });
      await assertServes(gateway);
      assert.equal(gateway.proc.exitCode, null, gateway.log);
      assert.ok(rssMiB(gateway.proc.pid) < 256, `gateway RSS ${rssMiB(gateway.proc.pid)} MiB`);
    });
  }

  test("upstream (huge-catalog): left out with the reason; run_python keeps working for everyone", async () => {
    const gateway = await startGateway({ hostile: hostile("huge-catalog"), everything: everythingStdio() });
    await assertServes(gateway);
    const client = await gateway.client("reader");
    await waitFor(async () => /hostile: unavailable \(its tool catalog is over \d+ bytes/
      .test((await client.listTools()).tools[0].description), "the hostile upstream left out", 30000);
    await client.close();
    assert.match(gateway.log, /left out/);
  });

  test("client: six parallel first run_python calls share one sandbox session", async () => {
    const gateway = await startGateway({ everything: everythingStdio() });
    const client = await gateway.client("parallel");
    const before = suite.sandboxd.sessions().length;
    const code = "x = globals().get('x', 0) + 1\nx";
    await Promise.all([...Array(6)].map(() => runPython(client, code)));
    assert.equal(suite.sandboxd.sessions().length - before, 1, "one sandbox session for one MCP session");
    const r = await runPython(client, "x");
    assert.equal(r.structuredContent.result, "6");  // every run saw the same namespace
    await client.close();
  });

  // One thread per call would abort the gateway (std::terminate) at tens of thousands of
  // calls: the runner holds calls past the cap back, and they all complete.
  test("sandbox: 20,000 gathered tool calls all complete, 16 at a time; the gateway stays small", async () => {
    const gateway = await startGateway({ everything: everythingStdio() },
      ["--max_tool_calls_in_flight=16", "--max_tool_calls_per_run=20000"]);
    const client = await gateway.client("flooder");
    const r = await runPython(client, [
      "rs = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(20000)],",
      "                          return_exceptions=True)",
      "errors = [str(x) for x in rs if isinstance(x, Exception)]",
      "print(len(rs) - len(errors), len(errors), errors[:1])",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000 });
    assert.match(text(r), /^20000 0 \[\]/, text(r));
    assert.equal(r.structuredContent.tool_calls_total, 20000);
    assert.equal(r.structuredContent.tool_calls.length, 100, "the result lists 100 calls, not 20,000");
    assert.match(text(r), /20000 tool calls \(0 failed\); tool_calls lists the first 100/);
    await client.close();
    assert.equal(gateway.proc.exitCode, null, gateway.log);
    assert.ok(rssMiB(gateway.proc.pid) < 256, `gateway RSS ${rssMiB(gateway.proc.pid)} MiB`);
    await assertServes(gateway);
  });

  // Sandboxed code owns the runner process: it can open the runner's gate. The gateway's
  // own cap still answers the excess with ToolErrors, and nothing grows without bound.
  test("sandbox: code that defeats the runner's back-pressure gets ToolErrors past the in-flight cap", async () => {
    const gateway = await startGateway({ everything: everythingStdio() },
      ["--max_tool_calls_in_flight=16", "--max_tool_calls_per_run=20000"]);
    const client = await gateway.client("gate-breaker");
    const r = await runPython(client, [
      "import gc",
      "gates = [g for g in gc.get_objects() if type(g).__name__ == 'CallGate']",
      "for g in gates: g._free = 10**9",
      "rs = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(20000)],",
      "                          return_exceptions=True)",
      "errors = [str(x) for x in rs if isinstance(x, Exception)]",
      "print(len(gates) > 0, len(rs) - len(errors), len(errors), any('in flight' in e for e in errors))",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000 });
    const [opened, ok, failed, capped] = text(r).trim().split("\n")[0].split(" ");
    assert.equal(opened, "True", text(r));
    assert.equal(Number(ok) + Number(failed), 20000, text(r));
    assert.ok(Number(ok) > 0, text(r));
    assert.equal(capped, "True", text(r));
    await client.close();
    assert.equal(gateway.proc.exitCode, null, gateway.log);
    assert.ok(rssMiB(gateway.proc.pid) < 256, `gateway RSS ${rssMiB(gateway.proc.pid)} MiB`);
    await assertServes(gateway);
  });

  test("sandbox: calls past --max_tool_calls_per_run get a ToolError naming the limit", async () => {
    const gateway = await startGateway({ everything: everythingStdio() }, ["--max_tool_calls_per_run=50"]);
    const client = await gateway.client("counter");
    const r = await runPython(client, [
      "n = 0",
      "try:",
      "    for i in range(60):",
      "        await mcp_everything.echo(message=str(i))",
      "        n += 1",
      "except ToolError as e:",
      "    print(n, e)",
    ].join("\n"));
    assert.match(text(r), /^50 .*more than 50 tool calls/m, text(r));
    await client.close();
  });

  // The TypeScript SDK opens a GET stream after initialize. A thread per connection ran out
  // at 64 of them: client 65 could not even initialize.
  test("client: 100 SDK clients hold GET streams; one more still initializes and lists tools", async () => {
    const gateway = await startGateway({ everything: everythingStdio() },
      ["--max_mcp_sessions_per_credential=200"]);
    const clients = [];
    try {
      for (let i = 0; i < 100; i++) clients.push(await gateway.client(`holder-${i}`));
      const late = await gateway.client("late");
      const { tools } = await late.listTools();
      assert.deepEqual(tools.map((t) => t.name), ["run_python", "run_javascript"]);
      clients.push(late);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    assert.equal(gateway.proc.exitCode, null, gateway.log);
  });

  // Header lines without end, as fast as the socket takes them: refused at 60 KiB (431)
  // and never stored, where the old server grew by 140 MiB before any check ran.
  test("client: 96 MiB of header lines get 431 and cost no memory", async () => {
    const gateway = await startGateway({ everything: everythingStdio() });
    const before = rssMiB(gateway.proc.pid);
    const reply = await new Promise((resolve, reject) => {
      const socket = net.connect(gateway.port, "127.0.0.1");
      let got = "";
      socket.on("data", (d) => { got += d; });
      socket.on("error", () => resolve(got));  // reset once the server closed: fine
      socket.on("close", () => resolve(got));
      socket.on("connect", async () => {
        socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
        const line = `X-Pad: ${"a".repeat(1 << 20)}\r\n`;
        // (The server reads and discards what follows its answer for a few seconds.)
        for (let i = 0; i < 96 && !socket.destroyed && !got; i++) {
          if (!socket.write(line)) await new Promise((r) => { socket.once("drain", r); socket.once("close", r); });
        }
      });
      setTimeout(() => reject(new Error(`no answer; got ${got.slice(0, 100)}`)), 60000).unref();
    });
    assert.match(reply, /^HTTP\/1.1 431 /, reply.slice(0, 200));
    const grown = rssMiB(gateway.proc.pid) - before;
    assert.ok(grown < 16, `the gateway grew by ${grown} MiB`);
    assert.equal(gateway.proc.exitCode, null, gateway.log);
    await assertServes(gateway);
  });

  // Parsed whole, one 16 MiB frame costs the gateway about 1 GiB (a DOM per parse plus
  // copies), and four 5.3 GiB. So arguments past --max_tool_call_bytes are refused
  // unparsed, those in flight share a byte budget, and large blocks go back to the system.
  test("sandbox: large tool-call arguments are refused or bounded; gateway memory stays bounded", async () => {
    const gateway = await startGateway({ everything: everythingStdio() });
    const client = await gateway.client("heavy");
    const r = await runPython(client, [
      "import asyncio",
      "big = await asyncio.gather(*[mcp_everything.echo(message='x' * 15_000_000) for _ in range(4)],",
      "                           return_exceptions=True)",
      "mid = await asyncio.gather(*[mcp_everything.echo(message='y' * 3_900_000) for _ in range(12)],",
      "                           return_exceptions=True)",
      "print(sum('--max_tool_call_bytes' in str(e) for e in big),",
      "      sum(not isinstance(m, Exception) for m in mid),",
      "      sum('in_flight' in str(m) or 'max_buffered_bytes' in str(m) for m in mid))",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 200000 });
    const [refused, answered, busy] = text(r).trim().split(" ").map(Number);
    assert.equal(refused, 4, text(r));
    assert.equal(answered + busy, 12, text(r));
    // Each call is charged 4 times its arguments and 4 times its result for their copies:
    // the credential's 64 MiB of tool-call bytes hold a few of these at once, how many
    // depends on how soon answers are taken. Some are answered, the rest refused. (A stdio
    // answer is also charged to the caller's share while it is read.)
    assert.ok(answered >= 1, text(r));
    await client.close();
    assert.equal(gateway.proc.exitCode, null, gateway.log);
    const peak = peakMiB(gateway.proc.pid);
    assert.ok(peak < 256, `gateway peak RSS ${peak} MiB`);
    await assertServes(gateway);
  });
});
