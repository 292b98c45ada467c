'use strict';
// The namespace: the worker thread that runs user code, seen from the main thread. The
// runtime talks to the main thread over a MessageChannel of its own, whose worker end is
// handed over in workerData and taken out of it before any user code runs (worker.js);
// the worker closes `parentPort` before user code runs (locks.js), so it cannot forge a
// `done` there. Every message of the channel is still checked here: one that is not
// ready/out/call/done/pong with well-typed fields is a violation, and the runner replaces
// the worker. A heap over `heapMb` ends only the worker (resourceLimits).

const { Worker, MessageChannel } = require('worker_threads');
const { isObject } = require('./catalog');
const { cap, log, verdictTimeout, clearVerdictTimeout, onPortData, STACK_TRACE_LIMIT } =
  require('./common');

const STATUSES = new Set(['ok', 'error', 'interrupted']);
// Why a namespace was lost, as the runner's log, a note and the next exec's error say it:
// the worker's own error message (user code chooses it) is cut to this many characters.
const LOST_REASON_CHARS = 1024;
// What the runner relays of a worker's real stderr (Node's own warnings, not user output,
// which goes over the port), over the worker's life; the rest is dropped, said once.
const WORKER_STDERR_BYTES = 256 * 1024;
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;
const isStr = (v) => typeof v === 'string';

// Why message `m` is not a valid worker message, or null.
function messageProblem(m) {
  if (!isObject(m) || !isStr(m.t)) return 'not an object with a string t';
  switch (m.t) {
    case 'ready': return null;
    case 'pong': return isCount(m.n) ? null : 'bad pong';
    case 'out':
      return (m.s === 'stdout' || m.s === 'stderr') && isStr(m.x) ? null : 'bad out';
    case 'call':
      return isCount(m.k) && isStr(m.server) && isStr(m.tool) && isObject(m.args) ?
        null : 'bad call';
    case 'done': {
      const e = m.error;
      const errorOk = e === null ||
        (isObject(e) && isStr(e.type) && isStr(e.message) && isStr(e.traceback));
      return isCount(m.id) && STATUSES.has(m.status) && (m.result === null || isStr(m.result)) &&
        errorOk && isCount(m.outputBytes) && isCount(m.droppedBytes) ? null : 'bad done';
    }
    default: return `unknown message ${JSON.stringify(m.t).slice(0, 40)}`;
  }
}

// Under Node's permission model (the wasm tier) the runner needs --allow-worker to start
// this worker, but a worker started by user code may drop the model altogether (`execArgv:
// []` gives one without any permission). The namespace gets the runner's permission flags
// without --allow-worker, so user code cannot start a worker at all. (Node's process-wide
// flags, such as --disallow-code-generation-from-strings, hold in every thread anyway.)
function permissionFlagsWithoutWorkers() {
  return process.execArgv.filter((a) =>
    (a === '--permission' || a.startsWith('--allow-')) && a !== '--allow-worker');
}

// In the wasm tier user code shares the process, and its descriptor table, with the runner:
// the locks that keep the runner's descriptors from it (locks.js) run again on every call a
// cell makes, using JavaScript's built-ins, which no cell may replace there (Set.prototype.has
// vouching for any number). The JavaScript worker freezes them all (--frozen-intrinsics; Node
// tames the override mistake for the usual properties, so `obj.toString = f` still works),
// Error.stackTraceLimit among them, at V8's flag, which the main thread sets before the first
// worker starts (a V8 flag holds for the isolates made after it). The Python worker freezes
// only what the locks use (intrinsics.js says why).
let stackTraceLimitSet = false;
function wasmWorkerFlags(frozen) {
  if (!frozen) return permissionFlagsWithoutWorkers();
  if (!stackTraceLimitSet) {
    require('v8').setFlagsFromString(`--stack-trace-limit=${STACK_TRACE_LIMIT}`);
    stackTraceLimitSet = true;
  }
  return [...permissionFlagsWithoutWorkers(), '--frozen-intrinsics',
    '--disable-warning=ExperimentalWarning'];
}

class Namespace {
  // handlers: ready(), out(stream, text), call(m), done(m), pong(n), lost(reason, outOfMemory);
  // lost is called at most once, and nothing after it.
  // `data`: what else the worker gets in workerData (its role first). `env`: the worker's
  // process.env, exactly (none of the runner's own variables); undefined: the runner's.
  constructor(bundle, heapMb, handlers, data = { sandboxRole: 'worker' }, env = undefined) {
    this.handlers = handlers;
    this.ended = false;
    this.saidReady = false;
    const channel = new MessageChannel();
    const options = { workerData: { ...data, port: channel.port2 },
      transferList: [channel.port2], stdout: true, stderr: true };
    if (env) options.env = { ...env };
    if (heapMb) options.resourceLimits = { maxOldGenerationSizeMb: heapMb };
    if (process.permission) options.execArgv = wasmWorkerFlags(data.sandboxRole === 'worker');
    this.port = channel.port1;
    onPortData(this.port, (data) => this.onMessage(data));  // closes the ports a message brings
    this.worker = new Worker(bundle, options);
    this.worker.stdout.resume();        // the worker's real stdio: not user output
    this.relayStderr(this.worker.stderr);
    // No 'message' listener on the worker: the worker closed parentPort (locks.js).
    this.worker.on('error', (e) => this.lose(`the worker failed: ${e && e.message}`,
      e && e.code === 'ERR_WORKER_OUT_OF_MEMORY'));
    this.worker.on('exit', (code) => this.lose(`the worker exited with code ${code}`, false));
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
  }

  relayStderr(stream) {
    let left = WORKER_STDERR_BYTES;
    stream.on('data', (d) => {
      if (left <= 0) return;
      const piece = d.length <= left ? d : d.subarray(0, left);
      left -= d.length;
      process.stderr.write(piece);
      if (left <= 0) log(`the worker's stderr passed ${WORKER_STDERR_BYTES} bytes; the rest is dropped`);
    });
  }

  onMessage(m) {
    if (this.ended) return;
    let problem = this.messageProblem(m);
    // `ready` once: after it, user code may run, and nothing of its says ready again.
    if (!problem && m.t === 'ready' && this.saidReady) problem = 'a second ready';
    if (problem) {
      this.lose(`the worker broke the runner protocol (${problem})`, false);
      return;
    }
    if (m.t === 'ready') {
      this.saidReady = true;
      this.handlers.ready(m);
    }
    else if (m.t === 'out') this.handlers.out(m.s, m.x);
    else if (m.t === 'call') this.handlers.call(m);
    else if (m.t === 'pong') this.handlers.pong(m.n);
    else this.handlers.done(m);
  }

  messageProblem(m) {
    return messageProblem(m);
  }

  post(message, transfer) {
    if (!this.ended) this.port.postMessage(message, transfer);
  }

  lose(reason, outOfMemory) {
    if (this.ended) return;
    this.end();
    this.handlers.lost(cap(reason, LOST_REASON_CHARS), outOfMemory);
  }

  // Stop the worker; no handler is called any more. Resolves true once the worker has exited,
  // false when it has not within `waitMs` (blocked in a system call: terminate() takes effect
  // only when the thread is back in JavaScript).
  end(waitMs = 0) {
    if (!this.ended) {
      this.ended = true;
      this.port.close();
      this.worker.terminate().catch(() => {});
    }
    return new Promise((resolve) => {
      const timer = verdictTimeout(() => resolve(false), waitMs);
      this.exited.then(() => {
        clearVerdictTimeout(timer);
        resolve(true);
      });
    });
  }
}

module.exports = { Namespace, messageProblem, isCount, isStr };
