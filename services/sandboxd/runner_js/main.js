'use strict';
// The entry point of sandbox_runner.js (the bundle build_js.py makes of these modules):
// on the main thread the runner, in the worker thread it starts (same file) the namespace.
//
//   node sandbox_runner.js (--socket PATH | --listen-fd N) [--workspace DIR] [--heap-mb N]
//     [--idle-watchdog-ms N] [--own-pid-namespace] [--language javascript|python]
//     [--env-fd N] [--egress-fd N] [--pyodide DIR --python-runner PYZ [--snapshot FILE]
//     [--python-packages DIR]]
//   node sandbox_runner.js --make-snapshot OUT --pyodide DIR --python-runner PYZ
//
// --listen-fd: fd N is a unix socket already bound and listening (the wasm tier's jail
// passes it); accepted exactly as --socket's. --language python runs Python in Pyodide in
// the worker (worker_python.js), restored from --snapshot (checked against FILE.sha256)
// or loaded cold from --pyodide; --python-packages DIR: DIR/dist-packages and DIR/certs
// (scripts/wasm-python-packages.sh) are mounted for Python to read. --env-fd: fd N is a
// pipe holding the session's environment (NUL-terminated KEY=VALUE entries up to EOF,
// written whole before the start); user code sees exactly those entries, nothing of the
// runner's own environment, except SANDBOX_RUNNER_TOKEN, which the runner keeps and shows
// in its `ready` frames. Without it the session's environment is the runner's (a
// container's is the session's). --egress-fd: fd N is egress.sock, bound and listening
// (the wasm tier's), where sandboxd's egress proxy dials in once the runner has turned its
// relay on (egress.js).

const fs = require('fs');
const path = require('path');
const { isMainThread, workerData } = require('worker_threads');
const { log, DEFAULT_IDLE_WATCHDOG_MS } = require('./common');

const RUNNER_TOKEN_VARIABLE = 'SANDBOX_RUNNER_TOKEN';

const USAGE = 'usage: sandbox_runner.js (--socket PATH | --listen-fd N) [--workspace DIR] ' +
  '[--heap-mb N] [--idle-watchdog-ms N] [--own-pid-namespace] [--language javascript|python] ' +
  '[--env-fd N] [--egress-fd N] [--pyodide DIR --python-runner PYZ [--snapshot FILE] ' +
  '[--python-packages DIR]]\n' +
  '       sandbox_runner.js --make-snapshot OUT --pyodide DIR --python-runner PYZ';
const VALUED = ['--socket', '--listen-fd', '--env-fd', '--egress-fd', '--workspace', '--heap-mb', '--idle-watchdog-ms',
  '--language', '--pyodide', '--python-runner', '--snapshot', '--make-snapshot', '--python-packages'];
const OPTION_NAMES = { '--socket': 'socket', '--workspace': 'workspace', '--language': 'language',
  '--pyodide': 'pyodide', '--python-runner': 'pythonRunner', '--snapshot': 'snapshot',
  '--make-snapshot': 'makeSnapshot', '--python-packages': 'pythonPackages' };
// How long the socket waits for the first namespace (a worker that cannot start still gets
// its runner a connection, which then reports why).
const FIRST_NAMESPACE_WAIT_MS = 5000;

function parseArgs(argv) {
  const options = { socket: null, listenFd: null, envFd: null, egressFd: null, workspace: '/workspace', heapMb: null,
    ownPidNamespace: false, idleWatchdogMs: DEFAULT_IDLE_WATCHDOG_MS, language: 'javascript',
    pyodide: null, pythonRunner: null, snapshot: null, makeSnapshot: null, pythonPackages: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--own-pid-namespace') options.ownPidNamespace = true;
    else if (VALUED.includes(arg) && i + 1 < argv.length) {
      const value = argv[++i];
      if (OPTION_NAMES[arg]) options[OPTION_NAMES[arg]] = value;
      else if (arg === '--listen-fd') options.listenFd = /^\d+$/.test(value) ? Number(value) : NaN;
      else if (arg === '--env-fd') options.envFd = /^\d+$/.test(value) ? Number(value) : NaN;
      else if (arg === '--egress-fd') options.egressFd = /^\d+$/.test(value) ? Number(value) : NaN;
      else if (arg === '--heap-mb') options.heapMb = Number.parseInt(value, 10);
      else options.idleWatchdogMs = /^\d+$/.test(value) ? Number(value) : NaN;
    } else {
      throw new Error(`unknown argument '${arg}'\n${USAGE}`);
    }
  }
  checkOptions(options);
  return options;
}

