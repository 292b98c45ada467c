'use strict';
// Preloaded (node -r) into the runner's main thread by python_wasm.test.mjs and
// tests/wasm-spike/idle-memory.mjs --diag: on SIGUSR2 it writes one stderr line
// `MEMDIAG {...}` with the main thread's and each worker's V8 heap statistics (MiB) and
// process.memoryUsage(). A test's probe, never in production.
const v8 = require('v8');
const wt = require('worker_threads');

const workers = [];
const RealWorker = wt.Worker;
wt.Worker = class extends RealWorker {
  constructor(...args) {
    super(...args);
    workers.push(this);
  }
};
const mib = (n) => Math.round(n / 1048576 * 10) / 10;
const heap = (h) => ({ used: mib(h.used_heap_size), total: mib(h.total_heap_size),
  physical: mib(h.total_physical_size), external: mib(h.external_memory),
  malloced: mib(h.malloced_memory) });
process.on('SIGUSR2', async () => {
  const w = [];
  for (const worker of workers) {
    if (worker.threadId < 0) continue;
    try {
      w.push(heap(await worker.getHeapStatistics()));
    } catch (e) {
      w.push(String(e && e.message));
    }
  }
  const m = process.memoryUsage();
  process.stderr.write(`MEMDIAG ${JSON.stringify({ main: heap(v8.getHeapStatistics()),
    mem: { rss: mib(m.rss), heapTotal: mib(m.heapTotal), external: mib(m.external),
      arrayBuffers: mib(m.arrayBuffers) }, workers: w })}\n`);
});
