// What a wasm session's namespace costs to start again: a JavaScript (or Python) runner as
// harness.mjs's WasmRunner starts it, `reset` then `1 + 1`, timed from the client, for each
// bundle given, alternated round by round so machine load hits every bundle alike.
//   SANDBOXD_RUNNER_PYZ=build/services/sandboxd/sandbox_runner.pyz \
//     node tests/wasm-spike/namespace-reset.mjs [--language python] [--rounds R] [--resets N] \
//       BUNDLE...
// Prints, per round and bundle, the p50 and p90 of N resets (ms).
import { NODE_MALLOC_TUNABLES, WasmRunner, makeWasmSnapshot, wasmFiles } from '../sandboxd/runner_js/harness.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const [, value] = args.splice(at, 2);
  return value;
};
const language = option('--language', 'javascript');
const rounds = Number(option('--rounds', '3'));
const resets = Number(option('--resets', '40'));
if (args.length === 0) throw new Error('name at least one sandbox_runner.js bundle');

async function measure(bundle) {
  process.env.SANDBOXD_RUNNER_JS = bundle;
  const python = language === 'python';
  const snapshot = python ? makeWasmSnapshot(wasmFiles()) : undefined;
  const runner = await WasmRunner.start(python ?
    { snapshot, env: [], hostEnv: { GLIBC_TUNABLES: NODE_MALLOC_TUNABLES } } :
    { language, heapMb: 128, env: [] });
  try {
    const [client] = await runner.connect();
    await client.exec('1');
    const times = [];
    for (let i = 0; i < resets; i++) {
      const start = process.hrtime.bigint();
      await client.reset();
      await client.exec('1 + 1', { timeout: 30000 });
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    times.sort((a, b) => a - b);
    const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(1);
    return `p50 ${at(0.5)} ms, p90 ${at(0.9)} ms`;
  } finally {
    runner.stop();
  }
}

for (let round = 1; round <= rounds; round++) {
  for (const bundle of args) console.log(`round ${round} ${bundle}: ${await measure(bundle)}`);
}
process.exit(0);
