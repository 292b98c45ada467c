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

  it('cannot start processes', async () => {
    const r = await client.exec('require("child_process").execSync("id").toString()');
    assert.equal(r.status, 'error');
    assert.match(r.error.message, /Access to this API has been restricted/);
  });
});
