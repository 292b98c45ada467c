'use strict';
// Experiment 6: two facts the Python runner's port rests on, in the worker of 02-interrupt.js:
// a Python SIGINT handler (as interrupts.py installs) receives the interrupt buffer's
// SIGINT, and the runner package imports from its zipapp inside Pyodide's MEMFS.
//   python3 ../../services/sandboxd/runner/build_pyz.py ../../services/sandboxd/runner/sandbox_runner /tmp/wasm-runner.pyz
//   node --permission --allow-worker --allow-fs-read=... 06-runner-in-pyodide.js SNAPSHOT_FILE PYZ
const fs = require('fs');
const { startWorker } = require('./02-interrupt');

async function main() {
  const [snapshot, pyz] = process.argv.slice(2);
  const w = startWorker(snapshot);
  await w.ready;
  const p = w.run('import signal\nhits = []\nsignal.signal(signal.SIGINT, lambda s, f: hits.append(s))\n' +
    'while not hits: pass\nhits');
  await new Promise((r) => setTimeout(r, 200));
  Atomics.store(w.sab, 0, 2);
  console.log('python SIGINT handler:', JSON.stringify(await p));
  const b64 = fs.readFileSync(pyz).toString('base64');
  const imported = await w.run(`import base64, sys
open('/tmp/r.pyz', 'wb').write(base64.b64decode('${b64}'))
sys.path.insert(0, '/tmp/r.pyz')
import sandbox_runner.catalog, sandbox_runner.toolbox, sandbox_runner.runtime_module
import sandbox_runner.display, sandbox_runner.tool_calls, sandbox_runner.executor
'imported ' + sandbox_runner.executor.__file__`);
  console.log('pyz import:', JSON.stringify(imported));
  process.exit(0);
}
main().catch((e) => { console.error(`FAILED: ${e && e.stack}`); process.exit(1); });
