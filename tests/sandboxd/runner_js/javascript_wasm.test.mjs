// The wasm tier's JavaScript sessions: sandbox_runner.js --language javascript on
// deploy/wasm's Node, started as a host process on an inherited listening socket under the
// contract's node flags (harness.mjs, WasmRunner).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
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

  it('runs cells (acorn from the runtime) and says it is javascript', async () => {
    assert.equal(ready.runtime, 'javascript');
    assert.match(ready.node, /^v26\./);
    await client.exec('const a = 41');
    assert.equal((await client.exec('a + 1')).result, '42');
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

  it('cannot start processes', async () => {
    const r = await client.exec('require("child_process").execSync("id").toString()');
    assert.equal(r.status, 'error');
    assert.match(r.error.message, /Access to this API has been restricted/);
  });
});
