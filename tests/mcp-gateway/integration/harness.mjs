// Shared set-up for the gateway's integration tests: the real sandboxd and mcp-gateway
// binaries, real upstream MCP servers (the npm reference servers) and real MCP clients
// (the TypeScript SDK). Paths come from the environment ctest sets:
//   SANDBOXD_BIN, GATEWAY_BIN, NODE_PEERS (deploy/node/node_modules)
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the tests through ctest (scripts/test.sh)`);
  return v;
}
export const SANDBOXD_BIN = required("SANDBOXD_BIN");
export const GATEWAY_BIN = required("GATEWAY_BIN");
export const NODE_PEERS = required("NODE_PEERS");
export const EVERYTHING = path.join(NODE_PEERS, "@modelcontextprotocol/server-everything/dist/index.js");
export const MEMORY = path.join(NODE_PEERS, "@modelcontextprotocol/server-memory/dist/index.js");
export const FILESYSTEM = path.join(NODE_PEERS, "@modelcontextprotocol/server-filesystem/dist/index.js");

// The TypeScript SDK from deploy/node (these tests live outside its node_modules tree).
const sdk = (p) => import(pathToFileURL(path.join(NODE_PEERS, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
export { Client };

const children = new Set();
export function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}
const daemons = new Set();
export async function stopAll() {
  for (const c of [...children]) c.kill("SIGTERM");
  for (let i = 0; i < 50 && children.size; i++) await sleep(100);
  for (const c of [...children]) c.kill("SIGKILL");
  // sandboxd keeps session containers across its own restarts by design; a test run
  // must not leave any behind.
  for (const d of daemons) d.removeContainers();
}
process.on("exit", () => { for (const c of children) c.kill("SIGKILL"); });

export function tempDir(prefix = "gwtest-") {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function waitFor(pred, what, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// A free loopback port (bound and released).
export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}

function canConnect(socketPath) {
  return new Promise((resolve) => {
    const c = net.connect(socketPath, () => { c.end(); resolve(true); });
    c.on("error", () => resolve(false));
  });
}

export class Sandboxd {
  constructor(extraArgs = []) {
    this.dir = tempDir("sbxd-");
    this.socket = path.join(this.dir, "sandboxd.sock");
    this.stateDir = path.join(this.dir, "state");
    this.extraArgs = extraArgs;
    this.log = "";
    daemons.add(this);
  }
  removeContainers() {
    const ids = execFileSync("podman", ["ps", "-aq", "--filter", `label=io.sandboxd.state-dir=${this.stateDir}`])
      .toString().split("\n").filter(Boolean);
    if (ids.length) execFileSync("podman", ["rm", "-f", "-t", "0", ...ids], { stdio: "ignore" });
  }
  get endpoint() { return `unix:${this.socket}`; }
  async start() {
    this.proc = track(spawn(SANDBOXD_BIN, [`--socket=${this.socket}`, `--state_dir=${this.stateDir}`,
      "--pool_size=2", ...this.extraArgs], { stdio: ["ignore", "ignore", "pipe"] }));
    this.proc.stderr.on("data", (d) => { this.log += d; });
    await waitFor(() => canConnect(this.socket), `sandboxd on ${this.socket}`, 30000);
  }
  // Sessions sandboxd knows about, from its records: [{id, container}].
  sessions() {
    const dir = path.join(this.stateDir, "sessions");
    if (!fs.existsSync(dir)) return [];
    return fs.readdirSync(dir).filter((f) => f.endsWith(".json")).map((f) => {
      const rec = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
      return { id: f.slice(0, -5), container: rec.container_name };
    });
  }
  async stop(signal = "SIGTERM") {
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.kill(signal);
    await exited;
  }
}

// Writes an mcpServers config file and returns its path.
export function writeConfig(servers, dir = tempDir("gwcfg-")) {
  const file = path.join(dir, "mcp.json");
  fs.writeFileSync(file, JSON.stringify({ mcpServers: servers }, null, 2));
  return file;
}

export function everythingStdio(extraEnv = {}) {
  return { command: "node", args: [EVERYTHING, "stdio"], env: extraEnv };
}

// server-everything over streamableHttp or sse on a loopback port of ours.
export async function startEverythingHttp(mode) {
  const port = await freePort();
  const proc = track(spawn("node", [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1" }, stdio: ["ignore", "pipe", "pipe"] }));
  let log = "";
  proc.stdout.on("data", (d) => { log += d; });
  proc.stderr.on("data", (d) => { log += d; });
  await waitFor(() => canConnect({ port, host: "127.0.0.1" }).catch(() => false), `server-everything ${mode}`);
  const url = mode === "sse" ? `http://127.0.0.1:${port}/sse` : `http://127.0.0.1:${port}/mcp`;
  return { proc, port, url, log: () => log };
}

// canConnect for TCP too.
function canConnectTcp(opts) {
  return new Promise((resolve) => {
    const c = net.connect(opts, () => { c.end(); resolve(true); });
    c.on("error", () => resolve(false));
  });
}
export { canConnectTcp };

export class GatewayHttp {
  constructor({ config, sandboxd, extraArgs = [] }) {
    this.args = [`--transport=http`, `--config=${config}`, `--sandboxd=${sandboxd}`, ...extraArgs];
    this.log = "";
  }
  async start() {
    this.port = await freePort();
    this.proc = track(spawn(GATEWAY_BIN, [...this.args, `--listen=127.0.0.1:${this.port}`],
      { stdio: ["ignore", "ignore", "pipe"] }));
    this.proc.stderr.on("data", (d) => { this.log += d; });
    await waitFor(() => canConnectTcp({ port: this.port, host: "127.0.0.1" }), "mcp-gateway http", 30000);
    this.url = `http://127.0.0.1:${this.port}/mcp`;
  }
  async client(name = "test-client", headers = {}) {
    const c = new Client({ name, version: "1.0.0" });
    await c.connect(new StreamableHTTPClientTransport(new URL(this.url), { requestInit: { headers } }));
    return c;
  }
  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.kill("SIGTERM");
    await exited;
  }
}

// An SDK client talking to a stdio gateway it spawns itself.
export async function stdioGateway({ config, sandboxd, extraArgs = [] }) {
  const transport = new StdioClientTransport({
    command: GATEWAY_BIN,
    args: ["--transport=stdio", `--config=${config}`, `--sandboxd=${sandboxd}`, ...extraArgs],
    stderr: "pipe",
  });
  let log = "";
  const client = new Client({ name: "stdio-test", version: "1.0.0" });
  await client.connect(transport);
  transport.stderr?.on("data", (d) => { log += d; });
  return { client, transport, log: () => log };
}

// run_python through an SDK client; returns the CallToolResult.
export async function runPython(client, code, extra = {}, options = {}) {
  return client.callTool({ name: "run_python", arguments: { code, ...extra } }, undefined,
    { timeout: 120000, ...options });
}

export function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}
