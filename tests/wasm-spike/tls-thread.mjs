// Where a wasm session's TLS should run (issue 45; docs/egress.md, "The relay inside"): on
// the runner's main thread as now, or on a TLS thread of the runner's own that the main
// thread can abandon while a handshake's certificate checks run. Three layouts, each GETting
// from a local HTTPS server (a child process) through a "session" worker that writes the
// request and reads the answer as the Python socket does, each piece a transferred
// ArrayBuffer as over the egress channel:
//   main    the main thread runs TLS on the socket and posts clear text to the session
//   relay   the main thread posts cipher text to a TLS worker and relays its clear text
//   direct  as relay, but the TLS worker posts clear text straight to the session worker
// For each: the p50 of a GET and each thread's busy time a GET (event loop utilization).
//   node tests/wasm-spike/tls-thread.mjs [--gets N] [--bytes N] [--new-connections]
// --new-connections opens a connection (and a handshake) for every GET.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { MessageChannel, Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at < 0 ? fallback : Number(args[at + 1]);
};
const GETS = option('--gets', 200);
const BYTES = option('--bytes', 1 << 20);
const NEW_CONNECTIONS = args.includes('--new-connections');
const WARM = Math.min(30, GETS);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-thread-'));
const [keyFile, certFile] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
  '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=localhost',
  '-addext', 'subjectAltName=DNS:localhost'], { stdio: 'ignore' });
const ca = fs.readFileSync(certFile, 'utf8');

// The origin: a keep-alive HTTPS server answering every GET with BYTES bytes.
const server = spawn(process.execPath, ['-e', `
  const https = require('https'), fs = require('fs');
  const body = Buffer.alloc(${BYTES}, 120);
  const s = https.createServer({ key: fs.readFileSync(${JSON.stringify(keyFile)}),
    cert: fs.readFileSync(${JSON.stringify(certFile)}) }, (req, res) => {
    res.writeHead(200, { 'Content-Length': body.length }); res.end(body); });
  s.keepAliveTimeout = 0;
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));`], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise((resolve) => server.stdout.once('data', (d) => resolve(Number(d))));

// Posts `chunk` over `p` as a transferred ArrayBuffer of its own (as PortStream does).
const POST = `const post = (p, chunk) => {
  const b = new Uint8Array(chunk.length); b.set(chunk); p.postMessage(b.buffer, [b.buffer]); };`;

// The session: writes a GET, reads the answer to its end, reports the time and its busy time.
const SESSION = `
  const { parentPort } = require('worker_threads');
  const { performance } = require('perf_hooks');
  ${POST}
  let port, got, want, started, header;
  parentPort.on('message', (m) => {
    if (m.port) { port = m.port; port.on('message', onData); return; }
    if (m === 'elu') { parentPort.postMessage({ elu: performance.eventLoopUtilization() }); return; }
    got = 0; want = Infinity; header = ''; started = performance.now();
    post(port, Buffer.from('GET / HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n'));
  });
  function onData(ab) {
    got += ab.byteLength;
    if (want === Infinity) {
      header += Buffer.from(ab).toString('latin1');
      const end = header.indexOf('\\r\\n\\r\\n');
      if (end >= 0) want = end + 4 + Number(/content-length: (\\d+)/i.exec(header)[1]);
    }
    if (got >= want) parentPort.postMessage({ ms: performance.now() - started });
  }`;

// The TLS worker: TLS over cipher text that comes and goes on `cipher`, clear text on `clear`.
const TLS_WORKER = `
  const { parentPort } = require('worker_threads');
  const { performance } = require('perf_hooks');
  const { Duplex } = require('stream');
  const tls = require('tls');
  ${POST}
  parentPort.on('message', (m) => {
    if (m === 'elu') { parentPort.postMessage({ elu: performance.eventLoopUtilization() }); return; }
    const { cipher, clear, ca } = m;
    const wire = new Duplex({ read() {}, write(chunk, _e, done) { post(cipher, chunk); done(); },
      final(done) { cipher.close(); done(); } });
    cipher.on('message', (ab) => wire.push(Buffer.from(ab)));
    cipher.on('close', () => wire.push(null));
    const secure = tls.connect({ socket: wire, ca, servername: 'localhost' });
    secure.on('data', (d) => post(clear, d));
    clear.on('message', (ab) => secure.write(Buffer.from(ab)));
    secure.once('secureConnect', () => parentPort.postMessage({ connected: true }));
    secure.on('error', (e) => parentPort.postMessage({ error: e.message }));
  });`;

const once = (w, key) => new Promise((resolve) => {
  const f = (m) => { if (m[key] !== undefined) { w.off('message', f); resolve(m); } };
  w.on('message', f);
});

// A connection to the origin in `layout`, whose clear text the session reads on `sessionPort`.
async function connect(layout, sessionPort, tlsWorker) {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => sock.once('connect', resolve));
  if (layout === 'main') {
    const secure = tls.connect({ socket: sock, ca, servername: 'localhost' });
    await new Promise((resolve, reject) => { secure.once('secureConnect', resolve); secure.once('error', reject); });
    secure.on('data', (d) => post(sessionPort, d));
    sessionPort.on('message', (ab) => secure.write(Buffer.from(ab)));
    return () => { secure.destroy(); sessionPort.removeAllListeners('message'); };
  }
  const cipher = new MessageChannel();
  sock.on('data', (d) => post(cipher.port1, d));
  cipher.port1.on('message', (ab) => sock.write(Buffer.from(ab)));
  let clear = sessionPort;
  let relay = null;
  if (layout === 'relay') {
    relay = new MessageChannel();
    relay.port1.on('message', (ab) => sessionPort.postMessage(ab, [ab]));
    sessionPort.on('message', (ab) => relay.port1.postMessage(ab, [ab]));
    clear = relay.port2;
  }
  const connected = once(tlsWorker, 'connected');
  tlsWorker.postMessage({ cipher: cipher.port2, clear, ca }, [cipher.port2, clear]);
  await connected;
  return () => {
    sock.destroy();
    cipher.port1.close();
    if (relay) relay.port1.close();
  };
}
const post = (p, chunk) => {
  const b = new Uint8Array(chunk.length);
  b.set(chunk);
  p.postMessage(b.buffer, [b.buffer]);
};

