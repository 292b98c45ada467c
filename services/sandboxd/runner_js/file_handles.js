'use strict';
// fs.promises' FileHandles as user code gets them (descriptors.js says why). Node's FileHandle
// trusts what it holds: its descriptor, reference count and binding handle live under
// symbols its methods read and write (kFd, kRefs, kHandle), and methods under symbols
// (kUnref, kCloseSync) close its number at once. Anyone holding one reaches all of them
// (getOwnPropertySymbols, its prototype), so could point it at any number, or close its
// number under one of its operations still queued on the threadpool, which then lands on
// whatever the runner opens there next (its reconnection to sandboxd). So code never holds
// one of Node's:
// - fs.promises.open gives a FileHandle of this module's class, which keeps Node's in a
//   private field and hands each call of its methods to Node's, which counts its operations
//   in flight and closes the number after the last, as for any FileHandle. Its streams read
//   and write through its methods (Node's own would hold Node's FileHandle under a symbol
//   of the stream's); fs.promises' readFile, writeFile and appendFile take it as a
//   FileHandle, and fs.createReadStream and createWriteStream as an `fd`.
// - Node's FileHandles, those behind this module's and those fs.promises makes for itself
//   (its readFile, writeFile and truncate of a path), and the binding handles behind them,
//   inherit from objects no code reaches, which hold what EventEmitter.prototype (and
//   AsyncWrap.prototype, which code reaches from any socket's or zlib stream's handle) held
//   before any cell ran and end the chain: nothing looked up on one (`emit` as it closes,
//   `then` as a promise resolves to one, V8's for the binding's open, the keys a
//   constructor sets) reaches an object code can change, so no accessor or function of the
//   code's gets one as `this`. EventEmitter.init, which the constructor calls, stays
//   Node's. Should a binding handle reach code all the same, it makes none on another
//   number, never closes at once (closeSync, releaseFD: only its asynchronous close, as
//   Node's FileHandle calls it), and takes no stream call, whose native checks abort the
//   process on arguments of another shape.

const EventEmitter = require('events');
const fs = require('fs');
const { Interface } = require('readline');
const { fileURLToPath } = require('url');
const { types: { isProxy, isUint8Array } } = require('util');

const {
  apply, defineProperty, fixed, locked, getOwnPropertySymbols, getPrototypeOf, isolateChain, Error, TypeError,
} = require('./intrinsics');

// Node's FileHandle methods this module's hands calls to, each with the same arguments and
// result. Not getAsyncId (it asks the binding handle, whose chain code can reach), nor the
// streams, nor anything under a symbol.
const FORWARDED = ['appendFile', 'chmod', 'chown', 'datasync', 'sync', 'read', 'readv', 'readFile',
  'stat', 'truncate', 'utimes', 'write', 'writev', 'writeFile', 'readableWebStream'];

function nodeError(Class, code, message) {
  const e = new Class(message);
  e.code = code;
  return e;
}

// The binding handle's methods that no FileHandle of Node's calls (closeSync and releaseFD
// only from what this module refuses: a transfer, kCloseSync) or that are a stream's.
const BINDING_REFUSED = ['closeSync', 'releaseFD', 'readStart', 'readStop', 'shutdown', 'useUserBuffer',
  'writev', 'writeBuffer', 'writeAsciiString', 'writeUtf8String', 'writeUcs2String', 'writeLatin1String'];

// Node's FileHandle class (`nodeProto`) and its binding's (from `handle`, an open one).
function isolateNodeClasses(nodeProto, handle) {
  const kHandle = getOwnPropertySymbols(handle).find((s) => s.description === 'kHandle');
  const binding = kHandle === undefined ? null : handle[kHandle];
  if (binding === null || typeof binding !== 'object') {
    throw new Error('a FileHandle without kHandle: this Node is not known here');
  }
  isolateChain(nodeProto);
  defineProperty(EventEmitter, 'init', locked(EventEmitter.init));
  const bindingProto = getPrototypeOf(binding);
  const refuse = (what) => function refusedBinding() {
    throw nodeError(Error, 'ERR_ACCESS_DENIED', `a FileHandle's binding ${what} is not available in a sandbox`);
  };
  defineProperty(bindingProto, 'constructor', locked(refuse('constructor')));
  for (const name of BINDING_REFUSED) {
    if (typeof bindingProto[name] === 'function') defineProperty(bindingProto, name, locked(refuse(name)));
  }
  isolateChain(bindingProto);
}

const MAKE = {};
const emitterOn = EventEmitter.prototype.on;
let nodeHandleOf = null;     // this module's FileHandle -> Node's (the class's private field)
let isFileHandle = null;

class FileHandle extends EventEmitter {
  #handle;

  // Own, as Node's is (`const { close } = handle` works).
  close = () => this.#handle.close();

  constructor(make, handle) {
    if (make !== MAKE) {
      throw nodeError(TypeError, 'ERR_ILLEGAL_CONSTRUCTOR', 'FileHandle: only fs.promises.open makes one');
    }
    super();
    this.#handle = handle;
    // Node's emits 'close' as its close begins (called here, or by a stream of this one).
    apply(emitterOn, handle, ['close', () => this.emit('close')]);
  }