function checkOptions(options) {
  const python = options.language === 'python' || options.makeSnapshot !== null;
  if (!['javascript', 'python'].includes(options.language)) {
    throw new Error(`--language must be javascript or python\n${USAGE}`);
  }
  if (python && (!options.pythonRunner || !options.pyodide)) {
    throw new Error(`Python needs --pyodide and --python-runner\n${USAGE}`);
  }
  if (options.makeSnapshot !== null) return;
  if ((options.socket === null) === (options.listenFd === null)) {
    throw new Error(`exactly one of --socket and --listen-fd is required\n${USAGE}`);
  }
  for (const [flag, fd] of [['--listen-fd', options.listenFd], ['--env-fd', options.envFd],
    ['--egress-fd', options.egressFd]]) {
    if (fd !== null && !Number.isSafeInteger(fd)) throw new Error(`${flag} must be a file descriptor number`);
  }
  if (options.heapMb !== null && !(options.heapMb >= 16)) throw new Error('--heap-mb must be >= 16');
  if (!Number.isSafeInteger(options.idleWatchdogMs)) {
    throw new Error('--idle-watchdog-ms must be a number of milliseconds (0: no watchdog)');
  }
}

// The worker's heap limit: three quarters of the container's memory limit (cgroup v2), so a
// heap blow-up ends the worker before the kernel kills the whole runner; none without one.
function defaultHeapMb() {
  try {
    const max = fs.readFileSync('/sys/fs/cgroup/memory.max', 'utf8').trim();
    if (/^\d+$/.test(max)) return Math.max(32, Math.floor(Number(max) * 0.75 / (1024 * 1024)));
  } catch (e) {
    // no cgroup v2 file: V8's default
  }
  return null;
}

// The session's environment from --env-fd's pipe (read to EOF, then closed), or null.
function readEnvFd(fd) {
  if (fd === null) return null;
  const chunks = [];
  const buf = Buffer.allocUnsafe(65536);
  for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0;) chunks.push(Buffer.from(buf.subarray(0, n)));
  fs.closeSync(fd);
  const env = {};
  for (const entry of Buffer.concat(chunks).toString('utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

// User code's relative paths are the workspace's (a container starts there anyway; the wasm
// tier's process does not). The workers share the process's working directory.
function chdirToWorkspace(workspace) {
  try {
    process.chdir(workspace);
  } catch (e) {
    log(`cannot change to the workspace ${workspace}: ${e.code || e.message}`);
  }
}

async function runMain(argv) {
  let options;
  try {
    options = parseArgs(argv);
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(2);
  }
  if (options.makeSnapshot !== null) {
    await require('./python_files').makeSnapshot(options);
    process.exit(0);
  }
  const env = readEnvFd(options.envFd) || { ...process.env };
  // sandboxd's token for this runner (the wasm tier): shown in every `ready`, never given to
  // user code, which could otherwise answer on the inherited socket in the runner's place.
  const token = env[RUNNER_TOKEN_VARIABLE] || null;
  delete env[RUNNER_TOKEN_VARIABLE];
  chdirToWorkspace(options.workspace);
  const python = options.language === 'python' ? require('./python_files').pythonFiles(options) :
    null;
  const { Runner } = require('./runner');
  const { listen, listenOnFd } = require('./connection');
  // egress.sock beside the runner's socket, before it (sandboxd seals the directory once it
  // has connected), or the one --egress-fd passes; a runner given a listening descriptor
  // and no --egress-fd has no egress.
  const { EgressRelay } = require('./egress');
  const egress = options.egressFd !== null ? EgressRelay.onFd(options.egressFd) :
    options.socket === null ? null :
      await EgressRelay.create(path.dirname(path.resolve(options.socket)));
  const runner = new Runner({ bundle: __filename, workspace: options.workspace,
    heapMb: options.heapMb || defaultHeapMb(), ownPidNamespace: options.ownPidNamespace,
    idleWatchdogMs: options.idleWatchdogMs, python, env, token, egress });
  // The socket appears once user code can run (sandboxd's pool counts a container ready
  // when it has connected), or after FIRST_NAMESPACE_WAIT_MS whatever the worker does.
  await Promise.race([runner.firstReady,
    new Promise((resolve) => setTimeout(resolve, FIRST_NAMESPACE_WAIT_MS).unref())]);
  const onSocket = (socket) => runner.accept(socket);
  if (options.listenFd !== null) await listenOnFd(options.listenFd, onSocket);
  else await listen(options.socket, onSocket);
  process.on('uncaughtException', (e) => log(`internal error: ${e && e.stack}`));
}

if (!isMainThread && workerData && workerData.sandboxRole === 'worker') {
  require('./worker').startWorker();
} else if (!isMainThread && workerData && workerData.sandboxRole === 'python-worker') {
  require('./worker_python').startPythonWorker();
} else if (isMainThread) {
  runMain(process.argv.slice(2)).catch((e) => {
    log(`failed to start: ${e && e.stack}`);
    process.exit(1);
  });
}
