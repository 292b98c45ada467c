// What the JavaScript runner tests share: the runner started the way production starts it
// (the built bundle, read-only, inside the real sandbox image under podman: --read-only,
// --user 65534, tmpfs /tmp and /workspace, no network) and sandboxd's side of the frame
// protocol (docs/runner-protocol.md). One container per test file; tests `reset` between.
//
// The bundle is SANDBOXD_RUNNER_JS (ctest sets it to build/services/sandboxd/
// sandbox_runner.js); the image is SANDBOXD_TEST_IMAGE (default
// localhost/sandboxd-python:bookworm). Without podman, the image or the bundle a test fails
// with the reason; it never skips. By hand, after `cmake --build build --target
// sandbox_runner_js`:
//
//   SANDBOXD_RUNNER_JS=build/services/sandboxd/sandbox_runner.js \
//     node --test tests/sandboxd/runner_js/

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const MIB = 1024 * 1024;
export const TIMEOUT = 10000;
// The malloc setting sandboxd starts the wasm tier's Node with (wasm_runtime.cc,
// kNodeMallocTunables): every block of this size or more is its own mapping, mapped and
// unmapped each time.
export const NODE_MALLOC_MMAP_THRESHOLD = 32768;
export const NODE_MALLOC_TUNABLES = `glibc.malloc.mmap_threshold=${NODE_MALLOC_MMAP_THRESHOLD}`;
const IMAGE = process.env.SANDBOXD_TEST_IMAGE || 'localhost/sandboxd-python:bookworm';

function bundlePath() {
  const value = process.env.SANDBOXD_RUNNER_JS;
  if (!value) {
    throw new Error('SANDBOXD_RUNNER_JS is not set: it must name the built sandbox_runner.js ' +
      '(ctest sets it; cmake --build build --target sandbox_runner_js)');
  }
  const resolved = path.resolve(value);
  if (!fs.existsSync(resolved)) throw new Error(`SANDBOXD_RUNNER_JS=${value}: no such file`);
  return resolved;
}

function checkPodman() {
  try {
    execFileSync('podman', ['image', 'exists', IMAGE], { stdio: 'ignore' });
  } catch (e) {
    if (e.code === 'ENOENT') throw new Error('podman is missing: these tests run the runner in the sandbox image');
    throw new Error(`the image ${IMAGE} is missing (build it: deploy/ or scripts/setup.sh)`);
  }
}

