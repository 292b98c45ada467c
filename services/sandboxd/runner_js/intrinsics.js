'use strict';
// The built-ins the locks (locks.js, descriptors.js, fs_descriptors.js, file_handles.js)
// call after user code has run, as they were when this module loaded, before any cell: a
// cell can rebind every global (`globalThis.Object = ...`), so no lock names one at call
// time. Their checks also call methods found on built-in prototypes at each call (a Set's
// `has`, an array's iterator): in the wasm tier, where user code shares the runner's
// process, no cell may change those. The JavaScript worker runs with --frozen-intrinsics
// (namespace.js); the Python worker cannot (Emscripten writes `.sig` on Math's functions,
// Pyodide's PythonError sets Error.stackTraceLimit), so lockRuntime freezes there what the
// checks use (freezeLockBuiltins). In the container tier the container is the boundary, and
// a cell that replaces a built-in breaks only its own thread.

const O = Object;
const R = Reflect;
const { apply } = R;

// A property that stays as it is: a descriptor with no prototype, so nothing put on
// Object.prototype (`get`, `set`) is read as part of it.
const fixed = (value) => ({ __proto__: null, value, writable: false, configurable: false, enumerable: true });
const locked = (value) => ({ __proto__: null, value, writable: false, configurable: false, enumerable: false });

// The built-ins the locks' checks use, frozen (a no-op where they are frozen already).
function freezeLockBuiltins() {
  const arrayIterator = O.getPrototypeOf([][Symbol.iterator]());
  for (const builtin of [O, R, Function.prototype, Set.prototype, Map.prototype, WeakMap.prototype,
    WeakSet.prototype, Array, Array.prototype, arrayIterator, Promise, Promise.prototype,
    String.prototype, Symbol.prototype]) {
    O.freeze(builtin);
  }
}

// `object` inherits from a copy of what its chain holds now (the nearer key wins), which
// nothing can be added to, no code reaches, and which ends the chain: nothing looked up on
// `object` (a method Node calls on it, a setter for what Node assigns to it) reaches an
// object code can change. The copy keeps data properties writable, so `object` may still
// get an own property of an inherited name. Returns the copy.
function isolateChain(object) {
  const copy = { __proto__: null };
  for (let o = O.getPrototypeOf(object); o !== null; o = O.getPrototypeOf(o)) {
    for (const key of R.ownKeys(o)) {
      if (O.getOwnPropertyDescriptor(copy, key) === undefined) {   // the nearer one's
        O.defineProperty(copy, key, { __proto__: null, ...O.getOwnPropertyDescriptor(o, key), configurable: false });
      }
    }
  }
  O.preventExtensions(copy);
  O.setPrototypeOf(object, copy);
  return copy;
}

module.exports = O.freeze({
  fixed,
  locked,
  freezeLockBuiltins,
  isolateChain,
  defineProperty: O.defineProperty,
  freeze: O.freeze,
  getOwnPropertyDescriptor: O.getOwnPropertyDescriptor,
  getOwnPropertySymbols: O.getOwnPropertySymbols,
  getPrototypeOf: O.getPrototypeOf,
  hasOwn: O.hasOwn,
  preventExtensions: O.preventExtensions,
  setPrototypeOf: O.setPrototypeOf,
  apply,
  construct: R.construct,
  ownKeys: R.ownKeys,
  nextTick: process.nextTick,
  Proxy,
  Map,
  Set,
  WeakSet,
  Error,
  TypeError,
});
