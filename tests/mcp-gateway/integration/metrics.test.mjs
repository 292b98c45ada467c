// Metrics as an operator sees them: Debian's Prometheus server, started with the shipped
// deploy/prometheus files (only the targets' ports and the intervals changed), scrapes the
// real sandboxd and gateway while a known workload runs through the TypeScript SDK client;
// the counters and histogram counts it stores must equal the workload, a killed upstream
// must show as down, and both /metrics bodies must pass `promtool check metrics`.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import {
  GatewayHttp, Sandboxd, everythingStdio, freePort, runPython, spawnTied, startEverythingHttp,
  stopAll, tempDir, text, track, waitFor, writeConfig,
} from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const which = (tool) => {
  const found = spawnSync("sh", ["-c", `command -v ${tool}`]).stdout.toString().trim();
  assert.ok(found, `${tool} is not installed: scripts/setup.sh installs Debian's prometheus package`);
  return found;
};

let sandboxd, gateway, doomed, prometheus, promUrl;
const ports = {};

// The shipped configuration with the test's ports, scraped and evaluated every second.
function prometheusConfig(dir) {
  const shipped = fs.readFileSync(path.join(ROOT, "deploy/prometheus/prometheus.yml"), "utf8");
  assert.match(shipped, /127\.0\.0\.1:9464/);
  assert.match(shipped, /127\.0\.0\.1:9465/);
  const config = shipped.replace('"127.0.0.1:9464"', `"127.0.0.1:${ports.sandboxd}"`)
    .replace('"127.0.0.1:9465"', `"127.0.0.1:${ports.gateway}"`)
    .replace(/scrape_interval: .*/, "scrape_interval: 1s")
    .replace(/evaluation_interval: .*/, "evaluation_interval: 1s");
  fs.copyFileSync(path.join(ROOT, "deploy/prometheus/rules.yml"), path.join(dir, "rules.yml"));
  fs.writeFileSync(path.join(dir, "prometheus.yml"), config);
  return path.join(dir, "prometheus.yml");
}

async function query(q) {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(q)}`);
  const body = await res.json();
  assert.equal(body.status, "success", JSON.stringify(body));
  return body.data.result;
}
// The one value `q` returns (a sum), or undefined when it returns nothing.
async function value(q) {
  const r = await query(q);
  return r.length ? Number(r[0].value[1]) : undefined;
}
// Waits until Prometheus has scraped both daemons after `since` (a Date).
async function scrapedAfter(since) {
  let seen = [];
  await waitFor(async () => {
    const res = await fetch(`${promUrl}/api/v1/targets`);
    const { data } = await res.json();
    seen = data.activeTargets.filter((t) => t.scrapePool.startsWith("codemode-"));
    return seen.length === 2 &&
      seen.every((t) => t.health === "up" && new Date(t.lastScrape) > since);
  }, "a scrape of both daemons", 20000).catch((e) => {
    const daemon = (name, d) => `${name} exit ${d?.proc?.exitCode} signal ${d?.proc?.signalCode}: ${(d?.log ?? "").slice(-2000)}`;
    throw new Error(`${e.message}: ${JSON.stringify(seen.map((t) => [t.scrapeUrl, t.health, t.lastError, t.lastScrape]))}` +
      `\nsandboxd :${ports.sandboxd}, gateway :${ports.gateway}\n${daemon("sandboxd", sandboxd)}\n${daemon("gateway", gateway)}`);
  });
}

before(async () => {
  const promtool = which("promtool");
  const prometheusBin = which("prometheus");
  ports.sandboxd = await freePort();
  ports.gateway = await freePort();
  ports.prometheus = await freePort();
  sandboxd = new Sandboxd([`--metrics_listen=127.0.0.1:${ports.sandboxd}`]);
  await sandboxd.start();
  doomed = await startEverythingHttp("streamableHttp");
  gateway = new GatewayHttp({
    config: writeConfig({ everything: everythingStdio(), doomed: { type: "http", url: doomed.url } }),
    sandboxd: sandboxd.endpoint,
    extraArgs: [`--metrics_listen=127.0.0.1:${ports.gateway}`],
  });
  await gateway.start();
  const dir = tempDir("prom-");
  prometheus = track(spawnTied(prometheusBin, [
    `--config.file=${prometheusConfig(dir)}`, `--storage.tsdb.path=${path.join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${ports.prometheus}`, "--log.level=warn"],
  { stdio: ["ignore", "ignore", "pipe"] }));
  let promLog = "";
  prometheus.stderr.on("data", (d) => { promLog += d; });
  promUrl = `http://127.0.0.1:${ports.prometheus}`;
  await waitFor(async () => (await fetch(`${promUrl}/-/ready`).catch(() => ({ ok: false }))).ok,
    `prometheus ready (${promLog})`, 30000);
  // Before the workload: rates need a sample from before it.
  await scrapedAfter(new Date(0));
  for (const port of [ports.sandboxd, ports.gateway]) {
    const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const check = spawnSync(promtool, ["check", "metrics"], { input: body });
    assert.equal(check.status, 0, `promtool check metrics on :${port}: ${check.stdout}${check.stderr}`);
  }
});

