'use strict';
// File modes under the wasm tier's jail (docs/wasm-tier.md). Its seccomp filter never lets
// a mode gain the set-user-ID, set-group-ID or sticky bit, and where neither root's
// per-session uids nor bubblewrap's mounts keep the session away from the other files of
// its uid, it refuses chmod altogether (Landlock has no rule for modes). Pyodide's NODEFS
// chmods every file Python creates to the mode it was just created with, and Python's
// shutil.copy copies a mode that is usually the same: a chmod to the mode a file already
// has changes nothing, so it is answered without the system call. Installed in a
// session's worker threads under Node's permission model only, which is how the wasm tier
// runs them (Node refuses fchmod there whatever the jail says).

const fs = require('fs');

function installChmodOfSameMode() {
  if (!process.permission) return;
  const chmodSync = fs.chmodSync;
  const sameMode = (path, mode) => {
    const bits = typeof mode === 'string' ? parseInt(mode, 8) : mode;
    try {
      return (fs.statSync(path).mode & 0o7777) === (bits & 0o7777);
    } catch (e) {
      return false;  // chmod itself reports the error
    }
  };
  fs.chmodSync = (path, mode) => (sameMode(path, mode) ? undefined : chmodSync(path, mode));
  const chmod = fs.chmod;
  fs.chmod = (path, mode, callback) =>
    (sameMode(path, mode) ? process.nextTick(callback, null) : chmod(path, mode, callback));
  const promisesChmod = fs.promises.chmod;
  fs.promises.chmod = async (path, mode) => (sameMode(path, mode) ? undefined : promisesChmod(path, mode));
  // `import('node:fs')` (Pyodide's way) sees the replacements too.
  require('module').syncBuiltinESMExports();
}

module.exports = { installChmodOfSameMode };
