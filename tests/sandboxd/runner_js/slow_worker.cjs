'use strict';
// Preloaded (node -r) into a runner and its threads by python_wasm.test.mjs: the Python
// worker's thread sleeps SLOW_WORKER_MS before it starts, as a first worker does on a
// machine too busy to start it within the runner's wait for its socket. A test's probe,
// never in production.
const wt = require('worker_threads');

const SLOW_WORKER_MS = 7000;

if (wt.isMainThread) {
  const RealWorker = wt.Worker;  // the runner gives its workers an execArgv of their own
  wt.Worker = class extends RealWorker {
    constructor(file, options = {}) {
      super(file, { ...options, execArgv: [...(options.execArgv || []), '--require', __filename] });
    }
  };
} else if (wt.workerData && wt.workerData.sandboxRole === 'python-worker') {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, SLOW_WORKER_MS);
}
