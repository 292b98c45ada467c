// The idle memory of wasm-tier sessions as sandboxd starts them (sandbox_runner.js on
// deploy/wasm's Node under the contract's flags, harness.mjs's WasmRunner, without the jail
// process): N sessions started, `x = 1` run in each, 2 s idle, then per session RSS and PSS
// (/proc/PID/smaps_rollup: PSS counts a page shared by k processes as 1/k, so the sum of
// PSS over N sessions is what they cost together) split into anonymous and file-backed,
// and the anonymous RSS of the wasm Memory (the mappings of 4 GiB and more: V8 reserves
// a wasm32 memory with its guard regions).
//   SANDBOXD_RUNNER_JS=build/services/sandboxd/sandbox_runner.js \
//   SANDBOXD_RUNNER_PYZ=build/services/sandboxd/sandbox_runner.pyz \
//     node tests/wasm-spike/idle-memory.mjs [--sessions N] [--language python|javascript]
//       [--heap-mb N] [--diag] [--timing] [--node-flag FLAG]... [--env KEY=VALUE]...
// --timing: also `x = 1` p50 and a CPU-bound cell's time, in the first session.
// --env: an entry of Node's own environment (sandboxd starts Node with an empty one).
// --diag preloads ../sandboxd/runner_js/heap_probe.cjs into the main thread and adds the
// V8 heaps of the main thread and the worker (a diagnostic: it adds its own few hundred KiB).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WasmRunner, makeWasmSnapshot, wasmFiles, CATALOG } from '../sandboxd/runner_js/harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mib = (kb) => Math.round(kb / 1024 * 10) / 10;

function parse(argv) {
  const o = { sessions: 3, language: 'python', heapMb: 512, diag: false, nodeFlags: [], env: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--sessions') o.sessions = Number(argv[++i]);
    else if (a === '--language') o.language = argv[++i];
    else if (a === '--heap-mb') o.heapMb = Number(argv[++i]);
    else if (a === '--diag') o.diag = true;
    else if (a === '--timing') o.timing = true;
    else if (a === '--node-flag') o.nodeFlags.push(argv[++i]);
    else if (a === '--env') {
      const [k, ...v] = argv[++i].split('=');
      o.env[k] = v.join('=');
    }
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

// With --timing, in the first session before the idle measurement: `x = 1` p50 over 300
// execs and one CPU-bound cell (the wasm tiers' compile work, and malloc's, is in it).
async function timing(client, language) {
  const ms = [];
  for (let i = 0; i < 300; i++) {
    const t = performance.now();
    await client.exec('x = 1');
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  const loop = language === 'python' ? 's = 0\nfor i in range(3_000_000):\n    s += i * i\n' :
    'let s = 0; for (let i = 0; i < 3e7; i++) s += i * i;';
  const t = performance.now();
  await client.exec(loop, { timeout: 60000 });
  console.log(JSON.stringify({ execP50Ms: Math.round(ms[150] * 100) / 100,
    loopMs: Math.round(performance.now() - t) }));
}

function rollup(pid) {
  const out = {};
  for (const line of fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n')) {
    const m = /^(\w+):\s+(\d+) kB/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

// Anonymous RSS in mappings of >= 4 GiB (the wasm Memory's reservation), in kB.
function wasmRssKb(pid) {
  let kb = 0;
  let big = false;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ (\d+)/.exec(line);
    if (head) {
      big = BigInt(`0x${head[2]}`) - BigInt(`0x${head[1]}`) >= 4n << 30n && head[3] === '0';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && big) kb += Number(rss[1]);
  }
  return kb;
}

function measure(pid) {
  const r = rollup(pid);
  const threads = /Threads:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1];
  return { rss: mib(r.Rss), pss: mib(r.Pss), pssAnon: mib(r.Pss_Anon), pssFile: mib(r.Pss_File),
    anon: mib(r.Anonymous), wasm: mib(wasmRssKb(pid)), threads: Number(threads) };
}

async function main() {
  const o = parse(process.argv.slice(2));
  const files = wasmFiles();
  const snapshot = o.language === 'python' ? makeWasmSnapshot(files) : null;
  const nodeFlags = [...o.nodeFlags];
  if (o.diag) {
    const diag = path.join(HERE, '..', 'sandboxd', 'runner_js', 'heap_probe.cjs');
    nodeFlags.push(`--allow-fs-read=${diag}`, '-r', diag);
  }
  const runners = [];
  const readyMs = [];
  try {
    for (let i = 0; i < o.sessions; i++) {
      const t0 = performance.now();
      const r = await WasmRunner.start({ snapshot, language: o.language, heapMb: o.heapMb, nodeFlags, env: [],
        hostEnv: o.env });
      runners.push(r);
      const [client] = await r.connect();
      readyMs.push(performance.now() - t0);
      await client.setCatalog(CATALOG);
      const result = await client.exec('x = 1', { timeout: 30000 });
      if (result.status !== 'ok') throw new Error(`x = 1: ${JSON.stringify(result)}`);
      if (i === 0 && o.timing) await timing(client, o.language);
    }
    await sleep(2000);
    const rows = runners.map((r) => measure(r.proc.pid));
    for (const row of rows) console.log(JSON.stringify(row));
    const sum = (k) => Math.round(rows.reduce((s, r) => s + r[k], 0) * 10) / 10;
    console.log(JSON.stringify({ node: process.version, language: o.language, sessions: rows.length,
      flags: o.nodeFlags, env: o.env, meanRss: Math.round(sum('rss') / rows.length * 10) / 10,
      meanPss: Math.round(sum('pss') / rows.length * 10) / 10, sumPss: sum('pss'),
      readyMs: readyMs.map(Math.round) }));
    if (o.diag) {
      for (const r of runners) process.kill(r.proc.pid, 'SIGUSR2');
      await sleep(500);
      for (const r of runners) {
        const line = r.log.split('\n').find((l) => l.startsWith('MEMDIAG '));
        console.log(line || `no MEMDIAG line; log:\n${r.log}`);
      }
    }
  } finally {
    for (const r of runners) r.stop();
    if (snapshot) fs.rmSync(path.dirname(snapshot), { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`FAILED: ${e && e.stack}`);
  process.exit(1);
});
