'use strict';
// FileTransfers: the file frames of docs/runner-protocol.md, served on the main thread one
// at a time in arrival order (a download waits for the socket to drain between chunks), so
// files move while code runs in the worker. Uploads go to a hidden `.upload-*` file beside
// the target and are renamed over it on commit. Paths: file_paths.js.

const fs = require('fs');
const P = require('./file_paths');

class FileTransfers {
  constructor(root) {
    this.root = root;
    this.uploads = new Map();     // conn -> Map(id -> upload)
    this.failed = new Map();      // conn -> Set(id) of uploads that already failed
    this.chain = Promise.resolve();
  }

  submit(conn, frame) {
    this.chain = this.chain.then(() => this.handle(conn, frame)).catch((e) => {
      P.log(`file operation failed internally: ${e && e.stack}`);
      conn.send({ type: 'file_error', id: frame.id, code: 'internal',
        message: `internal runner error: ${e && e.message}` });
    });
  }

  connectionLost(conn) {
    this.chain = this.chain.then(() => {
      for (const upload of (this.uploads.get(conn) || new Map()).values()) discard(upload);
      this.uploads.delete(conn);
      this.failed.delete(conn);
    });
  }

  of(map, conn, make) {
    if (!map.has(conn)) map.set(conn, make());
    return map.get(conn);
  }

  async handle(conn, frame) {
    const uploads = this.of(this.uploads, conn, () => new Map());
    const failed = this.of(this.failed, conn, () => new Set());
    const kind = frame.type;
    if (['file_chunk', 'file_commit', 'file_abort'].includes(kind) && failed.has(frame.id)) {
      if (kind !== 'file_chunk') failed.delete(frame.id);   // the error was sent: over
      return;
    }
    try {
      if (kind === 'file_upload') this.begin(uploads, frame);
      else if (kind === 'file_chunk') this.chunk(uploads, frame);
      else if (kind === 'file_commit') {
        const size = this.commit(uploads, frame.id);
        conn.send({ type: 'file_written', id: frame.id, size });
      } else if (kind === 'file_abort') {
        const upload = uploads.get(frame.id);
        uploads.delete(frame.id);
        if (upload) discard(upload);
      } else if (kind === 'file_download') await this.download(conn, frame);
      else if (kind === 'file_list') this.list(conn, frame);
    } catch (e) {
      if (!(e instanceof P.FileOpError)) throw e;
      const upload = uploads.get(frame.id);
      uploads.delete(frame.id);
      if (upload) {
        discard(upload);
        if (kind === 'file_chunk') failed.add(frame.id);   // its later frames are ignored
      } else if (kind === 'file_upload') failed.add(frame.id);
      conn.send({ type: 'file_error', id: frame.id, code: e.code, message: e.message });
    }
  }

  begin(uploads, frame) {
    const path = frame.path;
    if (uploads.has(frame.id)) throw new P.FileOpError('invalid_argument', `upload ${frame.id} is already open`);
    if (uploads.size >= P.MAX_OPEN_UPLOADS) {
      throw new P.FileOpError('resource_exhausted',
        `at most ${P.MAX_OPEN_UPLOADS} uploads may be open at once`);
    }
    const parts = P.splitPath(path, false);
    const name = parts[parts.length - 1];
    let dirFd;
    try {
      dirFd = P.resolveDir(this.root, parts, true);
    } catch (e) {
      throw P.describeOsError(e, path);
    }
    const temp = truncateBytes(`${P.TEMP_PREFIX}${process.pid}-${frame.id}-${name}`, 255);
    try {
      try {
        fs.unlinkSync(P.at(dirFd, temp));  // whatever user code left under that name
      } catch (e) {
        if (e.code !== 'ENOENT') throw e;
      }
      const fd = P.openNoFollow(dirFd, temp, P.O_WRONLY | P.O_CREAT | P.O_EXCL);
      uploads.set(frame.id, { path, dirFd, name, temp, fd, max: frame.max_bytes, size: 0 });
    } catch (e) {
      P.closeQuietly(dirFd);
      throw P.describeOsError(e, path);
    }
  }

  chunk(uploads, frame) {
    const upload = uploads.get(frame.id);
    if (!upload) throw new P.FileOpError('failed_precondition', `no open upload ${frame.id}`);
    let data = frame.data;
    if (typeof data === 'string') {
      if (!P.BASE64.test(data)) throw new P.FileOpError('invalid_argument', 'file_chunk.data is not base64');
      data = Buffer.from(data, 'base64');
    }
    if (upload.size + data.length > upload.max) {
      throw new P.FileOpError('resource_exhausted',
        `'${upload.path}': larger than the ${upload.max} byte cap`);
    }
    try {
      for (let off = 0; off < data.length;) off += fs.writeSync(upload.fd, data, off);
    } catch (e) {
      throw P.describeOsError(e, upload.path);
    }
    upload.size += data.length;
  }

