'use strict';
// fs.promises' FileHandles as user code gets them (descriptors.js says why). Node's
// FileHandle keeps its descriptor and its reference count under symbols its methods check
// (`handle[kRefs] !== undefined`), and reads the number from `handle.fd`; an object that had
// those symbols, or that inherited them, could hand any number to the binding. So:
// - the class is locked before any user code runs, on a FileHandle of the runner's own
//   (lockFileHandleClass): no new handle is in reach of code before it is pinned, since
//   what its constructors look up is the class's own (EventEmitter.init is fixed; what they
//   set, and `then`, which the promise that hands a new handle over reads, are own
//   properties of the class's prototype), so no accessor or replaced function of the code's
//   gets one as `this`;
// - every FileHandle fs.promises.open makes is pinned to its descriptor, the number its
//   binding handle holds: its `kFd` takes no value but -1 (closed), and its own `fd` (what
//   Node's code hands the binding) answers the same; the class's `fd` answers -1 to any
//   other object (one made from the prototype with the symbols copied);
// - the class's methods (Node's code trusts `this`: an object made from the prototype with
//   an `fd` of its own, or a proxy answering every symbol, passed its checks) run only for a
//   pinned FileHandle or a proxy of one this module gave (Node's own, which fs.promises'
//   truncate, readFile and writeFile make for a path, never get them); a handle is never
//   transferred (the receiving thread's copy would not be pinned);
// - the binding's FileHandle behind one (`kHandle`, also what async_hooks hands a hook)
//   cannot be constructed (it is a stream on any number given), and does not close, or
//   let go of, its descriptor while the FileHandle that holds it is open: Node sets kFd to
//   -1 before it closes one, and a number freed under an open handle would be taken by the
//   main thread's next socket;
// - code gets a proxy of each that hides the other symbols and answers its properties only
//   to itself. Node's util.inspect sees through a proxy, so the above, not the proxy, is
//   what holds once code has the handle itself.

const EventEmitter = require('events');
const fs = require('fs');
const { fileURLToPath } = require('url');
const { types: { isProxy, isUint8Array } } = require('util');
const { markAsUntransferable } = require('worker_threads');

const {
  apply, defineProperty, fixed, locked, getOwnPropertyDescriptor, getOwnPropertySymbols, getPrototypeOf, hasOwn,
  ownKeys, reflectDefineProperty, reflectDeleteProperty, reflectGet,
  reflectGetOwnPropertyDescriptor, reflectHas, reflectSet, Proxy, WeakMap, WeakSet, Error,
} = require('./intrinsics');

// Whether `key` is an accessor with a setter on `object` or its prototype chain.
function hasSetter(object, key) {
  for (let o = object; o !== null; o = getPrototypeOf(o)) {
    const d = getOwnPropertyDescriptor(o, key);
    if (d) return d.set !== undefined;
  }
  return false;
}

const refuse = (refused, what) => function refusedFileHandle() {
  throw refused('FileHandle', what);
};

const STREAM_BASE_METHODS = ['readStart', 'readStop', 'shutdown', 'useUserBuffer', 'writev',
  'writeBuffer', 'writeAsciiString', 'writeUtf8String', 'writeUcs2String', 'writeLatin1String'];

class FileHandleLock {
  constructor(refused) {
    this.refused = refused;
    this.targets = new WeakMap();   // proxy this module gave -> its FileHandle
    this.owners = new WeakMap();    // binding FileHandle -> the pinned FileHandle holding it
    this.pinned = new WeakSet();    // the pinned FileHandles
    this.proto = null;
    this.kFd = null;
    this.kHandle = null;
    this.nativeFd = null;           // the binding FileHandle's `fd` getter
  }

  // The proxy of `target`: to anything but the proxy itself (an object made from it, say) the
  // handle's symbols and its `fd` are not there (`kFd` is an accessor: the proxy may say it
  // is undefined, but must list it, as non-configurable).
  guard(target) {
    const hidden = (key) => typeof key === 'symbol' && key !== this.kFd;
    const proxy = new Proxy(target, {
      get(t, key, receiver) {
        if (receiver !== proxy && (typeof key === 'symbol' || key === 'fd')) return undefined;
        return reflectGet(t, key, key === 'fd' ? t : receiver);
      },
      // Node's own writes (`this[kRefs]++`, through the proxy as `this`) go to the handle; a
      // setter (the code's own, anywhere on the chain) runs with the proxy as `this`.
      set(t, key, value, receiver) {
        if (receiver !== proxy || hasSetter(t, key)) return reflectSet(t, key, value, receiver);
        return reflectSet(t, key, value, t);
      },
      has(t, key) { return hidden(key) ? false : reflectHas(t, key); },
      ownKeys(t) { return ownKeys(t).filter((k) => !hidden(k)); },
      getOwnPropertyDescriptor(t, key) {
        return hidden(key) ? undefined : reflectGetOwnPropertyDescriptor(t, key);
      },
      defineProperty(t, key, descriptor) {
        if (typeof key === 'symbol' || key === 'fd') return false;
        return reflectDefineProperty(t, key, descriptor);
      },
      deleteProperty(t, key) {
        return typeof key === 'symbol' || key === 'fd' ? false : reflectDeleteProperty(t, key);
      },
      setPrototypeOf() { return false; },
      preventExtensions() { return false; },
    });
    this.targets.set(proxy, target);
    return proxy;
  }

