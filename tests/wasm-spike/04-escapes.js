'use strict';
// Experiment 4: escape attempts from Python in Pyodide, one line of JSON each:
// {check, outcome: "blocked" | "ESCAPED", detail}. Run it with layers on and off
// (run-escapes.sh). Two instances: one with jsglobals = {} (as the tier would load it),
// where the attacker must first find a way out of Pyodide (Function from any JS object,
// mountNodeFS); and one with the default globals, where `js.process` is Node's process:
// the worst case (a Pyodide or V8 bug, or the JavaScript runner's user code), against which
// each layer below Pyodide is measured on its own.
//   node 04-escapes.js SNAPSHOT_FILE TCP_PORT UNIX_SOCKET_PATH
const { loadFromSnapshot } = require('./common');

// Each returns a string on success (an escape) or raises.
const GRAPH = `
import js as G
P = G.process
def mod(name):
    return P.getBuiltinModule(name)
`;

// Checks in the jsglobals = {} instance: the ways out of Pyodide itself.
const OUT_OF_PYODIDE = {
  function_constructor_reaches_process: `
import pyodide_js
# Any JS function's constructor is Function: code from a string, in the global scope.
P = pyodide_js.constructor.constructor("return globalThis.process")()
P.getBuiltinModule('fs').readFileSync('/etc/passwd', 'utf8')[:20]`,
  mount_nodefs_host_root: `
import pyodide_js
pyodide_js.mountNodeFS('/host', '/')
open('/host/etc/passwd').read()[:20]`,
  open_etc_passwd: `open('/etc/passwd').read()[:20]`,
  alloc_4gib: `len([bytearray(2**30) for _ in range(4)])`,
};

const CHECKS = {
  fs_read_etc_passwd: `${GRAPH}\nmod('fs').readFileSync('/etc/passwd', 'utf8')[:20]`,
  fs_realpath_native: `${GRAPH}\nmod('fs').realpathSync.native('/etc/passwd')`,
  fs_write_tmp: `${GRAPH}\nmod('fs').writeFileSync('/tmp/wasm-spike-escape', 'x') or 'wrote /tmp'`,
  host_environment: `${GRAPH}\nkeys = [k for k in G.Object.keys(P.env) if k != 'PWD']\nassert keys, 'the environment is empty (bwrap sets PWD)'\n' '.join(keys)`,
  child_process_exec: `${GRAPH}\nmod('child_process').execSync('id', G.JSON.parse('{"encoding": "utf8"}'))`,
  process_binding_spawn: `${GRAPH}\nspawn = P.binding('spawn_sync').spawn\n'internal spawn binding reached: ' + str(spawn)[:30]`,
  dlopen: `${GRAPH}\nP.dlopen(G.JSON.parse('{"exports": {}}'), '/usr/lib/x86_64-linux-gnu/libc.so.6') or 'dlopen ok'`,
  inspector_open: `${GRAPH}\nmod('inspector').open(0)\nurl = mod('inspector').url()\nassert url, 'the inspector did not start'\n'inspector at ' + url`,
  wasi: `${GRAPH}\nmod('wasi').WASI.new(G.JSON.parse('{"version": "preview1"}'))\n'WASI instance made'`,
  worker_thread: `${GRAPH}\n'worker ' + str(mod('worker_threads').Worker.new('1', G.JSON.parse('{"eval": true}')).threadId)`,
  signal_parent: `${GRAPH}\nP.kill(P.ppid, 0) and f'signalled ppid {P.ppid}'`,
  tcp_connect_127001: `
${GRAPH}
import asyncio
from pyodide.ffi import create_proxy
net = mod('net')
fut = asyncio.get_event_loop().create_future()
s = net.connect(int(PORT), '127.0.0.1')
s.setEncoding('utf8')
s.on('data', create_proxy(lambda d: fut.done() or fut.set_result('read ' + d[-15:])))
s.on('error', create_proxy(lambda e: fut.done() or fut.set_exception(RuntimeError(str(e.message)))))
await asyncio.wait_for(fut, 3)`,
  unix_connect_host_socket: `
${GRAPH}
import asyncio
from pyodide.ffi import create_proxy
net = mod('net')
fut = asyncio.get_event_loop().create_future()
s = net.connect(UNIX_PATH)
s.setEncoding('utf8')
s.on('data', create_proxy(lambda d: fut.done() or fut.set_result('read ' + d[-15:])))
s.on('error', create_proxy(lambda e: fut.done() or fut.set_exception(RuntimeError(str(e.message)))))
await asyncio.wait_for(fut, 3)`,
  fetch_127001: `
${GRAPH}
r = await G.fetch(f'http://127.0.0.1:{PORT}/')
'status ' + str(r.status)`,
};

async function main() {
  const [snapshot, port, unixPath] = process.argv.slice(2);
  const inner = await loadFromSnapshot(snapshot, { jsglobals: {} });
  const py = await loadFromSnapshot(snapshot);
  py.globals.set('PORT', port);
  py.globals.set('UNIX_PATH', unixPath);
  // "did not self-register": the library was loaded (its constructors ran), only not as an addon.
  const report = (check, escaped, detail) => console.log(JSON.stringify({ check,
    outcome: escaped ? 'ESCAPED' : 'blocked', detail: String(detail).split('\n').filter(Boolean).pop().slice(0, 160) }));
  const all = [...Object.entries(OUT_OF_PYODIDE).map(([c, code]) => [inner, c, code]),
    ...Object.entries(CHECKS).map(([c, code]) => [py, c, code])];
  for (const [instance, check, code] of all) {
    try {
      report(check, true, await instance.runPythonAsync(code));
    } catch (e) {
      report(check, /did not self-register/.test(e.message), e.message);
    }
  }
  process.exit(0);
}
main().catch((e) => { console.error(`FAILED: ${e && e.stack}`); process.exit(1); });
