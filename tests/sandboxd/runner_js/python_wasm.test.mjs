// The wasm tier's Python sessions: sandbox_runner.js --language python (Pyodide in the
// worker), started as a host process on an inherited listening socket under the contract's
// node flags (harness.mjs, WasmRunner), speaking the container Python runner's frames.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CATALOG, NODE_MALLOC_TUNABLES, WasmRunner, makeWasmSnapshot, mappingsHolding, textResult,
  wasmFiles, wasmPythonPackages } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('python in pyodide (wasm tier)', () => {
  let snapshot;
  let runner;
  let client;
  let ready;
  before(async () => {
    snapshot = makeWasmSnapshot(wasmFiles());
    runner = await WasmRunner.start({ snapshot, env: ['SESSION_VAR=visible', 'HOME=/workspace'],
      hostEnv: { HOST_SECRET: 'hunter2', GLIBC_TUNABLES: NODE_MALLOC_TUNABLES } });
    [client, ready] = await runner.connect();
    await client.setCatalog(CATALOG);
  });
  after(() => {
    if (runner) runner.stop();
    if (snapshot) fs.rmSync(path.dirname(snapshot), { recursive: true, force: true });
  });

  // A runner of its own with the test probe `name` (a .cjs beside this file) preloaded.
  const startWithProbe = (name) => {
    const probe = path.join(path.dirname(fileURLToPath(import.meta.url)), name);
    return WasmRunner.start({ snapshot, env: [], hostEnv: { GLIBC_TUNABLES: NODE_MALLOC_TUNABLES },
      nodeFlags: [`--allow-fs-read=${probe}`, '-r', probe] });
  };
  const interruptAfter = (id, ms) => setTimeout(() => client.send({ type: 'interrupt', id }), ms);

  it('sends the Python runner ready frame', () => {
    assert.equal(ready.runner_version, 2);
    assert.match(ready.python, /^3\.\d+\.\d+$/);
    assert.equal(ready.execs, 0);
    assert.ok(Number.isSafeInteger(ready.pid));
    assert.equal(ready.runtime, undefined);
  });

  it('gives os.environ the session environment of --env-fd over Pyodide\'s own', async () => {
    const r = await client.exec('import os\n(sorted(os.environ), os.environ["SESSION_VAR"], ' +
      'os.environ["HOME"], os.environ["PATH"], os.environ["LANG"])');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, "(['HOME', 'LANG', 'LD_LIBRARY_PATH', 'PATH', 'SESSION_VAR'], " +
      "'visible', '/workspace', '/', 'en_US.UTF-8')");
  });

  // The restore copies the snapshot into the wasm Memory: the bytes read from the file are
  // freed then, not kept for the session's life (python_files.js).
  it('keeps one copy of the snapshot after the restore: the wasm Memory', async () => {
    assert.equal((await client.exec('x = 1')).status, 'ok');
    const bytes = fs.statSync(snapshot).size;
    const copies = mappingsHolding(runner.proc.pid, bytes);
    assert.equal(copies.length, 1, `mappings holding ${bytes} bytes: ${copies.join(', ')}`);
  });

  // V8 keeps its own copy of the wasm binary: the 9.6 MB read from the file, and the rest of
  // the start's garbage, are gone from the worker's heap by `ready` (worker_python.js).
  it('keeps no buffers of the start in the worker after ready', async () => {
    const probed = await startWithProbe('heap_probe.cjs');
    try {
      const [c] = await probed.connect();
      assert.equal((await c.exec('x = 1')).status, 'ok');
      process.kill(probed.proc.pid, 'SIGUSR2');
      let line;
      for (let i = 0; i < 100 && !line; i++) {
        await sleep(50);
        line = probed.log.split('\n').find((l) => l.startsWith('MEMDIAG '));
      }
      assert.ok(line, `no MEMDIAG line: ${probed.log}`);
      const wasm = fs.statSync(path.join(wasmFiles().pyodide, 'pyodide.asm.wasm')).size;
      const external = JSON.parse(line.slice(8)).workers[0].external * 1048576;
      assert.ok(external < wasm, `the worker holds ${external} bytes of buffers (the binary: ${wasm})`);
    } finally {
      probed.stop();
    }
  });

  // The runner listens 5 s after its start whether or not its first worker is ready: the
  // `ready` it sends then still names the Python that runs the code.
  it('names the Python version in a ready sent before the first worker is', async () => {
    const slow = await startWithProbe('slow_worker.cjs');
    try {
      const [c, early] = await slow.connect();
      const r = await c.exec("import sys\n'%d.%d.%d' % sys.version_info[:3]");
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(early.python, JSON.parse(r.result.replace(/'/g, '"')));
    } finally {
      slow.stop();
    }
  });

  // Emscripten creates a file with mode 0777 and chmods it once open: where the jail refuses
  // every mode change, Python could create no file, nor one whose mode lacks the open's access.
  it('creates files with their mode where every mode change is refused', async () => {
    const refusing = await startWithProbe('no_chmod.cjs');
    try {
      const [c] = await refusing.connect();
      const r = await c.exec("import os\nopen('/workspace/a.txt', 'w').write('x')\n" +
        "os.close(os.open('/workspace/b.txt', os.O_CREAT | os.O_WRONLY, 0o640))\n" +
        "os.mkdir('/workspace/d')\nopen('/workspace/d/e', 'x').close()\n" +
        "try:\n    os.chmod('/workspace/a.txt', 0o600)\nexcept PermissionError:\n    print('refused')\n" +
        "[(n, oct(os.stat('/workspace/' + n).st_mode & 0o777)) for n in ('a.txt', 'b.txt', 'd', 'd/e')]");
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.stream('stdout'), 'refused\n', 'the probe does not refuse mode changes');
      assert.equal(r.result, "[('a.txt', '0o666'), ('b.txt', '0o640'), ('d', '0o777'), ('d/e', '0o666')]");
      // POSIX lets the creating open have any access whatever the new file's mode: Emscripten
      // opened its 0777 file and failed to chmod it, an error that left a 0777 file (W6-6).
      const lacking = await c.exec("fd = os.open('/workspace/r', os.O_CREAT | os.O_RDWR, 0o400)\n" +
        "os.write(fd, b'written')\nos.lseek(fd, 0, 0)\nback = os.read(fd, 7)\nos.close(fd)\n" +
        "os.close(os.open('/workspace/z', os.O_CREAT | os.O_RDONLY, 0))\n" +
        "(back, oct(os.stat('/workspace/r').st_mode & 0o777), oct(os.stat('/workspace/z').st_mode & 0o777))");
      assert.equal(lacking.status, 'ok', JSON.stringify(lacking.error));
      assert.equal(lacking.result, "(b'written', '0o400', '0o0')");
      const host = (name) => (fs.statSync(path.join(refusing.workspace, name)).mode & 0o777).toString(8);
      assert.deepEqual([host('r'), host('z')], ['400', '0']);
      assert.equal(fs.readFileSync(path.join(refusing.workspace, 'r'), 'utf8'), 'written');
    } finally {
      refusing.stop();
    }
  });

  it('refuses symlinks in the workspace (the permission model) instead of faking them', async () => {
    const r = await client.exec('import os\ntry:\n    os.symlink("/etc/passwd", "/workspace/link")\n' +
      'except PermissionError as e:\n    print(e.errno == __import__("errno").EACCES)\n' +
      'os.path.lexists("/workspace/link")');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.stream('stdout'), 'True\n');
    assert.equal(r.result, 'False');
    assert.equal(fs.existsSync(path.join(runner.workspace, 'link')), false);
  });

  it('refuses sockets, as the jail refuses them to node', async () => {
    const server = net.createServer((c) => c.destroy()).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    let reached = false;
    server.on('connection', () => { reached = true; });
    const r = await client.exec('import socket\ntry:\n    s = socket.socket()\n' +
      `    s.connect(("127.0.0.1", ${server.address().port}))\n    print("connected")\n` +
      'except PermissionError as e:\n    print(e.errno == __import__("errno").EPERM)');
    server.close();
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.stream('stdout'), 'True\n');
    assert.equal(reached, false);
  });

  // Pyodide's API is Python's to reach: neither of its ways to node:net sockets may undo
  // the refusal (this harness has no seccomp, so a socket they made would connect).
  it('keeps sockets refused through pyodide_js.useNodeSockFS', async () => {
    const server = net.createServer((c) => c.destroy()).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    let reached = false;
    server.on('connection', () => { reached = true; });
    const r = await client.exec('import pyodide_js, socket\n' +
      'for way in (pyodide_js.useNodeSockFS, pyodide_js._api.initializeNodeSockFS):\n' +
      '    try:\n        await way()\n        print("installed")\n' +
      '    except Exception as e:\n        print("refused")\n' +
      'try:\n    s = socket.socket()\n' +
      `    s.connect(("127.0.0.1", ${server.address().port}))\n    print("connected")\n` +
      'except PermissionError as e:\n    print(e.errno == __import__("errno").EPERM)');
    await sleep(200);
    server.close();
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.stream('stdout'), 'refused\nrefused\nTrue\n');
    assert.equal(reached, false);
  });

  it('keeps the namespace between execs, with top-level await', async () => {
    assert.equal((await client.exec('x = 1')).status, 'ok');
    const r = await client.exec('print(x)\nimport asyncio\nawait asyncio.sleep(0.01)\nx + 41');
    assert.equal(r.status, 'ok');
    assert.equal(r.stream('stdout'), '1\n');
    assert.equal(r.result, '42');
  });

  it('streams stdout and stderr in order and counts the bytes', async () => {
    const r = await client.exec('import sys\nprint("out")\nprint("err", file=sys.stderr)\n' +
      'print("again")');
    assert.deepEqual(r.chunks, [['stdout', 'out\n'], ['stderr', 'err\n'], ['stdout', 'again\n']]);
    assert.equal(r.done.output_bytes, 14);
  });

  it('sends displays as display chunks, in order with the text', async () => {
    const id = client.startExec('class T:\n    def _repr_html_(self):\n        return "<b>hi</b>"\n' +
      'print("before")\ndisplay(T())\nprint("after")', { maxDisplayBytes: 1024 });
    const frames = [];
    for (let f = await client.recv(); f.type !== 'done'; f = await client.recv()) frames.push(f);
    const chunks = frames.flatMap((f) => f.chunks);
    assert.deepEqual(chunks.map(([kind]) => kind), ['stdout', 'display', 'stdout']);
    assert.equal(chunks[1][1]['text/html'], '<b>hi</b>');
  });

  it('reports an exception with the user traceback only', async () => {
    const r = await client.exec('def f():\n    return 1 / 0\nf()');
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'ZeroDivisionError');
    assert.match(r.error.traceback, /File "<cell-\d+>", line 2, in f/);
    assert.doesNotMatch(r.error.traceback, /sandbox_runner|pyodide/);
  });

  it('round-trips tool calls through mcp_<server> proxies and tools[...]', async () => {
    const r = await client.exec('a = await mcp_everything.echo(message="hi")\n' +
      'b = await tools["everything.add"](a=1, b=2)\n[a, b]', {
      onToolCall: (f) => ({ ok: true, result: f.tool === 'echo' ? textResult('"hi!"') :
        { content: [], structuredContent: { sum: f.arguments.a + f.arguments.b } } }),
    });
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.deepEqual(r.calls.map((c) => [c.server, c.tool, c.arguments]),
      [['everything', 'echo', { message: 'hi' }], ['everything', 'add', { a: 1, b: 2 }]]);
    assert.equal(r.result, "['hi!', {'sum': 3}]");
  });

  it('keeps JSON number types of tool results as json.loads reads them', async () => {
    const id = client.startExec('r = await mcp_everything.add(a=1, b=2)\n' +
      't = await mcp_everything.echo(message="x")\n' +
      '(r["sum"], r["big"], t)');
    const answer = (c, result) => client.sendRaw(Buffer.from('{"type":"tool_result","call_id":' +
      `${JSON.stringify(c.call_id)},"ok":true,"result":${result}}`));
    answer(await client.expect('tool_call'),
      '{"content":[],"structuredContent":{"sum":5.0,"big":9007199254740993}}');
    answer(await client.expect('tool_call'), '{"content":[{"type":"text","text":"[2.0, 1e400]"}]}');
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, '(5.0, 9007199254740993, [2.0, inf])');
  });

  it('raises ToolError for a failed call', async () => {
    const r = await client.exec('try:\n    await mcp_everything.echo(message="x")\n' +
      'except ToolError as e:\n    print(e)', {
      onToolCall: () => ({ ok: false, error: 'gateway down' }) });
    assert.equal(r.stream('stdout'), 'everything.echo: gateway down\n');
  });

  it('runs 10 gathered tool calls concurrently', async () => {
    const id = client.startExec('import asyncio\nrs = await asyncio.gather(*[' +
      'mcp_everything.echo(message=str(i)) for i in range(10)])\nrs');
    const calls = [];
    while (calls.length < 10) calls.push(await client.expect('tool_call'));
    for (const c of calls.reverse()) {
      client.send({ type: 'tool_result', call_id: c.call_id, ok: true,
        result: textResult(JSON.stringify(c.arguments.message)) });
    }
    const r = await client.finishExec(id);
    assert.equal(r.result, `[${[...Array(10).keys()].map((i) => `'${i}'`).join(', ')}]`);
  });

  it('interrupts a CPU loop and an await, keeping the namespace', async () => {
    await client.exec('kept = 7');
    let id = client.startExec('while True: pass');
    interruptAfter(id, 300);
    let r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    assert.equal(r.error.type, 'KeyboardInterrupt');
    id = client.startExec('import asyncio\nprint("waiting")\nawait asyncio.sleep(100)');
    // Interrupted once it awaits (its output has come), not before it starts.
    assert.deepEqual((await client.expect('output')).chunks, [['stdout', 'waiting\n']]);
    client.send({ type: 'interrupt', id });
    r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    assert.equal(r.done.namespace_reset, undefined);
    assert.equal((await client.exec('kept')).result, '7');
  });

  it('interrupts a cell at once, before it starts, keeping the namespace', async () => {
    await client.exec('kept = 8');
    for (const code of ['import time\ntime.sleep(60)\nafter = 1', 'while True: pass']) {
      for (let i = 0; i < 5; i++) {
        const id = client.startExec(code);
        client.send({ type: 'interrupt', id });
        const r = await client.finishExec(id);
        assert.equal(r.status, 'interrupted', JSON.stringify(r.error));
        assert.equal(r.error.type, 'KeyboardInterrupt');
        assert.equal(r.done.namespace_reset, undefined, r.stream('stderr'));
      }
    }
    assert.equal((await client.exec('(kept, "after" in globals())')).result, '(8, False)');
  });

  it('takes an interrupt Pyodide wrapped while converting a value for the interrupt', async () => {
    const id = client.startExec('import pyodide.ffi\nprint("spinning")\ntry:\n' +
      '    while True: pass\nexcept KeyboardInterrupt as k:\n' +
      '    raise pyodide.ffi.ConversionError("Conversion from python to javascript failed") from k');
    interruptAfter(id, 300);
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted', JSON.stringify(r.error));
    assert.equal(r.error.type, 'KeyboardInterrupt');
    assert.equal(r.done.namespace_reset, undefined);
  });

  it('replaces the worker when a cell swallows the interrupt, and says so', async () => {
    await client.exec('lost = 1');
    // Interrupted once it runs (its output has come): one interrupted before it starts
    // never reaches the loop that swallows it.
    const id = client.startExec('print("spinning")\nwhile True:\n    try:\n        while True: pass\n' +
      '    except BaseException: pass');
    await client.expect('output');
    client.send({ type: 'interrupt', id });
    const r = await client.finishExec(id, { timeout: 20000 });
    assert.equal(r.status, 'interrupted');
    assert.equal(r.done.namespace_reset, true);
    assert.match(r.stream('stderr'), /namespace was reset/);
    const after = await client.exec('"lost" in globals()', { timeout: 20000 });
    assert.equal(after.result, 'False');
    assert.equal((await client.exec('await mcp_everything.echo(message="back")', {
      onToolCall: () => ({ ok: true, result: textResult('"back"') }) })).result, "'back'");
  });

  it('answers reset with a fresh namespace', async () => {
    await client.exec('gone = 1');
    await client.reset();
    assert.equal((await client.exec('"gone" in globals()')).result, 'False');
    assert.equal((await client.exec('"mcp_everything" in globals()')).result, 'True');
  });

  // A cell reaches the worker's channel to the main thread (Python cannot hide it): a
  // `refused` from it must not end the runner (exit 3 is for a snapshot that does not fit).
  it('takes no `refused` from a cell: its namespace is reset and the runner goes on', async () => {
    await client.exec('before_refused = 1');
    const r = await client.exec('import sandbox_runner.pyodide_host as h, json\n' +
      'h._hosts[0].post_text(json.dumps({"t": "refused", "message": "from a cell"}))\n' +
      'import asyncio\nawait asyncio.sleep(5)');
    assert.equal(r.status, 'error', JSON.stringify(r.done));
    assert.match(r.error.message, /broke the runner protocol \(refused after ready\)/);
    assert.equal((await client.exec('"before_refused" in globals()')).result, 'False');
    assert.equal((await client.exec('1 + 1')).result, '2');
    assert.equal(runner.exited, null);
    assert.doesNotMatch(runner.log, /from a cell/);
  });

  // The same channel carries displays: the main thread holds them to max_display_bytes
  // itself, so what reaches sandboxd for one exec is bounded whatever a cell posts.
  it('caps the displays a cell posts past the worker', async () => {
    const r = await client.exec('import sandbox_runner.pyodide_host as h, json\n' +
      'm = json.dumps({"t": "display", "b": {"text/plain": "x" * 500}})\n' +
      'for _ in range(50):\n    h._hosts[0].post_text(m)\n', { maxDisplayBytes: 1200 });
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const displays = r.frames.filter((f) => f.type === 'output')
      .flatMap((f) => f.chunks).filter(([kind]) => kind === 'display');
    assert.equal(displays.length, 2, `${displays.length} displays sent past a 1200-byte cap`);
    assert.equal(r.done.displays_dropped, 48);
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  // The workspace is the session's working directory, and '' is on sys.path: a module the
  // session left there must not run when a new worker starts, before its runtime is locked.
  it('starts a new worker without importing what the session left in the workspace', async () => {
    const planted = ['platform', 'sys', 'json', 'os', 'asyncio'];
    for (const name of planted) {
      fs.writeFileSync(path.join(runner.workspace, `${name}.py`),
        "open('/workspace/ran-' + __name__, 'w').close()\nimport os\nos._exit(1)\n");
    }
    try {
      await client.reset();
      const r = await client.exec('import os\nsorted(f for f in os.listdir("/workspace") if f.startswith("ran-"))');
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.result, '[]');
    } finally {
      for (const name of planted) fs.rmSync(path.join(runner.workspace, `${name}.py`), { force: true });
    }
  });

  it('rebuilds the proxies on set_catalog: _discover, _search', async () => {
    await client.setCatalog({ servers: [{ name: 'weather', py_name: 'mcp_weather',
      description: 'Weather', tools: [{ name: 'forecast', py_name: 'forecast', js_name: 'forecast',
        py_params: { city: 'city' },
        description: 'Forecast for a city', input_schema: { type: 'object',
          properties: { city: { type: 'string' } } }, output_schema: null }] }] });
    const r = await client.exec('[list(_discover()), _search("city forecast")[0]["tool"], ' +
      '"mcp_everything" in globals()]');
    assert.equal(r.result, "[['weather'], 'forecast', False]");
    await client.setCatalog(CATALOG);
  });

  it('shares /workspace with the file frames', async () => {
    await client.exec('open("/workspace/out.txt", "w").write("from python")');
    const id = client.newId();
    client.send({ type: 'file_download', id, path: 'out.txt', max_bytes: 1024 });
    const data = await client.expect('file_data');
    assert.equal(Buffer.from(data.data, 'base64').toString(), 'from python');
    assert.equal((await client.expect('file_read')).size, 11);
    assert.equal(fs.readFileSync(path.join(runner.workspace, 'out.txt'), 'utf8'), 'from python');
    assert.equal((await client.exec('import os\nos.getcwd()')).result, "'/workspace'");
  });

  it('keeps Python away from host files and processes', async () => {
    const probes = [
      ['import js\njs.process', /AttributeError/],
      ['import pyodide_js\npyodide_js.constructor.constructor("return process")()',
        /EvalError|Code generation from strings disallowed/],
      ['import pyodide_js\npyodide_js.mountNodeFS("/host", "/")\nopen("/host/etc/passwd").read()',
        /ERR_ACCESS_DENIED|Access to this API has been restricted|ErrnoError|Error/],
      ['from pyodide.code import run_js\nrun_js("require(\'child_process\').execSync(\'id\')")',
        /ImportError: cannot import name 'eval'|EvalError|Code generation from strings/],
      [`import pyodide_js\npyodide_js.mountNodeFS("/host", ${JSON.stringify(runner.dir)})\n` +
        'open("/host/escaped", "w").write("x")', /ERR_ACCESS_DENIED|Access to this API|Error/],
      ['open("/etc/passwd").read()', /FileNotFoundError/],
      ['import subprocess\nsubprocess.run(["id"])', /OSError|RuntimeError|NotImplementedError|Error/],
    ];
    for (const [code, expected] of probes) {
      const r = await client.exec(code);
      assert.equal(r.status, 'error', `${code} ran: ${r.result}`);
      assert.match(`${r.error.type}: ${r.error.message}`, expected, code);
    }
    assert.equal(fs.existsSync(path.join(runner.dir, 'escaped')), false);
  });

  it('reconnects with the namespace kept', async () => {
    await client.exec('again = 5');
    client.close();
    [client, ready] = await runner.connect();
    assert.ok(ready.execs > 0);
    assert.equal((await client.exec('again')).result, '5');
  });

  it('refuses a snapshot made from another sandbox_runner.pyz with exit 3', async () => {
    const other = path.join(path.dirname(snapshot), 'other.pyz');
    const bytes = fs.readFileSync(wasmFiles().pyz);
    bytes[bytes.length >> 1] ^= 1;
    fs.writeFileSync(other, bytes);
    const r = await WasmRunner.start({ snapshot, pyz: other });
    try {
      const code = await Promise.race([r.exitCode, sleep(20000).then(() => 'still running')]);
      assert.equal(code, 3, r.log);
      assert.match(r.log, /snapshot .*python\.snap refused: made from a sandbox_runner\.pyz with sha256 [0-9a-f]{64}, .*other\.pyz has [0-9a-f]{64}/);
    } finally {
      r.stop();
    }
  });

  // A worker that cannot start (here: --python-packages names a directory without the
  // packages) is tried three times, then the runner ends and says why: before, it was
  // started again every second for ever, each start seconds of CPU.
  it('ends after three workers in a row failed to start, and says why', async () => {
    const empty = fs.mkdtempSync(path.join(path.dirname(snapshot), 'no-packages-'));
    const r = await WasmRunner.start({ snapshot, extraArgs: ['--python-packages', empty],
      nodeFlags: [`--allow-fs-read=${empty}`] });
    try {
      const ended = await Promise.race([r.exitCode.then(() => 'ended'),
        sleep(60000).then(() => 'still running')]);
      assert.equal(ended, 'ended', r.log);
      assert.equal(r.log.match(/the Python worker failed to start: /g).length, 3, r.log);
      assert.match(r.log, new RegExp(`--python-packages: ${empty}/dist-packages cannot be read \\(ENOENT\\)`));
      assert.match(r.log, /ending the runner: the Python \(Pyodide\) worker failed to start 3 times in a row \(the last time: the worker exited with code 1\)/);
    } finally {
      r.stop();
    }
  });

  // pip runs in the cell on this tier, and its main() sets up logging for a process of
  // its own: the root logger's handlers and level are put back when it returns.
  it("leaves the session's logging as it was after pip's main() in a cell", async () => {
    const packages = wasmPythonPackages();
    const r = await WasmRunner.start({ snapshot, extraArgs: ['--python-packages', packages],
      nodeFlags: [`--allow-fs-read=${packages}`] });
    try {
      const [c] = await r.connect();
      await c.setCatalog(CATALOG);
      const root = 'import logging\nroot = logging.getLogger()\n' +
        'print([type(h).__name__ for h in root.handlers], root.level)';
      // pip's dictConfig closes every handler of the process: a file opened with mode 'w'
      // would take no record after it.
      const app = "app = logging.getLogger('app')\napp.propagate = False\n";
      const before = await c.exec(`${root}\nlogging.basicConfig(level=logging.INFO, format='mine %(message)s')\n` +
        `${app}app.addHandler(logging.FileHandler('app.log', mode='w'))\napp.warning('before pip')`);
      assert.equal(before.stream('stdout'), '[] 30\n');
      const pip = await c.exec('from pip._internal.cli.main import main as pip\n' +
        "print('exit', pip(['config', 'list']))\n" +
        "import pip as p\nprint('exit', p.main(['config', 'list']))");
      assert.equal(pip.done.status, 'ok', JSON.stringify(pip.done));
      assert.equal(pip.stream('stdout'), 'exit 0\nexit 0\n');
      const after = await c.exec(`${root}\nlogging.info('after pip')\n${app}app.warning('after pip')\n` +
        "app.handlers[0].flush()\nprint(open('app.log').read(), end='')");
      assert.equal(after.stream('stdout'), "['StreamHandler'] 20\nbefore pip\nafter pip\n");
      assert.equal(after.stream('stderr'), 'mine after pip\n');
    } finally {
      r.stop();
    }
  });

  it('refuses a tampered snapshot with exit 3 before ready', async () => {
    const bad = path.join(path.dirname(snapshot), 'tampered.snap');
    const bytes = fs.readFileSync(snapshot);
    bytes[bytes.length >> 1] ^= 1;
    fs.writeFileSync(bad, bytes);
    fs.copyFileSync(`${snapshot}.sha256`, `${bad}.sha256`);
    const tampered = await WasmRunner.start({ snapshot: bad }).catch((e) => e);
    try {
      const code = tampered instanceof Error ? null : await Promise.race([tampered.exitCode,
        sleep(20000).then(() => 'still running')]);
      const log = tampered instanceof Error ? tampered.message : tampered.log;
      assert.match(log, /snapshot .*tampered\.snap refused: sha256 [0-9a-f]{64} != [0-9a-f]{64}/);
      if (!(tampered instanceof Error)) assert.equal(code, 3);
      else assert.match(tampered.message, /exited \(3\)/);
    } finally {
      if (!(tampered instanceof Error)) tampered.stop();
    }
  });
});
