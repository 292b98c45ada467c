'use strict';
// What the code of a user's thread never gets from Node, taken out of reach before that code
// runs (lockRuntime), in the container tier and the wasm tier alike:
// - V8's flags: --allow-natives-syntax would hand it V8's memory-unsafe intrinsics,
//   --expose-gc the collector.
// - code caches: V8 trusts a cache's bytes (release builds check no checksum), so an edited
//   cache given to vm is attacker-chosen bytecode and object layouts, native memory
//   corruption without any flag. vm keeps working; a cachedData option is refused (own or
//   inherited), Node's binding class under vm.Script takes none, and module.enableCompileCache
//   is refused (a cache directory the code could edit for later requires).
// - process.report: the process's environment, command line and native addresses; and
//   process.execArgv, Node's command line (the workspace's host path, the paths it may
//   read and write), which is an empty array here.
// - the heap's contents (v8.getHeapSnapshot, writeHeapSnapshot, setHeapSnapshotNearHeapLimit,
//   queryObjects): every string and object of the thread, the runner's own too, including
//   what it holds out of the code's reach.
// - parentPort, the thread's own port to the main thread, which no runner code uses: closed,
//   so what code posts on it goes nowhere and a port posted on it closes at once (one the
//   main thread took in and dropped would queue what its other end posts, in the runner,
//   outside the thread's heap limit, after the thread is gone); and for the same reason
//   worker_threads.postMessageToThread, which reaches the main thread without parentPort.
// - Node's requests and handles in flight (process._getActiveRequests, _getActiveHandles),
//   whose callbacks are the runner's own too.
// - the process's descriptors other than the files the code opens (descriptors.js), and
//   async_hooks' createHook and executionAsyncResource, which hand code the resources of
//   Node's own operations (the binding's FileHandle of a writeFile in progress, say), past
//   what fs gives it. AsyncLocalStorage needs neither. And http2's server side, whose
//   streams answer with a descriptor (respondWithFD takes any number, respondWithFile
//   closes what it opened behind fs's back); code has no socket to serve on anyway. And vm's
//   importModuleDynamically, whose default loader loads built-ins past the locks on require.
// - node:sqlite, which opens the files its SQL names (ATTACH, VACUUM INTO) without asking
//   the permission model.
// - the objects Node's native requests and handles inherit from (lockNativeChain): a setter
//   there would get each request with the callback Node gives it.
// In the wasm tier the built-ins these locks call are frozen first (intrinsics.js).
// Every way to a built-in module (require, createRequire, process.getBuiltinModule, import)
// returns its one exports object, so each is changed there, for good (non-configurable);
// syncBuiltinESMExports carries the change to the modules' import() namespaces.

const vm = require('vm');
const Module = require('module');
const workerThreads = require('worker_threads');
const { Duplex } = require('stream');
const { lockDescriptors } = require('./descriptors');

// Taken now (intrinsics.js): user code can rebind Object and Reflect, and one called with
// Node's own constructors or functions would hand them over.
const {
  apply, construct, defineProperty, fixed, locked, freeze, freezeLockBuiltins, getPrototypeOf, hasOwn,
  isolateChain, preventExtensions, setPrototypeOf, Error, TypeError,
} = require('./intrinsics');
const { isContext } = vm;

function refuse(what) {
  return function refused() {
    throw new Error(`${what} is not available in a sandbox`);
  };
}

function lockV8() {
  const v8 = require('v8');
  defineProperty(v8, 'setFlagsFromString', {
    value: function setFlagsFromString() {
      throw new Error('V8 flags cannot be changed in a sandbox');
    },
    writable: false, configurable: false, enumerable: true,
  });
  for (const name of ['getHeapSnapshot', 'writeHeapSnapshot', 'setHeapSnapshotNearHeapLimit', 'queryObjects']) {
    defineProperty(v8, name, fixed(refuse(`v8.${name}`)));
  }
}

// vm's `options` as vm gets them: a fresh object with no prototype holding the options' own
// enumerable properties, each read once (a getter or a proxy trap runs once), its cachedData
// checked and then set to an own undefined, and its importModuleDynamically an own undefined
// too (USE_MAIN_CONTEXT_DEFAULT_LOADER would load any built-in through the ESM loader, past
// every lock that watches require, as cells' own import() cannot). Nothing is inherited: Node's vm copies options
// into plain objects of its own and reads cachedData from those, so an inherited one
// (Object.prototype.cachedData) would reach V8 unless the own undefined shadows it. A string
// is vm's filename; undefined, null and other values become no options.
function withoutCodeCache(options) {
  let copy;
  if (typeof options === 'string') copy = { __proto__: null, filename: options };
  else if (options !== null && (typeof options === 'object' || typeof options === 'function')) {
    copy = { __proto__: null, ...options };
  } else copy = { __proto__: null };
  if (copy.cachedData !== undefined) {
    throw new Error('vm: cachedData is refused in a sandbox (V8 trusts the bytes of a code cache)');
  }
  copy.cachedData = undefined;
  copy.importModuleDynamically = undefined;
  return copy;
}