export class Client {
  constructor(socket) {
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.frames = [];
    this.waiters = [];
    this.closed = false;
    this.nextId = 100;
    socket.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      while (this.buf.length >= 4) {
        const n = this.buf.readUInt32BE(0);
        if (n > 16 * MIB) throw new Error(`runner sent a frame of ${n} bytes`);
        if (this.buf.length < 4 + n) break;
        const body = this.buf.subarray(4, 4 + n);
        this.buf = this.buf.subarray(4 + n);
        const text = new TextDecoder('utf-8', { fatal: true }).decode(body);
        const frame = JSON.parse(text);
        frame.__raw = text;
        this.frames.push(frame);
      }
      this.wake();
    });
    const end = () => { this.closed = true; this.wake(); };
    socket.on('close', end);
    socket.on('error', end);
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  async recv(timeout = TIMEOUT) {
    const deadline = Date.now() + timeout;
    while (!this.frames.length) {
      if (this.closed) throw new Error('EOF: the runner closed the connection');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no frame within ${timeout} ms`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
    return this.frames.shift();
  }

  async expect(kind, timeout) {
    const f = await this.recv(timeout);
    if (f.type !== kind) throw new Error(`expected ${kind}, got ${f.__raw.slice(0, 500)}`);
    return f;
  }

  // True when the runner closes the connection within `timeout` (frames before are skipped).
  async atEof(timeout = TIMEOUT) {
    try {
      for (;;) await this.recv(timeout);
    } catch (e) {
      if (/^EOF/.test(e.message)) return true;
      return false;
    }
  }

  send(frame) {
    this.sendRaw(Buffer.from(JSON.stringify(frame)));
  }

  sendRaw(body, length = body.length) {
    const head = Buffer.alloc(4);
    head.writeUInt32BE(length >>> 0);
    this.socket.write(Buffer.concat([head, body]));
  }

  newId() {
    return ++this.nextId;
  }

  startExec(code, { maxOutputBytes = MIB, maxCalls, maxDisplayBytes } = {}) {
    const id = this.newId();
    const frame = { type: 'exec', id, code, max_output_bytes: maxOutputBytes };
    if (maxDisplayBytes !== undefined) frame.max_display_bytes = maxDisplayBytes;
    if (maxCalls !== undefined) frame.max_tool_calls_in_flight = maxCalls;
    this.send(frame);
    return id;
  }

  // Frames of one exec until its done; onToolCall(frame) returns the tool_result fields, or
  // null to leave the call unanswered (it may answer later itself).
  async finishExec(id, { onToolCall, timeout = TIMEOUT } = {}) {
    const chunks = [];
    const calls = [];
    const frames = [];
    for (;;) {
      const f = await this.recv(timeout);
      frames.push(f);
      if (f.type === 'output' && f.id === id) {
        for (const [stream, text] of f.chunks) {
          const last = chunks[chunks.length - 1];
          if (last && last[0] === stream) last[1] += text;
          else chunks.push([stream, text]);
        }
      } else if (f.type === 'tool_call' && f.id === id) {
        calls.push(f);
        const reply = onToolCall ? await onToolCall(f) : null;
        if (reply) this.send({ ...reply, type: 'tool_result', call_id: f.call_id });
      } else if (f.type === 'done' && f.id === id) {
        return new ExecResult(f, chunks, calls, frames);
      } else {
        throw new Error(`unexpected frame during exec ${id}: ${f.__raw.slice(0, 500)}`);
      }
    }
  }

  async exec(code, options = {}) {
    return this.finishExec(this.startExec(code, options), options);
  }

  async reply(kind, frame) {
    const id = this.newId();
    this.send({ ...frame, id });
    const r = await this.expect(kind);
    if (r.id !== id) throw new Error(`${kind} for ${r.id}, not ${id}`);
    return r;
  }

  reset() {
    return this.reply('reset_done', { type: 'reset' });
  }

  setCatalog(catalog) {
    return this.reply('catalog_set', { type: 'set_catalog', catalog });
  }

  close() {
    this.socket.destroy();
  }
}

export class ExecResult {
  constructor(done, chunks, calls, frames) {
    Object.assign(this, { done, chunks, calls, frames });
  }

  get status() { return this.done.status; }
  get result() { return this.done.result; }
  get error() { return this.done.error; }
  stream(name) {
    return this.chunks.filter(([s]) => s === name).map(([, t]) => t).join('');
  }
}

// One runner container for a test file. `extraArgs` go to the runner.
export class RunnerContainer {
  static async start({ extraArgs = [], memory } = {}) {
    const bundle = bundlePath();
    checkPodman();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-js-test-'));
    fs.chmodSync(dir, 0o777);
    const name = `runner-js-test-${process.pid}-${Date.now()}`;
    const args = ['run', '--rm', '--name', name, '--network', 'none', '--read-only',
      '--read-only-tmpfs=false', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
      '--user', '65534:65534', '--init', '--pull', 'never', '--ipc', 'private',
      '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=4096:4096',
      '--tmpfs', '/tmp:rw,nosuid,nodev,mode=1777,size=64m',
      '--tmpfs', '/workspace:rw,nosuid,nodev,mode=1777,size=64m', '--workdir', '/workspace',
      '-v', `${bundle}:/opt/sandboxd/sandbox_runner.js:ro`, '-v', `${dir}:/run/sandboxd`];
    if (memory) args.push('--memory', memory);
    args.push(IMAGE, 'node', '/opt/sandboxd/sandbox_runner.js', '--socket',
      '/run/sandboxd/runner.sock', '--own-pid-namespace', ...extraArgs);
    const proc = spawn('podman', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const c = new RunnerContainer(name, dir, proc);
    await c.waitForSocket();
    return c;
  }

  constructor(name, dir, proc) {
    Object.assign(this, { name, dir, proc, log: '', clients: [] });
    this.exited = null;
    proc.stdout.on('data', (d) => { this.log += d; });
    proc.stderr.on('data', (d) => { this.log += d; });
    proc.on('exit', (code) => { this.exited = code; });
  }

  get socketPath() {
    return path.join(this.dir, 'runner.sock');
  }

  async waitForSocket() {
    const deadline = Date.now() + 20000;
    while (!fs.existsSync(this.socketPath)) {
      if (this.exited !== null) throw new Error(`the runner container exited (${this.exited}):\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`no runner socket after 20 s:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  // A new connection that has read `ready`; returns [client, ready].
  // ECONNREFUSED is tried again for 10 s: the socket file appears at bind, before listen,
  // and a runner that has just lost its connection takes it back up (under load, seconds).
  async connect() {
    const deadline = Date.now() + 10000;
    let socket;
    for (;;) {
      try {
        socket = await new Promise((resolve, reject) => {
          const s = net.createConnection(this.socketPath, () => resolve(s));
          s.once('error', reject);
        });
        break;
      } catch (e) {
        if (e.code !== 'ECONNREFUSED' || Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const client = new Client(socket);
    this.clients.push(client);
    const ready = await client.expect('ready');
    return [client, ready];
  }

  stop() {
    for (const c of this.clients) c.close();
    try {
      execFileSync('podman', ['rm', '--force', '--time', '0', '--ignore', this.name], { stdio: 'ignore' });
    } catch (e) {
      // already gone
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

export const CATALOG = {
  servers: [
    { name: 'everything', py_name: 'mcp_everything', description: 'Test server', tools: [
      { name: 'echo', py_name: 'echo', js_name: 'echo', description: 'Echoes back the input',
        py_params: { message: 'message' },
        input_schema: { type: 'object', properties: { message: { type: 'string' } },
          required: ['message'] }, output_schema: null },
      { name: 'add', py_name: 'add', js_name: 'add', description: 'Adds two numbers',
        py_params: { a: 'a', b: 'b' },
        input_schema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } },
          required: ['a', 'b'] }, output_schema: { type: 'object' } },
      { name: 'get-image', py_name: 'get_image', js_name: 'get_image',
        description: 'Returns a tiny image', py_params: {},
        input_schema: { type: 'object', properties: {} }, output_schema: null },
      { name: 'search', py_name: 'search', js_name: 'search', description: 'Search documents',
        py_params: { limit: 'limit', query: 'query', tags: 'tags' },
        input_schema: { type: 'object', properties: { limit: { type: 'integer', default: 10 },
          query: { type: 'string' }, tags: { type: ['array', 'null'] } }, required: ['query'] },
        output_schema: null },
    ] },
    { name: 'memory', py_name: 'mcp_memory', description: 'Knowledge graph', tools: [
      { name: 'read_graph', py_name: 'read_graph', js_name: 'read_graph',
        description: 'Read the whole graph', py_params: {},
        input_schema: { type: 'object' }, output_schema: null },
    ] },
  ],
};

export function textResult(text) {
  return { content: [{ type: 'text', text }] };
}

// -- the wasm tier: the runner with Python in Pyodide, as a host process -------------------
//
// Started as sandboxd's WasmRuntime starts it (docs/wasm-tier.md, the runner's contract):
// the pinned Node of deploy/wasm (SANDBOXD_WASM_RUNTIME, default deploy/wasm/node_modules of
// this checkout), an empty environment, the permission model allowing reads of the runtime,
// the runner files and the workspace only, writes of the workspace only, and fd 3 a unix
// socket bound and listening before the start (a python3 launcher binds it, as sandboxd
// does, and execs node). Needs SANDBOXD_RUNNER_PYZ (the built sandbox_runner.pyz) besides
// SANDBOXD_RUNNER_JS, and `npm ci` in deploy/wasm (scripts/setup.sh).

const HERE = path.dirname(new URL(import.meta.url).pathname);
const LAUNCH_ON_FD3 = 'import json, os, socket, sys\n' +
  's = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n' +
  's.bind(sys.argv[1]); s.listen(8)\n' +
  'if s.fileno() != 3: os.dup2(s.fileno(), 3)\n' +
  'os.set_inheritable(3, True)\n' +
  'egress = os.environ.pop("RUNNER_TEST_EGRESS_SOCK", None)\n' +
  'if egress is not None:\n' +
  '    g = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n' +
  '    g.bind(egress); g.listen(8)\n' +
  '    os.dup2(g.fileno(), 6); os.set_inheritable(6, True)\n' +
  'entries = os.environ.pop("RUNNER_TEST_ENV_FD5", None)\n' +
  'if entries is not None:\n' +
  '    r, w = os.pipe()\n' +
  '    os.write(w, b"".join(e.encode() + b"\\0" for e in json.loads(entries)))\n' +
  '    os.close(w)\n' +
  '    if r != 5: os.dup2(r, 5); os.close(r)\n' +
  '    os.set_inheritable(5, True)\n' +
  'os.execv(sys.argv[2], sys.argv[2:])\n';

export function wasmFiles() {
  const runtime = path.resolve(process.env.SANDBOXD_WASM_RUNTIME ||
    path.join(HERE, '..', '..', '..', 'deploy', 'wasm', 'node_modules'));
  const node = path.join(runtime, 'node', 'bin', 'node');
  if (!fs.existsSync(node) || !fs.existsSync(path.join(runtime, 'pyodide', 'pyodide.js'))) {
    throw new Error(`${runtime} lacks node/bin/node or pyodide (npm ci in deploy/wasm; ` +
      'scripts/setup.sh does it)');
  }
  const pyz = process.env.SANDBOXD_RUNNER_PYZ;
  if (!pyz || !fs.existsSync(pyz)) {
    throw new Error('SANDBOXD_RUNNER_PYZ must name the built sandbox_runner.pyz (ctest sets it; ' +
      'cmake --build build --target sandbox_runner_pyz)');
  }
  return { runtime, node, pyodide: path.join(runtime, 'pyodide'), bundle: bundlePath(),
    pyz: path.resolve(pyz) };
}

// The wasm tier's Python packages (requests, pip): what sandboxd's --wasm_python_packages
// names by default.
export function wasmPythonPackages() {
  const dir = path.resolve(process.env.SANDBOXD_WASM_PYTHON_PACKAGES ||
    path.join(HERE, '..', '..', '..', 'deploy', 'wasm', 'python-packages'));
  if (!fs.existsSync(path.join(dir, 'dist-packages', 'pip'))) {
    throw new Error(`${dir} lacks dist-packages/pip (scripts/wasm-python-packages.sh makes it; ` +
      'scripts/setup.sh runs it)');
  }
  return dir;
}

// The node flags of the contract, for `reads` and the one writable `workspace`.
export function wasmNodeFlags(reads, workspace) {
  return ['--permission', ...reads.map((p) => `--allow-fs-read=${p}`),
    `--allow-fs-write=${workspace}`, '--allow-worker', '--allow-net',
    '--disallow-code-generation-from-strings', '--disable-proto=delete'];
}

// Makes the snapshot (--make-snapshot) into a new directory; returns the snapshot's path.
export function makeWasmSnapshot(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-wasm-snap-'));
  const out = path.join(dir, 'python.snap');
  execFileSync(files.node, [...wasmNodeFlags([files.runtime, files.bundle, files.pyz], dir),
    files.bundle, '--make-snapshot', out, '--pyodide', files.pyodide, '--python-runner',
    files.pyz], { env: {}, stdio: ['ignore', 'ignore', 'pipe'] });
  return out;
}

export class WasmRunner extends RunnerContainer {
  // `snapshot`: from makeWasmSnapshot (null: cold from --pyodide; for Python only, as
  // --pyodide and --python-runner). Resolves once the socket
  // is there; `exitCode` resolves with the process's exit code. `env`: KEY=VALUE entries
  // the runner gets on fd 5 (--env-fd 5), as sandboxd passes them; the runner's own
  // environment then holds `hostEnv` (which the session must not see). `nodeFlags`: more
  // node flags before the contract's (tests/wasm-spike/idle-memory.mjs compares some).
  // `egress`: egress.sock in the runner's directory, bound and listening, passed as fd 6
  // (--egress-fd 6), as sandboxd passes it.
  static async start({ snapshot = null, extraArgs = [], heapMb = 512, language = 'python',
    pyz = null, env = null, hostEnv = {}, nodeFlags = [], egress = false } = {}) {
    const files = wasmFiles();
    if (pyz) files.pyz = pyz;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-wasm-test-'));
    const workspace = path.join(dir, 'workspace');
    fs.mkdirSync(workspace);
    const reads = [files.runtime, files.bundle, files.pyz, workspace];
    const python = language !== 'python' ? [] :
      ['--pyodide', files.pyodide, '--python-runner', files.pyz];
    if (snapshot) {
      reads.push(path.dirname(snapshot));
      python.push('--snapshot', snapshot);
    }
    const args = ['-c', LAUNCH_ON_FD3, path.join(dir, 'runner.sock'), files.node, ...nodeFlags,
      ...wasmNodeFlags(reads, workspace), files.bundle, '--listen-fd', '3', '--workspace',
      workspace, '--language', language, '--heap-mb', String(heapMb), ...python, ...extraArgs];
    if (env) args.push('--env-fd', '5');
    if (egress) args.push('--egress-fd', '6');
    const launcherEnv = env ? { ...hostEnv, RUNNER_TEST_ENV_FD5: JSON.stringify(env) } : {};
    if (egress) launcherEnv.RUNNER_TEST_EGRESS_SOCK = path.join(dir, 'egress.sock');
    const proc = spawn('python3', args, { env: launcherEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    const r = new WasmRunner(`wasm-${process.pid}`, dir, proc);
    r.workspace = workspace;
    r.exitCode = new Promise((resolve) => proc.on('close', (code) => resolve(code)));
    await r.waitForSocket();
    return r;
  }

  stop() {
    for (const c of this.clients) c.close();
    if (this.exited === null) this.proc.kill('SIGKILL');
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// The anonymous mappings of process `pid` that are as large as `bytes` and resident, both
// within 64 KiB: "start-end rss_kb" each.
export function mappingsHolding(pid, bytes) {
  const found = [];
  let head = null;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ 0\s*$/.exec(line);
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) {
      head = m ? { name: `${m[1]}-${m[2]}`, size: Number(BigInt(`0x${m[2]}`) - BigInt(`0x${m[1]}`)) } : null;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && head && Math.abs(head.size - bytes) <= 65536 && Number(rss[1]) * 1024 >= bytes - 65536) {
      found.push(`${head.name} ${rss[1]} kB`);
    }
  }
  return found;
}