async function measure(layout) {
  const session = new Worker(SESSION, { eval: true });
  const tlsWorker = layout === 'main' ? null : new Worker(TLS_WORKER, { eval: true });
  // Each thread's event loop utilization so far: the main thread's, a worker's, or none.
  const elu = async (w) => {
    if (w === 'main') return performance.eventLoopUtilization();
    if (!w) return null;
    w.postMessage('elu');
    return (await once(w, 'elu')).elu;
  };
  let channel = null;
  let close = null;
  // For `direct`, the session's port goes to the TLS worker with each connection; the main
  // thread keeps no end of it.
  const fresh = async () => {
    channel = new MessageChannel();
    session.postMessage({ port: channel.port1 }, [channel.port1]);
    close = await connect(layout, channel.port2, tlsWorker);
  };
  const times = [];
  let before = null;
  for (let i = 0; i < GETS + WARM; i++) {
    if (i === WARM) before = await Promise.all([elu('main'), elu(session), elu(tlsWorker)]);
    const start = performance.now();
    if (!close || NEW_CONNECTIONS) {
      if (close) close();
      await fresh();
    }
    const done = once(session, 'ms');
    session.postMessage('get');
    await done;
    if (i >= WARM) times.push(performance.now() - start);
  }
  const after = await Promise.all([elu('main'), elu(session), elu(tlsWorker)]);
  const busy = after.map((a, k) => (a ? (a.active - before[k].active) / GETS : 0));
  close();
  await session.terminate();
  if (tlsWorker) await tlsWorker.terminate();
  times.sort((a, b) => a - b);
  return { layout, p50: times[times.length >> 1], p90: times[Math.floor(times.length * 0.9)], busy };
}

console.log(`${GETS} GETs of ${BYTES} bytes${NEW_CONNECTIONS ? ', a connection each' : ' on one connection'}`);
console.log('| layout | p50 ms | p90 ms | main busy ms | session busy ms | TLS worker busy ms |');
console.log('|---|---|---|---|---|---|');
for (const round of [1, 2]) {
  for (const layout of ['main', 'relay', 'direct']) {
    const r = await measure(layout);
    console.log(`| ${r.layout} (round ${round}) | ${r.p50.toFixed(2)} | ${r.p90.toFixed(2)} | ` +
      `${r.busy[0].toFixed(2)} | ${r.busy[1].toFixed(2)} | ${r.busy[2].toFixed(2)} |`);
  }
}
server.kill();
fs.rmSync(dir, { recursive: true, force: true });
