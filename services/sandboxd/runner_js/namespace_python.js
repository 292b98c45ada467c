'use strict';
// The namespace of a Python session: the Pyodide worker (worker_python.js) seen from the
// main thread. Besides Namespace's port it shares an interrupt buffer with the worker: an
// interrupt writes SIGINT (2) into it and writes it again every INTERRUPT_REWRITE_MS until
// the exec's `done` (a write that lands before the cell's loop starts, or in code that
// swallows one KeyboardInterrupt, is not lost), and the buffer is cleared when the exec
// ends, so a late write never hits the next exec.

const { Namespace, messageProblem, isCount, isStr } = require('./namespace');
const { isObject } = require('./catalog');

const INTERRUPT_REWRITE_MS = 50;
const SIGINT = 2;
// Why message `m` of the Python worker is not valid, or null: the JavaScript worker's
// messages, `ready` with the Python version, `display` and `done` with display counts.
function pythonMessageProblem(m) {
  if (!isObject(m) || !isStr(m.t)) return 'not an object with a string t';
  if (m.t === 'ready') return isStr(m.python) ? null : 'bad ready';
  if (m.t === 'refused') return isStr(m.message) ? null : 'bad refused';
  if (m.t === 'display') {
    return isObject(m.b) && Object.values(m.b).every(isStr) ? null : 'bad display';
  }
  const problem = messageProblem(m);
  if (problem || m.t !== 'done') return problem;
  return isCount(m.displays) && isCount(m.displaysDropped) ? null : 'bad done';
}

class PythonNamespace extends Namespace {
  // files: pythonFiles() of python_files.js. handlers as Namespace's, plus display(bundle)
  // and refused(message): the snapshot does not fit the runner's files. `env`: Python's
  // os.environ (with worker_python.js's defaults), also the worker's process.env.
  constructor(bundle, heapMb, handlers, files, env) {
    const interruptBuffer = new SharedArrayBuffer(4);
    super(bundle, heapMb, handlers, { sandboxRole: 'python-worker', files, interruptBuffer },
      env);
    this.signal = new Int32Array(interruptBuffer);
    this.rewrite = null;
  }

  messageProblem(m) {
    const problem = pythonMessageProblem(m);
    if (!problem && m.t === 'refused' && this.saidReady) return 'refused after ready';
    return problem;
  }

  // `refused` only before `ready`: it ends the runner (the snapshot does not fit), and once
  // a cell may run, a cell could send it (Python cannot keep the worker's channel out of a
  // cell's reach); after ready it breaks the protocol, and costs the worker its namespace.
  onMessage(m) {
    if (isObject(m) && m.t === 'done') this.stopInterrupting();
    if (!this.ended && isObject(m) && (m.t === 'display' || (m.t === 'refused' && !this.saidReady)) &&
        !pythonMessageProblem(m)) {
      if (m.t === 'display') this.handlers.display(m.b);
      else this.handlers.refused(m.message);
      return;
    }
    super.onMessage(m);
  }

  post(message, transfer) {
    if (message.t === 'interrupt' && !this.ended && this.rewrite === null) {
      Atomics.store(this.signal, 0, SIGINT);
      this.rewrite = setInterval(() => Atomics.store(this.signal, 0, SIGINT),
        INTERRUPT_REWRITE_MS);
    }
    super.post(message, transfer);
  }

  stopInterrupting() {
    if (this.rewrite !== null) clearInterval(this.rewrite);
    this.rewrite = null;
    Atomics.store(this.signal, 0, 0);
  }

  end(waitMs = 0) {
    this.stopInterrupting();
    return super.end(waitMs);
  }
}

module.exports = { PythonNamespace, pythonMessageProblem };
