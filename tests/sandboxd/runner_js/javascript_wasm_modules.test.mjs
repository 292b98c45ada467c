// The wasm tier's JavaScript sessions: what a cell reaches of Node's modules and of
// JavaScript's built-ins, which the runner's locks use on every call (locks.js,
// intrinsics.js). A runner of its own, as javascript_wasm.test.mjs starts one.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { FIND_CONNECTION, SERVES } from './cells.mjs';
import { WasmRunner } from './harness.mjs';

describe('javascript on the wasm tier: modules and built-ins', () => {
  let runner;
  let client;
  before(async () => {
    runner = await WasmRunner.start({ language: 'javascript', heapMb: 128, env: [] });
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  it('serves no http2 stream, whose answers take a descriptor', async () => {
    const r = await client.exec(`const used = [];
for (const get of [() => require('http2'), () => require('node:http2'), () => process.getBuiltinModule('http2')]) {
  const http2 = get();
  for (const name of ['createServer', 'createSecureServer', 'performServerHandshake']) {
    try { http2[name](); used.push(name); } catch {}
  }
}
JSON.stringify({ used, client: typeof require('http2').connect })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), { used: [], client: 'function' });
  });

  // Every way to http2's server side, whose streams take a descriptor (respondWithFD): its
  // exports however loaded, and the session class behind a client session.
  it('serves no http2 stream by any way to a server session', async () => {
    const r = await client.exec(`${FIND_CONNECTION}${SERVES}const vm = require('vm');
const imported = async () => (await new vm.Script('import("node:http2")',
  { importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER }).runInThisContext()).default;
const decoyed = () => {
  require.cache.http2 = { id: 'http2', filename: 'http2', loaded: true, exports: {} };
  require('http2');
  delete require.cache.http2;
  return require('node:http2');
};
const served = {};
try {
  const h2 = await imported();
  served.vmImport = await serves(h2, (end) => h2.performServerHandshake(end));
} catch { served.vmImport = 'no server'; }
const h2 = decoyed();
served.cacheDecoy = await serves(h2, (end) => h2.performServerHandshake(end));
const probe = h2.connect('http://x', { createConnection: () => duplexPair()[0] });
probe.on('error', () => {});
const Http2Session = Object.getPrototypeOf(Object.getPrototypeOf(probe).constructor);
probe.destroy();
served.sessionClass = await serves(h2, (end) => new Http2Session(h2.constants.NGHTTP2_SESSION_SERVER, {}, end));
JSON.stringify(served)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), { vmImport: 'no server', cacheDecoy: 'no server', sessionClass: 'no server' });
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // The locks run again on every call a cell makes (fs.writeSync's check, a FileHandle's
  // method): the built-ins they use must be the ones there before any cell ran.
  it('keeps its descriptor lock whatever built-in a cell replaces', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const used = [];
const attempt = async (what, fn) => { try { await fn(); used.push(what); } catch {} };
const replace = (fn) => { try { fn(); } catch {} };
const fh = await fs.promises.open('replaced.txt', 'w+');
const proto = Object.getPrototypeOf(fh);
replace(() => { Set.prototype.has = () => true; });
replace(() => { Map.prototype.has = () => true; });
const get = WeakMap.prototype.get;
const fake = Object.create(proto);
replace(() => { WeakMap.prototype.get = function (k) { return k === fake ? fh : get.call(this, k); }; });
replace(() => { Function.prototype.call = function () { return true; }; });
await attempt('writeSync', () => fs.writeSync(conn, frame));
await attempt('write', () => new Promise((resolve, reject) => fs.write(conn, frame, (e) => (e ? reject(e) : resolve()))));
Object.defineProperty(fake, 'fd', { value: conn });
for (const k of Object.getOwnPropertySymbols(proto)) { try { fake[k] = 1; } catch {} }
await attempt('FileHandle method', () => proto.write.call(fake, frame));
await fh.close();
JSON.stringify(used)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), []);
    await client.reset();
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // FileHandle's class is locked at the cell's first fs.promises.open, after cells ran.
  it('keeps its FileHandle lock whatever global a cell rebinds before the first open', async () => {
    await client.reset();
    const r = await client.exec(`${FIND_CONNECTION}
const used = [];
const attempt = async (what, fn) => { try { await fn(); used.push(what); } catch {} };
const passThrough = { defineProperty: (o) => o, preventExtensions: (o) => o, freeze: (o) => o };
globalThis.Object = new Proxy(Object, { get: (t, k) => (k in passThrough ? passThrough[k] : t[k]) });
globalThis.Reflect = new Proxy(Reflect, { get: (t, k) => (k === 'defineProperty' ? () => true : t[k]) });
const fh = await fs.promises.open('rebound.txt', 'w+');
let raw = null;
fh.on('close', function () { raw = this; });
const kFd = Object.getOwnPropertySymbols(Object.getPrototypeOf(fh)).find((s) => s.description === 'kFd');
await attempt('kFd', async () => { fh[kFd] = conn; });
await fh.close();
await attempt('after close', async () => { raw[kFd] = conn; raw.fd = conn; await raw.write(frame); });
JSON.stringify(used)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), []);
    await client.reset();
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // No new FileHandle is code's before it is pinned: not through what EventEmitter's
  // constructor calls, nor through the `then` its promise reads (fs.promises' truncate makes
  // one of its own for a path).
  for (const [how, code] of [
    ['EventEmitter.init', `const EE = require('events');
const init = EE.init;
try {
  EE.init = function (opts) {
    if (typeof Object.getPrototypeOf(this).datasync === 'function') lend(this);
    return init.call(this, opts);
  };
} catch {}`],
    ['a then on EventEmitter.prototype', `const EE = require('events');
try {
  Object.defineProperty(EE.prototype, 'then', { configurable: true, get() {
    if (typeof Object.getPrototypeOf(this).datasync === 'function') lend(this);
    return undefined;
  } });
} catch {}`]]) {
    it(`lends no number to a new FileHandle through ${how}`, async () => {
      await client.reset();
      const r = await client.exec(`${FIND_CONNECTION}
const used = [];
const raws = [];
const lend = (raw) => {
  try { Object.defineProperty(raw, 'fd', { value: conn }); } catch {}
  raws.push(raw);
};
${code}
fs.writeFileSync('lent.txt', 'x');
try { await fs.promises.truncate('lent.txt', 0); } catch {}
try { (await fs.promises.open('lent.txt', 'r+')).close(); } catch {}
for (const raw of raws) {
  try { await raw.write(frame); used.push('write'); } catch {}
  try { await raw.read(Buffer.alloc(64), 0, 64, null); used.push('read'); } catch {}
}
JSON.stringify({ used, raws: raws.length })`);
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.deepEqual(JSON.parse(eval(r.result)), { used: [], raws: 0 });
      await client.reset();
    });
  }

  // Node's requests in flight carry the runner's callbacks (fs.open's adds the number it is
  // given to the code's own).
  it('adds no number to its own through a request of Node\'s in flight', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const used = [];
fs.open('inflight.txt', 'w', () => {});
let requests = [];
try { requests = process._getActiveRequests(); } catch {}
for (const request of requests) { try { request.oncomplete(null, conn); } catch {} }
try { fs.writeSync(conn, frame); used.push('writeSync'); } catch {}
JSON.stringify(used)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), []);
  });

  // fs.promises' readFile and writeFile ask whether they were given a FileHandle after the
  // lock did: a proxy's trap, or a getter of the options, can answer the second time otherwise.
  it('takes nothing for a FileHandle that says it is one only when Node asks', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const used = [];
const fh = await fs.promises.open('posing2.txt', 'w');
const proto = Object.getPrototypeOf(fh);
await fh.close();
const proxied = () => { let asked = 0; return new Proxy({ fd: conn }, { getPrototypeOf: () => (asked++ === 0 ? null : proto) }); };
const late = () => { const fake = { fd: conn }; return [fake, { get encoding() { Object.setPrototypeOf(fake, proto); return undefined; } }]; };
for (const [what, call] of [
  ['writeFile proxy', () => fs.promises.writeFile(proxied(), frame)],
  ['appendFile proxy', () => fs.promises.appendFile(proxied(), frame)],
  ['readFile proxy', () => fs.promises.readFile(proxied())],
  ['writeFile getter', () => { const [fake, options] = late(); return fs.promises.writeFile(fake, frame, options); }],
  ['readFile getter', () => { const [fake, options] = late(); return fs.promises.readFile(fake, options); }]]) {
  try { await call(); used.push(what); } catch {}
}
await fs.promises.writeFile(Buffer.from('bytes.txt'), 'by bytes');
await fs.promises.appendFile(new URL('file://' + process.cwd() + '/bytes.txt'), ', by URL');
JSON.stringify({ used, text: await fs.promises.readFile('bytes.txt', 'utf8') })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), { used: [], text: 'by bytes, by URL' });
  });

  // http2 is locked before any cell runs: no name, resolver or hook a cell sets up gets it
  // unlocked.
  for (const [how, code] of [
    ['its own Module._resolveFilename', `const Module = require('module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) { return request === 'h2x' ? 'http2' : resolve.call(this, request, ...rest); };
const h2 = require('h2x');`],
    ['module.registerHooks', `const Module = require('module');
Module.registerHooks({ resolve: (s, c, next) => (s === 'h2y' ? { url: 'node:http2', format: 'builtin', shortCircuit: true } : next(s, c)) });
const h2 = require('h2y');`],
    ['Module._findPath', `const Module = require('module');
const findPath = Module._findPath;
Module._findPath = function (request, ...rest) { return request === 'h2z' ? 'http2' : findPath.call(this, request, ...rest); };
const h2 = require('h2z');`],
    ['Module._pathCache', `const Module = require('module');
const cache = Module._pathCache;
Module._pathCache = new Proxy(cache, { get: (t, k) => (typeof k === 'string' && k.startsWith('h2p\\x00') ? 'http2' : t[k]) });
const h2 = require('h2p');`],
    ['a lock it made throw once', `const EE = require('events');
const on = EE.prototype.on;
EE.prototype.on = () => { throw new Error('abort the lock'); };
try { require('http2'); } catch {}
EE.prototype.on = on;
const http2 = require('http2');
const probe = http2.connect('http://x', { createConnection: () => duplexPair()[0] });
probe.on('error', () => {});
const Session = Object.getPrototypeOf(Object.getPrototypeOf(probe).constructor);
probe.destroy();
const h2 = { connect: http2.connect, performServerHandshake: (end) => new Session(http2.constants.NGHTTP2_SESSION_SERVER, {}, end) };`],
    ['a hook on what its lock calls', `const EE = require('events');
const on = EE.prototype.on;
let Session = null;
EE.prototype.on = function (...args) {
  if (!Session && this.constructor.name === 'ClientHttp2Session') Session = Object.getPrototypeOf(this.constructor);
  return on.apply(this, args);
};
const http2 = require('http2');
EE.prototype.on = on;
const h2 = { connect: http2.connect, performServerHandshake: (end) => new Session(http2.constants.NGHTTP2_SESSION_SERVER, {}, end) };`]]) {
    it(`serves no http2 stream through ${how}`, async () => {
      await client.reset();
      const r = await client.exec(`${FIND_CONNECTION}${SERVES}let served = 'no server';
try {
${code}
  served = await serves(h2, (end) => h2.performServerHandshake(end));
} catch {}
served`);
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.result, "'no server'");
      await client.reset();
    });
  }

  // SQLite opens the files SQL names (ATTACH, VACUUM INTO) past Node's permission model.
  it('writes no database outside the workspace through node:sqlite', async () => {
    const outside = path.join(runner.dir, 'attached.db');
    const r = await client.exec(`const written = [];
for (const sql of ["ATTACH DATABASE ${JSON.stringify(outside).replace(/"/g, "'")} AS x; CREATE TABLE x.t(a)",
  "VACUUM INTO ${JSON.stringify(outside + '2').replace(/"/g, "'")}"]) {
  try { new (require('node:sqlite').DatabaseSync)(':memory:').exec(sql); written.push(sql.slice(0, 6)); } catch {}
}
JSON.stringify(written)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), []);
    assert.equal(fs.existsSync(outside), false);
    assert.equal(fs.existsSync(`${outside}2`), false);
  });
});
