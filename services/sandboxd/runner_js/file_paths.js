'use strict';
// Path handling for the file frames (docs/runner-protocol.md, "Files"; files.js serves them)
// and their checks. Node has no openat(): a path is
// walked one component at a time through /proc/self/fd/<dir fd>/<name>, each part opened
// with O_NOFOLLOW, and the opened file must be the very one lstat saw (gVisor follows a
// symlink to a directory despite O_NOFOLLOW | O_DIRECTORY); neither `..`, an absolute path
// nor a symlink planted by user code can lead outside the workspace.

const fs = require('fs');
const { log } = require('./common');
const { ProtocolError, frameField } = require('./protocol');

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = fs.constants;
const FILE_CHUNK_BYTES = 1024 * 1024;
const MAX_PATH_CHARS = 4096;
const MAX_OPEN_UPLOADS = 16;
const TEMP_PREFIX = '.upload-';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const FILE_FRAMES = {
  file_upload: { path: 'str', max_bytes: 'int' },
  file_chunk: { data: 'data' },
  file_commit: {},
  file_abort: {},
  file_download: { path: 'str', max_bytes: 'int' },
  file_list: { path: 'str', max_entries: 'int' },
};

function checkFileFrame(frame) {
  frameField(frame, 'id', 'int');
  if (frame.id < 0) throw new ProtocolError(`${frame.type}.id must not be negative`);
  for (const [name, kind] of Object.entries(FILE_FRAMES[frame.type])) {
    if (kind === 'data') {
      if (typeof frame.data !== 'string' && !Buffer.isBuffer(frame.data)) {
        throw new ProtocolError('file_chunk.data must be a string');
      }
    } else if (frameField(frame, name, kind) < 0) {
      throw new ProtocolError(`${frame.type}.${name} must not be negative`);
    }
  }
  return frame;
}

class FileOpError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function splitPath(path, allowRoot) {
  if (path.length > MAX_PATH_CHARS || path.includes('\0')) {
    throw new FileOpError('invalid_argument',
      `path must be at most ${MAX_PATH_CHARS} characters without NUL bytes`);
  }
  if (path.startsWith('/')) {
    throw new FileOpError('invalid_argument',
      `'${path}': paths are relative to the workspace, not absolute`);
  }
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new FileOpError('invalid_argument', `'${path}': '..' is not allowed`);
  if (!parts.length && !allowRoot) throw new FileOpError('invalid_argument', 'path names no file');
  return parts;
}

// Under Node's permission model (the wasm tier) /proc/self/fd/... is no allowed path: there
// a directory descriptor stands for the path it was opened by (recorded by openNoFollow and
// resolveDir); the checks of openNoFollow stay, and the process's own confinement (the
// permission model, Landlock) bounds what a path could reach.
const BY_PATH = typeof process.permission === 'object' && process.permission !== null;
const dirPaths = new Map();           // fd -> path, when BY_PATH
const at = (dirFd, name) => (BY_PATH ? `${dirPaths.get(dirFd)}/${name}` :
  `/proc/self/fd/${dirFd}/${name}`);

function remember(fd, path) {
  if (BY_PATH) dirPaths.set(fd, path.endsWith('/') ? path.slice(0, -1) : path);
  return fd;
}
const same = (a, b) => a.dev === b.dev && a.ino === b.ino;

function errnoError(code, name) {
  const e = new Error(`${code}: ${name}`);
  e.code = code;
  return e;
}

// open of `name` in directory `dirFd` that never goes through a symlink (see the top).
function openNoFollow(dirFd, name, flags, mode) {
  let seen = null;
  try {
    seen = fs.lstatSync(at(dirFd, name), { bigint: true });
  } catch (e) {
    if (e.code !== 'ENOENT' || !(flags & O_CREAT)) throw e;
  }
  if (seen && seen.isSymbolicLink()) throw errnoError('ELOOP', name);
  const fd = remember(fs.openSync(at(dirFd, name), flags | O_NOFOLLOW,
    mode === undefined ? 0o644 : mode), at(dirFd, name));
  try {
    const opened = fs.fstatSync(fd, { bigint: true });
    const now = fs.lstatSync(at(dirFd, name), { bigint: true });
    if (now.isSymbolicLink() || !same(opened, now) || (seen && !same(seen, now))) {
      throw errnoError('ELOOP', name);
    }
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
  return fd;
}

function openDir(dirFd, name, create) {
  try {
    return openNoFollow(dirFd, name, O_RDONLY | O_DIRECTORY);
  } catch (e) {
    if (e.code !== 'ENOENT' || !create) throw e;
  }
  try {
    fs.mkdirSync(at(dirFd, name), 0o755);
  } catch (e) {
    if (e.code !== 'EEXIST') throw e;  // made meanwhile; the open below decides
  }
  return openNoFollow(dirFd, name, O_RDONLY | O_DIRECTORY);
}

// A descriptor of the directory holding parts[parts.length - 1]; the caller closes it.
function resolveDir(root, parts, createDirs) {
  let fd = remember(fs.openSync(root, O_RDONLY | O_DIRECTORY), root);
  try {
    for (const name of parts.slice(0, -1)) {
      const next = openDir(fd, name, createDirs);
      fs.closeSync(fd);
      fd = next;
    }
    return fd;
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
}

function describeOsError(e, path) {
  switch (e.code) {
    case 'ENOENT': return new FileOpError('not_found', `'${path}': no such file or directory`);
    case 'ELOOP': case 'ENOTDIR':
      return new FileOpError('invalid_argument', `'${path}': a part of it is a symlink or not a directory`);
    case 'ENOSPC': case 'EDQUOT': case 'EFBIG':
      return new FileOpError('resource_exhausted', `'${path}': the workspace is full`);
    case 'EISDIR': return new FileOpError('failed_precondition', `'${path}' is a directory`);
    default:
      if (e instanceof FileOpError) return e;
      return new FileOpError('failed_precondition', `'${path}': ${e.code || e.message}`);
  }
}

function closeQuietly(fd) {
  try {
    fs.closeSync(fd);
  } catch (e) {
    // already closed
  }
}

module.exports = { FILE_FRAMES, FILE_CHUNK_BYTES, MAX_OPEN_UPLOADS, TEMP_PREFIX, BASE64,
  checkFileFrame, FileOpError, splitPath, at, openNoFollow, resolveDir, describeOsError,
  closeQuietly, O_WRONLY, O_CREAT, O_EXCL, O_NONBLOCK, O_RDONLY, log };
