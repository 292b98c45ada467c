'use strict';
// The namespace: the worker thread that runs user code, seen from the main thread. Every
// message the worker posts is checked here (user code can post to the same port): a message
// that is not one of ready/out/call/done with well-typed fields is a violation, and the
// runner replaces the worker. A heap over `heapMb` ends only the worker (resourceLimits).

const { Worker } = require('worker_threads');
const { isObject } = require('./catalog');

const STATUSES = new Set(['ok', 'error', 'interrupted']);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;
const isStr = (v) => typeof v === 'string';

// Why message `m` is not a valid worker message, or null.
function messageProblem(m) {
  if (!isObject(m) || !isStr(m.t)) return 'not an object with a string t';
  switch (m.t) {
    case 'ready': return null;
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

class Namespace {
  // handlers: ready(), out(stream, text), call(m), done(m), lost(reason, outOfMemory);
  // lost is called at most once, and nothing after it.
  constructor(bundle, heapMb, handlers) {
    this.handlers = handlers;
    this.ended = false;
    const options = { workerData: { sandboxRole: 'worker' }, stdout: true, stderr: true };
    if (heapMb) options.resourceLimits = { maxOldGenerationSizeMb: heapMb };
    this.worker = new Worker(bundle, options);
    this.worker.stdout.resume();        // the worker's real stdio: not user output
    this.worker.stderr.on('data', (d) => process.stderr.write(d));
    this.worker.on('message', (m) => this.onMessage(m));
    this.worker.on('error', (e) => this.lose(`the worker failed: ${e && e.message}`,
      e && e.code === 'ERR_WORKER_OUT_OF_MEMORY'));
    this.worker.on('exit', (code) => this.lose(`the worker exited with code ${code}`, false));
  }

  onMessage(m) {
    if (this.ended) return;
    const problem = messageProblem(m);
    if (problem) {
      this.lose(`the worker broke the runner protocol (${problem})`, false);
      return;
    }
    if (m.t === 'ready') this.handlers.ready();
    else if (m.t === 'out') this.handlers.out(m.s, m.x);
    else if (m.t === 'call') this.handlers.call(m);
    else this.handlers.done(m);
  }

  post(message) {
    if (!this.ended) this.worker.postMessage(message);
  }

  lose(reason, outOfMemory) {
    if (this.ended) return;
    this.end();
    this.handlers.lost(reason, outOfMemory);
  }

  // Stop the worker; no handler is called any more.
  end() {
    this.ended = true;
    this.worker.terminate().catch(() => {});
  }
}

module.exports = { Namespace, messageProblem };
