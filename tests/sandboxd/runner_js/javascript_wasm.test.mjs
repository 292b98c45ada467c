// The wasm tier's JavaScript sessions: sandbox_runner.js --language javascript on
// deploy/wasm's Node, started as a host process on an inherited listening socket under the
// contract's node flags (harness.mjs, WasmRunner).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { BUSY_THREADPOOL, FIND_CONNECTION } from './cells.mjs';
import { WasmRunner } from './harness.mjs';

describe('javascript on the wasm tier\'s node', () => {
  let runner;
  let client;
  let ready;
  before(async () => {
    runner = await WasmRunner.start({ language: 'javascript', heapMb: 128,
      env: ['SESSION_VAR=visible', 'EMPTY=', 'WITH_EQ=a=b'], hostEnv: { HOST_SECRET: 'hunter2' } });
    [client, ready] = await runner.connect();
  });
  after(() => runner && runner.stop());

  // Runs cell code `perFd` (which counts what is refused in `refused`) on each of 8 files of
  // the code's own with the threadpool kept busy (what it queues waits), then closes them,
  // and uses a new connection once what was queued has landed, if it could: the count.
  const queueOnOwnFiles = async (name, perFd) => {
    const r = await client.exec(`${FIND_CONNECTION}${BUSY_THREADPOOL}
const own = [];
for (let i = 0; i < 8; i++) own.push(fs.openSync('${name}' + i + '.txt', 'w'));
let refused = 0;
for (const fd of own) {
${perFd}
}
for (const fd of own) fs.closeSync(fd);
refused`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    await reconnectAfter(5000);
    return Number(r.result);
  };

  // A new connection (the runner's next socket, which takes the lowest free number), used
  // after `ms` (what the code left queued has landed by then, if it could) and kept.
  const reconnectAfter = async (ms) => {
    const [second] = await runner.connect();
    await new Promise((resolve) => setTimeout(resolve, ms));
    assert.equal((await second.exec('1 + 1', { timeout: 20000 })).result, '2');
    client = second;
  };

  it('runs cells (acorn from the runtime) and says it is javascript', async () => {
    assert.equal(ready.runtime, 'javascript');
    assert.match(ready.node, /^v26\./);
    await client.exec('const a = 41');
    assert.equal((await client.exec('a + 1')).result, '42');
  });

  // Node 26's `crypto` and `navigator` are getter-only globals, which ignore the assignment a
  // top-level declaration becomes.
  it('lets a cell declare over Node\'s getter-only globals: const crypto = require(\'crypto\')', async () => {
    const r = await client.exec("const crypto = require('crypto'); let navigator = 'mine'; typeof crypto.createHash");
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, "'function'");
    assert.equal((await client.exec("crypto.createHash('sha256').update('x').digest('hex').length + navigator")).result, "'64mine'");
  });

  it('has no egress: no egress.sock beside its socket, and `egress` answers an error', async () => {
    assert.equal(fs.existsSync(path.join(runner.dir, 'egress.sock')), false);
    const reply = await client.reply('egress_on', { type: 'egress' });
    assert.match(reply.error, /no egress relay/);
    assert.equal(reply.port, undefined);
  });

  it('gives user code exactly the session environment of --env-fd', async () => {
    const r = await client.exec('JSON.stringify(process.env)');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)),
      { SESSION_VAR: 'visible', EMPTY: '', WITH_EQ: 'a=b' });
  });

  it('runs in the workspace, the only place it writes', async () => {
    const r = await client.exec('require("fs").writeFileSync("f.txt", "x"); process.cwd()');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, `'${runner.workspace}'`);
    assert.equal(fs.readFileSync(path.join(runner.workspace, 'f.txt'), 'utf8'), 'x');
    const outside = await client.exec(`require("fs").writeFileSync(${JSON.stringify(
      path.join(runner.dir, 'escaped'))}, "x")`);
    assert.equal(outside.status, 'error');
    assert.match(outside.error.message, /Access to this API has been restricted/);
  });

  it('cannot change V8 flags, by any way to the v8 module', async () => {
    for (const code of ['require("v8").setFlagsFromString("--allow-natives-syntax")',
      'process.getBuiltinModule("v8").setFlagsFromString("--allow-natives-syntax")',
      'require("module").createRequire("/x")("node:v8").setFlagsFromString("--expose-gc")',
      'Object.defineProperty(require("v8"), "setFlagsFromString", { value: () => 1 })']) {
      const r = await client.exec(code);
      assert.equal(r.status, 'error', code);
      assert.match(r.error.message, /V8 flags cannot be changed|Cannot redefine property/, code);
    }
    const imported = await client.exec('(await import("node:v8")).setFlagsFromString("--expose-gc")');
    assert.equal(imported.status, 'error');
    assert.equal((await client.exec('typeof gc')).result, "'undefined'");
  });

  // V8 trusts a code cache's bytes: one edited byte given back to vm crashed Node (SIGSEGV).
  it('cannot hand vm a code cache, by any way to vm', async () => {
    const make = 'const vm = require("vm"); const src = "function f(a){ return a * 3 } f(2)"; ' +
      'const cd = new vm.Script(src + ";/*A*/").createCachedData(); cd[86] ^= 1; ';
    for (const use of ['new vm.Script(src + ";/*B*/", { cachedData: cd }).runInNewContext({})',
      'vm.createScript(src, { cachedData: cd })',
      'vm.runInThisContext(src, { cachedData: cd })',
      'vm.runInNewContext(src, {}, { cachedData: cd })',
      'vm.runInContext(src, vm.createContext({}), { cachedData: cd })',
      'vm.compileFunction("return 1", [], { cachedData: cd })',
      'new (Object.getPrototypeOf(new vm.Script("1"))).constructor(src, { cachedData: cd })',
      'new (Object.getPrototypeOf(vm.Script))(src, { cachedData: cd })',
      'new ((await import("node:vm")).Script)(src, { cachedData: cd })',
      'new (process.getBuiltinModule("vm").Script)(src, { cachedData: cd })']) {
      const r = await client.exec(make + use);
      assert.equal(r.status, 'error', `${use}: ${JSON.stringify(r)}`);
      assert.equal(r.done.namespace_reset, undefined, use);
    }
    // A cache V8 takes: made from a source of the same length (V8 checks the length, not the
    // text), so a cache that gets through runs `a * 3` (6) where the source says `a * 4` (8).
    // Each way is followed by `1 + 1`: a Node that aborted or crashed does not answer it.
    const taken = 'const vm = require("vm"); const cd = new vm.Script("let a = 2; a * 3")' +
      '.createCachedData(); const src = "let a = 2; a * 4"; ' +
      'const fcd = vm.compileFunction("return 3", [], { produceCachedData: true }).cachedData; ';
    // Object.prototype.cachedData: the cache from the first read on, or undefined to the first
    // read (a check) and the cache after.
    const viaGetter = (use, cache, first) => '(() => { let n = 0; Object.defineProperty(Object.prototype, ' +
      `"cachedData", { get() { return ++n === 1 ? ${first} : ${cache} }, configurable: true }); ` +
      `try { return ${use} } finally { delete Object.prototype.cachedData } })()`;
    const getterWays = [['new vm.Script(src).runInThisContext()', '8'],
      ['new vm.Script(src, { filename: "g.js" }).runInThisContext()', '8'],
      ['new vm.Script(src, "g.js").runInThisContext()', '8'],
      ['vm.createScript(src, "g.js").runInThisContext()', '8'],
      ['vm.runInThisContext(src, "g.js")', '8'],
      ['vm.runInContext(src, vm.createContext({}), "g.js")', '8'],
      ['vm.runInContext(src, vm.createContext({}))', '8'],
      ['vm.runInNewContext(src, {})', '8'],
      ['vm.runInNewContext(src)', '8'],
      ['vm.compileFunction("return 4", [], { filename: "g.js" })()', '4', 'fcd'],
      ['vm.compileFunction("return 4")()', '4', 'fcd']].flatMap(([use, source, cache = 'cd']) =>
      [[viaGetter(use, cache, cache), source], [viaGetter(use, cache, 'undefined'), source]]);
    const binding = 'new (Object.getPrototypeOf(vm.Script.prototype).constructor)';
    const eight = '(src, "c.js", 0, 0, cd, false, undefined, Symbol("c")).runInContext(null, -1, true, false, false)';
    for (const [use, source] of [[`${binding}${eight}`, '8'],
      [`new (Reflect.getPrototypeOf(Reflect.getPrototypeOf(new vm.Script("1"))).constructor)${eight}`, '8'],
      [`${binding}(src)`, '8'],
      ['vm.runInContext(src, vm.createContext({}), Object.assign(() => 0, { cachedData: cd }))', '8'],
      // What the runner calls through Reflect, replaced by user code, is handed to it.
      ['(() => { const apply = Reflect.apply; let f; Reflect.apply = (t, h, a) => { f = f || t; return apply(t, h, a) }; ' +
        'try { vm.runInThisContext("1") } finally { Reflect.apply = apply } return f(src, { cachedData: cd }) })()', '8'],
      ['(() => { const c = Reflect.construct; const seen = []; Reflect.construct = (t, a, n) => { seen.push(t); ' +
        'return c(t, a, n) }; try { new vm.Script("1") } finally { Reflect.construct = c } ' +
        `return seen.map((t) => { try { return new t${eight} } catch (e) { return 8 } }).find((v) => v !== 8) ?? 8 })()`, '8'],
      ...getterWays]) {
      const r = await client.exec(taken + use);
      assert.ok(r.status === 'error' || r.result === source, `${use}: ${JSON.stringify(r)}`);
      const alive = await client.exec('1 + 1');
      assert.equal(alive.result, '2', `${use}, then 1 + 1: ${JSON.stringify(alive)}`);
    }
    const plain = await client.exec('const vm2 = require("vm"); [new vm2.Script("6 * 7").runInThisContext(), ' +
      'vm2.runInNewContext("a + 1", { a: 1 }), new vm2.Script("1") instanceof vm2.Script]');
    assert.equal(plain.result, '[ 42, 2, true ]', JSON.stringify(plain));
    const cache = await client.exec('require("module").enableCompileCache("/workspace/cc")');
    assert.equal(cache.status, 'error');
  });

  it('cannot read the process report: its environment, command line and addresses', async () => {
    for (const code of ['process.report.getReport()', 'process.report = {}; process.report.getReport()',
      'delete process.report; process.report.getReport()']) {
      const r = await client.exec(code);
      assert.equal(r.status, 'error', code);
    }
  });

  it('cannot read node\'s command line or the heap', async () => {
    for (const code of ['process.execArgv', 'process.execArgv = ["x"]; process.execArgv',
      'delete process.execArgv; process.execArgv']) {
      const r = await client.exec(code);
      assert.equal(r.result, '[]', `${code}: ${JSON.stringify(r)}`);
    }
    for (const code of ['require("v8").getHeapSnapshot().read()', 'require("v8").writeHeapSnapshot("h")',
      'require("v8").setHeapSnapshotNearHeapLimit(1)', 'require("v8").queryObjects(Object, { format: "summary" })',
      'process.getBuiltinModule("v8").queryObjects(Object)']) {
      const r = await client.exec(code);
      assert.equal(r.status, 'error', `${code}: ${JSON.stringify(r)}`);
      assert.match(r.error.message, /is not available in a sandbox/, code);
    }
    assert.equal(fs.existsSync(path.join(runner.workspace, 'h')), false);
  });

  it('cannot post to the runner\'s thread: postMessageToThread, by any way to worker_threads', async () => {
    // A port it carried would stay open in the runner (outside the worker's heap limit)
    // and queue what its other end posts, after a reset too.
    for (const code of ['await require("worker_threads").postMessageToThread(0, 1)',
      'await process.getBuiltinModule("worker_threads").postMessageToThread(0, 1)',
      'const { port1 } = new MessageChannel();\n' +
        'await require("worker_threads").postMessageToThread(0, { port1 }, [port1], 1000)',
      'Object.defineProperty(require("worker_threads"), "postMessageToThread", { value: () => 1 })']) {
      const r = await client.exec(code);
      assert.equal(r.status, 'error', `${code}: ${JSON.stringify(r)}`);
      assert.match(r.error.message, /is not available in a sandbox|Cannot redefine property/, code);
    }
  });

  // Threads share the process's descriptors: the runner's connection, libuv's pipes.
  it('cannot use a descriptor it did not open: the runner\'s sockets and pipes', async () => {
    const r = await client.exec(`const fs = require('fs');
const others = [];
for (let fd = 0; fd < 256; fd++) {
  try { const st = fs.fstatSync(fd); if (!st.isFile() && !st.isDirectory()) others.push(fd); } catch {}
}
const used = [];
const attempt = (what, fn) => { try { fn(); used.push(what); } catch (e) { if (e.code !== 'EBADF') used.push(what + ': ' + e.message); } };
for (const fd of others) {
  attempt('write ' + fd, () => fs.writeSync(fd, Buffer.alloc(16, 0x41)));
  attempt('read ' + fd, () => fs.readSync(fd, Buffer.alloc(1)));
  attempt('writeFile ' + fd, () => fs.writeFileSync(fd, 'x'));
  attempt('stream ' + fd, () => fs.createWriteStream(null, { fd }));
  attempt('socket ' + fd, () => new (require('net').Socket)({ fd, readable: false }));
  attempt('connect ' + fd, () => require('net').connect({ fd }));
  attempt('listen ' + fd, () => require('net').createServer().listen({ fd }));
  attempt('close ' + fd, () => fs.closeSync(fd));
}
attempt('tty', () => new (require('tty').WriteStream)(1));
const own = fs.openSync('own.txt', 'w+');
fs.writeSync(own, 'mine');
const back = Buffer.alloc(4);
fs.readSync(own, back, 0, 4, 0);
fs.closeSync(own);
JSON.stringify({ others: others.length, used, back: back.toString() })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const seen = JSON.parse(eval(r.result));
    assert.ok(seen.others >= 3, `${seen.others} descriptors other than files`);
    assert.deepEqual(seen.used, []);
    assert.equal(seen.back, 'mine');
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // What a FileHandle and libuv's handles would otherwise lend: any descriptor number.
  it('cannot point a FileHandle or a socket handle at a descriptor it did not open', async () => {
    const r = await client.exec(`const fs = require('fs'), net = require('net'), dgram = require('dgram');
let conn = -1;
for (let fd = 3; fd < 256; fd++) { try { if (fs.fstatSync(fd).isSocket()) conn = fd; } catch {} }
const used = [];
const attempt = async (what, fn) => { try { await fn(); used.push(what); } catch {} };
const fh = await fs.promises.open('handle.txt', 'w+');
await attempt('new FileHandle', () => new (Object.getPrototypeOf(fh).constructor)());
const made = Object.create(fh);
Object.defineProperty(made, 'fd', { value: conn });
await attempt('writeFile', () => fs.promises.writeFile(made, 'x'));
await attempt('appendFile', () => fs.promises.appendFile(made, 'x'));
await attempt('write', () => Object.getPrototypeOf(fh).write.call(made, Buffer.from('x')));
const pipe = net.connect({ path: '/nonexistent-runner-test' });
pipe.on('error', () => {});
await attempt('pipe', () => new pipe._handle.constructor(0).open(conn));
pipe.destroy();
const tcp = net.connect({ port: 1, host: '127.0.0.1' });
tcp.on('error', () => {});
await attempt('tcp', () => new tcp._handle.constructor(0).open(conn));
tcp.destroy();
const udp = dgram.createSocket('udp4');
const state = Object.getOwnPropertySymbols(udp).map((k) => udp[k]).find((v) => v && v.handle);
await attempt('udp', () => new state.handle.constructor().open(conn));
udp.close();
await fh.write('mine');
const back = (await fs.promises.readFile(fh, { encoding: 'utf8' })) + (await fh.readFile('utf8'));
await fh.close();
JSON.stringify({ conn, used, back, text: fs.readFileSync('handle.txt', 'utf8') })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const seen = JSON.parse(eval(r.result));
    assert.ok(seen.conn > 2, `the connection is descriptor ${seen.conn}`);
    assert.deepEqual(seen.used, []);
    assert.equal(seen.text, 'mine');
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  it('cannot adopt a descriptor through tty\'s or net\'s classes as their prototypes hold them', async () => {
    const r = await client.exec(`${FIND_CONNECTION}
const used = [];
const attempt = (what, fn) => { try { fn(); used.push(what); } catch {} };
attempt('tty.WriteStream', () => new (require('tty').WriteStream.prototype.constructor)(conn).write(frame));
attempt('tty.ReadStream', () => new (require('tty').ReadStream.prototype.constructor)(conn).pause());
attempt('net.Socket', () => new (require('net').Socket.prototype.constructor)({ fd: conn }).write(frame));
JSON.stringify(used)`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), []);
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // An async call is checked as it is made and runs later on the threadpool (kept busy here):
  // a close of its number meanwhile must not let the runner's next socket take the number.
  it('lands no queued write on a descriptor the runner opens after the code closed its own', async () => {
    assert.equal(await queueOnOwnFiles('race', 'fs.write(fd, frame, () => {});'), 0);
  });

  // Node takes an async call's callback by its position: a call with an argument after its
  // callback would run uncounted, and its close would free the number at once.
  it('lands no queued write whose callback is not its last argument', async () => {
    assert.equal(await queueOnOwnFiles('trailing', `
try { fs.write(fd, frame, 0, frame.length, null, () => {}, 0); } catch { refused++; }
try { fs.write(fd, frame, 0, frame.length, null, () => {}, () => {}); } catch { refused++; }`), 16);
  });

  // Node may call a callback at once (writeFile on a number with an aborted signal), and
  // one that throws comes out of the call: the call ends its count once, not twice (the
  // second took the count of another write still queued on the number).
  it('lands no queued write after a callback that throws at once', async () => {
    assert.equal(await queueOnOwnFiles('thrown', `fs.write(fd, frame, () => {});
try { fs.writeFile(fd, 'x', { signal: AbortSignal.abort() }, () => { throw new Error('at once'); }); } catch { refused++; }`), 8);
  });

  // A number is the code's only from its fs.open to its close: one a FileHandle, an fs.Dir
  // or the main thread holds, or one the code asked to close, is refused, so no holder
  // uses a number freed under it, which the runner's next socket (a reconnection) takes.
  it('uses no number it did not open, or asked to close, once the runner reuses it', async () => {
    client.send({ type: 'file_upload', id: 7, path: 'up.bin', max_bytes: 1000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const r = await client.exec(`${FIND_CONNECTION}
const open = () => { const s = new Set(); for (let fd = 0; fd < 256; fd++) { try { fs.fstatSync(fd); s.add(fd); } catch {} } return s; };
const used = [];
const attempt = (what, fn) => { try { fn(); used.push(what); } catch {} };
const temp = fs.readdirSync('.').find((n) => n.startsWith('.upload-'));
const ino = fs.statSync(temp).ino;
for (let fd = 3; fd < 256; fd++) { try { if (fs.fstatSync(fd).ino === ino) attempt('upload ' + fd, () => fs.closeSync(fd)); } catch {} }
const fh = await fs.promises.open('handle.txt', 'w+');
attempt('FileHandle', () => fs.closeSync(fh.fd));
const before = open();
const dir = fs.opendirSync('.');
for (const fd of [...open()].filter((n) => !before.has(n))) attempt('fs.Dir ' + fd, () => fs.closeSync(fd));
const own = fs.openSync('async-close.txt', 'w');
fs.close(own, () => {});
let late = null;
fs.write(own, frame, (e) => { late = e && e.code; });
await new Promise((resolve) => setTimeout(resolve, 50));
setTimeout(() => { fh.write(frame).catch(() => {}); try { dir.closeSync(); } catch {} }, 3000);
JSON.stringify({ used, late })`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(JSON.parse(eval(r.result)), { used: [], late: 'EBADF' });
    await reconnectAfter(4000);
  });

  // Runs `code` (its value 'done'), waits `settleMs` and runs `1 + 1`: that exec, and how
  // many bytes the runner's log grew by meanwhile.
  const afterCell = async (code, settleMs, options) => {
    const logged = runner.log.length;
    assert.equal((await client.exec(code)).result, "'done'");
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    const next = await client.exec('1 + 1', options);
    assert.equal(next.result, '2');
    return { next, logGrowth: runner.log.length - logged };
  };

  it('cuts the reason a worker was lost, however long the error user code throws', async () => {
    const { next, logGrowth } = await afterCell("process.removeAllListeners('uncaughtException');\n" +
      "setTimeout(() => { throw new Error('M'.repeat(4 * 1024 * 1024)); }, 10); 'done'", 1000,
    { maxOutputBytes: 1000 });
    const noted = next.chunks.map(([, text]) => text).join('');
    assert.match(noted, /the worker failed: M+\.\.\.\[truncated \d+ chars\]/);
    assert.ok(noted.length < 4096, `${noted.length} characters of output`);
    assert.ok(logGrowth < 64 * 1024, `${logGrowth} bytes logged`);
  });

  it('relays a bounded part of what a worker writes to its real stderr', async () => {
    const { logGrowth } = await afterCell("const write = require('stream').Writable.prototype.write;\n" +
      "for (let i = 0; i < 8; i++) write.call(process.stderr, 'E'.repeat(1 << 20) + '\\n'); 'done'", 500);
    assert.ok(logGrowth < 512 * 1024, `${logGrowth} bytes relayed`);
    assert.match(runner.log, /stderr passed 262144 bytes; the rest is dropped/);
  });

  it('cannot start processes', async () => {
    const r = await client.exec('require("child_process").execSync("id").toString()');
    assert.equal(r.status, 'error');
    assert.match(r.error.message, /Access to this API has been restricted/);
  });
});
