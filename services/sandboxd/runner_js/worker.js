'use strict';
// The worker thread that runs user code (one per namespace; the main thread terminates it
// when an interrupt cannot land, on reset and when it misbehaves). Cells run in this
// thread's own global scope with vm.Script (file names <cell-1>, <cell-2>, ...), after the
// transform of transform.js. Messages go over the runner's private port (namespace.js), not
// parentPort: to the main thread ready, out, call, done, pong; from it exec, result,
// interrupt, catalog, ping. The port and the other references the runtime needs are
// captured when this module loads, before any user code can replace a global or read
// workerData.

const vm = require('vm');
const util = require('util');
const path = require('path');
const { createRequire } = require('module');
const { workerData } = require('worker_threads');
const { cap, escapeLoneSurrogates, RESULT_LIMIT, ERROR_MESSAGE_LIMIT, TRACEBACK_LIMIT,
  STACK_TRACE_LIMIT } = require('./common');
const { lockRuntime } = require('./locks');
const { OutputCapture } = require('./worker_output');
const { WorkerTools } = require('./worker_tools');
const { installChmodOfSameMode } = require('./fs_modes');
const { isolateChain } = require('./intrinsics');

// The longest delay a timer takes: the one that keeps the thread alive fires once in ~25 days.
const KEEP_ALIVE_MS = 2 ** 31 - 1;
// Taken out of workerData, which user code can read (require('worker_threads').workerData),
// and on a chain of its own: Node delivers its messages through methods looked up on it
// (EventTarget's kHybridDispatch, a well-known symbol), which code could otherwise replace
// to get the port as `this` (intrinsics.js, isolateChain).
const port = workerData && workerData.port;
if (workerData) delete workerData.port;
if (port) isolateChain(port);
const post = port ? port.postMessage.bind(port) : null;
const inspect = util.inspect;
const Script = vm.Script;
const NativePromise = Promise;
const promiseThen = Promise.prototype.then;
const apply = Reflect.apply;
const StringCtor = String;
const objectCreate = Object.create;
const NullObject = () => objectCreate(null);
// The result on one line, as Python's repr gives it: no '...' + continuation lines for long
// strings, no rows of grouped array items; nested six deep before [Object].
const INSPECT_OPTIONS = { maxStringLength: RESULT_LIMIT + 1, breakLength: Infinity, compact: true, depth: 6 };
const CELL_FRAME = /<cell-\d+>:\d+(:\d+)?\)?$/;

function safe(fn, fallback) {
  try {
    return fn();
  } catch (e) {
    return fallback;
  }
}

function capTraceback(text) {
  if (text.length <= TRACEBACK_LIMIT) return text;
  const head = TRACEBACK_LIMIT / 4;
  const tail = TRACEBACK_LIMIT - head;
  return `${text.slice(0, head)}\n...[truncated ${text.length - head - tail} chars]...\n` +
    text.slice(text.length - tail);
}

// The stack with only the user's frames: the header (type and message) and every frame
// in a cell; the runner's frames and node's internals are left out.
function userStack(stack) {
  const lines = stack.split('\n');
  const kept = [];
  let inFrames = false;
  for (const line of lines) {
    const isFrame = /^\s+at /.test(line);
    inFrames = inFrames || isFrame;
    if (!inFrames || (isFrame && CELL_FRAME.test(line))) kept[kept.length] = line;
  }
  return kept.join('\n');
}

// {type, message, traceback} of whatever a cell threw (any value; getters may throw).
function describeError(err) {
  if (err === null || (typeof err !== 'object' && typeof err !== 'function')) {
    const text = `Uncaught ${safe(() => inspect(err), '?')}`;
    return { type: 'Error', message: cap(text, ERROR_MESSAGE_LIMIT), traceback: text };
  }
  const type = safe(() => StringCtor(err.name || err.constructor.name), 'Error') || 'Error';
  const message = safe(() => StringCtor(err.message), '') || '';
  const traceback = userStack(safe(() => StringCtor(err.stack), `${type}: ${message}`));
  return { type: escapeLoneSurrogates(type).slice(0, 256),
    message: escapeLoneSurrogates(cap(message, ERROR_MESSAGE_LIMIT)),
    traceback: escapeLoneSurrogates(capTraceback(traceback)) };
}

