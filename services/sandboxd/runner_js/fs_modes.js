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
// open does), and Emscripten's open then finds it there and chmods nothing. A mode that does
// not allow the open's access (os.open(name, O_CREAT | O_RDWR, 0o400), which POSIX lets the
// creating open do) cannot be opened again once made: then Emscripten makes the node, the
// host file is made with its mode and the access in one open, whose descriptor becomes the
// stream's, and Emscripten's chmod to that same mode changes nothing. What this cannot look
// up takes Emscripten's own way.
function createFilesWithTheirMode(FS) {
  const O_CREAT = 0o100;
  const O_EXCL = 0o200;
  const O_TRUNC = 0o1000;
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
  // The creating open under way whose mode lacks its access: { host, flags, perms, fd, stream }.
  let creating = null;
  const mknod = NODEFS.node_ops.mknod;
  NODEFS.node_ops.mknod = function mknodWithTheAccess(parent, name, mode, dev) {
    if (!creating || !FS.isFile(mode) || path.join(NODEFS.realPath(parent), name) !== creating.host) {
      return mknod.call(this, parent, name, mode, dev);
    }
    const node = NODEFS.createNode(parent, name, mode, dev);
    creating.fd = NODEFS.tryFSOperation(() => fs.openSync(creating.host, creating.flags | fs.constants.O_CREAT |
      fs.constants.O_EXCL, creating.perms));
    return node;
  };
  const streamOpen = NODEFS.stream_ops.open;
  NODEFS.stream_ops.open = function openTheCreatedFile(stream) {
    if (!creating || creating.fd === undefined || creating.stream || NODEFS.realPath(stream.node) !== creating.host) {
      return streamOpen.call(this, stream);
    }
    stream.shared.refcount = 1;
    stream.nfd = creating.fd;
    creating.stream = stream;  // which closes the descriptor
    return undefined;
  };
  const openLackingAccess = (name, flags, mode, host) => {
    creating = { host, flags: NODEFS.flagsForNode(flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOFOLLOW)), perms: mode & 0o777 };
    try {
      return open.call(FS, name, flags, mode);
    } catch (e) {
      // A failed open leaves no file behind.
      if (creating.stream) {
        try { FS.close(creating.stream); } catch (ignored) { /* e says what went wrong */ }
      } else if (creating.fd !== undefined) {
        fs.closeSync(creating.fd);
      }
      if (creating.fd !== undefined) {
        try { FS.unlink(name); } catch (ignored) { /* e says what went wrong */ }
      }
      throw e;
    } finally {
      creating = null;
    }
  };
  FS.open = function openCreatingWithMode(name, flags, mode = 0o666) {
    if (typeof name !== 'string' || typeof flags !== 'number' || !(flags & O_CREAT)) {
      return open.call(FS, name, flags, mode);
    }
    const perms = mode & 0o777;
    const access = flags & 3;
    const needs = access === 0 ? 0o400 : access === 1 ? 0o200 : 0o600;
    let host = null;
    let made = false;
    try {
      host = hostPathToCreate(name, flags);
      if (host !== null && (perms & needs) === needs) {
        fs.closeSync(fs.openSync(host, fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_WRONLY, perms));
        made = true;
      }
    } catch (e) {
      host = null;  // Emscripten's open reports what is wrong
    }
    if (host !== null && !made) return openLackingAccess(name, flags, mode, host);
    return open.call(FS, name, made ? flags & ~O_EXCL : flags, mode);
  };
}

module.exports = { installChmodOfSameMode, createFilesWithTheirMode };
