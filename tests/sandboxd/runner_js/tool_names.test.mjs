// Names an upstream chooses: callTool() prefers a real MCP name over a py_name, and a tool
// named `then` does not make its server object a thenable (nor do `constructor` and
// `__proto__` break it).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RunnerContainer, textResult } from './harness.mjs';

const tool = (name, pyName, jsName = pyName) => ({ name, py_name: pyName, js_name: jsName,
  description: '', input_schema: { type: 'object' }, py_params: {}, output_schema: null });

// As the catalog (catalog.cc) names them: 'a-b' came first, so the tool 'a_b' is a_b_2;
// the server 'b' is mcp_b, so the server 'mcp_b' is mcp_mcp_b; `then` is the method then_2
// (then_ is a py_name taken). `__proto__` is a Python special name, so its py_name is
// __proto___ (codemode::PythonToolName); its JavaScript method keeps the name here, to show
// that even that one cannot change the server object's prototype.
const NAMES = {
  servers: [
    { name: 'h', py_name: 'mcp_h', description: '', tools: [
      tool('a-b', 'a_b'), tool('a_b', 'a_b_2'), tool('then', 'then', 'then_2'), tool('then-', 'then_'),
      tool('constructor', 'constructor'), tool('__proto__', '__proto___', '__proto__'), tool('echo', 'echo'),
    ] },
    { name: 'b', py_name: 'mcp_b', description: '', tools: [tool('echo', 'echo')] },
    { name: 'mcp_b', py_name: 'mcp_mcp_b', description: '', tools: [tool('echo', 'echo')] },
  ],
};

describe('javascript runner: tool and server names', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
    await client.setCatalog(NAMES);
  });
  after(() => runner && runner.stop());

  const answer = () => ({ ok: true, result: textResult('1') });
  const called = async (code) => {
    const r = await client.exec(code, { onToolCall: answer });
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    return r.calls.map((c) => `${c.server}/${c.tool}`);
  };

  it('callTool takes the real MCP name before a py_name', async () => {
    assert.deepEqual(await called('await callTool("h", "a_b")'), ['h/a_b']);
    assert.deepEqual(await called('await callTool("h", "a-b")'), ['h/a-b']);
    assert.deepEqual(await called('await callTool("h", "a_b_2")'), ['h/a_b']);
    assert.deepEqual(await called('await callTool("mcp_b", "echo")'), ['mcp_b/echo']);
    assert.deepEqual(await called('await callTool("b", "echo")'), ['b/echo']);
    assert.deepEqual(await called('await callTool("mcp_mcp_b", "echo")'), ['mcp_b/echo']);
    assert.deepEqual(await called('await mcp_h.a_b(); await mcp_h.a_b_2()'), ['h/a-b', 'h/a_b']);
  });

  it('keeps constructor and __proto__ tools as methods of the server object', async () => {
    assert.deepEqual(await called('await mcp_h.constructor(); await mcp_h.__proto__()'),
      ['h/constructor', 'h/__proto__']);
    const r = await client.exec('Object.getPrototypeOf(mcp_h) === Object.prototype && ' +
      'Object.isFrozen(mcp_h)');
    assert.equal(r.result, 'true');
  });

  it('names the `then` tool then_2 (then_ is taken), so awaiting a server object settles', async () => {
    const r = await client.exec('const s = await mcp_h; const p = await Promise.resolve(mcp_b);\n' +
      'JSON.stringify([s === mcp_h, p === mcp_b, typeof mcp_h.then, Object.keys(mcp_h)])');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, `'[true,true,"undefined",` +
      `["a_b","a_b_2","then_2","then_","constructor","__proto__","echo"]]'`);
    assert.deepEqual(await called('await mcp_h.then_2(); await mcp_h.then_()'), ['h/then', 'h/then-']);
    assert.deepEqual(await called('await callTool("h", "then"); await callTool("h", "then_2")'),
      ['h/then', 'h/then']);
    const trailing = await client.exec('mcp_h');
    assert.equal(trailing.status, 'ok', 'a server object as the cell\'s value');
    assert.match(trailing.result, /then_2, then_/);
  });

  // Names no rule of the runner would give (`then` would be then_, `x-y` x_y): the methods
  // are the catalog's js_names, and the runner computes none.
  it('names each method as the catalog says', async () => {
    await client.setCatalog({ servers: [{ name: 'g', py_name: 'mcp_g', description: '', tools: [
      tool('then', 'then', 'later'), tool('x-y', 'x_y', 'given'),
    ] }] });
    try {
      assert.equal((await client.exec('JSON.stringify(Object.keys(mcp_g))')).result,
        `'["later","given"]'`);
      assert.deepEqual(await called('await mcp_g.later(); await mcp_g.given()'), ['g/then', 'g/x-y']);
      assert.deepEqual(await called('await callTool("g", "given")'), ['g/x-y']);
    } finally {
      await client.setCatalog(NAMES);
    }
  });
});
