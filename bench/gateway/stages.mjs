// Where a run_python `print(1)` spends its time (issue 47), over stdio and over Streamable
// HTTP: a gateway with --stage_times logs, per response, the microseconds between the
// stages it marks (services/mcp-gateway/metrics/stage_times.h); the client times the whole
// call. Each table is for the runs around the p50 of the client's time (p40-p60, each
// stage's mean over them), so its rows add up to that run's time; the client's own part
// (the SDK both ways, the pipes or HTTP) is the client's time less the gateway's, from the
// request read (the line; the HTTP body) to the response written (stdout) or handed to the
// connection (HTTP, whose event-loop thread writes it).
//
// With GATEWAY_BIN_BEFORE set (another build, e.g. main's), its gateways and this build's,
// both without --stage_times, are timed in interleaved rounds of 50, over stdio and over
// Streamable HTTP: the A/B rows. With SANDBOXD_BIN_BEFORE set too, the "before" gateways
// use a sandboxd of that build (same flags), so that a change on either side is measured.
import { setTimeout as sleep } from "node:timers/promises";

import { ms, pct } from "./stats.mjs";

// The stages in the order the gateway logs them, and what each row of the table calls the
// time up to it (from the stage before).
const STAGES = [
  ["parsed", "gateway: parse the JSON-RPC line"],
  ["run_start", "gateway: MCP dispatch (tools/call, a worker thread) to RunService::Run"],
  ["catalog", "gateway: arguments, approval view, catalog built and keyed"],
  ["execute_start", "gateway: binding opened and locked, handle sealed"],
  ["start_written", "gRPC: Execute stream opened, start written"],
  ["finished_read", "sandboxd + runner: execute print(1), Finished back"],
  ["stream_ended", "gRPC: the stream's trailers"],
  ["execute_end", "gRPC: stream finished, its threads joined"],
  ["list_start", "gateway: stdout spill check"],
  ["list_end", "walk of out/: ListFiles (gRPC, sandboxd, runner), diffed; none if out/'s fingerprint is unchanged"],
  ["run_end", "gateway: run logged, counted, audited"],
  ["result", "gateway: CallToolResult built"],
  ["encoded", "gateway: response wrapped and serialized"],
  ["written", "gateway: written to stdout / handed to the HTTP connection"],
];

// The stage_times lines of `log` from character `from` on, each as {stage: µs}.
function stageLines(log, from) {
  return log.slice(from).split("\n").filter((l) => l.includes("stage_times "))
    .map((l) => Object.fromEntries(l.slice(l.indexOf("stage_times ") + 12).trim().split(" ")
      .map((kv) => kv.split("=")).map(([k, v]) => [k, Number(v)])));
}

async function timeRun(client, runPython) {
  const t0 = performance.now();
  const r = await runPython(client, "print(1)");
  const t = performance.now() - t0;
  if (r.isError) throw new Error(`run failed: ${JSON.stringify(r.structuredContent)}`);
  return t;
}

async function breakdown({ client: mcp, log, over, n, row, runPython }) {
  for (let i = 0; i < 50; i++) await timeRun(mcp, runPython);
  await sleep(200);
  const from = log().length;
  const client = [];
  for (let i = 0; i < n; i++) client.push(await timeRun(mcp, runPython));
  await sleep(200);
  const lines = stageLines(log(), from);
  if (lines.length !== n) throw new Error(`${lines.length} stage_times lines for ${n} runs`);
  table({ client, lines, over, row });
}

// The rows for runs that took `client` ms each as the client timed them, `lines` their
// stage_times in the same order.
function table({ client, lines, over, row }) {
  const n = client.length;
  const order = client.map((t, i) => [t, i]).sort((a, b) => a[0] - b[0]);
  const mid = order.slice(Math.floor(n * 0.4), Math.ceil(n * 0.6)).map(([, i]) => i);
  const mean = (f) => mid.reduce((s, i) => s + f(i), 0) / mid.length;
  const us = (v) => `${(v / 1000).toFixed(3)} ms`;
  row(`run_python \`print(1)\` over ${over} with --stage_times, client p50 (n=${n}); runs p40-p60, mean by stage:`,
    ms(pct(client, 50)));
  const gatewayUs = mean((i) => lines[i].total);
  row(`  client: SDK request out, ${over} both ways, SDK response in (client time less the gateway's)`,
    us(mean((i) => client[i] * 1000) - gatewayUs));
  for (const [key, what] of STAGES) row(`  ${what}`, us(mean((i) => lines[i][key] ?? 0)));
  row("  gateway total, request read to response written", us(gatewayUs));
  row("  of which Execute (stream opened to joined) / ListFiles",
    `${us(mean((i) => ["start_written", "finished_read", "stream_ended", "execute_end"]
      .reduce((s, k) => s + (lines[i][k] ?? 0), 0)))} / ${us(mean((i) => lines[i].list_end ?? 0))}`);
}