const int32 = (value) => typeof value === 'number' && (value | 0) === value;

// The arguments Node's Script hands its parent, the binding class ContextifyScript:
// (code, filename, lineOffset, columnOffset, cachedData, produceCachedData, parsingContext,
// hostDefinedOptionId), without a code cache. The binding aborts the process on any other
// shape (and its last words carry native addresses).
function isScriptOfNode(args) {
  return args.length === 8 && typeof args[0] === 'string' && typeof args[1] === 'string' &&
    int32(args[2]) && int32(args[3]) && args[4] === undefined && typeof args[5] === 'boolean' &&
    (args[6] === undefined || (typeof args[6] === 'object' && args[6] !== null && isContext(args[6]))) &&
    typeof args[7] === 'symbol';
}

// The class one step up `Child`'s [[Prototype]] (`name`), as Child's super() and code reach
// it: Child's super() finds its parent through Child's [[Prototype]] when it runs, and code
// finds the parent only through its prototype's `constructor` (one step up every instance's
// prototype chain); both lead to a guard instead, which constructs the parent only with
// arguments `allowed` takes, else throws `refusal`.
function guardParentClass(Child, name, allowed, refusal) {
  const Parent = getPrototypeOf(Child);
  const Guard = { [name]: function (...args) {
    if (new.target === undefined || !allowed(args)) throw new TypeError(refusal);
    return construct(Parent, args, new.target);
  } }[name];
  Guard.prototype = Parent.prototype;
  setPrototypeOf(Child, Guard);
  preventExtensions(Child);
  defineProperty(Parent.prototype, 'constructor', locked(Guard));
}

function lockCodeCaches() {
  const NodeScript = vm.Script;
  // Node's Script extends ContextifyScript, whose constructor takes a code cache unchecked.
  guardParentClass(NodeScript, 'ContextifyScript', isScriptOfNode,
    'vm: ContextifyScript is not available in a sandbox; use vm.Script');
  // A function, not a subclass: getPrototypeOf(subclass) would be Node's Script.
  // Instances keep Node's prototype, whose `constructor` becomes this one.
  function Script(code, options) {
    if (new.target === undefined) throw new TypeError("Class constructor Script cannot be invoked without 'new'");
    return construct(NodeScript, [code, withoutCodeCache(options)], new.target);
  }
  Script.prototype = NodeScript.prototype;
  defineProperty(NodeScript.prototype, 'constructor', locked(Script));
  defineProperty(vm, 'Script', fixed(Script));
  // The module's own functions build Node's Script from inside (createScript, runIn*) from
  // options they copy. The position of each one's options, which vm always gets (a copy).
  const OPTIONS = { createScript: 1, runInThisContext: 1, runInContext: 2, runInNewContext: 2, compileFunction: 2 };
  for (const [name, at] of Object.entries(OPTIONS)) {
    const original = vm[name];
    defineProperty(vm, name, fixed({
      [name](...args) {
        args[at] = withoutCodeCache(args[at]);
        return apply(original, this, args);
      },
    }[name]));
  }
  defineProperty(Module, 'enableCompileCache', fixed(refuse('module.enableCompileCache')));
}

function lockProcessInfo() {
  const report = freeze({
    getReport: refuse('process.report'), writeReport: refuse('process.report'),
  });
  defineProperty(process, 'report', fixed(report));
  defineProperty(process, 'execArgv', fixed(freeze([])));
  // Node's warnings read these from `process`; inherited, a getter that code put on
  // Object.prototype would run with `process` as `this` (a Python cell has no other way to it).
  for (const name of ['noDeprecation', 'throwDeprecation', 'traceDeprecation', 'traceProcessWarnings']) {
    defineProperty(process, name, fixed(process[name] === true));
  }
  // Node's requests in flight and their callbacks, the runner's own among them (fs.open's
  // completion, which adds the number it is given to the code's own).
  for (const name of ['_getActiveRequests', '_getActiveHandles']) {
    defineProperty(process, name, fixed(refuse(`process.${name}`)));
  }
}

