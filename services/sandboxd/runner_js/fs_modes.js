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
const path = require('path');

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

// Emscripten's FS.open makes a file it creates with mode 0777 and chmods it to the mode
// asked for once it is open. Where the jail refuses every mode change, that chmod fails and
// Python could create no file at all. On a NODEFS mount, a creating open makes the file with
// its mode at once (O_CREAT|O_EXCL through Node, under the process's umask, as a container's
// open does), and Emscripten's open then finds it there and chmods nothing. An open whose
// access the new mode would not allow (a read-only file opened for writing, which POSIX
// allows the creating open) and anything this cannot look up take Emscripten's own way.
function createFilesWithTheirMode(FS) {
  const O_CREAT = 0o100;
  const O_EXCL = 0o200;
  const O_NOFOLLOW = 0o400000;
  const NODEFS = FS.filesystems.NODEFS;
  const open = FS.open;
  const hostPathToCreate = (name, flags) => {
    const found = FS.lookupPath(name, { follow: !(flags & O_NOFOLLOW), noent_okay: true });
    if (found.node || name.endsWith('/')) return null;
    const parent = FS.lookupPath(path.posix.dirname(found.path), { follow: true }).node;
    if (!parent || parent.mount.type !== NODEFS) return null;
    return path.join(NODEFS.realPath(parent), path.posix.basename(found.path));
  };
  FS.open = function openCreatingWithMode(name, flags, mode = 0o666) {
    if (typeof name !== 'string' || typeof flags !== 'number' || !(flags & O_CREAT)) {
      return open.call(FS, name, flags, mode);
    }
    const perms = mode & 0o777;
    const access = flags & 3;
    const needs = access === 0 ? 0o400 : access === 1 ? 0o200 : 0o600;
    let host = null;
    try {
      if ((perms & needs) === needs) host = hostPathToCreate(name, flags);
      if (host !== null) fs.closeSync(fs.openSync(host, fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_WRONLY, perms));
    } catch (e) {
      host = null;  // Emscripten's open reports what is wrong
    }
    return open.call(FS, name, host === null ? flags : flags & ~O_EXCL, mode);
  };
}

module.exports = { installChmodOfSameMode, createFilesWithTheirMode };
