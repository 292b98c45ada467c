// Cells: persistence across execs, re-declaration, top-level await, the trailing result,
// errors with only the user's frames, output streaming and caps, reset and ping.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MIB, RunnerContainer } from './harness.mjs';

describe('javascript runner: execution', () => {
  let runner;
  let client;
  let ready;
  before(async () => {
    runner = await RunnerContainer.start();
    [client, ready] = await runner.connect();
  });
  after(() => runner && runner.stop());

  const ok = async (code, options) => {
    const r = await client.exec(code, options);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    return r;
  };

  it('says it is the javascript runtime in ready', () => {
    assert.equal(ready.runner_version, 2);
    assert.equal(ready.runtime, 'javascript');
    assert.match(ready.node, /^v18\./);
    assert.equal(typeof ready.pid, 'number');
    assert.equal(ready.execs, 0);
  });

  it('keeps let, const, var, function and class across execs', async () => {
    await ok('let a = 1; const b = 2; var c = 3; function f() { return a + b + c }\n' +
      'class K { get v() { return 10 } }');
    const r = await ok('f() + new K().v');
    assert.equal(r.result, '16');
  });

  it('lets a later exec declare the same names again', async () => {
    await ok('const x = 1; let y = 2; class Z {}; function w() { return 1 }');
    const r = await ok('const x = 5; let y = 6; class Z { m() { return 7 } }; function w() { return 2 }\n' +
      '[x, y, new Z().m(), w()]');
    assert.equal(r.result, '[ 5, 6, 7, 2 ]');
  });

  it('keeps destructured and loop var declarations', async () => {
    await ok('const { p, q: [r] } = { p: 1, q: [2] }; for (var i = 0; i < 3; i++) {}');
    assert.equal((await ok('[p, r, i]')).result, '[ 1, 2, 3 ]');
  });

  it('gives the result on one line, as Python\'s repr does', async () => {
    const r = await ok('({ n: Array.from({ length: 12 }, (_, i) => i), s: "a".repeat(90) + "\\n" + "b".repeat(90),\n' +
      '   deep: { a: { b: { c: { d: { e: 1 } } } } } })');
    assert.equal(r.result, `{ n: [ ${[...Array(12).keys()].join(', ')} ], s: '${'a'.repeat(90)}\\n${'b'.repeat(90)}', ` +
      'deep: { a: { b: { c: { d: { e: 1 } } } } } }');
  });

  it('runs top-level await', async () => {
    const r = await ok('const v = await new Promise((res) => setTimeout(() => res(41), 20)); v + 1');
    assert.equal(r.result, '42');
  });

  it('returns the trailing expression, null without one or for undefined', async () => {
    assert.equal((await ok('1 + 1')).result, '2');
    assert.equal((await ok('let nothing = 1;')).result, null);
    assert.equal((await ok('console.log("x")')).result, null);
    assert.equal((await ok('({ a: [1, "s"] })')).result, "{ a: [ 1, 's' ] }");
    assert.equal((await ok('Promise.resolve(3)')).result, 'Promise { 3 }');
  });

  it('caps the result at 64 Ki characters with a marker', async () => {
    const r = await ok('"x".repeat(100000)');
    assert.ok(r.result.length < 66 * 1024);
    assert.match(r.result, /\.\.\.\[truncated \d+ chars\]$/);
  });

  it('reports a syntax error as an ordinary error', async () => {
    const r = await client.exec('let = = 2');
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'SyntaxError');
    assert.match(r.error.traceback, /<cell-\d+>:1/);
    assert.equal((await ok('1')).result, '1');
  });

  it('shows only the user frames in a traceback', async () => {
    const r = await client.exec('function inner() { throw new RangeError("deep") }\n' +
      'async function outer() { await null; inner() }\nawait outer()');
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'RangeError');
    assert.equal(r.error.message, 'deep');
    assert.match(r.error.traceback, /^RangeError: deep/);
    assert.match(r.error.traceback, /at inner \(<cell-\d+>:1:/);
    assert.match(r.error.traceback, /at outer \(<cell-\d+>:2:/);
    assert.match(r.error.traceback, /at async <cell-\d+>:3:/);
    assert.doesNotMatch(r.error.traceback, /sandbox_runner|node:internal|\(node:/);
  });

  it('accepts a hashbang first line, as node does for a script, and keeps line numbers', async () => {
    assert.equal((await ok('#!/usr/bin/env node\nconst h = 41;\nh + 1')).result, '42');
    assert.equal((await ok('#!/usr/bin/env node')).result, null);
    const r = await client.exec('#!/usr/bin/env node\nfunction f() {\n  throw new Error("line 3") }\nf()');
    assert.equal(r.status, 'error');
    assert.match(r.error.traceback, /at f \(<cell-\d+>:3:9\)/);
    const late = await client.exec('1;\n#!/usr/bin/env node');
    assert.equal(late.error.type, 'SyntaxError', 'only the first line may be a hashbang');
  });

  it('reports thrown non-errors', async () => {
    const r = await client.exec('throw 42');
    assert.equal(r.status, 'error');
    assert.match(r.error.message, /42/);
  });

  it('streams output while the code runs', async () => {
    const id = client.startExec('console.log("first"); await new Promise((r) => setTimeout(r, 300));' +
      ' console.error("second"); process.stdout.write("third")');
    const first = await client.recv(2000);
    assert.equal(first.type, 'output');
    assert.deepEqual(first.chunks, [['stdout', 'first\n']]);
    const r = await client.finishExec(id);
    assert.equal(r.stream('stderr'), 'second\n');
    assert.equal(r.stream('stdout'), 'third');
    assert.equal(r.done.output_bytes, 6 + 7 + 5);
  });

  it('streams output of a synchronous loop before done', async () => {
    const id = client.startExec('console.log("early"); const t = Date.now(); while (Date.now() - t < 300) {}');
    const started = Date.now();
    const first = await client.recv(2000);
    assert.equal(first.type, 'output');
    assert.ok(Date.now() - started < 250, 'output came only at the end');
    await client.finishExec(id);
  });

  it('cuts output at max_output_bytes on a character boundary, no marker', async () => {
    const r = await ok('process.stdout.write("é".repeat(10)); console.log("more")', { maxOutputBytes: 5 });
    assert.equal(r.stream('stdout'), 'éé');
    assert.equal(r.done.output_bytes, 25);
    assert.equal(r.done.dropped_bytes, 21);
  });

  it('keeps every output frame under 1 Mi characters', async () => {
    const r = await ok('process.stdout.write("y".repeat(3 * 1024 * 1024))', { maxOutputBytes: 4 * MIB });
    const outputs = r.frames.filter((f) => f.type === 'output');
    assert.ok(outputs.length >= 3);
    for (const f of outputs) {
      assert.ok(f.chunks.reduce((n, [, t]) => n + t.length, 0) <= 1024 * 1024);
    }
    assert.equal(r.stream('stdout').length, 3 * 1024 * 1024);
  });

  it('escapes lone surrogates so every frame is valid UTF-8', async () => {
    // the harness decodes every frame with a fatal UTF-8 decoder
    const r = await ok('console.log("a\\ud800b", "\\udc00"); "\\ud83d"');
    assert.equal(r.stream('stdout'), 'a\\ud800b \\udc00\n');
    assert.ok(!/[\ud800-\udfff]/.test(r.result));
    const s = await ok('"ok \\ud83d\\ude00"');
    assert.equal(s.result, "'ok \ud83d\ude00'");
  });

  it('reports code nested too deeply to parse as an error and keeps serving', async () => {
    await ok('var survivor = 41');
    for (const code of ['('.repeat(3000) + '1' + ')'.repeat(3000),
      'a = ' + '['.repeat(50000) + ']'.repeat(50000)]) {
      const r = await client.exec(code);
      assert.equal(r.status, 'error');
      assert.equal(r.error.type, 'RangeError');
      assert.match(r.error.message, /nested too deeply to parse/);
    }
    assert.equal((await ok('survivor + 1')).result, '42');
  });

  it('answers ping and counts execs in ready after a reconnect', async () => {
    const pong = await client.reply('pong', { type: 'ping' });
    assert.equal(pong.type, 'pong');
    [client, ready] = await runner.connect();
    assert.ok(ready.execs > 5);
  });

  it('reset gives a fresh namespace', async () => {
    await ok('const keep = 1');
    await client.reset();
    const r = await client.exec('keep');
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'ReferenceError');
    assert.equal((await ok('typeof callTool')).result, "'function'");
  });
});
