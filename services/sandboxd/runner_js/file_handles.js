'use strict';
// fs.promises' FileHandles as user code gets them (descriptors.js says why): the proxy of a
// FileHandle that only the proxy itself can read. Node's FileHandle keeps its descriptor and
// its reference count under symbols its methods check (`handle[kRefs] !== undefined`), and
// reads the number from `handle.fd`; an object that had those symbols, or that inherited
// them, could hand any number to the binding.

const fs = require('fs');

const { apply } = Reflect;
const fixed = (value) => ({ value, writable: false, configurable: false, enumerable: true });

function lockFileHandles(refused) {
  const promises = fs.promises;
  const proxies = new WeakSet();
  let fileHandleProto = null;

  const guard = (target) => {
    const proxy = new Proxy(target, {
      // To anything but the proxy itself (an object made from it, say) the handle's symbols
      // and its `fd` are not there.
      get(t, key, receiver) {
        if (receiver !== proxy && (typeof key === 'symbol' || key === 'fd')) return undefined;
        return Reflect.get(t, key, key === 'fd' ? t : receiver);
      },
      // Node's own writes (`this[kRefs]++`, through the proxy as `this`) go to the handle.
      set(t, key, value, receiver) {
        return Reflect.set(t, key, value, receiver === proxy ? t : receiver);
      },
      has(t, key) { return typeof key === 'symbol' ? false : Reflect.has(t, key); },
      ownKeys(t) { return Reflect.ownKeys(t).filter((k) => typeof k !== 'symbol'); },
      getOwnPropertyDescriptor(t, key) {
        return typeof key === 'symbol' ? undefined : Reflect.getOwnPropertyDescriptor(t, key);
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
  // symbols and all; so `constructor` is a function that makes none.
  // `fd`, an accessor of the class, stays Node's.
  const lockClass = (handle) => {
    fileHandleProto = Object.getPrototypeOf(handle);
    const fd = Object.getOwnPropertyDescriptor(fileHandleProto, 'fd');
    if (fd && fd.configurable) Object.defineProperty(fileHandleProto, 'fd', { ...fd, configurable: false });
    Object.defineProperty(fileHandleProto, 'constructor', {
      value: function FileHandle() { throw refused('FileHandle', 'new FileHandle'); },
      writable: false, configurable: false, enumerable: false,
    });
  };
  const open = promises.open;
  Object.defineProperty(promises, 'open', fixed({
    async open(...args) {
      const handle = await apply(open, promises, args);
      if (fileHandleProto === null) lockClass(handle);
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