// The program of a sandbox that gathers `calls` tool calls at once (the flood of issue 47's
// fairness row); it prints how many were answered and how many refused.
export function floodProgram(calls) {
  return [
    "import asyncio",
    `rs = await asyncio.gather(*[mcp_everything.echo(message='x') for _ in range(${calls})], return_exceptions=True)`,
    "print(sum(1 for r in rs if not isinstance(r, Exception)), sum(1 for r in rs if isinstance(r, Exception)))",
  ].join("\n");
}

// Another client's run_python by stage, idle and during one sandbox's flood of `calls` tool
// calls (issue 47's fairness): where the time the flood adds to its runs goes. A gateway of
// its own with --stage_times; each table is for the runs around the client's p50, as above.
export async function stagesDuringFlood({ GatewayHttp, sandboxd, config, calls, row, runPython }) {
  const gateway = new GatewayHttp({ config, sandboxd: sandboxd.endpoint,
    extraArgs: ["--stage_times", `--max_tool_calls_per_run=${calls}`] });
  await gateway.start();
  const log = () => gateway.log;
  const flooder = await gateway.client("flooder");
  const witness = await gateway.client("witness");
  try {
    await runPython(flooder, "pass");
    await breakdown({ client: witness, log, over: "Streamable HTTP, idle", n: 500, row, runPython });
    const from = log().length;
    let flooding = true;
    const flood = runPython(flooder, floodProgram(calls), { timeout_seconds: 300 }, { timeout: 400000 })
      .finally(() => { flooding = false; });
    const client = [];
    while (flooding) client.push(await timeRun(witness, runPython));
    const result = await flood;
    if (result.isError) throw new Error(`the flood failed: ${JSON.stringify(result.structuredContent)}`);
    await sleep(200);
    // The witness's, in the order it ran them; not the flood's own run (its Execute took
    // the whole flood).
    const lines = stageLines(log(), from).filter((l) => (l.finished_read ?? 0) < 1e6);
    if (lines.length !== client.length) throw new Error(`${lines.length} stage_times lines for ${client.length} runs`);
    table({ client, lines, over: `Streamable HTTP, during a flood of ${calls} tool calls`, row });
  } finally {
    await flooder.close();
    await witness.close();
    await gateway.stop();
  }
}

// Interleaved rounds: each client's p50 of print(1) against a gateway without --stage_times.
async function versus({ clients, over, n, row, runPython }) {
  const lat = clients.map(() => []);
  for (const c of clients) for (let i = 0; i < 50; i++) await timeRun(c, runPython);
  for (let round = 0; round < n / 50; round++) {
    for (const [k, c] of clients.entries()) {
      for (let i = 0; i < 50; i++) lat[k].push(await timeRun(c, runPython));
    }
  }
  const [before, after] = lat.map((l) => pct(l, 50));
  const builds = process.env.SANDBOXD_BIN_BEFORE ? "GATEWAY_BIN_BEFORE, SANDBOXD_BIN_BEFORE" : "GATEWAY_BIN_BEFORE";
  row(`run_python \`print(1)\` over ${over}, interleaved rounds of 50 (n=${n} each): before (${builds}) p50 / p99`,
    `${ms(before)} / ${ms(pct(lat[0], 99))}`);
  row("  this build, p50 / p99", `${ms(after)} / ${ms(pct(lat[1], 99))}`);
  row("  this build less before, p50", ms(after - before));
}

export async function stageBreakdown({ stdioGateway, GatewayHttp, Sandboxd, sandboxd, sandboxdArgs, config, n, row,
  runPython }) {
  const timed = await stdioGateway({ config, sandboxd: sandboxd.endpoint, extraArgs: ["--stage_times"] });
  try {
    await breakdown({ client: timed.client, log: timed.log, over: "stdio", n, row, runPython });
  } finally {
    await timed.client.close();
  }
  const http = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, extraArgs: ["--stage_times"] });
  await http.start();
  try {
    const client = await http.client();
    await breakdown({ client, log: () => http.log, over: "Streamable HTTP", n, row, runPython });
    await client.close();
  } finally {
    await http.stop();
  }
  if (!process.env.GATEWAY_BIN_BEFORE) return;
  let sandboxdBefore = sandboxd;
  if (process.env.SANDBOXD_BIN_BEFORE) {
    sandboxdBefore = new Sandboxd(sandboxdArgs, { bin: process.env.SANDBOXD_BIN_BEFORE });
    await sandboxdBefore.start();
  }
  const bins = [[process.env.GATEWAY_BIN_BEFORE, sandboxdBefore], [undefined, sandboxd]];
  const stdio = [];
  for (const [bin, daemon] of bins) stdio.push(await stdioGateway({ config, sandboxd: daemon.endpoint, ...(bin ? { bin } : {}) }));
  try {
    await versus({ clients: stdio.map((g) => g.client), over: "stdio", n, row, runPython });
  } finally {
    for (const g of stdio) await g.client.close();
  }
  const https = bins.map(([bin, daemon]) => new GatewayHttp({ config, sandboxd: daemon.endpoint, ...(bin ? { bin } : {}) }));
  try {
    const clients = [];
    for (const h of https) {
      await h.start();
      clients.push(await h.client());
    }
    await versus({ clients, over: "Streamable HTTP", n, row, runPython });
    for (const c of clients) await c.close();
  } finally {
    for (const h of https) await h.stop();
  }
}
