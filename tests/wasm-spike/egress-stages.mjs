// Where a wasm session's egress time goes (issue 45): the runner as sandboxd starts it
// (sandbox_runner.js on deploy/wasm's Node under the contract's flags, harness.mjs's
// WasmRunner, without the jail, sandboxd's malloc setting) with egress on, a Node stand-in for sandboxd's proxy that
// tunnels each CONNECT (and each absolute-URI request) to
// tests/sandboxd/integration/egress_origin.py, and GETs timed in the session. For each
// measurement: the p50 of the last 50 GETs (a session's first ~120 run slower while V8
// tiers Pyodide up, so each measurement is warmed with 30 first), and the runner's CPU a GET
// by thread (/proc/PID/task: the main thread, which runs TLS and the relay; the worker,
// which runs Python; V8's background threads, mostly concurrent GC), its mark-compact GCs
// (from --trace-gc) and its RSS after.
//   SANDBOXD_RUNNER_JS=build/services/sandboxd/sandbox_runner.js \
//   SANDBOXD_RUNNER_PYZ=build/services/sandboxd/sandbox_runner.pyz \
//     node tests/wasm-spike/egress-stages.mjs [--gets N] [--only a,b] [--node-flag FLAG]...
//       [--host]
// Measurements: https_urllib (1 MiB over HTTPS with urllib, a connection each, as
// sandboxd_bench's egress row), http_urllib (the same over HTTP, no TLS), https_raw (1 MiB
// over a socket, CONNECT and wrap_socket by hand, recv_into of up to 1 MiB), https_small
// (the same for 17 bytes: a connection's cost). --host runs the same program with the
// host's python3 straight to the origin (no proxy), for the comparison.
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NODE_MALLOC_TUNABLES, WasmRunner, makeWasmSnapshot, wasmFiles } from '../sandboxd/runner_js/harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(HERE, '..', '..');
const MEASUREMENTS = ['https_urllib', 'http_urllib', 'https_raw', 'https_small'];

function parse(argv) {
  const o = { gets: 200, only: MEASUREMENTS, nodeFlags: [], host: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--gets') o.gets = Number(argv[++i]);
    else if (a === '--only') o.only = argv[++i].split(',');
    else if (a === '--node-flag') o.nodeFlags.push(argv[++i]);
    else if (a === '--host') o.host = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

async function startOrigin() {
  const dir = fs.mkdtempSync('/tmp/egress-stages-');
  execFileSync(path.join(ROOT, 'tests/common/make_test_certs.sh'), [dir, 'origin.test'], { stdio: 'ignore' });
  const proc = spawn('python3', [path.join(ROOT, 'tests/sandboxd/integration/egress_origin.py'), dir,
    `${dir}/server.pem`, `${dir}/server-key.pem`], { stdio: 'ignore' });
  while (!fs.existsSync(`${dir}/ports`)) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 100));
  const [http, https] = fs.readFileSync(`${dir}/ports`, 'utf8').trim().split(/\s+/).map(Number);
  return { dir, proc, http, https, ca: fs.readFileSync(`${dir}/ca.pem`, 'utf8') };
}

// sandboxd's proxy, played: keeps four connections parked on egress.sock and tunnels each to
// the origin once its request head arrives.
function playProxy(socketPath, origin) {
  const park = () => {
    const s = net.createConnection({ path: socketPath });
    let head = Buffer.alloc(0);
    const onData = (d) => {
      if (head.length === 0) park();
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.off('data', onData);
      s.pause();
      const connect = /^CONNECT /.test(head.toString('latin1', 0, 8));
      const up = net.createConnection({ host: '127.0.0.1', port: connect ? origin.https : origin.http }, () => {
        if (connect) s.write('HTTP/1.1 200 Connection established\r\n\r\n');
        else up.write(head.subarray(0, end + 4).toString('latin1').replace(/^(\w+) http:\/\/[^/]+/, '$1 '));
        if (head.length > end + 4) up.write(head.subarray(end + 4));
        s.pipe(up);
        up.pipe(s);
        s.resume();
      });
      up.on('error', () => s.destroy());
      s.on('error', () => up.destroy());
    };
    s.on('data', onData);
    s.on('error', () => {});
  };
  for (let i = 0; i < 4; i++) park();
}

