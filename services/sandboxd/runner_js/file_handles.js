'use strict';
// fs.promises' FileHandles as user code gets them (descriptors.js says why). Node's
// FileHandle keeps its descriptor and its reference count under symbols its methods check
// (`handle[kRefs] !== undefined`), and reads the number from `handle.fd`; an object that had
// those symbols, or that inherited them, could hand any number to the binding. So:
// - every FileHandle fs.promises.open makes is pinned to its descriptor: its `kFd` takes no
//   value but -1 (closed), and its own `fd` (what Node's code hands the binding) answers the
//   same; the class's `fd` answers -1 to any other object (one made from the prototype with
//   the symbols copied);
// - code gets a proxy of it that hides the other symbols and answers its properties only to
//   itself. Node's util.inspect sees through a proxy, so the pinning, not the proxy, is what
//   holds once code has the handle itself.

const fs = require('fs');

const { apply } = Reflect;
const fixed = (value) => ({ value, writable: false, configurable: false, enumerable: true });

// Whether `key` is an accessor with a setter on `object` or its prototype chain.
function hasSetter(object, key) {
  for (let o = object; o !== null; o = Object.getPrototypeOf(o)) {
    const d = Object.getOwnPropertyDescriptor(o, key);
    if (d) return d.set !== undefined;
  }
  return false;
}

function lockFileHandles(refused) {
  const promises = fs.promises;
  const proxies = new WeakSet();
  let fileHandleProto = null;
  let kFd = null;
  // Symbols the proxy hides; `kFd`, made non-configurable by pin(), a proxy must show.
  const hidden = (key) => typeof key === 'symbol' && key !== kFd;

  const guard = (target) => {
    const proxy = new Proxy(target, {
      // To anything but the proxy itself (an object made from it, say) the handle's symbols
      // and its `fd` are not there (`kFd` is an accessor: the proxy may say it is undefined).
      get(t, key, receiver) {
        if (receiver !== proxy && (typeof key === 'symbol' || key === 'fd')) return undefined;
        return Reflect.get(t, key, key === 'fd' ? t : receiver);
      },
      // Node's own writes (`this[kRefs]++`, through the proxy as `this`) go to the handle; a
      // setter (the code's own, anywhere on the chain) runs with the proxy as `this`.
      set(t, key, value, receiver) {
        if (receiver !== proxy || hasSetter(t, key)) return Reflect.set(t, key, value, receiver);
        return Reflect.set(t, key, value, t);
      },
      has(t, key) { return hidden(key) ? false : Reflect.has(t, key); },
      ownKeys(t) { return Reflect.ownKeys(t).filter((k) => !hidden(k)); },
      getOwnPropertyDescriptor(t, key) {
        return hidden(key) ? undefined : Reflect.getOwnPropertyDescriptor(t, key);
      },
      defineProperty(t, key, descriptor) {
        if (typeof key === 'symbol' || key === 'fd') return false;
        return Reflect.defineProperty(t, key, descriptor);
      },
      deleteProperty(t, key) {
        return typeof key === 'symbol' || key === 'fd' ? false : Reflect.deleteProperty(t, key);
      },
      setPrototypeOf() { return false; },
      preventExtensions() { return false; },
    });
    proxies.add(proxy);
    return proxy;
  };

  // The class itself is one `constructor` away: a FileHandle it made would be the code's own,
  // symbols and all; so `constructor` is a function that makes none. The class's `fd` says
  // -1 (closed) to every object: the handles fs.promises.open made answer with their own.
  const lockClass = (handle) => {
    fileHandleProto = Object.getPrototypeOf(handle);
    kFd = Object.getOwnPropertySymbols(handle).find((s) => s.description === 'kFd');
    if (kFd === undefined) throw new Error('a FileHandle without kFd: this Node is not known here');
    Object.defineProperty(fileHandleProto, 'fd', {
      get() { return -1; }, configurable: false, enumerable: false,
    });
    Object.defineProperty(fileHandleProto, 'constructor', {
      value: function FileHandle() { throw refused('FileHandle', 'new FileHandle'); },
      writable: false, configurable: false, enumerable: false,
    });
    // The binding's FileHandle behind it (`kHandle`) is a stream on any number it is given.
    const kHandle = Object.getOwnPropertySymbols(handle).find((s) => s.description === 'kHandle');
    const native = kHandle === undefined ? null : handle[kHandle];
    if (native === null || typeof native !== 'object') throw new Error('a FileHandle without kHandle');
    Object.defineProperty(Object.getPrototypeOf(native), 'constructor', {
      value: function FileHandle() { throw refused('FileHandle', 'new FileHandle'); },
      writable: false, configurable: false, enumerable: false,
    });
  };
  // A handle's `kFd` takes only -1 (Node's close, or a transfer), for good; its own `fd`
  // answers the same.
  const pin = (handle) => {
    let fd = handle[kFd];
    const get = () => fd;
    Object.defineProperty(handle, kFd, {
      get,
      set(value) {
        if (value !== -1) throw refused('FileHandle', "a FileHandle's descriptor");
        fd = -1;
      },
      configurable: false, enumerable: false,
    });
    Object.defineProperty(handle, 'fd', { get, configurable: false, enumerable: false });
  };
  const open = promises.open;
  Object.defineProperty(promises, 'open', fixed({
    async open(...args) {
      const handle = await apply(open, promises, args);
      if (fileHandleProto === null) lockClass(handle);
      pin(handle);
      return guard(handle);
    },
  }.open));

  // readFile, writeFile and appendFile read `fd` of a FileHandle they are given; only the
  // proxies fs.promises.open gave pass for one.
  const isFileHandle = (x) => fileHandleProto !== null && x !== null && typeof x === 'object' &&
    Object.prototype.isPrototypeOf.call(fileHandleProto, x);
  for (const name of ['readFile', 'writeFile', 'appendFile']) {
    const original = promises[name];
    Object.defineProperty(promises, name, fixed({
      [name](file, ...rest) {
        if (isFileHandle(file) && !proxies.has(file)) throw refused('FileHandle', name);
        return apply(original, promises, [file, ...rest]);
      },
    }[name]));
  }
}

module.exports = { lockFileHandles };
