// Hostile and malformed input at the MCP edge, and the MCP Inspector CLI as a client.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import {
  GATEWAY_BIN, GatewayHttp, NODE_PEERS, Sandboxd, everythingStdio, rawStdioGateway, stopAll, tempDir, waitFor,
  writeConfig,
} from "./harness.mjs";

const run = promisify(execFile);
const INIT = {
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

describe("protocol edges", () => {
  let sandboxd, config, gateway;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    config = writeConfig({ everything: everythingStdio() });
    gateway = new GatewayHttp({ config, sandboxd: sandboxd.endpoint });
    await gateway.start();
  });
  after(async () => {
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("stdio: malformed lines get JSON-RPC errors and the gateway keeps serving", async () => {
    const { proc, lines, send } = rawStdioGateway({ config, sandboxd: sandboxd.endpoint });
    send("{not json");
    send(JSON.stringify([{ jsonrpc: "2.0", id: 5, method: "ping" }]));
    send(JSON.stringify({ jsonrpc: "2.0", id: 6 }));
    send(JSON.stringify(INIT));
    send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
    send(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "no/such/method" }));
    send(JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: 42 } }));
    send(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping" }));
    await waitFor(() => lines.length >= 7, "seven replies");
    const msgs = lines.map((l) => JSON.parse(l));  // every stdout line is JSON-RPC
    const byId = (id) => msgs.find((m) => m.id === id);
    assert.equal(msgs[0].error.code, -32700);
    assert.equal(msgs[1].error.code, -32600);
    assert.equal(byId(6).error.code, -32600);
    assert.equal(byId(1).result.protocolVersion, "2025-06-18");
    assert.equal(byId(7).error.code, -32601);
    assert.equal(byId(8).error.code, -32602);
    assert.deepEqual(byId(9).result, {});
    proc.stdin.end();
    await new Promise((r) => proc.once("exit", r));
  });

  async function post(body, headers = {}) {
    return fetch(gateway.url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
        ...gateway.authHeaders, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  }

  test("http: wrong Origin is 403, unknown session 404, missing session 400, oversized body 413", async () => {
    let r = await post(INIT, { Origin: "http://evil.example" });
    assert.equal(r.status, 403);
    r = await post({ jsonrpc: "2.0", id: 2, method: "ping" }, { "Mcp-Session-Id": "no-such-session" });
    assert.equal(r.status, 404);
    r = await post({ jsonrpc: "2.0", id: 2, method: "ping" });
    assert.equal(r.status, 400);
    r = await post("x".repeat(5 << 20));
    assert.equal(r.status, 413);
    r = await post("{broken", {});
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, -32700);
    // The gateway still serves a proper client.
    r = await post(INIT);
    assert.equal(r.status, 200);
    assert.ok(r.headers.get("mcp-session-id"));
  });

  test("http: authenticated by default; no or a wrong bearer token is 401", async () => {
    let r = await post(INIT, { Authorization: "" });
    assert.equal(r.status, 401);
    r = await post(INIT, { Authorization: `Bearer ${"0".repeat(48)}` });
    assert.equal(r.status, 401);
    r = await post(INIT);
    assert.equal(r.status, 200);
  });

  test("http: without --token the gateway creates a 0600 token file and requires it", async () => {
    const state = tempDir("gwstate-");
    const gw = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, auth: false });
    gw.args = gw.args.filter((a) => a !== "--no_auth");
    gw.env = { XDG_STATE_HOME: state };
    await gw.start();
    try {
      const file = path.join(state, "mcp-gateway", "token");
      await waitFor(() => fs.existsSync(file), "the token file");
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      const token = fs.readFileSync(file, "utf8").trim();
      assert.match(token, /^[0-9a-f]{64}$/);
      // The ready snippet (it may reach stderr a moment after the port accepts connections)
      // says where the token is; no log line carries the token itself (journald keeps them).
      await waitFor(() => gw.log.includes(`Authorization: Bearer $(cat ${file})`), "the ready snippet", 10000);
      assert.ok(!gw.log.includes(token), "the token appears in the gateway's log");
      const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
      let r = await fetch(gw.url, { method: "POST", headers, body: JSON.stringify(INIT) });
      assert.equal(r.status, 401);
      r = await fetch(gw.url, { method: "POST", headers: { ...headers, Authorization: `Bearer ${token}` },
        body: JSON.stringify(INIT) });
      assert.equal(r.status, 200);
    } finally {
      await gw.stop();
    }
  });

  test("the MCP Inspector CLI lists and calls run_python over stdio and HTTP", async () => {
    const cli = path.join(NODE_PEERS, "@modelcontextprotocol/inspector/cli/build/cli.js");
    // The inspector owns --config, so the gateway gets its settings through -e (env).
    const gatewayCmd = [GATEWAY_BIN, "-e", `MCP_GATEWAY_CONFIG=${config}`, "-e", `MCP_GATEWAY_SANDBOXD=${sandboxd.endpoint}`];
    let { stdout } = await run("node", [cli, "--cli", ...gatewayCmd, "--method", "tools/list"], { timeout: 60000 });
    assert.match(stdout, /run_python/);
    ({ stdout } = await run("node", [cli, "--cli", ...gatewayCmd, "--method", "tools/call", "--tool-name", "run_python",
      "--tool-arg", "code=r = await mcp_everything.echo(message='inspected')\nprint(r)"], { timeout: 60000 }));
    assert.match(stdout, /inspected/);
    // Inspector 0.15 (the last for Node 20) cannot send headers: an explicitly
    // unauthenticated gateway, which says so in its log.
    const open = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, auth: false });
    await open.start();
    try {
      ({ stdout } = await run("node", [cli, "--cli", open.url, "--transport", "http", "--method", "tools/list"], { timeout: 60000 }));
      assert.match(stdout, /run_python/);
      assert.match(open.log, /NOT authenticated/);
    } finally {
      await open.stop();
    }
  });
});
