'use strict';
// What a user's thread may do with a file descriptor number (lockDescriptors, part of
// lockRuntime). Threads share the process's descriptor table, and Node checks no
// permission on an operation by number: a cell could otherwise write frames on the runner's
// connection to sandboxd, read the frames meant for the main thread, or write into libuv's
// internal pipes (whose messages carry pointers the loop follows). So:
// - fs's functions that take a descriptor (read, write, close, fsync, ...) take only the
//   numbers this thread's fs.open gave and has not been asked to close (fs_descriptors.js);
//   every other is refused with EBADF. Pyodide's file system calls the same functions.
// - net's sockets and servers and tty's streams take no descriptor at all: the code's own
//   sockets are the ones it connects (tls builds on net's). libuv's handle classes (Pipe,
//   TCP, UDP), one `_handle.constructor` away, lose `open(fd)`, which adopts any descriptor.
// - fs.promises: Node's FileHandle trusts what it holds (its number, its count of
//   operations in flight), and any holder reaches those, so code gets a FileHandle of the
//   runner's own, which keeps Node's out of reach (file_handles.js).

const dgram = require('dgram');
const fs = require('fs');
const net = require('net');
const tty = require('tty');
const { lockFileHandles, streamOnFileHandle } = require('./file_handles');
const { lockFsDescriptors } = require('./fs_descriptors');

const {
  apply, construct, defineProperty, fixed, locked, getPrototypeOf, hasOwn, Proxy, WeakSet, Error,
} = require('./intrinsics');


function refusedDescriptor(fd, what) {
  const e = new Error(`EBADF: ${what}: descriptor ${fd} is not a file this code opened`);
  e.code = 'EBADF';
  e.errno = -9;
  e.syscall = what;
  return e;
}

function lockFs() {
  const check = lockFsDescriptors(refusedDescriptor);
  // A stream's `fd` is checked as a number, or is a FileHandle fs.promises.open gave, on
  // which the FileHandle's own stream is made (options copied: read once).
  for (const name of ['createReadStream', 'createWriteStream']) {
    const original = fs[name];
    defineProperty(fs, name, fixed({
      [name](path, options) {
        if (options === null || typeof options !== 'object') return apply(original, this, [path, options]);
        const settings = { ...options };
        check(settings.fd, name);
        return streamOnFileHandle(name, settings) || apply(original, this, [path, settings]);
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
  defineProperty(module, name, fixed(Guarded));
  // The class is also its prototype's `constructor`, one step from any instance.
  defineProperty(Original.prototype, 'constructor', locked(Guarded));
}

function lockSockets() {
  guardClass(net, 'Socket');
  if (net.Stream !== undefined) defineProperty(net, 'Stream', fixed(net.Socket));
  for (const name of ['connect', 'createConnection']) {
    const original = net[name];
    defineProperty(net, name, fixed({
      [name](...args) {
        refuseFdOption(args[0], name);
        return apply(original, this, args);
      },
    }[name]));
  }
  const listen = net.Server.prototype.listen;
  defineProperty(net.Server.prototype, 'listen', fixed({
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
    let owner = getPrototypeOf(h);
    while (owner !== null && !hasOwn(owner, 'open')) {
      owner = getPrototypeOf(owner);
    }
    if (owner === null || lockedHandleClasses.has(owner)) continue;
    defineProperty(owner, 'open', fixed(function open(fd) {
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

// Resolves once every lock holds (the FileHandle class is locked on a handle of this file's).
function lockDescriptors() {
  lockFs();
  lockSockets();
  lockHandles();
  return lockFileHandles(refusedDescriptor, __filename);
}

module.exports = { lockDescriptors, refusedDescriptor };