after(async () => {
  await gateway?.stop();
  await sandboxd?.stop();
  await stopAll();
});

test("Prometheus stores exactly the workload: runs, tool calls, failures, executions", async () => {
  const client = await gateway.client();
  const N = 5, K = 2;
  for (let i = 0; i < N; i++) {
    const r = await runPython(client, `a = await mcp_everything.echo(message="m${i}")
b = await mcp_everything.echo(message="n${i}")
print(a, b)`);
    assert.ok(!r.isError, text(r));
  }
  for (let i = 0; i < K; i++) {
    const r = await runPython(client, `raise ValueError("k${i}")`);
    assert.equal(r.isError, true);
  }
  // A tool error (isError from the upstream) and a timed-out run.
  const te = await runPython(client, `try:
    await mcp_everything.gzip_file_as_resource(name="x", data="file:///etc/passwd")
except ToolError as e:
    print("tool error")`);
  assert.match(text(te), /tool error/);
  const slow = await runPython(client, "while True: pass", { timeout_seconds: 1 });
  assert.equal(slow.isError, true);
  await client.close();

  await scrapedAfter(new Date());
  const ok = await value('codemode_gateway_runs_total{outcome="ok",tool="run_python"}');
  assert.equal(ok, N + 1, "N runs and the one that caught its ToolError");
  assert.equal(await value('codemode_gateway_runs_total{outcome="error",tool="run_python"}'), K);
  assert.equal(await value('codemode_gateway_runs_total{outcome="timeout",tool="run_python"}'), 1);
  assert.equal(await value("codemode_gateway_run_duration_seconds_count"), N + K + 2);
  assert.equal(await value("codemode_gateway_tool_calls_per_run_sum"), 2 * N + 1);
  assert.equal(await value('sum(codemode_gateway_tool_calls_total{server="everything",tool="echo",outcome="ok"})'), 2 * N);
  assert.equal(await value('codemode_gateway_tool_calls_total{server="everything",tool="gzip-file-as-resource",outcome="tool_error"}'), 1);
  assert.equal(await value('codemode_gateway_tool_call_duration_seconds_count{server="everything"}'), 2 * N + 1);
  assert.equal(await value('codemode_gateway_upstream_tools{server="everything"}') > 5, true);
  assert.equal(await value('codemode_build_info{component="mcp-gateway"}'), 1);
  // sandboxd ran the same executions.
  assert.equal(await value('codemode_sandboxd_executions_total{status="ok"}'), N + 1);
  assert.equal(await value('codemode_sandboxd_executions_total{status="error"}'), K);
  assert.equal(await value('codemode_sandboxd_executions_total{status="timeout"}'), 1);
  assert.equal(await value("sum(codemode_sandboxd_tool_calls_total)"), 2 * N + 1);
  assert.equal(await value("codemode_sandboxd_sessions_active"), 1, "one MCP session, one sandbox");
  assert.equal(await value('codemode_build_info{component="sandboxd"}'), 1);
  // The rules loaded and evaluate.
  await waitFor(async () => (await value('codemode:gateway_runs:rate5m{outcome="ok"}')) > 0,
    "the recording rule codemode:gateway_runs:rate5m", 10000);
});

test("A killed upstream goes to upstream_up 0 and its alert becomes pending", async () => {
  assert.equal(await value('codemode_gateway_upstream_up{server="doomed"}'), 1);
  doomed.proc.kill("SIGKILL");
  await waitFor(async () => (await value('codemode_gateway_upstream_up{server="doomed"}')) === 0,
    "upstream_up{server=doomed} == 0 in Prometheus", 30000);
  assert.equal(await value('codemode_gateway_upstream_up{server="everything"}'), 1);
  await waitFor(async () => {
    const alerts = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()).data.alerts;
    return alerts.some((a) => a.labels.alertname === "CodemodeUpstreamDown" && a.labels.server === "doomed");
  }, "CodemodeUpstreamDown for doomed", 15000);
});