  // The class, from its first handle: `constructor` makes none, `fd` says -1 (closed) to
  // every object (the pinned handles answer with their own), the methods check `this`.
  lockClass(handle) {
    const proto = getPrototypeOf(handle);
    const symbol = (name) => getOwnPropertySymbols(handle).find((s) => s.description === name);
    const kFd = symbol('kFd');
    const kHandle = symbol('kHandle');
    const native = kHandle === undefined ? null : handle[kHandle];
    if (kFd === undefined || native === null || typeof native !== 'object') {
      throw new Error('a FileHandle without kFd or kHandle: this Node is not known here');
    }
    const FileHandle = proto.constructor;
    // What the constructors (FileHandle's, EventEmitter's) set on a new handle, Node's own
    // included (fs.promises' writeFile, readFile, truncate make some), is found here first:
    // an accessor code put further up the chain (EventEmitter.prototype, Object.prototype)
    // would get that handle as `this`, unpinned, and could give it an `fd` of its own.
    for (const key of ['_events', '_eventsCount', '_maxListeners', ...getOwnPropertySymbols(handle)]) {
      if (!hasOwn(proto, key)) {
        defineProperty(proto, key, { __proto__: null, value: undefined, writable: true, configurable: false, enumerable: false });
      }
    }
    defineProperty(proto, 'fd', { __proto__: null, get() { return -1; }, configurable: false, enumerable: false });
    defineProperty(proto, 'then', locked(undefined));
    defineProperty(proto, 'constructor', locked(refuse(this.refused, 'new FileHandle')));
    this.lockMethods(proto, FileHandle);
    const nativeProto = getPrototypeOf(native);
    const nativeFd = getOwnPropertyDescriptor(nativeProto, 'fd');
    if (!nativeFd || typeof nativeFd.get !== 'function') {
      throw new Error("a binding FileHandle without an fd getter: this Node is not known here");
    }
    this.lockNative(nativeProto);
    this.proto = proto;
    this.kFd = kFd;
    this.kHandle = kHandle;
    this.nativeFd = nativeFd.get;
  }

  lockMethods(proto, FileHandle) {
    const brand = FileHandle.isFileHandle;   // Node 18 (the container tier) has none
    if (typeof brand !== 'function') return;
    const { targets, pinned, refused } = this;
    for (const key of ownKeys(proto)) {
      const d = getOwnPropertyDescriptor(proto, key);
      if (key === 'constructor' || typeof d.value !== 'function') continue;
      const what = typeof key === 'symbol' ? key.description : key;
      // transfer, transfer list, deserialize; and kCloseSync, which closes the descriptor
      // at once, whatever operation of the handle is still queued on it
      if (what.startsWith('messaging_') || what === 'kCloseSync') {
        defineProperty(proto, key, locked(refuse(refused, `a FileHandle's ${what}`)));
        continue;
      }
      const original = d.value;
      defineProperty(proto, key, locked(function fileHandleMethod(...args) {
        const target = targets.get(this) || this;
        if (!pinned.has(target) || !apply(brand, FileHandle, [target])) throw refused('FileHandle', what);
        return apply(original, this, args);
      }));
    }
  }

