// gateway_bench part 11: run_python and run_javascript on the wasm tier (--isolation=wasm,
// docs/wasm-tier.md) through a stdio gateway, next to the seed it replaces where no
// container engine runs: codemode-lite's Pyodide backend, a fresh Node that loads Pyodide
// and runs the code, per call. Issue 43's target: `print(1)` through the gateway at least
// 100 times faster than that.
//
//   await wasmVsSeed({ Sandboxd, stdioGateway, config, n, seedRuns, row })
import { execFileSync } from "node:child_process";
import path from "node:path";
import { ms, pct } from "./stats.mjs";

const WASM = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../deploy/wasm/node_modules");
const SEED_NODE = path.join(WASM, "node/bin/node");
const SEED_SCRIPT = `const {loadPyodide} = require(${JSON.stringify(path.join(WASM, "pyodide"))});` +
  ` loadPyodide().then((py) => py.runPython('print(1)'));`;

async function timeTool(client, tool, code, n) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await client.callTool({ name: tool, arguments: { code } }, undefined, { timeout: 120000 });
    lat.push(performance.now() - t0);
    if (r.isError) throw new Error(`${tool} failed on wasm: ${JSON.stringify(r.structuredContent)}`);
  }
  return lat;
}

export async function wasmVsSeed({ Sandboxd, stdioGateway, config, n, seedRuns, row }) {
  const sandboxd = new Sandboxd(["--isolation=wasm", "--allowed_isolations=wasm", "--pool_size=2",
    `--wasm_dir=/tmp/sandboxd-bench-wasm-${process.getuid()}`]);
  await sandboxd.start();
  const stdio = await stdioGateway({ config, sandboxd: sandboxd.endpoint, extraArgs: ["--isolation=wasm"] });
  try {
    const platform = await stdio.client.callTool({ name: "run_python", arguments: { code: "import sys\nsys.platform" } });
    if (platform.structuredContent?.result !== "'emscripten'") {
      throw new Error(`run_python did not run in Pyodide: ${JSON.stringify(platform.structuredContent)}`);
    }
    await timeTool(stdio.client, "run_python", "print(1)", 20);
    await timeTool(stdio.client, "run_javascript", "console.log(1)", 20);
    const py = await timeTool(stdio.client, "run_python", "print(1)", n);
    const js = await timeTool(stdio.client, "run_javascript", "console.log(1)", n);
    const seed = [];
    for (let i = 0; i < seedRuns; i++) {
      const t0 = performance.now();
      const out = execFileSync(SEED_NODE, ["-e", SEED_SCRIPT]).toString();
      seed.push(performance.now() - t0);
      if (out.trim() !== "1") throw new Error(`the seed's per-call Pyodide printed ${JSON.stringify(out)}`);
    }
    const ratio = pct(seed, 50) / pct(py, 50);
    row("[wasm] run_python `print(1)` over stdio, p50 / p99", `${ms(pct(py, 50))} / ${ms(pct(py, 99))}`);
    row("[wasm] run_javascript `console.log(1)` over stdio, p50 / p99", `${ms(pct(js, 50))} / ${ms(pct(js, 99))}`);
    row(`[wasm] seed (codemode-lite): a fresh Node + Pyodide per call, print(1), p50 (n=${seedRuns})`,
      `${ms(pct(seed, 50))}: run_python is ${ratio.toFixed(0)}x faster`, ">= 100x faster", ratio >= 100);
  } finally {
    await stdio.client.close();
    await sandboxd.stop();
  }
}