  static {
    nodeHandleOf = (handle) => handle.#handle;
    isFileHandle = (value) => value !== null && typeof value === 'object' && #handle in value;
  }

  get fd() {
    return this.#handle.fd;
  }

  createReadStream(options = undefined) {
    return streamOn(this, fs.ReadStream, options);
  }

  createWriteStream(options = undefined) {
    return streamOn(this, fs.WriteStream, options);
  }

  readLines(options = undefined) {
    return new Interface({ input: this.createReadStream(options), crlfDelay: Infinity });
  }
}

// A stream of `fs` on `handle`, as Node makes one on its own FileHandle: it reads, writes and
// closes through the handle's methods, and closes with it.
function streamOn(handle, Stream, options) {
  const settings = { ...options };
  if (settings.fs !== undefined) {
    throw nodeError(Error, 'ERR_METHOD_NOT_IMPLEMENTED', 'The FileHandle with fs method is not implemented');
  }
  const settle = (promise, ok, failed) => { promise.then(ok, failed); };
  const operations = {
    open() {
      throw nodeError(Error, 'ERR_METHOD_NOT_IMPLEMENTED', 'The open() method is not implemented');
    },
    close: (fd, cb) => settle(handle.close(), () => cb(), cb),
    fsync: (fd, cb) => settle(handle.sync(), () => cb(), cb),
    read: (fd, buffer, offset, length, position, cb) => settle(handle.read(buffer, offset, length, position),
      (r) => cb(null, r.bytesRead, r.buffer), (e) => cb(e, 0, buffer)),
    write: (fd, buffer, offset, length, position, cb) => settle(handle.write(buffer, offset, length, position),
      (r) => cb(null, r.bytesWritten, r.buffer), (e) => cb(e, 0, buffer)),
    writev: (fd, buffers, position, cb) => settle(handle.writev(buffers, position),
      (r) => cb(null, r.bytesWritten, r.buffers), (e) => cb(e, 0, buffers)),
  };
  const stream = new Stream(undefined, { ...settings, fd: handle.fd, fs: operations });
  handle.on('close', () => stream.close());
  return stream;
}

function defineForwarded(nodeProto) {
  for (const name of FORWARDED) {
    const method = nodeProto[name];
    if (typeof method !== 'function') continue;   // Node 18 (the container tier) lacks some
    defineProperty(FileHandle.prototype, name, {
      __proto__: null,
      value: { [name](...args) { return apply(method, nodeHandleOf(this), args); } }[name],
      writable: true, configurable: true, enumerable: false,
    });
  }
  if (typeof Symbol.asyncDispose === 'symbol') {
    defineProperty(FileHandle.prototype, Symbol.asyncDispose, {
      __proto__: null,
      async value() { await this.close(); },
      writable: true, configurable: true, enumerable: false,
    });
  }
}

// fs.promises.open, and readFile, writeFile and appendFile, which take a path or a FileHandle:
// this module's is handed to its Node's method of the name (which counts the call in flight,
// as fs.promises' own do not). Any other object is passed on as a value no code holds (a
// copy of a path's bytes, a file URL's path), so no getter of the code's (of the options,
// say) changes it after Node's checks.
function lockPromises(refused) {
  const promises = fs.promises;
  const open = promises.open;
  defineProperty(promises, 'open', fixed({
    async open(...args) {
      return new FileHandle(MAKE, await apply(open, promises, args));
    },
  }.open));
  const pathOf = (file, name) => {
    if (file === null || (typeof file !== 'object' && typeof file !== 'function')) return file;
    if (isProxy(file)) throw refused('FileHandle', name);
    return isUint8Array(file) ? new Uint8Array(file) : fileURLToPath(file);
  };
  for (const name of ['readFile', 'writeFile', 'appendFile']) {
    const original = promises[name];
    const method = FileHandle.prototype[name];
    defineProperty(promises, name, fixed({
      [name](file, ...rest) {
        if (isFileHandle(file)) return apply(method, file, rest);
        return apply(original, promises, [pathOf(file, name), ...rest]);
      },
    }[name]));
  }
}

// Locks fs.promises' FileHandles; resolves once done (on a handle of the runner's own file,
// `ownFile`), which must come before any user code runs.
async function lockFileHandles(refused, ownFile) {
  const handle = await fs.promises.open(ownFile, 'r');
  const nodeProto = getPrototypeOf(handle);
  try {
    isolateNodeClasses(nodeProto, handle);
  } finally {
    await handle.close();
  }
  defineForwarded(nodeProto);
  lockPromises(refused);
}

// The stream `name` (createReadStream, createWriteStream) of fs makes on `options.fd` when it
// is one of this module's FileHandles, else null.
function streamOnFileHandle(name, options) {
  if (options === null || typeof options !== 'object' || !isFileHandle(options.fd)) return null;
  return apply(FileHandle.prototype[name], options.fd, [{ ...options, fd: undefined }]);
}

module.exports = { lockFileHandles, streamOnFileHandle };
