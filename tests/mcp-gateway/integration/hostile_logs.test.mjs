// Issue 27, against the real gateway: what a peer says reaches the gateway's log escaped and
// clipped (base/log_text.h), so it can neither forge log lines nor write megabytes per line:
//  - a hostile upstream's notifications/message with newlines in "level" and "data" and
//    4 MiB of data each;
//  - a token holder's tools/call, refused (and logged) with a tool name that holds a newline
//    and a forged line, or a megabyte.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { GatewayHttp, Sandboxd, everythingStdio, stopAll, waitFor, writeConfig } from "./harness.mjs";

const HOSTILE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "hostile_upstream.py");
const FORGED = "1999-01-01T00:00:00.000 info http: session deadbeef deleted by the client";
const PROTOCOL = "2025-11-25";
// Data is clipped to 1 KiB, names to 256 bytes (escapes count), plus the line's prefix.
const MAX_LINE = 1400;

// Every line of the log is one the gateway wrote, and none is long.
function assertNoForgedOrLongLine(log) {
  for (const line of log.split("\n")) {
    assert.ok(!line.startsWith("1999-01-01"), `a forged log line: ${line.slice(0, 300)}`);
    assert.ok(line.length <= MAX_LINE, `a log line of ${line.length} bytes: ${line.slice(0, 300)}`);
  }
}

async function request(g, body, session) {
  const res = await fetch(g.url, {
    method: "POST",
    headers: {
      ...g.authHeaders, Accept: "application/json, text/event-stream", "Content-Type": "application/json",
      "MCP-Protocol-Version": PROTOCOL, ...(session ? { "Mcp-Session-Id": session } : {}),
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60000),
  });
  return { status: res.status, session: res.headers.get("mcp-session-id"), text: await res.text() };
}

describe("peers cannot forge or flood the gateway's log", () => {
  let sandboxd;
  const gateways = [];
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
  });
  after(async () => {
    for (const g of gateways) await g.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  async function startGateway(servers, extraArgs) {
    const g = new GatewayHttp({ config: writeConfig(servers), sandboxd: sandboxd.endpoint, extraArgs });
    gateways.push(g);
    await g.start();
    return g;
  }

  test("upstream: notifications/message with newlines and 4 MiB of data", async () => {
    // At debug every upstream log message is logged (the nine fit in one burst of
    // --upstream_log_rate): what is checked is how, not whether.
    const g = await startGateway({ hostile: { command: "python3", args: [HOSTILE, "log-flood"] } },
      ["--log_level=debug"]);
    await waitFor(() => g.log.includes("end-of-flood"), "the upstream's last log message", 60000);
    assertNoForgedOrLongLine(g.log);
    const upstream = g.log.split("\n").filter((l) => l.includes("upstream hostile ["));
    assert.equal(upstream.length, 9, upstream.map((l) => l.slice(0, 200)).join("\n"));
    // Not a level name: shown as "?", and the forged text is nowhere.
    assert.equal(upstream.filter((l) => l.endsWith("upstream hostile [?]: d")).length, 3);
    assert.ok(upstream.some((l) => l.endsWith(`[error]: x\\n${FORGED}`)), upstream.join("\n"));
    assert.equal(upstream.filter((l) => l.endsWith("(4194304 bytes)")).length, 4);
    assert.ok(!g.log.includes("[forged"));
  });

  test("client: a refused tools/call whose tool name holds a newline or a megabyte", async () => {
    // Calls whose arguments pass 1 KiB in flight are refused, and each refusal is logged
    // with the tool's name.
    const g = await startGateway({ everything: everythingStdio() },
      ["--max_call_bytes_in_flight_per_credential=1024"]);
    const init = await request(g, {
      jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: `raw\n${FORGED}`, version: "1" } },
    });
    assert.equal(init.status, 200, init.text);
    const ack = await request(g, { jsonrpc: "2.0", method: "notifications/initialized" }, init.session);
    assert.equal(ack.status, 202);
    const pad = "p".repeat(4096);
    for (const [id, name] of [[2, `x\n${FORGED}`], [3, `${"y".repeat(1 << 20)}\n${FORGED}`]]) {
      const r = await request(g, { jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: { pad } } },
        init.session);
      assert.match(r.text, /max_call_bytes_in_flight_per_credential/, r.text.slice(0, 300));
    }
    await waitFor(() => g.log.includes("refused tool yyyy"), "the second refusal in the log", 30000);
    assertNoForgedOrLongLine(g.log);
    assert.ok(g.log.includes(`refused tool x\\n${FORGED}`), g.log.slice(-2000));
    assert.match(g.log, /refused tool y+… \(\d+ bytes\)/);
  });
});
