'use strict';
// Preloaded (node -r) into a runner and its threads by python_wasm.test.mjs: every mode
// change answers EPERM and the umask is 0, as under the wasm jail where the session shares
// sandboxd's uid without bubblewrap (seccomp --no-chmod). A test's probe, never in production.
const fs = require('fs');
const wt = require('worker_threads');

if (wt.isMainThread) {
  process.umask(0);
  const RealWorker = wt.Worker;  // the runner gives its workers an execArgv of their own
  wt.Worker = class extends RealWorker {
    constructor(file, options = {}) {
      super(file, { ...options, execArgv: [...(options.execArgv || []), '--require', __filename] });
    }
  };
}
const refused = (syscall) => () => {
  const e = new Error(`EPERM: operation not permitted, ${syscall}`);
  Object.assign(e, { errno: -1, code: 'EPERM', syscall });
  throw e;
};
fs.chmodSync = refused('chmod');
fs.fchmodSync = refused('fchmod');
fs.lchmodSync = refused('lchmod');
