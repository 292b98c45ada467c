// Shared set-up for the gateway's integration tests: the real sandboxd and mcp-gateway
// binaries, real upstream MCP servers (the npm reference servers) and real MCP clients
// (the TypeScript SDK). Paths come from the environment ctest sets:
//   SANDBOXD_BIN, GATEWAY_BIN, NODE_PEERS (deploy/node/node_modules)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before } from "node:test";
import { pathToFileURL } from "node:url";
import {
  Sandboxd, canConnect, freePort, required, spawnTied, stopAll as stopProcesses, tempDir, tiedCommand, track,
  waitFor,
} from "../../common/processes.mjs";

export { Sandboxd, freePort, spawnTied, tempDir, tiedCommand, track, waitFor };

// The SDK spawns a stdio gateway itself: one a failed test leaves open would keep this
// process alive (until ctest's timeout), so stopAll closes them too.
const stdioClients = new Set();
export async function stopAll() {
  for (const client of stdioClients) await client.close().catch(() => {});
  stdioClients.clear();
  await stopProcesses();
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
// The SDK's protocol schemas (notification schemas for setNotificationHandler, ...).
export const sdkTypes = await sdk("types.js");
export { Client, StreamableHTTPClientTransport };

// TLS material for sandboxd TCP ports at `addresses` (IP addresses or DNS names), made by
// tests/common/make_test_certs.sh in a new directory: `certs` (its files), and `token`, a
// --tcp_token_file every sandboxd and gateway of the test shares.
export function tlsMaterial(addresses) {
  const dir = tempDir("tls-");
  const certs = path.join(dir, "certs");
  execFileSync(path.join(import.meta.dirname, "../../common/make_test_certs.sh"), [certs, ...addresses]);
  const token = path.join(dir, "token");
  fs.writeFileSync(token, randomBytes(24).toString("hex"), { mode: 0o600 });
  return { certs, token };
}
// sandboxd's flags for its TCP port at `endpoint` (host:port) over TLS, wanting client
// certificates of the test CA.
export function tlsSandboxdArgs(endpoint, { certs, token }) {
  return [`--listen_tcp=${endpoint}`, `--tcp_token_file=${token}`, `--tls_cert_file=${certs}/server.pem`,
    `--tls_key_file=${certs}/server-key.pem`, `--tls_client_ca_file=${certs}/ca.pem`];
}
// The gateway's flags to reach such ports with `client`'s certificate (other-client: one
// of another CA).
export function tlsGatewayArgs({ certs, token }, client = "client") {
  return [`--sandboxd_token_file=${token}`, `--sandboxd_tls_ca_file=${certs}/ca.pem`,
    `--sandboxd_tls_cert_file=${certs}/${client}.pem`, `--sandboxd_tls_key_file=${certs}/${client}-key.pem`];
}

// tests/common/hosts.sh for one test file (needs root): `hosts(...args)` runs it, `name` is
// this process's hosts (`tag` and the pid in base 36: another copy of the test has its own),
// removed when the process exits, and `exec(i)` the prefix that runs a command on host i;
// `stop({ client, gateway, daemons })` closes and stops them all, then removes the hosts;
// `up(hostCount, n, port)` makes the hosts and starts sandboxd on hosts 1..n over TLS with
// client certificates (tlsMaterial, naming their addresses), each on its own address at
// `port`, until they serve: { tls, endpoints, daemons } (daemons[i] on host i + 1).
// Hosts that copies of the test killed by ctest's timeout left are removed here.
const HOSTS_SH = path.join(import.meta.dirname, "../../common/hosts.sh");
export function testHosts(tag) {
  const hosts = (...args) => execFileSync("bash", [HOSTS_SH, ...args], { encoding: "utf8" }).trim();
  const name = `${tag}${process.pid.toString(36)}`;
  const state = "/run/sandbox-hosts";
  for (const other of fs.existsSync(state) ? fs.readdirSync(state) : []) {
    const pid = new RegExp(`^${tag}[0-9a-z]+$`).test(other) && parseInt(other.slice(tag.length), 36);
    if (pid && pid !== process.pid && !fs.existsSync(`/proc/${pid}`)) hosts("down", other);
  }
  process.on("exit", () => { try { hosts("down", name); } catch { /* reported by the test's after() */ } });
  const stop = async ({ client, gateway, daemons }) => {
    await client?.close();
    await gateway?.stop();
    for (const d of daemons ?? []) await d.stop();
    await stopAll();
    hosts("down", name);
  };
  const exec = (i) => ["bash", HOSTS_SH, "exec", name, String(i)];
  const up = async (hostCount, n, port) => {
    hosts("up", name, String(hostCount));
    const addresses = Array.from({ length: n }, (_, i) => hosts("addr", name, String(i + 1)));
    const tls = tlsMaterial(addresses);
    const endpoints = addresses.map((a) => `${a}:${port}`);
    const daemons = endpoints.map((e, i) => new Sandboxd([...tlsSandboxdArgs(e, tls), "--pool_size=1"], { prefix: exec(i + 1) }));
    await Promise.all(daemons.map((d) => d.start()));
    await Promise.all(daemons.map((d) => d.serving()));
    return { tls, endpoints, daemons };
  };
  return { hosts, name, exec, stop, up };
}
// A `# measured:` line of a test's output (printed, not asserted).
export const measured = (what, ms) => console.log(`# measured: ${what}: ${Math.round(ms)} ms`);
// `promise`'s value and how long it took to settle.
export async function timed(promise) {
  const t0 = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - t0 };
}
// The gateway's deadlines towards sandboxd hosts, for the multi-host tests:
//   run(timeout): a run's when sandboxd stops answering, its timeout_seconds plus 60 s
//     (SandboxClient::Execute);
//   create: a create's (SandboxClient::CreateSession): a placement that took less did not
//     try a create on a host that does not answer;
//   list: resources/list asks every endpoint at once, 5 s at most each (ListOwned);
//   keepalive: a peer gone without a word is noticed by the gateway's keepalive, a ping
//     every 10 s unanswered within 5 s (SandboxClient's channel arguments);
//   slack: what the gateway and the client add to a call beyond its deadline (HTTP, SDK).
export const DEADLINES_MS = {
  run: (timeoutSeconds) => (timeoutSeconds + 60) * 1000, create: 20000, list: 5000, keepalive: 10000 + 5000,
  slack: 5000,
};
// A new sandbox made by `create()` (run_python without a handle) on one of `daemons`: its
// handle and the index of the daemon whose records gained it.
export async function newSandboxOn(daemons, create, log = () => "") {
  const counts = () => daemons.map((d) => d.sessions().length);
  const before = counts();
  const r = await create();
  assert.equal(r.isError, false, text(r) + log());
  const host = counts().findIndex((n, i) => n > before[i]);
  assert.notEqual(host, -1, `no host recorded the new sandbox: ${before} -> ${counts()}`);
  return { handle: r.structuredContent.sandbox, host };
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
  const proc = track(spawnTied("node", [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1" }, stdio: ["ignore", "pipe", "pipe"] }));
  let log = "";
  proc.stdout.on("data", (d) => { log += d; });
  proc.stderr.on("data", (d) => { log += d; });
  await waitFor(() => canConnect({ port, host: "127.0.0.1" }), `server-everything ${mode}`);
  const url = mode === "sse" ? `http://127.0.0.1:${port}/sse` : `http://127.0.0.1:${port}/mcp`;
  return { proc, port, url, log: () => log };
}

// An SDK v2 client (tests/node22's, at $NODE22_PEERS: ctest sets it for the tests on Node
// 22) pinned to protocol 2026-07-28, connected over Streamable HTTP to `url`.
export async function connectV2(url, headers = {}, name = "sdk-v2") {
  const v2 = (p) => import(pathToFileURL(path.join(required("NODE22_PEERS"), "@modelcontextprotocol/client/dist", p)).href);
  const { Client: ClientV2, StreamableHTTPClientTransport: TransportV2 } = await v2("index.mjs");
  const c = new ClientV2({ name, version: "1.0.0" },
    { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await c.connect(new TransportV2(new URL(url), { requestInit: { headers } }));
  return c;
}

// An SDK (v1) client connected over Streamable HTTP to `url`, sending `headers`.
export async function connectClient(url, headers = {}, name = "test-client") {
  const c = new Client({ name, version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return c;
}

// Every gateway the harness starts waits up to a minute for its upstreams before serving
// (it serves as soon as each has tried once): a loaded machine can take longer than the
// default 10 s to start an npm server, and a test expects the tools it configured.
const STARTUP_WAIT = "--startup_wait=60s";

// Until the gateway whose stderr `log()` returns has connected every npm reference server
// (run by node from NODE_PEERS over stdio, not disabled) that its `config` file lists:
// the tests take those as up. The gateway serves once each upstream's first attempt has
// ended (--startup_wait), and a node server it starts niced can outlast that attempt's
// connect timeout when the CPU is short; its next attempt then connects.
const REFERENCE_SERVERS = [EVERYTHING, MEMORY, FILESYSTEM];
async function referenceServersConnected(config, log) {
  const servers = JSON.parse(fs.readFileSync(config, "utf8")).mcpServers ?? {};
  const names = Object.entries(servers)
    .filter(([, s]) => !s.disabled && !s.url && REFERENCE_SERVERS.includes(s.args?.[0]))
    .map(([name]) => name);
  const connected = () => names.every((n) => log().includes(`upstream ${n}: connected`));
  await waitFor(connected, `the gateway to connect ${names.join(", ")}`, 180000).catch((e) => {
    throw new Error(`${e.message}; its log:\n${log()}`);
  });
}

export class GatewayHttp {
  // HTTP is authenticated: each gateway gets a random token ($MCP_GATEWAY_TOKEN: a command
  // line is readable by every local user), and client() sends it. `tokens: n` gives it n
  // random tokens instead, one credential each (`tokens[i]`, `as(i)`); client() sends the
  // first. `auth: false` starts it with --no_auth (for clients that cannot send headers).
  // `prefix`: a command that runs it and keeps its pid (`hosts.sh exec NAME I`), listening
  // on `host` (that host's address). `bin`: another build than GATEWAY_BIN's.
  constructor({ config, sandboxd, extraArgs = [], auth = true, tokens = 1, prefix = [], host = "127.0.0.1",
    bin = GATEWAY_BIN }) {
    this.bin = bin;
    this.tokens = auth ? Array.from({ length: tokens }, () => randomBytes(24).toString("hex")) : [];
    this.token = auth ? this.tokens[0] : "";
    this.config = config;
    this.args = [`--transport=http`, `--config=${config}`, `--sandboxd=${sandboxd}`, STARTUP_WAIT,
      ...(auth ? [] : ["--no_auth"]), ...extraArgs];
    this.log = "";
    this.env = {};  // added to the gateway's environment
    this.prefix = prefix;
    this.host = host;
  }
  // Headers that authenticate a raw request (with the i-th token).
  get authHeaders() { return this.token ? { Authorization: `Bearer ${this.token}` } : {}; }
  as(i) { return { Authorization: `Bearer ${this.tokens[i]}` }; }
  // On `port` when given (a restarted replica keeps its address), else on the port the
  // kernel gives its listener: its own log says which. A port picked beforehand can be taken
  // by another test's server while this gateway connects its upstreams, and a connect test
  // would then find that server.
  async start(port = undefined) {
    const command = [...this.prefix, this.bin, ...this.args, `--listen=${this.host}:${port ?? 0}`];
    const from = this.log.length;
    const proc = track(spawnTied(command[0], command.slice(1),
      { stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, ...(this.token ? { MCP_GATEWAY_TOKEN: this.tokens.join(",") } : {}), ...this.env } }));
    this.proc = proc;
    proc.stderr.on("data", (d) => { this.log += d; });
    this.port = await waitFor(() => {
      const serving = /http: MCP endpoint http:\/\/.*:(\d+)\//.exec(this.log.slice(from));
      if (serving) return Number(serving[1]);
      if (proc.exitCode !== null || proc.signalCode !== null) {
        throw new Error(`mcp-gateway exited before serving; its log:\n${this.log.slice(from)}`);
      }
      return 0;
    }, "mcp-gateway http", 90000);
    this.url = `http://${this.host}:${this.port}/mcp`;
    await referenceServersConnected(this.config, () => this.log);
  }
  async client(name = "test-client", headers = {}) {
    return connectClient(this.url, { ...this.authHeaders, ...headers }, name);
  }
  // SIGKILL: no clean-up, what a crashed replica leaves.
  async stop(signal = "SIGTERM") {
    // Gone already: exited, or killed by a signal (exitCode stays null then).
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.kill(signal);
    await exited;
  }
}

// Debian's HAProxy ($HAPROXY) with the shipped deploy/haproxy/haproxy.cfg in front of two
// started gateway replicas (GatewayHttp; HAProxy's servers gateway1 and gateway2), on
// 127.0.0.1, with a stats socket to look at it through. `url`: where clients go;
// `ask(command)`: a stats socket command's answer; `homeOf(client)`: the replica a 2025
// session (SDK v1 client) is stuck on; `seenUp(name)`: until the health check says `name`
// is up; `column(field)`: a field of each replica's `show stat` row; `answered()`: each
// replica's count of 2xx answers so far.
export const HAPROXY_CONFIG = path.join(import.meta.dirname, "../../../deploy/haproxy/haproxy.cfg");
export async function startHaproxy(replicas) {
  const port = await freePort();
  const extra = path.join(tempDir("haproxy-"), "stats.cfg");
  const stats = path.join(path.dirname(extra), "stats.sock");
  fs.writeFileSync(extra, `global\n    stats socket ${stats} mode 600 level admin\n`);
  const proc = track(spawnTied(required("HAPROXY"), ["-db", "-f", HAPROXY_CONFIG, "-f", extra], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, MCP_LISTEN: `127.0.0.1:${port}`,
      GATEWAY_1: `${replicas[0].host}:${replicas[0].port}`, GATEWAY_2: `${replicas[1].host}:${replicas[1].port}` },
  }));
  const haproxy = { proc, log: "", url: `http://127.0.0.1:${port}/mcp` };  // log: for failure messages
  proc.stdout.on("data", (d) => { haproxy.log += d; });
  proc.stderr.on("data", (d) => { haproxy.log += d; });
  haproxy.ask = (command) => new Promise((resolve, reject) => {
    let out = "";
    const socket = net.connect(stats, () => socket.write(`${command}\n`));
    socket.on("data", (d) => { out += d; });
    socket.on("error", reject);
    socket.on("end", () => resolve(out));
  });
  // `field` of every server's row of `show stat`: { gateway1: ..., gateway2: ... }.
  const column = haproxy.column = async (field) => {
    const csv = (await haproxy.ask("show stat")).split("\n");
    const header = csv[0].replace(/^# /, "").split(",");
    const rows = csv.map((l) => l.split(",")).filter((r) => r[0] === "gateways" && /^gateway\d+$/.test(r[1]));
    return Object.fromEntries(rows.map((r) => [r[1], r[header.indexOf(field)]]));
  };
  haproxy.answered = async () =>
    Object.fromEntries(Object.entries(await column("hrsp_2xx")).map(([k, v]) => [k, Number(v)]));
  haproxy.seenUp = (name) =>
    waitFor(async () => (await column("status"))[name] === "UP", `HAProxy to see ${name} up`, 15000);
  // The stick table's entry of the session, not HAProxy's log: a stream's line comes when
  // the stream ends, after lines of later requests.
  haproxy.homeOf = async (client) => {
    const sid = client.transport.sessionId;
    const line = (await haproxy.ask("show table gateways")).split("\n").find((l) => l.includes(`key=${sid} `));
    const id = /server_id=(\d+)/.exec(line ?? "");
    if (!id) throw new Error(`no stick table entry for ${sid}`);
    return `gateway${id[1]}`;
  };
  await waitFor(() => canConnect({ port, host: "127.0.0.1" }), "haproxy")
    .catch((e) => { throw new Error(`${e.message}; it said:\n${haproxy.log}`); });
  await Promise.all(["gateway1", "gateway2"].map(haproxy.seenUp));
  return haproxy;
}

// What a 2025 session's next call gets once the replica it lives on is gone: the error,
// which must say the other replica does not know the session (404). A keep-alive
// connection HAProxy had open to the killed replica may fail a first request without an
// answer (HAProxy retries nothing a replica may have received): then the next is asked.
export async function refusedSession(client, call) {
  let refused;
  for (let attempt = 0; attempt < 3; ++attempt) {
    refused = await call(client).then((r) => assert.fail(`ran: ${text(r)}`), (e) => e);
    if (/404|session/i.test(String(refused?.message))) break;
  }
  assert.match(String(refused?.message), /404|session/i, "the other replica does not know the session");
  return refused;
}

// The set-up several suites share: one sandboxd (its flags `sandboxdArgs`) started in
// before(), and HTTP gateways on it that startGateway(extraArgs, options) starts as the
// tests need them, all stopped in after(). Called at a file's top level or in a describe(),
// it registers the hooks there. `options` and `gatewayOptions` (every gateway's) are
// GatewayHttp's, and `servers` the gateway's mcpServers (none by default).
export function gatewaySuite({ sandboxdArgs = [], ...gatewayOptions } = {}) {
  const suite = { sandboxd: undefined, gateways: [] };
  before(async () => {
    suite.sandboxd = new Sandboxd(sandboxdArgs);
    await suite.sandboxd.start();
  });
  after(async () => {
    for (const g of suite.gateways) await g.stop();
    await suite.sandboxd?.stop();
    await stopAll();
  });
  suite.startGateway = async (extraArgs = [], options = {}) => {
    const { servers = {}, ...rest } = { ...gatewayOptions, ...options };
    const g = new GatewayHttp({ config: writeConfig(servers), sandboxd: suite.sandboxd.endpoint, extraArgs, ...rest });
    suite.gateways.push(g);
    await g.start();
    return g;
  };
  return suite;
}

// The tool names a new SDK client of `gateway` lists (with the i-th token): a witness that
// the gateway still serves a client that behaves while an attack goes on.
export async function listToolNames(gateway, token = 0) {
  const client = await gateway.client("witness", gateway.tokens.length ? gateway.as(token) : {});
  try {
    return (await client.listTools()).tools.map((t) => t.name);
  } finally {
    await client.close();
  }
}

// One field of /proc/<pid>/status as a number: the sizes given in kB (VmRSS now, VmHWM
// the peak, ...) in MiB, a count (Threads, ...) as it stands. procStatus(pid, "VmHWM") is
// the process's peak memory in MiB.
export function procStatus(pid, field) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const m = new RegExp(`^${field}:\\s+(\\d+)( kB)?$`, "m").exec(status);
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return m[2] ? Number(m[1]) / 1024 : Number(m[1]);
}

// How many threads of process `pid` are named `name` (codemode::StartThread's names, cut
// to 15 bytes by the kernel). Counting by name leaves out the threads a library starts
// and stops by itself (gRPC's pools grow under load).
export function threadsNamed(pid, name) {
  let n = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      if (fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim() === name) n++;
    } catch { /* the thread ended meanwhile */ }
  }
  return n;
}

// An SDK client talking to a stdio gateway it spawns itself.
export async function stdioGateway({ config, sandboxd, extraArgs = [], bin = GATEWAY_BIN }) {
  const transport = new StdioClientTransport({
    ...tiedCommand(bin,
      ["--transport=stdio", `--config=${config}`, `--sandboxd=${sandboxd}`, STARTUP_WAIT, ...extraArgs]),
    stderr: "pipe",
  });
  let log = "";
  const client = new Client({ name: "stdio-test", version: "1.0.0" });
  await client.connect(transport);
  stdioClients.add(client);
  transport.stderr?.on("data", (d) => { log += d; });
  await referenceServersConnected(config, () => log);
  return { client, transport, log: () => log };
}

// A stdio gateway driven line by line, for input no SDK would send: `send(text)` writes
// one line, `lines` collects stdout's lines (raw strings) as they arrive.
export function rawStdioGateway({ config, sandboxd }) {
  const proc = track(spawnTied(GATEWAY_BIN, ["--transport=stdio", `--config=${config}`, `--sandboxd=${sandboxd}`],
    { stdio: ["pipe", "pipe", "ignore"] }));
  const lines = [];
  let buf = "";
  proc.stdout.on("data", (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) { lines.push(buf.slice(0, i)); buf = buf.slice(i + 1); }
  });
  const send = (text) => proc.stdin.write(text + "\n");
  return { proc, lines, send };
}

// run_python through an SDK client; returns the CallToolResult.
export async function runPython(client, code, extra = {}, options = {}) {
  const request = { name: "run_python", arguments: { code, ...extra } };
  const requestOptions = { timeout: 120000, ...options };
  // The SDK v2 client takes the request options second; v1 third, after a result schema.
  if (typeof client.getProtocolEra === "function") return client.callTool(request, requestOptions);
  return client.callTool(request, undefined, requestOptions);
}

// A subscriptions/listen stream of protocol 2026-07-28, opened with fetch (the SDK v2
// client has no call for it): `next()` resolves to its next message (rejecting once the
// stream has ended), `close()` ends it.
export async function openListen(url, headers, id, notifications) {
  const abort = new AbortController();
  const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {} };
  const res = await fetch(url, {
    method: "POST", signal: abort.signal,
    headers: { ...headers, "Content-Type": "application/json", Accept: "text/event-stream",
      "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen" },
    body: JSON.stringify({ jsonrpc: "2.0", id, method: "subscriptions/listen", params: { _meta: meta, notifications } }),
  });
  const reader = res.body.getReader();
  const seen = [];
  let buffered = "";
  const next = async () => {
    while (true) {
      const event = buffered.indexOf("\n\n");
      if (event >= 0) {
        const data = buffered.slice(0, event).split("\n").find((l) => l.startsWith("data: "));
        buffered = buffered.slice(event + 2);
        if (data) {
          seen.push(JSON.parse(data.slice(6)));
          return seen.at(-1);
        }
        continue;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error(`the listen stream ended after ${JSON.stringify(seen)}`);
      buffered += new TextDecoder().decode(value);
    }
  };
  return { res, next, seen, close: () => abort.abort() };
}

export function text(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}
