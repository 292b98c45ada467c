'use strict';
// What a user's thread may do with a file descriptor number (lockDescriptors, part of
// lockRuntime). Threads share the process's descriptor table, and Node checks no
// permission on an operation by number: a cell could otherwise write frames on the runner's
// connection to sandboxd, read the frames meant for the main thread, or write into libuv's
// internal pipes (whose messages carry pointers the loop follows). So:
// - fs's functions that take a descriptor (read, write, close, fsync, ...) take one only if
//   it is a regular file or a directory, what fs.open gives code in its workspace; sockets,
//   pipes, event and epoll descriptors, terminals are refused with EBADF. The type is asked
//   each time (fstat), so a number the main thread reuses after the code closed it is
//   judged by what it is then. Pyodide's file system calls the same functions.
// - net's sockets and servers and tty's streams take no descriptor at all: the code's own
//   sockets are the ones it connects (tls builds on net's). libuv's handle classes (Pipe,
//   TCP, UDP), one `_handle.constructor` away, lose `open(fd)`, which adopts any descriptor.
// - fs.promises: a FileHandle's descriptor is its `fd`, which Node's FileHandle code and
//   readFile/writeFile/appendFile read without a check, so the code never holds a
//   FileHandle itself: fs.promises.open gives a proxy of one that hides its internal
//   symbols (without them no object passes for a FileHandle in its methods), refuses new
//   properties and prototypes, and answers its properties only to itself (an object made
//   from it inherits nothing); readFile/writeFile/appendFile take no other FileHandle.

const dgram = require('dgram');
const fs = require('fs');
const net = require('net');
const tty = require('tty');
const { lockFileHandles } = require('./file_handles');

const { apply, construct } = Reflect;
const fstatSync = fs.fstatSync;

const fixed = (value) => ({ value, writable: false, configurable: false, enumerable: true });

function refusedDescriptor(fd, what) {
  const e = new Error(`EBADF: ${what}: descriptor ${fd} is not a file this code opened`);
  Object.assign(e, { code: 'EBADF', errno: -9, syscall: what });
  return e;
}

// Throws unless `fd` is a number of a regular file or a directory. A non-number is left to
// Node's own checks (a path, a FileHandle, a wrong type); so is a number fstat finds no
// fault with but its type (not an integer, out of range). A number that is not open is
// refused here: the call would run later (async) or on another thread's time, when the
// main thread may have opened it.
function checkDescriptor(fd, what) {
  if (typeof fd !== 'number') return;
  let st;
  try {
    st = fstatSync(fd);
  } catch (e) {
    if (e && e.code === 'EBADF') throw refusedDescriptor(fd, what);
    return;
  }
  if (!st.isFile() && !st.isDirectory()) throw refusedDescriptor(fd, what);
}

// fs's functions whose first argument is a descriptor, and those that take a path or one.
const BY_DESCRIPTOR = ['read', 'readv', 'write', 'writev', 'close', 'fsync', 'fdatasync',
  'ftruncate', 'futimes', 'fchmod', 'fchown', 'readFile', 'writeFile', 'appendFile'];

// An async call checked on a descriptor runs later, on the threadpool: a close of that
// number before it ran would let the main thread's next socket take the number and the call
// land there. So the descriptors of async calls in flight are counted, and a close of one
// waits (fs.close's callback, or closeSync's own effect, comes when the last call ended).
class CallsInFlight {
  constructor(close) {
    this.close = close;             // Node's fs.close
    this.counts = new Map();        // fd -> calls in flight
    this.closes = new Map();        // fd -> [callback or null] waiting for them
  }

  // `args` of an async call on `fd`, its callback (the last argument) wrapped to count it.
  track(fd, args) {
    const last = args.length - 1;
    const callback = args[last];
    if (typeof fd !== 'number' || typeof callback !== 'function') return args;
    this.counts.set(fd, (this.counts.get(fd) || 0) + 1);
    const calls = this;
    let ended = false;
    const out = args.slice();
    out[last] = function callbackInFlight(...results) {
      if (!ended) {
        ended = true;
        calls.end(fd);
      }
      return apply(callback, this, results);
    };
    return out;
  }

  end(fd) {
    const left = this.counts.get(fd) - 1;
    if (left > 0) {
      this.counts.set(fd, left);
      return;
    }
    this.counts.delete(fd);
    const waiting = this.closes.get(fd) || [];
    this.closes.delete(fd);
    for (const callback of waiting) this.close(fd, callback || (() => {}));
  }

  // Whether a close of `fd` (`callback`: fs.close's, or null) now waits for calls in flight.
  deferClose(fd, callback) {
    if (typeof fd !== 'number' || !this.counts.has(fd)) return false;
    if (!this.closes.has(fd)) this.closes.set(fd, []);
    this.closes.get(fd).push(typeof callback === 'function' ? callback : null);
    return true;
  }
}

