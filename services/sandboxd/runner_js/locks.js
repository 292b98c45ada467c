'use strict';
// What the code of a user's thread never gets from Node, taken out of reach before that code
// runs (lockRuntime), in the container tier and the wasm tier alike:
// - V8's flags: --allow-natives-syntax would hand it V8's memory-unsafe intrinsics,
//   --expose-gc the collector.
// - code caches: V8 trusts a cache's bytes (release builds check no checksum), so an edited
//   cache given to vm is attacker-chosen bytecode and object layouts, native memory
//   corruption without any flag. vm keeps working; a cachedData option is refused, and so is
//   module.enableCompileCache (a cache directory the code could edit for later requires).
// - process.report: the process's environment, command line and native addresses.
// Every way to a built-in module (require, createRequire, process.getBuiltinModule, import)
// returns its one exports object, so each is changed there, for good (non-configurable);
// syncBuiltinESMExports carries the change to the modules' import() namespaces.

const vm = require('vm');
const Module = require('module');

const fixed = (value) => ({ value, writable: false, configurable: false, enumerable: true });

function refuse(what) {
  return function refused() {
    throw new Error(`${what} is not available in a sandbox`);
  };
}

function lockV8Flags() {
  Object.defineProperty(require('v8'), 'setFlagsFromString', {
    value: function setFlagsFromString() {
      throw new Error('V8 flags cannot be changed in a sandbox');
    },
    writable: false, configurable: false, enumerable: true,
  });
}

// A copy of vm's `options` that holds no code cache to consume. The copy is made once (a
// getter runs once), so what is checked is what vm gets.
function withoutCodeCache(options) {
  if (options === null || typeof options !== 'object') return options;
  const copy = { ...options };
  if (copy.cachedData !== undefined) {
    throw new Error('vm: cachedData is refused in a sandbox (V8 trusts the bytes of a code cache)');
  }
  return copy;
}

function lockCodeCaches() {
  const NodeScript = vm.Script;
  // A function, not a subclass: Object.getPrototypeOf(subclass) would be Node's Script.
  // Instances keep Node's prototype, whose `constructor` becomes this one.
  function Script(code, options) {
    if (new.target === undefined) throw new TypeError("Class constructor Script cannot be invoked without 'new'");
    return Reflect.construct(NodeScript, [code, withoutCodeCache(options)], new.target);
  }
  Script.prototype = NodeScript.prototype;
  Object.defineProperty(NodeScript.prototype, 'constructor',
    { value: Script, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(vm, 'Script', fixed(Script));
  // The module's own functions build Node's Script from inside (createScript, runIn*).
  // The position of each one's options.
  const OPTIONS = { createScript: 1, runInThisContext: 1, runInContext: 2, runInNewContext: 2, compileFunction: 2 };
  for (const [name, at] of Object.entries(OPTIONS)) {
    const original = vm[name];
    Object.defineProperty(vm, name, fixed({
      [name](...args) {
        if (args.length > at) args[at] = withoutCodeCache(args[at]);
        return Reflect.apply(original, this, args);
      },
    }[name]));
  }
  Object.defineProperty(Module, 'enableCompileCache', fixed(refuse('module.enableCompileCache')));
}

function lockProcessReport() {
  const report = Object.freeze({
    getReport: refuse('process.report'), writeReport: refuse('process.report'),
  });
  Object.defineProperty(process, 'report', fixed(report));
}

function lockRuntime() {
  lockV8Flags();
  lockCodeCaches();
  lockProcessReport();
  Module.syncBuiltinESMExports();
}

module.exports = { lockRuntime };