  commit(uploads, id) {
    const upload = uploads.get(id);
    uploads.delete(id);
    if (!upload) throw new P.FileOpError('failed_precondition', `no open upload ${id}`);
    try {
      // Replaces a file (or a symlink itself, never its target); a directory: EISDIR.
      fs.renameSync(P.at(upload.dirFd, upload.temp), P.at(upload.dirFd, upload.name));
    } catch (e) {
      discard(upload);
      throw P.describeOsError(e, upload.path);
    }
    P.closeQuietly(upload.fd);
    P.closeQuietly(upload.dirFd);
    return upload.size;
  }

  openFile(path) {
    const parts = P.splitPath(path, false);
    let fd;
    try {
      const dirFd = P.resolveDir(this.root, parts, false);
      try {
        fd = P.openNoFollow(dirFd, parts[parts.length - 1], P.O_RDONLY | P.O_NONBLOCK);
      } finally {
        P.closeQuietly(dirFd);
      }
    } catch (e) {
      throw P.describeOsError(e, path);
    }
    const st = fs.fstatSync(fd);
    if (!st.isFile()) {
      P.closeQuietly(fd);
      throw new P.FileOpError('failed_precondition', `'${path}' is not a regular file`);
    }
    return [fd, st];
  }

  async download(conn, frame) {
    const { path, max_bytes: max } = frame;
    const [fd, st] = this.openFile(path);
    let sent = 0;
    try {
      if (st.size > max) {
        throw new P.FileOpError('resource_exhausted',
          `'${path}' has ${st.size} bytes, more than the ${max} byte cap`);
      }
      const buf = Buffer.allocUnsafe(P.FILE_CHUNK_BYTES);
      for (;;) {
        const n = fs.readSync(fd, buf, 0, buf.length, null);
        if (n === 0) break;
        sent += n;
        if (sent > max) throw new P.FileOpError('resource_exhausted', `'${path}' grew past the ${max} byte cap`);
        // The exact layout sandboxd decodes without a JSON parser (ParseFileDataFrame).
        const body = Buffer.from(`{"type":"file_data","id":${frame.id},"data":"` +
          `${buf.toString('base64', 0, n)}"}`, 'latin1');
        if (!conn.sendBody(body)) return;
        await conn.drained();
      }
    } finally {
      P.closeQuietly(fd);
    }
    conn.send({ type: 'file_read', id: frame.id, size: sent, mtime_ms: Math.floor(st.mtimeMs) });
  }

  list(conn, frame) {
    const { path, max_entries: max } = frame;
    const parts = P.splitPath(path, true);
    let fd;
    let names;
    try {
      fd = P.resolveDir(this.root, [...parts, '.'], false);
      names = fs.readdirSync(P.at(fd, '')).filter((n) => !n.startsWith(P.TEMP_PREFIX));
    } catch (e) {
      if (fd !== undefined) P.closeQuietly(fd);
      throw P.describeOsError(e, path);
    }
    const entries = [];
    const truncated = names.length > max;
    try {
      for (const name of names.slice(0, max)) entries.push(describe(fd, name, [...parts, name].join('/')));
    } finally {
      P.closeQuietly(fd);
    }
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    conn.send({ type: 'file_list_result', id: frame.id, entries, truncated });
  }
}

function describe(dirFd, name, path) {
  let st;
  try {
    st = fs.lstatSync(P.at(dirFd, name));
  } catch (e) {
    return { path, type: 'other', size: 0, mtime_ms: 0 };
  }
  const type = st.isFile() ? 'file' : st.isDirectory() ? 'directory' :
    st.isSymbolicLink() ? 'symlink' : 'other';
  return { path, type, size: type === 'file' ? st.size : 0, mtime_ms: Math.floor(st.mtimeMs) };
}

function discard(upload) {
  P.closeQuietly(upload.fd);
  try {
    fs.unlinkSync(P.at(upload.dirFd, upload.temp));
  } catch (e) {
    // gone already
  }
  P.closeQuietly(upload.dirFd);
}

function truncateBytes(text, max) {
  let out = text;
  while (Buffer.byteLength(out) > max) out = out.slice(0, -1);
  return out;
}

module.exports = { FileTransfers, FILE_FRAMES: P.FILE_FRAMES, checkFileFrame: P.checkFileFrame };
