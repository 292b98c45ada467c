// _discover(), _schema(name) and _search(text, limit): the Python runner's discovery
// helpers (toolbox.py) in the JavaScript runner, with each tool's JavaScript method name.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RunnerContainer, textResult } from './harness.mjs';

const OBJECT = { type: 'object', properties: {} };
// With the names sandboxd sends (codemode::Catalog): `then` is the method then_.
const tool = (name, pyName, description, inputSchema = OBJECT, outputSchema = null,
  pyParams = {}) =>
  ({ name, py_name: pyName, js_name: pyName === 'then' ? 'then_' : pyName, description,
    input_schema: inputSchema, output_schema: outputSchema, py_params: pyParams });
const SEARCH_INPUT = { type: 'object', properties: { query: { type: 'string' },
  limit: { type: 'integer', default: 10 }, 'max-hits': { type: 'integer' } },
required: ['query', 'max-hits'] };
const SEARCH_OUTPUT = { type: 'object', properties: { hits: { type: 'array' } } };

const CATALOG = {
  servers: [
    { name: 'docs', py_name: 'mcp_docs', description: 'Documents', tools: [
      tool('search-docs', 'search_docs', '\n  Search the documents by keyword.  \nSecond line mentions graph.',
        SEARCH_INPUT, SEARCH_OUTPUT, { query: 'query', limit: 'limit', 'max-hits': 'max_hits' }),
      tool('then', 'then', 'Then what'),
      tool('echo', 'echo', 'Echo a message'),
    ] },
    { name: 'graph', py_name: 'mcp_graph', description: '', tools: [
      tool('search', 'search', 'Search the knowledge graph'),
      tool('echo', 'echo', 'echo'),
    ] },
    { name: 'a.b', py_name: 'mcp_a_b', description: '', tools: [tool('c.d', 'c_d', '')] },
  ],
};

const OTHER = { servers: [{ name: 'files', py_name: 'mcp_files', description: '', tools: [
  tool('read', 'read', 'Read a file'),
] }] };

