'use strict';
// The worker thread of a Python session (--language python): Pyodide, restored from the
// snapshot (or loaded cold), with the host workspace mounted at /workspace (NODEFS: the
// permission model allows reads and writes there only) and the runner's Python side,
// sandbox_runner.pyodide_host, which runs the cells. Messages go over the runner's private
// port (namespace.js) as for the JavaScript worker; `ping` is answered here, the rest is
// handed to Python as JSON text, and Python posts JSON text back. The interrupt buffer is
// the SharedArrayBuffer the main thread writes SIGINT into (namespace_python.js).

const v8 = require('v8');
const vm = require('vm');
const { workerData } = require('worker_threads');
const { log } = require('./common');
const { lockRuntime } = require('./locks');
const { isolateChain } = require('./intrinsics');
const { loadPython, mountPythonPackages, exposeFetchToPython, SnapshotRefused } = require('./python_files');
const { createFilesWithTheirMode, installChmodOfSameMode } = require('./fs_modes');

const WORKSPACE = '/workspace';
// Emscripten's errno values of EACCES and EPERM.
const EMSCRIPTEN_EACCES = 2;
const EMSCRIPTEN_EPERM = 63;

// NODEFS turns a Node error's code into an errno, and a code it does not know (the
// permission model's ERR_ACCESS_DENIED, e.g. for fs.symlink, which needs read and write
// permission everywhere) into no errno at all, which the system call then reports as
// success: os.symlink in the workspace returned without making a link. Those are EACCES.
function refuseUnknownNodeErrors(py) {
  const nodefs = py.FS.filesystems.NODEFS;
  const convert = nodefs.convertNodeCode;
  nodefs.convertNodeCode = (e) => {
    const errno = convert.call(nodefs, e);
    return typeof errno === 'number' ? errno : EMSCRIPTEN_EACCES;
  };
}

// Python's socket.socket() answers EPERM, as the jail's seccomp answers Node's socket():
// Pyodide's sockets on node:net connect in the background and reported a connection the
// jail had refused as made (connect() and send() returned), so code believed it was online.
// Python code reaches Pyodide's API (`import pyodide_js`), whose useNodeSockFS() would put
// node:net sockets back under SOCKFS: both ways to it refuse, and only the egress install
// (python_egress.js) gets the original, which connects through the relay. Returns it.
function refuseSockets(py) {
  py._module.SOCKFS.createSocket = () => {
    throw new py.FS.ErrnoError(EMSCRIPTEN_EPERM);
  };
  const initializeNodeSockFS = py._api.initializeNodeSockFS;
  const refuse = async () => {
    throw new Error('sockets are not available in this sandbox');
  };
  py._api.initializeNodeSockFS = refuse;
  py.useNodeSockFS = refuse;
  return initializeNodeSockFS;
}

// Loading leaves garbage that the worker's heap keeps until its next full collection, which
// an idle session may not reach for its whole life: the wasm binary's bytes, Pyodide's
// loading code and data (together ~20 MiB). Two full collections before `ready` return it
// (one left the binary's buffer behind in some starts), 100-180 ms of the start on a busy
// 2-core machine. The collector is taken from a context of its own, and the flag is off
// again after: no context user code reaches has `gc`.
function collectStartupGarbage() {
  v8.setFlagsFromString('--expose-gc');
  try {
    const gc = vm.runInNewContext('gc');
    gc();
    gc();
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

async function runPythonWorker(port, files, interruptBuffer) {
  const post = port.postMessage.bind(port);
  installChmodOfSameMode();
  const py = await loadPython(files);
  const signal = new Int32Array(interruptBuffer);
  py.setInterruptBuffer(signal);
  refuseUnknownNodeErrors(py);
  const initializeNodeSockFS = refuseSockets(py);
  py.FS.mkdirTree(WORKSPACE);
  py.FS.mount(py.FS.filesystems.NODEFS, { root: files.workspace }, WORKSPACE);
  mountPythonPackages(py, files.pythonPackages);
  createFilesWithTheirMode(py.FS);
  // An error nothing handled (of the runner's own JavaScript, or of JavaScript that Python
  // code started) is logged: it must not end the worker, and the namespace with it.
  process.on('uncaughtException', (e) => log(`python worker: uncaught ${String(e && e.stack || e).slice(0, 2000)}`));
  process.on('unhandledRejection', (e) => log(`python worker: unhandled ${String(e && e.stack || e).slice(0, 2000)}`));
  // Before the host changes into the workspace: from then on '' on sys.path is the
  // session's files, and nothing of the session may run before lockRuntime() (an `import
  // platform` here once ran a platform.py the session had left there, at every reset).
  const version = py.runPython('import sys\n"%d.%d.%d" % sys.version_info[:3]');
  const host = py.pyimport('sandbox_runner.pyodide_host');
  // The worker's process.env is the session's environment (namespace.js): os.environ's too.
  const onMessage = host.start((text) => post(JSON.parse(text)), JSON.stringify({ ...process.env }));
  port.on('message', (m) => {
    if (m && m.t === 'ping') {
      post({ t: 'pong', n: m.n });
      return;
    }
    if (m && m.t === 'egress') {   // fetch() (pyfetch's too) and sockets through the relay's port
      // Loaded here: a session without egress loads none of it (node:tls among it).
      const channel = new (require('./egress_channel').Channel)(m.channel);
      require('./egress_fetch').installEgress(channel, null);
      exposeFetchToPython(py);
      const { installPythonEgress } = require('./python_egress');
      installPythonEgress(py, initializeNodeSockFS, channel, signal).catch((e) =>
        log(`python egress failed to install: ${e && e.stack}`));
      return;
    }
    try {
      onMessage(JSON.stringify(m));
    } catch (e) {
      log(`python host failed: ${e && e.message}`);
    }
  });
  collectStartupGarbage();
  await lockRuntime();
  post({ t: 'ready', python: version });
}

// Emscripten's file system errors carry no message or stack, only an errno.
function startErrorText(e) {
  if (e && e.stack) return e.stack;
  if (e && Number.isInteger(e.errno)) return `${e.name || 'ErrnoError'}: errno ${e.errno}`;
  return String(e);
}

function startPythonWorker() {
  const port = workerData.port;
  delete workerData.port;
  isolateChain(port);   // as the JavaScript worker's (worker.js)
  runPythonWorker(port, workerData.files, workerData.interruptBuffer).catch((e) => {
    if (e instanceof SnapshotRefused) {
      port.postMessage({ t: 'refused', message: e.message });   // the runner ends with exit 3
      return;
    }
    log(`the Python worker failed to start: ${startErrorText(e)}`);
    process.exit(1);
  });
}

module.exports = { startPythonWorker };
