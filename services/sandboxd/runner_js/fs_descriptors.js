'use strict';
// fs's functions that take a descriptor number, as a user's thread gets them (part of
// lockDescriptors; descriptors.js says why). A number is the code's only while it holds it:
// fs.open and fs.openSync of this thread gave it (Pyodide's file system opens through them
// too) and no close of this thread has been asked for it since. Every other number is
// refused with EBADF: the runner's sockets and libuv's pipes, but also regular files that
// others hold (an upload the main thread writes, a FileHandle's or an fs.Dir's number),
// whose holder would go on using the number after the code closed it, when the main thread
// may have opened something else there.
//
// An async call runs later, on the threadpool: the calls in flight on a number are counted,
// and its close, asked while some are, waits for the last (the number stays open, and the
// code's no longer, meanwhile).

const fs = require('fs');

const { apply, defineProperty, fixed, nextTick, Map, Set, TypeError } = require('./intrinsics');

// fs's functions whose first argument is a descriptor (and those that take a path or one).
const BY_DESCRIPTOR = ['read', 'readv', 'write', 'writev', 'fsync', 'fdatasync', 'ftruncate',
  'futimes', 'fchmod', 'fchown', 'readFile', 'writeFile', 'appendFile'];

function callbackNotLast() {
  const e = new TypeError('fs: a call on a descriptor takes one function, its callback, as its last argument');
  e.code = 'ERR_INVALID_ARG_TYPE';
  return e;
}

class Descriptors {
  constructor(refused) {
    this.refused = refused;         // (fd, what) -> Error
    this.owned = new Set();         // numbers the code holds
    this.inFlight = new Map();      // fd -> async calls not ended
    this.closes = new Map();        // fd -> [callback or null]: closes waiting for them
    this.close = fs.close;          // Node's
    this.closeSync = fs.closeSync;
  }

  // Throws unless `fd` is a number the code holds. A non-number is left to Node's own
  // checks (a path, a FileHandle, a wrong type).
  check(fd, what) {
    if (typeof fd === 'number' && !this.owned.has(fd)) throw this.refused(fd, what);
  }

  // check(fd, what) for a call with `callback` (null: none): a refusal goes to the callback
  // on the next tick, as Node says EBADF (true), or is thrown without one.
  refusedThrough(callback, fd, what) {
    try {
      this.check(fd, what);
      return false;
    } catch (e) {
      if (callback === null) throw e;
      nextTick(callback, e);
      return true;
    }
  }

  // An async call on `fd` counted in flight: {args}, its callback (the last argument)
  // wrapped to end the count, and {end}, which ends it as well, once for both (Node may call
  // the callback at once, and a callback that throws comes out of the call). Node takes the
  // callback by its position, not as the last argument: a call holds exactly one function,
  // last, or one with an argument after its callback would run uncounted, and a close would
  // not wait for it. Null for a call not on a number.
  track(fd, args) {
    if (typeof fd !== 'number') return null;
    const last = args.length - 1;
    for (let i = 0; i < last; i++) {
      if (typeof args[i] === 'function') throw callbackNotLast();
    }
    const callback = args[last];
    if (typeof callback !== 'function') throw callbackNotLast();
    this.inFlight.set(fd, (this.inFlight.get(fd) || 0) + 1);
    let ended = false;
    const end = () => {
      if (!ended) {
        ended = true;
        this.end(fd);
      }
    };
    const out = args.slice();
    out[last] = function callbackInFlight(...results) {
      end();
      return apply(callback, undefined, results);
    };
    return { args: out, end };
  }