// fs[name] (`base` without Sync) checking its descriptor; an async one says a refusal
// through its callback, as Node says EBADF, and counts its call in `calls` until it ends.
function byDescriptor(base, name, original, calls) {
  const sync = name !== base;
  return {
    [name](...args) {
      const fd = args[0];
      const last = args[args.length - 1];
      const callback = !sync && typeof last === 'function' ? last : null;
      try {
        checkDescriptor(fd, name);
      } catch (e) {
        if (callback === null) throw e;
        process.nextTick(callback, e);
        return undefined;
      }
      if (base === 'close' && calls.deferClose(fd, callback)) return undefined;
      const tracked = sync || base === 'close' ? args : calls.track(fd, args);
      try {
        return apply(original, this, tracked);
      } catch (e) {
        if (tracked !== args) calls.end(fd);
        throw e;
      }
    },
  }[name];
}

function lockFs() {
  const calls = new CallsInFlight(fs.close);
  for (const base of BY_DESCRIPTOR) {
    for (const name of [base, `${base}Sync`]) {
      const original = fs[name];
      if (typeof original === 'function') {
        Object.defineProperty(fs, name, fixed(byDescriptor(base, name, original, calls)));
      }
    }
  }
  for (const name of ['createReadStream', 'createWriteStream']) {
    const original = fs[name];
    Object.defineProperty(fs, name, fixed({
      [name](path, options) {
        if (options !== null && typeof options === 'object') checkDescriptor(options.fd, name);
        return apply(original, this, [path, options]);
      },
    }[name]));
  }
}

function refuseFdOption(options, what) {
  if (options !== null && typeof options === 'object' && options.fd !== undefined) {
    throw refusedDescriptor(options.fd, what);
  }
}

// `Class` as its module exports it, refusing construction with an `fd` option (or with any
// arguments at all when `always`).
function guardClass(module, name, always = false) {
  const Original = module[name];
  const Guarded = new Proxy(Original, {
    construct(target, args, newTarget) {
      if (always) throw refusedDescriptor(args[0], `${name}`);
      refuseFdOption(args[0], name);
      return construct(target, args, newTarget === Guarded ? target : newTarget);
    },
    apply(target, self, args) {
      if (always) throw refusedDescriptor(args[0], `${name}`);
      refuseFdOption(args[0], name);
      return apply(target, self, args);
    },
  });
  Object.defineProperty(module, name, fixed(Guarded));
  // The class is also its prototype's `constructor`, one step from any instance.
  Object.defineProperty(Original.prototype, 'constructor',
    { value: Guarded, writable: false, configurable: false, enumerable: false });
}

function lockSockets() {
  guardClass(net, 'Socket');
  if (net.Stream !== undefined) Object.defineProperty(net, 'Stream', fixed(net.Socket));
  for (const name of ['connect', 'createConnection']) {
    const original = net[name];
    Object.defineProperty(net, name, fixed({
      [name](...args) {
        refuseFdOption(args[0], name);
        return apply(original, this, args);
      },
    }[name]));
  }
  const listen = net.Server.prototype.listen;
  Object.defineProperty(net.Server.prototype, 'listen', fixed({
    listen(...args) {
      const first = args[0];
      if (first !== null && typeof first === 'object') {
        refuseFdOption(first, 'listen');
        if (first.handle !== undefined || first._handle !== undefined) throw refusedDescriptor('handle', 'listen');
      }
      return apply(listen, this, args);
    },
  }.listen));
  guardClass(tty, 'ReadStream', true);
  guardClass(tty, 'WriteStream', true);
}

// Takes `open` from the class of `handle` (and of the TCP handle under a TLS one).
const lockedHandleClasses = new WeakSet();
function lockHandleClass(handle) {
  for (const h of [handle, handle && handle._parent]) {
    if (h === null || typeof h !== 'object') continue;
    let owner = Object.getPrototypeOf(h);
    while (owner !== null && !Object.prototype.hasOwnProperty.call(owner, 'open')) {
      owner = Object.getPrototypeOf(owner);
    }
    if (owner === null || lockedHandleClasses.has(owner)) continue;
    Object.defineProperty(owner, 'open', fixed(function open(fd) {
      throw refusedDescriptor(fd, 'open');
    }));
    lockedHandleClasses.add(owner);
  }
}

// A socket of each of libuv's handle classes, made and dropped at once, gives each class
// to lock: a pipe's connect to a path that is not there (in the wasm jail, socket() is
// refused), a TCP connect to an address, ended before its connect runs (on the next tick),
// and a UDP socket, which has no descriptor before it binds.
function lockHandles() {
  const pipe = net.connect({ path: '/nonexistent/sandboxd-runner' });
  const tcp = net.connect({ port: 9, host: '127.0.0.1' });
  for (const socket of [pipe, tcp]) {
    socket.on('error', () => {});
    lockHandleClass(socket._handle);
    socket.destroy();
  }
  const udp = dgram.createSocket('udp4');
  for (const key of Object.getOwnPropertySymbols(udp)) {
    const state = udp[key];
    if (state !== null && typeof state === 'object' && state.handle) lockHandleClass(state.handle);
  }
  udp.close();
}

function lockDescriptors() {
  lockFs();
  lockSockets();
  lockHandles();
  lockFileHandles(refusedDescriptor);
}

module.exports = { lockDescriptors, checkDescriptor, refusedDescriptor };
