'use strict';
// The entry point of sandbox_runner.js (the bundle build_js.py makes of these modules):
// on the main thread the runner, in the worker thread it starts (same file) the namespace.
//
//   node sandbox_runner.js --socket PATH [--workspace DIR] [--heap-mb N]
//     [--idle-watchdog-ms N] [--own-pid-namespace]

const fs = require('fs');
const { isMainThread, workerData } = require('worker_threads');
const { log, DEFAULT_IDLE_WATCHDOG_MS } = require('./common');

const USAGE = 'usage: sandbox_runner.js --socket PATH [--workspace DIR] [--heap-mb N] ' +
  '[--idle-watchdog-ms N] [--own-pid-namespace]';
const VALUED = ['--socket', '--workspace', '--heap-mb', '--idle-watchdog-ms'];
// How long the socket waits for the first namespace (a worker that cannot start still gets
// its runner a connection, which then reports why).
const FIRST_NAMESPACE_WAIT_MS = 5000;

function parseArgs(argv) {
  const options = { socket: null, workspace: '/workspace', heapMb: null, ownPidNamespace: false,
    idleWatchdogMs: DEFAULT_IDLE_WATCHDOG_MS };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--own-pid-namespace') options.ownPidNamespace = true;
    else if (VALUED.includes(arg) && i + 1 < argv.length) {
      const value = argv[++i];
      if (arg === '--socket') options.socket = value;
      else if (arg === '--workspace') options.workspace = value;
      else if (arg === '--heap-mb') options.heapMb = Number.parseInt(value, 10);
      else options.idleWatchdogMs = /^\d+$/.test(value) ? Number(value) : NaN;
    } else {
      throw new Error(`unknown argument '${arg}'\n${USAGE}`);
    }
  }
  if (!options.socket) throw new Error(`--socket is required\n${USAGE}`);
  if (options.heapMb !== null && !(options.heapMb >= 16)) throw new Error('--heap-mb must be >= 16');
  if (!Number.isSafeInteger(options.idleWatchdogMs)) {
    throw new Error('--idle-watchdog-ms must be a number of milliseconds (0: no watchdog)');
  }
  return options;
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

async function runMain(argv) {
  let options;
  try {
    options = parseArgs(argv);
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(2);
  }
  const { Runner } = require('./runner');
  const { listen } = require('./connection');
  const runner = new Runner({ bundle: __filename, workspace: options.workspace,
    heapMb: options.heapMb || defaultHeapMb(), ownPidNamespace: options.ownPidNamespace,
    idleWatchdogMs: options.idleWatchdogMs });
  // The socket appears once user code can run (sandboxd's pool counts a container ready
  // when it has connected), or after FIRST_NAMESPACE_WAIT_MS whatever the worker does.
  await Promise.race([runner.firstReady,
    new Promise((resolve) => setTimeout(resolve, FIRST_NAMESPACE_WAIT_MS).unref())]);
  await listen(options.socket, (socket) => runner.accept(socket));
  process.on('uncaughtException', (e) => log(`internal error: ${e && e.stack}`));
}

if (!isMainThread && workerData && workerData.sandboxRole === 'worker') {
  require('./worker').startWorker();
} else if (isMainThread) {
  runMain(process.argv.slice(2)).catch((e) => {
    log(`failed to start: ${e && e.stack}`);
    process.exit(1);
  });
}