// Node's native objects (an fs request in flight, a readFile job, a directory's handle) get
// their callbacks and state by assignment (`req.oncomplete = callback`, the runner's own
// callbacks among them), which runs a setter found up their chain: AsyncWrap.prototype, which
// code reaches from any socket's or zlib stream's `_handle`, and Object.prototype (writable
// in the Python worker). AsyncWrap.prototype is frozen and inherits from a frozen copy of
// what its chain held before any cell (Node 18's BaseObject.prototype, Object.prototype),
// which ends the chain.
function lockNativeChain() {
  const gzip = require('zlib').createGzip();
  let asyncWrap = gzip._handle;
  while (asyncWrap !== null && !hasOwn(asyncWrap, 'getAsyncId')) asyncWrap = getPrototypeOf(asyncWrap);
  gzip.close();
  if (asyncWrap === null) throw new Error('no AsyncWrap.prototype under a zlib handle: this Node is not known here');
  freeze(isolateChain(asyncWrap));
  freeze(asyncWrap);
}

// fs's requests (FSReqCallback, one step under AsyncWrap.prototype): fs.Dir's close hands its
// callback the request as `this`, which led to the prototype every fs request with a callback
// gets its `oncomplete` through. That close's callback runs with no `this`, and the
// prototype, taken from a close of the runner's own, is frozen.
async function lockFsRequests() {
  const Dir = require('fs').Dir;
  const nodeClose = Dir.prototype.close;
  defineProperty(Dir.prototype, 'close', { __proto__: null,
    value: function close(...args) {
      const callback = args[0];
      if (typeof callback === 'function') {
        args[0] = function closed(...results) {
          return apply(callback, undefined, results);
        };
      }
      return apply(nodeClose, this, args);
    },
    writable: false, configurable: false, enumerable: false });
  const request = await new Promise((resolve) => {
    apply(nodeClose, require('fs').opendirSync('.'), [function closed() {
      resolve(this);
    }]);
  });
  if (request === null || typeof request !== 'object') {
    throw new Error("no request under fs.Dir's close: this Node is not known here");
  }
  freeze(getPrototypeOf(request));
}

function lockAsyncHooks() {
  const asyncHooks = require('async_hooks');
  for (const name of ['createHook', 'executionAsyncResource']) {
    defineProperty(asyncHooks, name, fixed(refuse(`async_hooks.${name}`)));
  }
}

// http2's server side: its streams answer with a descriptor (respondWithFD takes any
// number; respondWithFile closes what it opened behind fs's back). The factories are
// refused, and so is a session of any type but client from the class behind a client
// session (one step up ClientHttp2Session's [[Prototype]]). Before any user code, whatever
// it costs (~25 ms and 3 MiB a worker): making the client session that leads to the class
// runs Node code (EventEmitter.prototype.on, say) that user code could have changed to take
// the class before its guard.
function lockHttp2() {
  const http2 = require('node:http2');
  for (const name of ['createServer', 'createSecureServer', 'performServerHandshake']) {
    if (typeof http2[name] === 'function') defineProperty(http2, name, fixed(refuse(`http2.${name}`)));
  }
  const socket = new Duplex({ read() {}, write(chunk, encoding, callback) { callback(); } });
  const client = http2.connect('http://localhost', { createConnection: () => socket });
  client.on('error', () => {});
  const ClientSession = getPrototypeOf(client).constructor;
  client.destroy();
  socket.destroy();
  const CLIENT = http2.constants.NGHTTP2_SESSION_CLIENT;
  guardParentClass(ClientSession, 'Http2Session', (args) => args[0] === CLIENT,
    'http2: only client sessions are available in a sandbox');
}

// node:sqlite opens the files its SQL names (ATTACH, VACUUM INTO) without asking Node's
// permission model: its classes and functions are refused (Node 18 has no node:sqlite;
// Pyodide's sqlite3 keeps to the files Python may open).
function lockSqlite() {
  let sqlite;
  try {
    sqlite = require('node:sqlite');
  } catch {
    return;
  }
  for (const name of Object.keys(sqlite)) {
    if (typeof sqlite[name] === 'function') defineProperty(sqlite, name, fixed(refuse(`node:sqlite's ${name}`)));
  }
}

function lockThreadMessages() {
  if (workerThreads.parentPort) workerThreads.parentPort.close();
  defineProperty(workerThreads, 'postMessageToThread',
    fixed(refuse('worker_threads.postMessageToThread')));
}

// Resolves once every lock holds; no user code may run before.
async function lockRuntime() {
  if (process.permission) freezeLockBuiltins();     // the wasm tier (intrinsics.js)
  lockV8();
  lockCodeCaches();
  lockProcessInfo();
  lockThreadMessages();
  lockAsyncHooks();
  lockNativeChain();
  await lockFsRequests();
  lockHttp2();
  lockSqlite();
  await lockDescriptors();
  Module.syncBuiltinESMExports();
}

module.exports = { lockRuntime };