  // `args` with its callback (a function last), if any, called with no `this`: Node calls
  // fs.readFile's as `context.callback(error)` when the open fails, and its ReadFileContext
  // closes any number it is given through the binding, past fs.close.
  static withoutThis(args) {
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback !== 'function') return args;
    const out = args.slice();
    out[last] = function callbackWithoutThis(...results) {
      return apply(callback, undefined, results);
    };
    return out;
  }

  end(fd) {
    const left = this.inFlight.get(fd) - 1;
    if (left > 0) {
      this.inFlight.set(fd, left);
      return;
    }
    this.inFlight.delete(fd);
    const waiting = this.closes.get(fd) || [];
    this.closes.delete(fd);
    if (waiting.length === 0) return;
    let error = null;
    try {
      this.closeSync(fd);
    } catch (e) {
      error = e;
    }
    for (const callback of waiting) if (callback) nextTick(callback, error);
  }

  // A close of `fd` (`callback`: fs.close's; null: closeSync's): the number is the code's no
  // longer at once; the descriptor closes now, or after the calls in flight on it.
  // Returns whether it waits for them.
  release(fd, callback) {
    this.owned.delete(fd);
    if (!this.inFlight.has(fd)) return false;
    if (!this.closes.has(fd)) this.closes.set(fd, []);
    this.closes.get(fd).push(callback);
    return true;
  }

  // fs[name] (`base` without Sync) checking its descriptor; an async one says a refusal
  // through its callback, as Node says EBADF, and is counted until it ends.
  byDescriptor(base, name, original) {
    const descriptors = this;
    const sync = name !== base;
    return {
      [name](...args) {
        const fd = args[0];
        const last = args[args.length - 1];
        const callback = !sync && typeof last === 'function' ? last : null;
        if (descriptors.refusedThrough(callback, fd, name)) return undefined;
        const call = sync ? null : descriptors.track(fd, args);
        try {
          return apply(original, this, call ? call.args : sync ? args : Descriptors.withoutThis(args));
        } catch (e) {
          if (call) call.end();
          throw e;
        }
      },
    }[name];
  }

  lockOpenAndClose() {
    const descriptors = this;
    const nodeFs = { open: fs.open, openSync: fs.openSync, close: fs.close, closeSync: fs.closeSync };
    defineProperty(fs, 'openSync', fixed(function openSync(...args) {
      const fd = apply(nodeFs.openSync, this, args);
      descriptors.owned.add(fd);
      return fd;
    }));
    defineProperty(fs, 'open', fixed(function open(...args) {
      const last = args.length - 1;
      const callback = args[last];
      if (typeof callback === 'function') {
        args = args.slice();
        args[last] = function opened(error, fd) {
          if (!error) descriptors.owned.add(fd);
          return apply(callback, this, [error, fd]);
        };
      }
      return apply(nodeFs.open, this, args);
    }));
    defineProperty(fs, 'closeSync', fixed(function closeSync(fd) {
      descriptors.check(fd, 'closeSync');
      if (typeof fd === 'number' && descriptors.release(fd, null)) return undefined;
      return apply(nodeFs.closeSync, this, [fd]);
    }));
    defineProperty(fs, 'close', fixed(function close(fd, callback) {
      if (descriptors.refusedThrough(typeof callback === 'function' ? callback : null, fd, 'close')) {
        return undefined;
      }
      if (typeof fd === 'number' && descriptors.release(fd, typeof callback === 'function' ? callback : null)) {
        return undefined;
      }
      return apply(nodeFs.close, this, [fd, callback]);
    }));
  }
}

// Locks fs's descriptor functions in this thread; `refused(fd, what)` makes their error.
// Returns the check, for the stream constructors (descriptors.js).
function lockFsDescriptors(refused) {
  const descriptors = new Descriptors(refused);
  for (const base of BY_DESCRIPTOR) {
    for (const name of [base, `${base}Sync`]) {
      const original = fs[name];
      if (typeof original === 'function') {
        defineProperty(fs, name, fixed(descriptors.byDescriptor(base, name, original)));
      }
    }
  }
  descriptors.lockOpenAndClose();
  return (fd, what) => descriptors.check(fd, what);
}

module.exports = { lockFsDescriptors };
