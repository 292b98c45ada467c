// gateway_bench part 10: run_javascript next to run_python, in the same run and through the
// same stdio gateway and sandboxd, so that the two languages see the same machine (issue
// 26's targets: `console.log(1)` p50 <= 3 ms over stdio, a tool call <= 1 ms added).
//
//   await javascriptVsPython({ client, n, row, direct })
//     client  an MCP client of a stdio gateway offering both tools
//     direct  per-call latencies (ms) of the same echo called directly, or null
//     row     the bench's row(what, value, target, pass)

import { ms, pct } from "./stats.mjs";

function run(client, tool, code) {
  return client.callTool({ name: tool, arguments: { code } }, undefined, { timeout: 120000 });
}

// Latencies of `rounds` x `per` runs of each [tool, code] pair, interleaved by round.
async function interleaved(client, pairs, rounds, per) {
  const lat = pairs.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (const [i, [tool, code]] of pairs.entries()) {
      for (let k = 0; k < per; k++) {
        const t0 = performance.now();
        const result = await run(client, tool, code);
        lat[i].push(performance.now() - t0);
        if (result.isError) throw new Error(`${tool} failed: ${JSON.stringify(result.structuredContent)}`);
      }
    }
  }
  return lat;
}

// Echo timed inside the sandbox, in milliseconds per call.
export const PY_ECHOES = (n) => `
import time, json
lat = []
for i in range(${n}):
    t0 = time.perf_counter()
    await mcp_everything.echo(message="x")
    lat.append((time.perf_counter() - t0) * 1000)
print(json.dumps(lat))`;
const JS_ECHOES = (n) => `
const lat = [];
for (let i = 0; i < ${n}; i++) {
  const t0 = performance.now();
  await mcp_everything.echo({ message: "x" });
  lat.push(performance.now() - t0);
}
console.log(JSON.stringify(lat));`;

export async function javascriptVsPython({ client, n, row, direct }) {
  const pairs = [["run_python", "print(1)"], ["run_javascript", "console.log(1)"]];
  await interleaved(client, pairs, 1, 20);  // both sandboxes exist and are warm
  const [py, js] = await interleaved(client, pairs, 10, Math.max(1, Math.floor(n / 10)));
  row("run_python `print(1)` over stdio, p50 / p99 (interleaved with the next row)",
    `${ms(pct(py, 50))} / ${ms(pct(py, 99))}`);
  row("run_javascript `console.log(1)` over stdio, p50 / p99", `${ms(pct(js, 50))} / ${ms(pct(js, 99))}`,
    "p50 <= 3 ms", pct(js, 50) <= 3);
  const echoes = async (tool, code) => {
    const r = await run(client, tool, code);
    if (r.isError) throw new Error(`${tool} echo loop failed: ${JSON.stringify(r.structuredContent)}`);
    return JSON.parse(r.structuredContent.stdout);
  };
  await echoes("run_javascript", JS_ECHOES(20));
  const pyCalls = await echoes("run_python", PY_ECHOES(n));
  const jsCalls = await echoes("run_javascript", JS_ECHOES(n));
  row("echo called from Python / JavaScript through the gateway, p50",
    `${ms(pct(pyCalls, 50))} / ${ms(pct(jsCalls, 50))}`);
  if (direct) {
    const added = pct(jsCalls, 50) - pct(direct, 50);
    row("  added latency per tool call from JavaScript (against the direct call), p50", ms(added),
      "<= 1 ms", added <= 1);
  }
}
