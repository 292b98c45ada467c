// Tool calls: one global per server, callTool(), result conversion, ToolError, argument
// checks before any call, Promise.all with back-pressure, late results, the end of an exec.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOG, RunnerContainer, textResult } from './harness.mjs';

describe('javascript runner: tool calls', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
    await client.setCatalog(CATALOG);
  });
  after(() => runner && runner.stop());

  const answer = (result) => () => ({ ok: true, result });

  it('installs one global per server and callTool', async () => {
    const r = await client.exec('JSON.stringify([typeof mcp_everything.echo, typeof mcp_memory.read_graph, ' +
      'typeof callTool, typeof ToolError, Object.keys(mcp_everything).join()])');
    assert.equal(r.result, `'["function","function","function","function","echo,add,get_image,search"]'`);
  });

  it('sends a tool_call frame and converts the result', async () => {
    const cases = [
      [textResult('plain text'), "'plain text'"],
      [textResult('{"n": 1}'), '{ n: 1 }'],
      [{ content: [], structuredContent: { sum: 3 } }, '{ sum: 3 }'],
      [{ content: [{ type: 'text', text: 'a' }, { type: 'image', data: 'AA==', mimeType: 'image/png' }] },
        "[ { type: 'text', text: 'a' }, { type: 'image', data: 'AA==', mimeType: 'image/png' } ]"],
    ];
    for (const [result, expected] of cases) {
      const r = await client.exec('await mcp_everything.echo({ message: "hi" })', { onToolCall: answer(result) });
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.result, expected);
      assert.equal(r.calls.length, 1);
      assert.deepEqual([r.calls[0].server, r.calls[0].tool, r.calls[0].arguments],
        ['everything', 'echo', { message: 'hi' }]);
      assert.match(r.calls[0].call_id, /^c\d+$/);
    }
  });

  it('callTool takes catalog or py names and passes unknown properties', async () => {
    const r = await client.exec('await callTool("everything", "get-image", { extra: 1 })',
      { onToolCall: answer(textResult('"img"')) });
    assert.equal(r.result, "'img'");
    assert.deepEqual(r.calls[0].arguments, { extra: 1 });
    assert.equal(r.calls[0].tool, 'get-image');
  });

  it('raises ToolError for a failed call, catchable with its fields', async () => {
    const code = 'let seen; try { await mcp_everything.add({ a: 1, b: 2 }) } catch (e) {\n' +
      '  seen = [e instanceof ToolError, e.name, e.server, e.tool, e.message] }\nJSON.stringify(seen)';
    const r = await client.exec(code, { onToolCall: () => ({ ok: false, error: 'upstream down' }) });
    assert.equal(r.result, `'[true,"ToolError","everything","add","everything.add: upstream down"]'`);
    const e = await client.exec('await mcp_everything.add({ a: 1, b: 2 })', {
      onToolCall: answer({ isError: true, content: [{ type: 'text', text: 'bad numbers' }] }) });
    assert.equal(e.status, 'error');
    assert.equal(e.error.type, 'ToolError');
    assert.equal(e.error.message, 'everything.add: bad numbers');
  });

  it('checks arguments against the schema before any call', async () => {
    const bad = [
      ['mcp_everything.echo({})', /missing a required argument: 'message'/],
      ['mcp_everything.echo({ message: 5 })', /'message' must be string, not number/],
      ['mcp_everything.echo({ message: "x", nope: 1 })', /unexpected argument 'nope'/],
      ['mcp_everything.search({ query: "q", limit: 1.5 })', /'limit' must be integer/],
      ['mcp_everything.echo("hi")', /arguments must be an object/],
      ['mcp_everything.add({ a: 1, b: NaN })', /'b' must be number/],
      ['callTool("everything", "echo", { message: () => 1 })', /must be string/],
      ['callTool("everything", "echo", { message: "m", f: () => 1 })', /not JSON-serializable/],
    ];
    for (const [call, message] of bad) {
      const r = await client.exec(`await ${call}`);
      assert.equal(r.status, 'error', call);
      assert.equal(r.error.type, 'TypeError', call);
      assert.match(r.error.message, message, call);
      assert.equal(r.calls.length, 0, call);
    }
    const unknown = await client.exec('await callTool("nowhere", "x", {})');
    assert.equal(unknown.error.type, 'ToolError');
    assert.match(unknown.error.message, /no MCP server 'nowhere'/);
    const opt = await client.exec('await mcp_everything.search({ query: "q", limit: null, tags: null })',
      { onToolCall: answer(textResult('1')) });
    assert.deepEqual(opt.calls[0].arguments, { query: 'q', tags: null });
  });

  it('refuses arguments nested deeper than 120 levels, which sandboxd would refuse the frame of', async () => {
    await client.exec('globalThis.keep = 42; globalThis.deep = (n) => { let v = 1; ' +
      'for (let i = 0; i < n; i++) v = i % 2 ? [v] : { o: v }; return v; }');
    const depth = (v) => (v !== null && typeof v === 'object' ?
      1 + Math.max(0, ...Object.values(v).map(depth)) : 0);
    const ok = await client.exec('await callTool("everything", "echo", { message: "m", d: deep(120) })',
      { onToolCall: answer(textResult('1')) });
    assert.equal(ok.status, 'ok', JSON.stringify(ok.error));
    assert.equal(depth(ok.calls[0]), 122, 'within sandboxd\'s 128 levels');
    for (const n of [121, 125, 200, 10000]) {
      const r = await client.exec(`await callTool("everything", "echo", { message: "m", d: deep(${n}) })`,
        { onToolCall: answer(textResult('1')) });
      assert.equal(r.status, 'error', `${n}`);
      assert.equal(r.error.type, 'TypeError', `${n}`);
      assert.match(r.error.message, /argument 'd' is not JSON-serializable: nested deeper than 120 levels/);
      assert.equal(r.calls.length, 0, `${n}`);
    }
    // a getter read again when the arguments are copied for sending: checked there too
    const sly = await client.exec('let reads = 0; const d = {};\n' +
      'Object.defineProperty(d, "x", { enumerable: true, get: () => (reads++ ? deep(125) : 1) });\n' +
      'await callTool("everything", "echo", { message: "m", d })', { onToolCall: answer(textResult('1')) });
    assert.equal(sly.error.type, 'ToolError', JSON.stringify(sly.error));
    assert.match(sly.error.message, /argument 'd' is not JSON-serializable: nested deeper than 120/);
    assert.equal(sly.calls.length, 0);
    assert.equal((await client.exec('keep')).result, '42');
  });

  it('refuses arguments of more values than sandboxd takes in a frame', async () => {
    // sandboxd refuses a frame of more than 131,072 JSON values (and ends the session)
    const ok = await client.exec('await callTool("everything", "echo", { message: "m", d: Array(131000).fill(0) })',
      { onToolCall: answer(textResult('1')) });
    assert.equal(ok.status, 'ok', JSON.stringify(ok.error));
    assert.equal(ok.calls[0].arguments.d.length, 131000);
    for (const code of ['await callTool("everything", "echo", { message: "m", d: Array(131100).fill(0) })',
      'await mcp_everything.search({ query: "q", tags: [Array(200000).fill(0)] })']) {
      const r = await client.exec(code, { onToolCall: answer(textResult('1')) });
      assert.equal(r.status, 'error', code);
      assert.equal(r.error.type, 'TypeError', code);
      assert.match(r.error.message, /holds more than 131056 values/);
      assert.equal(r.calls.length, 0, code);
    }
    // two arguments within the bound each, over it together: refused as they go out
    const both = await client.exec('await callTool("everything", "echo", ' +
      '{ message: "m", a: Array(70000).fill(0), b: Array(70000).fill(0) })', { onToolCall: answer(textResult('1')) });
    assert.equal(both.error.type, 'ToolError', JSON.stringify(both.error));
    assert.match(both.error.message, /argument 'b' is not JSON-serializable: holds more than 131056 values/);
    assert.equal(both.calls.length, 0);
  });

  it('runs Promise.all of 100 calls with at most max_tool_calls_in_flight unanswered', async () => {
    const id = client.startExec('const rs = await Promise.all(Array.from({ length: 100 }, (_, i) =>' +
      ' mcp_everything.add({ a: i, b: 1 }))); rs.reduce((s, v) => s + v.sum, 0)', { maxCalls: 4 });
    const held = [];
    let maxSeen = 0;
    let total = 0;
    for (;;) {
      const f = await client.recv();
      if (f.type === 'done') {
        assert.equal(f.status, 'ok', JSON.stringify(f.error));
        assert.equal(f.result, String(Array.from({ length: 100 }, (_, i) => i + 1).reduce((a, b) => a + b)));
        break;
      }
      assert.equal(f.type, 'tool_call');
      total++;
      held.push(f);
      maxSeen = Math.max(maxSeen, held.length);
      // answer only once the runner has nothing more to send: it must stop at 4
      if (held.length === 4 || total === 100) {
        await new Promise((r) => setTimeout(r, total <= 8 ? 100 : 0));
        assert.equal(client.frames.length, 0, 'more than 4 calls in flight');
        const call = held.shift();
        client.send({ type: 'tool_result', call_id: call.call_id, ok: true,
          result: { content: [], structuredContent: { sum: call.arguments.a + call.arguments.b } } });
        if (total === 100) {
          for (const c of held.splice(0)) {
            client.send({ type: 'tool_result', call_id: c.call_id, ok: true,
              result: { content: [], structuredContent: { sum: c.arguments.a + c.arguments.b } } });
          }
        }
      }
    }
    assert.equal(total, 100);
    assert.equal(maxSeen, 4);
  });

  it('ignores late and unknown results, and rejects pending calls when the exec ends', async () => {
    const r = await client.exec('globalThis.pending = mcp_everything.echo({ message: "late" })' +
      '.catch((e) => e); "left"');
    assert.equal(r.result, "'left'");
    assert.equal(r.calls.length, 1);
    client.send({ type: 'tool_result', call_id: r.calls[0].call_id, ok: true, result: textResult('"too late"') });
    client.send({ type: 'tool_result', call_id: 'c999999', ok: true, result: textResult('x') });
    const e = await client.exec('const err = await pending; [err.name, err.message]');
    assert.equal(e.result, "[ 'ToolError', 'everything.echo: the execution ended before the tool result arrived' ]");
  });

  it('flushes output before each tool_call frame', async () => {
    const r = await client.exec('console.log("before"); await mcp_everything.echo({ message: "m" })',
      { onToolCall: answer(textResult('1')) });
    const kinds = r.frames.map((f) => f.type);
    assert.deepEqual(kinds.slice(0, 2), ['output', 'tool_call']);
  });

  it('refuses arguments that would make a frame over 16 MiB', async () => {
    const r = await client.exec('await mcp_everything.echo({ message: "x".repeat(17 * 1024 * 1024) })');
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'ToolError');
    assert.match(r.error.message, /arguments too large/);
    assert.equal(r.calls.length, 0);
  });

  it('gives call ids unique for the runner lifetime, also across a reset', async () => {
    const a = await client.exec('await mcp_everything.echo({ message: "1" })', { onToolCall: answer(textResult('1')) });
    await client.reset();
    const b = await client.exec('await mcp_everything.echo({ message: "2" })', { onToolCall: answer(textResult('2')) });
    assert.equal(b.result, '2', 'the catalog survives a reset');
    assert.notEqual(a.calls[0].call_id, b.calls[0].call_id);
  });
});