// The program: defines get(what) (one GET of the measurement) and timed(what, n).
function program(origin, host) {
  const base = (scheme) => (host ? `${scheme}://127.0.0.1:${scheme === 'https' ? origin.https : origin.http}`
    : `${scheme}://origin.test`);
  return `
import json, socket, ssl, statistics, time, urllib.request
ctx = ssl.create_default_context(cadata='''${origin.ca}''')
ctx.check_hostname = ${host ? 'False' : 'True'}
opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if ${host ? 'True' : 'False'} else []),
                                     urllib.request.HTTPSHandler(context=ctx))
def fetch(url, size):
    body = opener.open(url, timeout=30).read()
    assert len(body) == size, len(body)
def raw(size):
    if ${host ? 'True' : 'False'}:
        s = socket.create_connection(('127.0.0.1', ${origin.https}))
    else:
        s = socket.create_connection(('127.0.0.1', 3128))
        s.sendall(b'CONNECT origin.test:443 HTTP/1.1\\r\\n\\r\\n')
        head = b''
        while b'\\r\\n\\r\\n' not in head:
            head += s.recv(4096)
    c = ctx.wrap_socket(s, server_hostname='origin.test')
    c.sendall(b'GET /bytes/%d HTTP/1.1\\r\\nHost: origin.test\\r\\nConnection: close\\r\\n\\r\\n' % size)
    buf = bytearray(2 << 20)
    view, n = memoryview(buf), 0
    while k := c.recv_into(view[n:], min(1 << 20, len(buf) - n)):
        n += k
    c.close()
    assert n > size, n
GETS = {'https_urllib': lambda: fetch('${base('https')}/bytes/1048576', 1 << 20),
        'http_urllib': lambda: fetch('${base('http')}/bytes/1048576', 1 << 20),
        'https_raw': lambda: raw(1 << 20), 'https_small': lambda: raw(17)}
def timed(what, n):
    ms = []
    for _ in range(n):
        t = time.perf_counter()
        GETS[what]()
        ms.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(ms[-50:]), 2)
`;
}

// CPU (ms) of each of `pid`'s threads, by "tid name".
function threadCpu(pid) {
  const out = {};
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out[`${tid} ${name}`] = (Number(f[11]) + Number(f[12])) * 10;    // clock ticks of 10 ms
    } catch {
      // the thread ended
    }
  }
  return out;
}

function cpuByRole(before, after, gets) {
  const role = { main: 0, worker: 0, v8: 0, other: 0 };
  for (const [key, ms] of Object.entries(after)) {
    const d = ms - (before[key] || 0);
    const name = key.slice(key.indexOf(' ') + 1);
    const r = name === 'node-MainThread' ? 'main' : name === 'WorkerThread' ? 'worker' :
      name.startsWith('node-V8Worker') ? 'v8' : 'other';
    role[r] += d;
  }
  for (const r of Object.keys(role)) role[r] = Math.round((role[r] / gets) * 100) / 100;
  return role;
}

async function main() {
  const o = parse(process.argv.slice(2));
  const origin = await startOrigin();
  try {
    if (o.host) {
      const code = `${program(origin, true)}\nfor what in ${JSON.stringify(o.only)}:\n` +
        `    timed(what, 30)\n    cpu = time.process_time()\n    p50 = timed(what, ${o.gets})\n` +
        `    print(json.dumps({'what': what, 'p50_ms': p50, 'cpu_ms_per_get': ` +
        `round((time.process_time() - cpu) * 1000 / ${o.gets}, 2)}))\n`;
      const r = spawnSync('python3', ['-c', code], { encoding: 'utf8' });
      process.stdout.write(r.stdout + r.stderr);
      return;
    }
    const snapshot = makeWasmSnapshot(wasmFiles());
    // Node's environment as sandboxd gives it (docs/wasm-tier.md, "Memory").
    const runner = await WasmRunner.start({ snapshot, egress: true, env: [],
      hostEnv: { GLIBC_TUNABLES: NODE_MALLOC_TUNABLES }, nodeFlags: ['--trace-gc', ...o.nodeFlags] });
    try {
      playProxy(path.join(runner.dir, 'egress.sock'), origin);
      const [client] = await runner.connect();
      const reply = await client.reply('egress_on', { type: 'egress' });
      if (reply.error) throw new Error(JSON.stringify(reply.error));
      const setup = await client.exec(program(origin, false));
      if (setup.status !== 'ok') throw new Error(JSON.stringify(setup.error));
      for (const what of o.only) {
        await client.exec(`timed('${what}', 30)`, { timeout: 600000 });
        const gcBefore = (runner.log.match(/Mark-Compact/g) || []).length;
        const before = threadCpu(runner.proc.pid);
        const r = await client.exec(`timed('${what}', ${o.gets})`, { timeout: 600000 });
        if (r.status !== 'ok') throw new Error(JSON.stringify(r.error));
        const cpu = cpuByRole(before, threadCpu(runner.proc.pid), o.gets);
        const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${runner.proc.pid}/status`, 'utf8'))[1]);
        console.log(JSON.stringify({ what, p50_ms: Number(r.result), cpu_ms_per_get: cpu,
          mark_compacts: (runner.log.match(/Mark-Compact/g) || []).length - gcBefore,
          rss_mib: Math.round(rss / 1024) }));
      }
    } finally {
      runner.stop();
      fs.rmSync(path.dirname(snapshot), { recursive: true, force: true });
    }
  } finally {
    origin.proc.kill();
    fs.rmSync(origin.dir, { recursive: true, force: true });
  }
}

await main();