describe('javascript runner: _discover, _schema and _search', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
    await client.setCatalog(CATALOG);
  });
  after(() => runner && runner.stop());

  // The JSON of what `expr` gives in the sandbox (printed, so no inspect quoting).
  const value = async (expr) => {
    const r = await client.exec(`console.log(JSON.stringify(${expr}))`);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    return JSON.parse(r.stream('stdout'));
  };
  const failure = async (code) => {
    const r = await client.exec(code);
    assert.equal(r.status, 'error', `${code} did not fail`);
    return r.error;
  };

  it('_discover() lists every tool by server with its first line, method and call', async () => {
    assert.deepEqual(await value('_discover()'), {
      docs: [
        { name: 'search-docs', js_name: 'search_docs', description: 'Search the documents by keyword.',
          call: 'await mcp_docs.search_docs({ query: ..., "max-hits": ... })' },
        { name: 'then', js_name: 'then_', description: 'Then what', call: 'await mcp_docs.then_()' },
        { name: 'echo', js_name: 'echo', description: 'Echo a message', call: 'await mcp_docs.echo()' },
      ],
      graph: [
        { name: 'search', js_name: 'search', description: 'Search the knowledge graph',
          call: 'await mcp_graph.search()' },
        { name: 'echo', js_name: 'echo', description: 'echo', call: 'await mcp_graph.echo()' },
      ],
      'a.b': [{ name: 'c.d', js_name: 'c_d', description: '', call: 'await mcp_a_b.c_d()' }],
    });
    assert.equal((await client.exec('typeof _discover().then')).result, "'undefined'",
      'a plain object, not a promise');
  });

  it('_schema() gives the full schema by MCP, py, JavaScript or unambiguous bare name', async () => {
    const full = await value('_schema("docs.search-docs")');
    assert.deepEqual(full, { name: 'docs.search-docs', server: 'docs', tool: 'search-docs',
      js_name: 'search_docs', description: CATALOG.servers[0].tools[0].description,
      input_schema: SEARCH_INPUT, output_schema: SEARCH_OUTPUT,
      call: 'await mcp_docs.search_docs({ query: ..., "max-hits": ... })' });
    for (const name of ['mcp_docs.search_docs', 'docs.search_docs', 'search-docs', 'search_docs']) {
      assert.deepEqual(await value(`_schema(${JSON.stringify(name)})`), full, name);
    }
    for (const name of ['docs.then', 'mcp_docs.then_', 'then', 'then_']) {
      const s = await value(`_schema(${JSON.stringify(name)})`);
      assert.deepEqual([s.name, s.js_name, s.output_schema], ['docs.then', 'then_', null], name);
    }
    assert.equal((await value('_schema("a.b.c.d")')).name, 'a.b.c.d', 'dotted server and tool names');
    assert.equal((await value('_schema("graph.echo")')).name, 'graph.echo');
  });

  it('_schema() refuses unknown, ambiguous and non-string names', async () => {
    let e = await failure('_schema("echo")');
    assert.equal(e.type, 'ToolError');
    assert.match(e.message, /tool name 'echo' is ambiguous: docs\.echo, graph\.echo/);
    e = await failure('_schema("nope")');
    assert.equal(e.type, 'ToolError');
    assert.match(e.message, /no tool named 'nope'/);
    e = await failure('_schema("docs.nope")');
    assert.match(e.message, /no tool named 'docs\.nope'/);
    e = await failure('_schema(42)');
    assert.equal(e.type, 'TypeError');
  });

  it('_schema() returns copies: changing one changes no argument check', async () => {
    const r = await client.exec('_schema("docs.search-docs").input_schema.required.length = 0;\n' +
      'await mcp_docs.search_docs({})');
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'TypeError');
    assert.match(r.error.message, /missing a required argument: 'query'/);
    assert.deepEqual((await value('_schema("search-docs")')).input_schema, SEARCH_INPUT);
  });

  it('_search() ranks names (3) over descriptions (1), then by server and tool', async () => {
    const hit = (server, name, js, description, score) =>
      ({ server, tool: name, js_name: js, description, score });
    const all = [hit('graph', 'search', 'search', 'Search the knowledge graph', 8),
      hit('docs', 'search-docs', 'search_docs', 'Search the documents by keyword.', 5),
      hit('graph', 'echo', 'echo', 'echo', 3)];
    assert.deepEqual(await value('_search("search GRAPH")'), all);
    assert.deepEqual(await value('_search("search graph", 2)'), all.slice(0, 2));
    assert.deepEqual(await value('_search("search graph", null)'), all);
    assert.deepEqual(await value('_search("search graph", 0)'), []);
    assert.deepEqual(await value('_search("search graph", -3)'), []);
    assert.deepEqual(await value('_search("echo")'),
      [hit('docs', 'echo', 'echo', 'Echo a message', 4), hit('graph', 'echo', 'echo', 'echo', 4)]);
    assert.deepEqual(await value('_search("then")'), [hit('docs', 'then', 'then_', 'Then what', 4)]);
    assert.deepEqual(await value('[_search(""), _search("__ -- ..")]'), [[], []]);
    assert.equal((await failure('_search("x", "many")')).type, 'TypeError');
    assert.equal((await failure('_search()')).type, 'TypeError');
  });

  // Code written to await them (codemode-lite's Python awaits its helpers) works: `await`
  // of a non-promise gives the value, and no result is a thenable (a server named `then`
  // holds an array; _schema's and _search's fields are never functions).
  it('awaiting them gives what the plain call gives', async () => {
    for (const call of ['_discover()', '_schema("docs.search-docs")', '_search("graph", 2)']) {
      assert.deepEqual(await value(`await ${call}`), await value(call), call);
    }
    await client.setCatalog({ servers: [{ name: 'then', py_name: 'mcp_then', description: '',
      tools: [tool('then', 'then', 'Then what')] }] });
    try {
      assert.deepEqual(await value('await _discover()'), await value('_discover()'));
      assert.deepEqual(await value('(await _discover()).then.map((t) => t.js_name)'), ['then_']);
    } finally {
      await client.setCatalog(CATALOG);
    }
  });

  it('follows set_catalog, also through references saved before it', async () => {
    const r = await client.exec('globalThis.savedSchema = _schema; 1');
    assert.equal(r.status, 'ok');
    await client.setCatalog(OTHER);
    try {
      assert.deepEqual(Object.keys(await value('_discover()')), ['files']);
      assert.equal((await value('savedSchema("read")')).call, 'await mcp_files.read()');
      assert.deepEqual((await value('_search("read")')).map((h) => h.tool), ['read']);
      assert.match((await failure('_schema("docs.echo")')).message, /no tool named 'docs\.echo'/);
    } finally {
      await client.setCatalog(CATALOG);
    }
    assert.deepEqual(Object.keys(await value('_discover()')), ['docs', 'graph', 'a.b']);
  });

  it('keeps working when user code replaces these or other globals', async () => {
    try {
      let r = await client.exec('const S = JSON.stringify; JSON.stringify = () => "broken";\n' +
        'structuredClone = undefined; const s = _schema("search-docs"); JSON.stringify = S;\n' +
        'console.log(S([s.call, s.input_schema.required]))');
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.deepEqual(JSON.parse(r.stream('stdout')),
        ['await mcp_docs.search_docs({ query: ..., "max-hits": ... })', ['query', 'max-hits']]);
      r = await client.exec('_discover = () => "mine"; delete globalThis._schema; _search = null;\n' +
        'const a = await mcp_docs.echo(); const b = await callTool("graph", "echo");\n' +
        '[_discover(), typeof _schema, a, b]', { onToolCall: () => ({ ok: true, result: textResult('1') }) });
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.result, "[ 'mine', 'undefined', 1, 1 ]");
      assert.deepEqual(r.calls.map((c) => `${c.server}/${c.tool}`), ['docs/echo', 'graph/echo']);
      await client.setCatalog(CATALOG);
      assert.equal((await value('[typeof _schema, typeof _search, _discover().docs.length]')).join(),
        'function,function,3', 'set_catalog installs them again');
    } finally {
      await client.reset();
    }
  });
});
