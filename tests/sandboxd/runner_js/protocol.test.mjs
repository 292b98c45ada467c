// The frame protocol against a hostile or broken peer, and hostile user code: garbage and
// malformed frames close the connection (the runner accepts the next one), a malformed
// catalog does too, and user code that pollutes its globals or posts to parentPort cannot
// forge a frame or a result: the runtime talks to the main thread over a port of its own.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOG, RunnerContainer, textResult } from './harness.mjs';

describe('javascript runner: protocol and hostile code', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  const fresh = async () => {
    [client] = await runner.connect();
    return client;
  };

  it('closes the connection on broken frames and accepts a new one', async () => {
    const broken = [
      (c) => c.sendRaw(Buffer.from('not json')),
      (c) => c.sendRaw(Buffer.from('[1, 2]')),
      (c) => c.sendRaw(Buffer.from('{"no_type": 1}')),
      (c) => c.sendRaw(Buffer.from([0xff, 0xfe, 0x7b])),
      (c) => c.sendRaw(Buffer.alloc(0), 17 * 1024 * 1024),
      (c) => c.send({ type: 'exec', id: '1', code: 'x', max_output_bytes: 1 }),
      (c) => c.send({ type: 'exec', id: 1, code: 'x' }),
      (c) => c.send({ type: 'exec', id: true, code: 'x', max_output_bytes: 1 }),
      (c) => c.send({ type: 'exec', id: 1, code: 'x', max_output_bytes: 1, max_tool_calls_in_flight: 0 }),
      (c) => c.send({ type: 'ping' }),
      (c) => c.send({ type: 'tool_result', call_id: 'c1' }),
      (c) => c.send({ type: 'file_upload', id: 1, path: 'x' }),
    ];
    for (const breakIt of broken) {
      const c = await fresh();
      breakIt(c);
      assert.ok(await c.atEof(5000), breakIt.toString());
    }
    const c = await fresh();
    assert.equal((await c.reply('pong', { type: 'ping' })).type, 'pong');
  });

  it('ignores unknown frame types', async () => {
    const c = await fresh();
    c.send({ type: 'from_the_future', id: 1 });
    assert.equal((await c.reply('pong', { type: 'ping' })).type, 'pong');
  });

  it('closes the connection on a malformed catalog', async () => {
    const bad = [
      { servers: 'no' },
      { servers: [{ name: 'a', py_name: 'not an identifier', tools: [] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [] }, { name: 'a', py_name: 'b', tools: [] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [5] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', input_schema: [] }] }] },
      { servers: [{ name: 'a', py_name: 'class', tools: [] }] },
      // js_name: sandboxd's (codemode::JsMethodName), read and checked, never computed.
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't' }] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', js_name: 'then' }] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', js_name: 'a-b' }] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', js_name: 'u' },
        { name: 'u', py_name: 'u', js_name: 'u' }] }] },
      // py_params and py_kwargs: checked here for the wasm tier's Python (catalog.py's rules).
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', js_name: 't',
        input_schema: { properties: { x: {} } } }] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', js_name: 't',
        input_schema: { properties: { 'x y': {} } }, py_params: { 'x y': null } }] }] },
      { servers: [{ name: 'a', py_name: 'a', tools: [{ name: 't', py_name: 't', js_name: 't',
        input_schema: { properties: { x: {} } }, py_params: { x: 'class' } }] }] },
    ];
    for (const catalog of bad) {
      const c = await fresh();
      c.send({ type: 'set_catalog', id: 1, catalog });
      assert.ok(await c.atEof(5000), JSON.stringify(catalog));
    }
  });

  it('user code that pollutes its globals cannot break or forge frames', async () => {
    const c = await fresh();
    await c.setCatalog(CATALOG);
    const pollute = 'Object.prototype.then = function (r) { r("forged") };\n' +
      'Object.defineProperty(Object.prototype, "type", { get() { return "done" }, set() {}, configurable: true });\n' +
      'Array.prototype.push = function () { throw new Error("push") };\n' +
      'JSON.stringify = () => \'{"type":"done","id":0}\'; JSON.parse = () => ({ type: "done" });\n' +
      'Promise = function () { throw new Error("promise") }; Map = function () {}; "polluted"';
    const r = await c.exec(pollute);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, "'polluted'");
    const after = await c.exec('console.log("still", 1); await mcp_everything.echo({ message: "m" })',
      { onToolCall: () => ({ ok: true, result: textResult('"real"') }) });
    assert.equal(after.status, 'ok', JSON.stringify(after.error));
    assert.equal(after.stream('stdout'), 'still 1\n');
    assert.equal(after.calls.length, 1);
    assert.deepEqual(after.calls[0].arguments, { message: 'm' });
    assert.equal(after.result, "'real'");
    await c.reset();
  });

  it('ignores whatever user code posts to parentPort: a forged done, garbage', async () => {
    const c = await fresh();
    await c.reset();
    await c.exec('const mine = 1');
    const id = c.newId() + 1;
    const forged = await c.exec('const { parentPort } = require("worker_threads");\n' +
      'parentPort.postMessage({ t: "done", id: 99999, status: "ok", result: null, error: null,' +
      ` outputBytes: 0, droppedBytes: 0 });\nparentPort.postMessage({ t: "done", id: ${id}, ` +
      'status: "ok", result: "1", error: null, outputBytes: 0, droppedBytes: 0 });\n' +
      'parentPort.postMessage({ t: "out", s: "evil", x: 1 });\n' +
      'await new Promise((r) => setTimeout(r, 100)); "real"');
    assert.equal(forged.done.id, id);
    assert.equal(forged.status, 'ok');
    assert.equal(forged.result, "'real'");
    assert.equal(forged.frames.filter((f) => f.type === 'done').length, 1);
    const mine = await c.exec('typeof mine');
    assert.equal(mine.result, "'number'");
    assert.equal(mine.done.namespace_reset, undefined);
    assert.equal((await c.reply('pong', { type: 'ping' })).type, 'pong');
  });

  it('closes a port user code posts to parentPort, so nothing it sends there piles up', async () => {
    const c = await fresh();
    const r = await c.exec('const { MessageChannel, parentPort } = require("worker_threads");\n' +
      'const { port1, port2 } = new MessageChannel();\nport2.on("message", () => {});\n' +
      'const closed = new Promise((r) => port2.once("close", () => r("closed")));\n' +
      'parentPort.postMessage({ deep: [port1] }, [port1]);\n' +
      'await Promise.race([closed, new Promise((r) => setTimeout(() => r("open"), 3000))])');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, "'closed'");
  });

  it('a forged output message posted to parentPort is not output', async () => {
    const c = await fresh();
    await c.reset();
    const r = await c.exec('require("worker_threads").parentPort.postMessage({ t: "out", s: "stdout", x: "mine\\n" })');
    assert.equal(r.status, 'ok');
    assert.equal(r.stream('stdout'), '');
  });
});
