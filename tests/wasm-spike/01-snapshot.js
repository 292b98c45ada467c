'use strict';
// Experiment 1: Pyodide offline under --permission; cold load, snapshot make, restore.
//   node 01-snapshot.js make DIR      cold load, write DIR/pyodide.snap + .sha256
//   node 01-snapshot.js cold          cold load only, print the time
//   node 01-snapshot.js restore DIR   restore from the snapshot (checked), run code
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { loadCold, loadFromSnapshot, ms, now } = require('./common');

async function main() {
  const [mode, dir] = process.argv.slice(2);
  const env = Object.keys(process.env).length;
  const t0 = now();
  if (mode === 'cold' || mode === 'make') {
    const py = await loadCold(mode === 'make' ? { _makeSnapshot: true } : {});
    const coldMs = ms(t0);
    const r = py.runPython('import sys; sys.version.split()[0]');
    const out = { node: process.version, mode, env_vars: env, cold_load_ms: Math.round(coldMs), python: r };
    if (mode === 'make') {
      const t1 = now();
      const snap = py.makeMemorySnapshot();
      out.make_snapshot_ms = Math.round(ms(t1));
      out.snapshot_bytes = snap.length;
      const file = path.join(dir, 'pyodide.snap');
      fs.writeFileSync(file, snap);
      fs.writeFileSync(`${file}.sha256`,
        `${crypto.createHash('sha256').update(snap).digest('hex')}\n`);
    }
    console.log(JSON.stringify(out));
  } else if (mode === 'restore') {
    const py = await loadFromSnapshot(path.join(dir, 'pyodide.snap'));
    const restoreMs = ms(t0);
    const t1 = now();
    py.runPython('x = 41');
    const firstMs = ms(t1);
    const t2 = now();
    const x = py.runPython('x + 1');
    const secondMs = ms(t2);
    console.log(JSON.stringify({ node: process.version, mode, env_vars: env,
      restore_ms: Math.round(restoreMs), first_exec_ms: +firstMs.toFixed(2),
      exec_x_plus_1_ms: +secondMs.toFixed(2), x,
      rss_mib: Math.round(process.memoryUsage().rss / 2 ** 20) }));
  } else {
    throw new Error('usage: 01-snapshot.js make DIR | cold | restore DIR');
  }
}
main().catch((e) => { console.error(`FAILED: ${e && e.stack}`); process.exit(1); });