  // The binding handle of a pinned FileHandle closes only asynchronously, once its
  // FileHandle is closed (Node closes it so when its last operation ends); closeSync and
  // releaseFD, which Node calls only from kCloseSync and a transfer (both refused), never.
  lockNative(nativeProto) {
    const { owners, refused } = this;
    defineProperty(nativeProto, 'constructor', locked(refuse(refused, 'new FileHandle')));
    // Its stream methods, which no FileHandle uses, abort the process on arguments of
    // another shape (their native checks are assertions).
    for (const name of STREAM_BASE_METHODS) {
      if (typeof nativeProto[name] === 'function') {
        defineProperty(nativeProto, name, locked(refuse(refused, `a FileHandle's binding ${name}`)));
      }
    }
    for (const name of ['close', 'closeSync', 'releaseFD']) {
      const original = nativeProto[name];
      if (typeof original !== 'function') continue;
      defineProperty(nativeProto, name, locked({
        [name](...args) {
          const owner = owners.get(this);
          if (owner !== undefined && (name !== 'close' || owner.fd !== -1)) {
            throw refused('FileHandle', `an open FileHandle's ${name}`);
          }
          return apply(original, this, args);
        },
      }[name]));
    }
  }

  // A handle's `kFd` takes only -1 (Node's close), for good; its own `fd` answers the same.
  // The number is its binding handle's, which no other pinned handle holds.
  pin(handle) {
    const { kFd, kHandle, refused } = this;
    const native = getOwnPropertyDescriptor(handle, kHandle).value;
    let fd = apply(this.nativeFd, native, []);
    if (this.owners.has(native) || getOwnPropertyDescriptor(handle, kFd).value !== fd) {
      throw refused('FileHandle', 'a FileHandle made other than by open');
    }
    const get = () => fd;
    defineProperty(handle, kFd, {
      __proto__: null,
      get,
      set(value) {
        if (value !== -1) throw refused('FileHandle', "a FileHandle's descriptor");
        fd = -1;
      },
      configurable: false, enumerable: false,
    });
    defineProperty(handle, 'fd', { __proto__: null, get, configurable: false, enumerable: false });
    // A copy of the binding handle (structuredClone, postMessage) would close the number
    // under this one.
    markAsUntransferable(native);
    this.owners.set(native, handle);
    this.pinned.add(handle);
  }

  // EventEmitter's constructor sets `_events` and the like on every new emitter, Node's own
  // FileHandles (fs.promises' writeFile, truncate) among them, before this module ever saw
  // the class: each is found as an own data property of EventEmitter.prototype, so no
  // accessor code puts further up the chain (Object.prototype) gets a new handle as `this`.
  static lockEmitterPrototype() {
    // EventEmitter's constructor calls EventEmitter.init, as it finds it at each call.
    defineProperty(EventEmitter, 'init', locked(EventEmitter.init));
    const proto = EventEmitter.prototype;
    for (const key of ownKeys(new EventEmitter())) {
      const d = getOwnPropertyDescriptor(proto, key);
      if (d && !d.configurable) continue;
      const value = d && 'value' in d ? d.value : undefined;
      defineProperty(proto, key, { __proto__: null, value, writable: true, configurable: false, enumerable: d ? d.enumerable : false });
    }
  }

  lock() {
    FileHandleLock.lockEmitterPrototype();
    const promises = fs.promises;
    const lock = this;
    const open = promises.open;
    defineProperty(promises, 'open', fixed({
      async open(...args) {
        const handle = await apply(open, promises, args);
        lock.pin(handle);
        return lock.guard(handle);
      },
    }.open));
    // readFile, writeFile and appendFile take a path or a FileHandle, whose `fd` they hand the
    // binding, and Node's code asks which of the two it was given after it ran code's getters
    // (of the options) and through the object's own [[GetPrototypeOf]] (a proxy's trap): only
    // the proxies fs.promises.open gave pass as a FileHandle, and any other object is passed
    // on as a value no code holds (a copy of a path's bytes, a file URL's path).
    const pathOf = (file, name) => {
      if (file === null || (typeof file !== 'object' && typeof file !== 'function') || lock.targets.has(file)) {
        return file;
      }
      if (isProxy(file)) throw lock.refused('FileHandle', name);
      return isUint8Array(file) ? new Uint8Array(file) : fileURLToPath(file);
    };
    for (const name of ['readFile', 'writeFile', 'appendFile']) {
      const original = promises[name];
      defineProperty(promises, name, fixed({
        [name](file, ...rest) {
          return apply(original, promises, [pathOf(file, name), ...rest]);
        },
      }[name]));
    }
  }
}

// Locks fs.promises' FileHandles; resolves once the class is locked (on a handle of the
// runner's own file, `ownFile`), which must come before any user code runs.
async function lockFileHandles(refused, ownFile) {
  const lock = new FileHandleLock(refused);
  const handle = await fs.promises.open(ownFile, 'r');
  try {
    lock.lockClass(handle);
  } finally {
    await handle.close();
  }
  lock.lock();
}

module.exports = { lockFileHandles };