// A cell's top-level declarations become global variables assigned as `name = value`
// (transform.js), and an assignment to a getter-only global of Node's (crypto, navigator) is
// ignored: `const crypto = require('crypto')` would leave Web Crypto in place. Each such
// global takes what is assigned to it as its new value, a data property.
function makeGlobalsReplaceable() {
  for (const key of Reflect.ownKeys(globalThis)) {
    const d = Object.getOwnPropertyDescriptor(globalThis, key);
    if (!d.configurable || typeof d.get !== 'function' || d.set !== undefined) continue;
    Object.defineProperty(globalThis, key, {
      get: d.get,
      set(value) {
        Object.defineProperty(globalThis, key, { value, writable: true, enumerable: d.enumerable, configurable: true });
      },
      enumerable: d.enumerable,
      configurable: true,
    });
  }
}

class WorkerRuntime {
  constructor() {
    this.output = new OutputCapture(post);
    this.tools = new WorkerTools(post);
    this.current = null;          // {id, interrupt(reason)} of the running exec
  }

  async setup() {
    // Frozen in the wasm tier at the same limit, by V8's flag (namespace.js).
    if (!Object.isFrozen(Error)) Error.stackTraceLimit = STACK_TRACE_LIMIT;
    this.output.install();
    this.tools.install([]);
    await lockRuntime();
    makeGlobalsReplaceable();
    globalThis.require = createRequire(path.join(process.cwd(), '<repl>'));
    process.on('uncaughtException', (e) => this.background(e));
    process.on('unhandledRejection', (e) => this.background(e));
    if (workerData.egressPort !== undefined) {
      require('./egress_fetch').installEgress(workerData.egressPort, null);
    }
    port.on('message', (m) => this.onMessage(m));
    // Unreferenced, so process._getActiveHandles() does not list it; a timer keeps the thread
    // alive instead (code that clears it only ends its own namespace).
    port.unref();
    setInterval(() => {}, KEEP_ALIVE_MS);
    post({ t: 'ready' });
  }

  // An error of code left running in the background: shown on stderr of the running exec.
  background(err) {
    const text = safe(() => (err && err.stack ? userStack(StringCtor(err.stack)) : inspect(err)), '?');
    this.output.write('stderr', `Uncaught (in background) ${text}\n`);
  }

  onMessage(m) {
    if (m.t === 'exec') this.exec(m.id, m.code, m.filename, m.maxOut);
    else if (m.t === 'result') this.tools.settle(m);
    else if (m.t === 'interrupt' && this.current && this.current.id === m.id) this.current.interrupt();
    else if (m.t === 'catalog') this.tools.install(m.servers);
    else if (m.t === 'ping') post({ t: 'pong', n: m.n });      // the idle watchdog (watchdog.js)
    else if (m.t === 'egress') require('./egress_fetch').installEgress(m.channel || m.port, m.env);
  }

  // `code` is the cell after transform.js (done on the main thread).
  async exec(id, code, filename, maxOut) {
    this.output.begin(maxOut);
    this.tools.execId = id;
    let status = 'ok';
    let result = null;
    let error = null;
    try {
      const value = (await this.run(id, code, filename)).value;
      if (value !== undefined) {
        result = escapeLoneSurrogates(cap(inspect(value, INSPECT_OPTIONS), RESULT_LIMIT));
      }
    } catch (e) {
      if (e === INTERRUPTED) {
        status = 'interrupted';
        error = { type: 'InterruptedError', message: 'execution interrupted', traceback: '' };
      } else {
        status = 'error';
        error = describeError(e);
      }
    }
    this.current = null;
    this.tools.endExec('the execution ended before the tool result arrived');
    const counts = this.output.finish();
    post({ t: 'done', id, status, result, error, outputBytes: counts.outputBytes,
      droppedBytes: counts.droppedBytes });
  }

  // {value} of the cell's trailing expression; rejects with the cell's error, or INTERRUPTED.
  run(id, code, filename) {
    return new NativePromise((resolve, reject) => {
      this.current = { id, interrupt: () => reject(INTERRUPTED) };
      const script = new Script(code, { filename, importModuleDynamically: (s) => import(s) });
      const promise = script.runInThisContext({ displayErrors: false })();
      apply(promiseThen, promise, [(box) => {
        const holder = NullObject();      // no `then` even if Object.prototype has one
        holder.value = box ? box.value : undefined;
        resolve(holder);
      }, reject]);
    });
  }
}

const INTERRUPTED = Symbol('interrupted');

function startWorker() {
  if (!port) throw new Error('the namespace runtime is already running in this worker');
  installChmodOfSameMode();
  new WorkerRuntime().setup().catch((e) => {
    process.stderr.write(`sandbox_runner.js: the worker failed to start: ${e && e.stack}\n`);
    process.exit(1);
  });
}

module.exports = { startWorker, userStack };
