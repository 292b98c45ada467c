// The wasm tier's JavaScript sessions: what a cell reaches of Node's modules and of
// JavaScript's built-ins, which the runner's locks use on every call (locks.js,
// intrinsics.js), and fs.promises' FileHandles, which code gets as the runner's own and
// never as Node's (file_handles.js). A runner of its own, as javascript_wasm.test.mjs
// starts one.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { BUSY_THREADPOOL, FIND_CONNECTION, SERVES, WATCH_FILE_HANDLES } from './cells.mjs';
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

  // What plain Node answers to the same calls (positions, streams, close, disposal).
  it('works as Node\'s FileHandle does', async () => {
    const r = await client.exec(`const fs = require('fs');
const out = {};
const fh = await fs.promises.open('a.txt', 'w+');
await fh.write('hello ');
await fh.write(Buffer.from('world\\n'));
await fh.appendFile('line2\\n');
const buf = Buffer.alloc(5);
out.read = (await fh.read(buf, 0, 5, 0)).bytesRead + ':' + buf.toString();
out.options = (await fh.read({ buffer: Buffer.alloc(3), position: 6 })).buffer.toString();
out.size = (await fh.stat()).size;
await fh.truncate(11);
out.atEnd = await fs.promises.readFile(fh, 'utf8');
let closed = 0;
fh.on('close', () => { closed++; });
const { close } = fh;
await close();
out.closed = [closed, fh.fd];
await fs.promises.writeFile('b.txt', 'one\\ntwo\\n');
const lines = [];
const b = await fs.promises.open('b.txt', 'a+');
await fs.promises.appendFile(b, 'three\\n');
for await (const line of b.readLines({ start: 0 })) lines.push(line);
out.lines = [lines, b.fd];
const c = await fs.promises.open('c.txt', 'w');
await new Promise((resolve, reject) => { const ws = c.createWriteStream(); ws.on('error', reject); ws.end('via a stream', resolve); });
out.written = [fs.readFileSync('c.txt', 'utf8'), c.fd];
let text = '';
for await (const chunk of fs.createReadStream(null, { fd: await fs.promises.open('c.txt'), encoding: 'utf8', start: 4 })) text += chunk;
out.fsStream = text;
const web = [];
for await (const chunk of (await fs.promises.open('c.txt')).readableWebStream()) web.push(Buffer.from(chunk).toString());
out.web = web.join('');
let disposed;
{ await using d = await fs.promises.open('c.txt'); disposed = d; }
out.disposed = disposed.fd;
const many = await fs.promises.open('many.txt', 'w');
const writes = [];
for (let i = 0; i < 20; i++) writes.push(many.write(i + ','));
const closing = many.close();
out.many = (await Promise.allSettled(writes)).filter((x) => x.status === 'fulfilled').length;
await closing;
out.manyText = fs.readFileSync('many.txt', 'utf8').split(',').length;
try { await many.write('late'); } catch (e) { out.late = e.code; }
JSON.stringify(out)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), {
      read: '5:hello', options: 'wor', size: 18, atEnd: '', closed: [1, -1],
      lines: [['one', 'two', 'three'], -1], written: ['via a stream', -1], fsStream: 'a stream',
      web: 'via a stream', disposed: -1, many: 20, manyText: 21, late: 'EBADF',
    });
  });

  it('makes no FileHandle but by fs.promises.open, and takes none that poses as one', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const used = [];
const attempt = async (what, fn) => { try { await fn(); used.push(what); } catch {} };
const fh = await fs.promises.open('posing.txt', 'w+');
const proto = Object.getPrototypeOf(fh);
await attempt('new FileHandle', () => new fh.constructor());
const posing = new Proxy(fh, { get: (t, k) => (k === 'fd' ? conn : Reflect.get(t, k)) });
const made = Object.create(fh);
Object.defineProperty(made, 'fd', { value: conn });
for (const [what, handle] of [['proxy', posing], ['made', made]]) {
  await attempt(what + ' write', () => proto.write.call(handle, frame));
  await attempt(what + ' writeFile', () => fs.promises.writeFile(handle, frame));
  await attempt(what + ' appendFile', () => fs.promises.appendFile(handle, frame));
  await attempt(what + ' stream', () => new Promise((resolve, reject) => {
    const ws = fs.createWriteStream(null, { fd: handle });
    ws.on('error', reject);
    ws.end(frame, resolve);
  }));
}
await fh.write('mine');
await fh.close();
JSON.stringify({ used, text: fs.readFileSync('posing.txt', 'utf8') })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), { used: [], text: 'mine' });
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // Node's FileHandle trusts its own symbols (its number, its count of operations in
  // flight): code that held one could close its number under a queued write.
  it('gives code no FileHandle of Node\'s, however it watches', async () => {
    const r = await client.exec(`${WATCH_FILE_HANDLES}await watchFileHandles()`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const seen = JSON.parse(eval(r.result));
    assert.ok(seen.seen > 0, 'no watch saw anything');
    assert.equal(seen.nodes, 0);
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // Node's fs gives its native requests their callbacks by assignment (`req.oncomplete`,
  // a readFile job's `ondone`), the runner's own among them (fs.open's adds the number it is
  // given to the code's own), calls fs.readFile's callback on its ReadFileContext (whose
  // close() closes any number through the binding) and fs.Dir's close's on its request
  // (whose prototype every request gets its `oncomplete` through): none of them reaches code.
  it('hands code no request of Node\'s, nor the callback it gives one', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const gzip = require('zlib').createGzip();
let asyncWrap = gzip._handle;
while (!Object.hasOwn(asyncWrap, 'getAsyncId')) asyncWrap = Object.getPrototypeOf(asyncWrap);
gzip.close();
const planted = [];
const stolen = [];
for (const key of ['oncomplete', 'ondone', 'context', 'callback']) {
  try {
    Object.defineProperty(asyncWrap, key, { configurable: true, set(v) {
      stolen.push([this, v]);
      Object.defineProperty(this, key, { value: v, writable: true, configurable: true });
    } });
    planted.push(key);
  } catch {}
}
try { Object.setPrototypeOf(asyncWrap, new Proxy({}, {})); planted.push('chain'); } catch {}
fs.writeFileSync('small.txt', 'hello');
await new Promise((resolve) => fs.open('small.txt', 'r', (e, fd) => fs.close(fd, resolve)));
await fs.promises.readFile('small.txt');
await (await fs.promises.opendir('.')).close();
for (const key of planted) { try { delete asyncWrap[key]; } catch {} }
for (const [, callback] of stolen) { try { callback(null, conn); } catch {} }
let written = false;
try { fs.writeSync(conn, frame); written = true; } catch {}
const thisOf = (start) => new Promise((resolve) => start(function () {
  resolve(this === undefined || this === globalThis ? 'none' : this.constructor.name);
}));
const context = await thisOf((callback) => fs.readFile('no-such-file', callback));
const request = await thisOf((callback) => fs.opendirSync('.').close(callback));
JSON.stringify({ planted, stolen: stolen.length, written, context, request })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)),
      { planted: [], stolen: 0, written: false, context: 'none', request: 'none' });
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // Node delivers a port's messages through methods it looks up on the port (EventTarget's
  // kHybridDispatch, under a well-known symbol): replaced, they would hand code the runner's
  // own port to the main thread with the next exec.
  it('hands code no port of the runner\'s through the methods Node delivers messages with', async () => {
    const planted = await client.exec(`globalThis.ports = [];
const { port1, port2 } = new (require('worker_threads').MessageChannel)();
globalThis.own = [port1, port2];
for (const target of [EventTarget.prototype, Object.getPrototypeOf(port1)]) {
  for (const key of Reflect.ownKeys(target)) {
    const d = Object.getOwnPropertyDescriptor(target, key);
    if (key === 'constructor' || typeof d.value !== 'function') continue;
    try {
      target[key] = function (...args) { globalThis.ports.push(this); return d.value.apply(this, args); };
    } catch {}
  }
}
port1.close();
const receiving = Symbol.for('nodejs.internal.kCurrentlyReceivingPorts');
Object.defineProperty(EventTarget.prototype, receiving, { configurable: true, set(v) { globalThis.ports.push(this); } });
'planted'`);
    assert.equal(planted.status, 'ok', JSON.stringify(planted.error));
    const r = await client.exec("globalThis.ports.filter((p) => !globalThis.own.includes(p) && p && p.constructor && p.constructor.name === 'MessagePort').length");
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, '0');
    await client.reset();
  });

  // A FileHandle's number stays open while an operation of its is queued on the threadpool
  // (kept busy here): its close waits, and fs takes the number from nobody but fs.open's caller.
  it('closes no FileHandle\'s descriptor under its queued write', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const handles = [];
for (let i = 0; i < 8; i++) handles.push(await fs.promises.open('closing' + i + '.txt', 'w'));
${BUSY_THREADPOOL}let refused = 0;
for (const h of handles) {
  h.write(frame).catch(() => {});
  h.close().catch(() => {});
  try { fs.closeSync(h.fd); } catch { refused++; }
}
refused`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, '8');
    const [second] = await runner.connect();
    await new Promise((resolve) => setTimeout(resolve, 5000));
    assert.equal((await second.exec('1 + 1', { timeout: 20000 })).result, '2');
    client = second;
  });

  // fs.promises' readFile, writeFile and appendFile take as a FileHandle only one that
  // fs.promises.open gave, and ask once: a proxy's trap, or a getter of the options, cannot
  // answer otherwise when Node asks again; any other object is passed on as a copied path.
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
});
