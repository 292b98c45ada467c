// Python's own sockets in a wasm session with egress (runner_js/python_egress.js,
// sandbox_runner/pyodide_egress.py; docs/wasm-tier.md, "Egress"): the runner on deploy/wasm's
// Node with egress.sock passed as fd 6, a test playing sandboxd's proxy (egress_host.mjs).
// A cell blocked on the network in any call is interrupted and keeps its namespace; its
// socket timeouts hold, in send() too, without losing or reordering a byte; a handshake
// cannot start after bytes the code has not read (TLS runs on the host side of the relay,
// after the last byte both sides agree on); the TLS helper
// Python's ssl calls, called by hostile code with options node:tls refuses, neither ends
// the worker nor leaves a proxy connection behind.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { WasmRunner, makeWasmSnapshot, wasmFiles } from './harness.mjs';
import { Parked } from './egress_host.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const CONNECT = "import socket, ssl, select\ns = socket.create_connection(('127.0.0.1', 3128))\n" +
  "s.sendall(b'CONNECT example.test:443 HTTP/1.1\\r\\n\\r\\n')\n";
// A recv() that times out leaves a read waiting in NodeSockFS under the handshake after it.
const TIMED_OUT_RECV = "s.settimeout(0.2)\ntry:\n    s.recv(1)\nexcept TimeoutError:\n    pass\n";
const HANDSHAKE = "ssl.create_default_context().wrap_socket(s, server_hostname='example.test')\n";

describe('wasm runner: Python sockets through the relay', () => {
  let snapshot;
  let runner;
  let client;
  const park = () => Parked.open(path.join(runner.dir, 'egress.sock'));
  before(async () => {
    snapshot = makeWasmSnapshot(wasmFiles());
    runner = await WasmRunner.start({ snapshot, egress: true, env: [] });
    [client] = await runner.connect();
    const reply = await client.reply('egress_on', { type: 'egress' });
    assert.equal(reply.error, undefined, reply.error);
    await client.exec("marker = 'kept'");
  });
  after(() => {
    if (runner) runner.stop();
    if (snapshot) fs.rmSync(path.dirname(snapshot), { recursive: true, force: true });
  });

  async function expectInterrupted(id, what) {
    client.send({ type: 'interrupt', id });
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted', `${what}: ${JSON.stringify(r.error)} ${r.stream('stderr')}`);
    assert.equal((await client.exec('marker')).result, "'kept'", `${what}: the namespace is kept`);
  }

  for (const [what, code, proxyAnswers] of [
    ['recv', "s = socket.create_connection(('127.0.0.1', 3128))\n" +
      "s.sendall(b'GET http://example.test/ HTTP/1.1\\r\\n\\r\\n')\ns.recv(1)\n", false],
    ['select', "s = socket.create_connection(('127.0.0.1', 3128))\n" +
      "s.sendall(b'GET http://example.test/ HTTP/1.1\\r\\n\\r\\n')\nselect.select([s], [], [])\n", false],
    ['a TLS handshake', `s.recv(4096)\n${HANDSHAKE}`, true],
    ['a TLS handshake after a recv() that timed out', TIMED_OUT_RECV + 's.settimeout(None)\n' + HANDSHAKE, false],
  ]) {
    it(`interrupts a cell blocked in ${what}`, async () => {
      const host = await park();
      const id = client.startExec(`import socket, ssl, select\n${code.startsWith('s = ') ? '' : CONNECT}${code}`);
      await host.head();
      if (proxyAnswers) {
        host.socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
        await host.until((d) => d.length > 0, 'ClientHello');
      }
      await sleep(300);
      await expectInterrupted(id, what);
      host.socket.destroy();
    });
  }

  // With egress, Python's `js` holds Object and AbortSignal: a getter put on Object.prototype
  // runs with `this` as whatever object Node reads a missing property of. Node's warnings read
  // process.noDeprecation (eleven listeners on one EventTarget make one).
  it('gives Python no way to `process` through a getter on Object.prototype', async () => {
    const r = await client.exec(`import js
from pyodide.ffi import create_proxy, to_js
O = js.Object
caught = []
def grab(this):
    if this is not None and "getBuiltinModule" in list(O.getOwnPropertyNames(this)):
        caught.append(this)
getter = create_proxy(grab, capture_this=True)
O.defineProperty(O.prototype, "noDeprecation", O.fromEntries(to_js([["get", getter], ["configurable", True]])))
target = O.getPrototypeOf(js.AbortSignal).new()
for i in range(12):
    target.addEventListener("x", create_proxy(lambda *a: None))
import asyncio
await asyncio.sleep(0.1)
del O.prototype.noDeprecation
len(caught)`, { timeout: 30000 });
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.result, '0');
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  it('interrupts a cell blocked in sendall() to a proxy that reads nothing, cutting the connection', async () => {
    const host = await park();
    const id = client.startExec("import socket\ns = socket.create_connection(('127.0.0.1', 3128))\n" +
      "s.sendall(b'POST http://example.test/ HTTP/1.1\\r\\nContent-Length: 100000000\\r\\n\\r\\n')\n" +
      "s.sendall(b'x' * 100_000_000)\n");
    await host.head();
    host.socket.pause();                     // the window fills
    await sleep(1000);
    await expectInterrupted(id, 'sendall');
    host.socket.resume();
    await host.until(() => host.ended, 'the cut');
    host.socket.destroy();
  });

  it("ends a sendall() to a proxy that reads nothing at the socket's timeout", async () => {
    const host = await park();
    const id = client.startExec("import socket, time\ns = socket.create_connection(('127.0.0.1', 3128))\n" +
      "s.sendall(b'POST http://example.test/ HTTP/1.1\\r\\nContent-Length: 100000000\\r\\n\\r\\n')\n" +
      "s.settimeout(1)\nstart = time.monotonic()\n" +
      "try:\n    s.sendall(b'x' * 100_000_000)\nexcept TimeoutError as e:\n" +
      "    print('timed out', e, round(time.monotonic() - start))\n");
    await host.head();
    host.socket.pause();                     // the window fills
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.stream('stdout'), 'timed out timed out 1\n');
    assert.equal((await client.exec('marker')).result, "'kept'");
    host.socket.destroy();
  });

  it('sends every byte in order through a socket with a timeout', async () => {
    const host = await park();
    const size = 8 << 20;
    const id = client.startExec("import socket\ns = socket.create_connection(('127.0.0.1', 3128), timeout=30)\n" +
      `s.sendall(b'POST http://example.test/ HTTP/1.1\\r\\nContent-Length: ${size}\\r\\n\\r\\n')\n` +
      `data = (bytes(range(251)) * ${Math.ceil(size / 251)})[:${size}]\n` +
      "for i in range(0, len(data), 65536):\n    s.sendall(data[i:i + 65536])\n" +
      "s.recv(1)\n");
    await host.head();
    const body = await host.until((d) => d.length >= size, 'the body', 60000);
    const expected = Buffer.alloc(size);
    for (let i = 0; i < size; i++) expected[i] = i % 251;
    assert.ok(body.equals(expected), 'the bytes arrive as sent');
    host.socket.end('x');
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    host.socket.destroy();
  });

  it('gives a recv() every byte that has arrived, in order, not one piece', async () => {
    const host = await park();
    const size = 200 * 1024;                 // within the stream's window: all of it is sent
    const id = client.startExec(`import hashlib, time\n${CONNECT.replace('CONNECT example.test:443', 'GET http://example.test/')}` +
      'time.sleep(1)\nsizes, data = [], bytearray()\n' +
      'while chunk := s.recv(1 << 20):\n    sizes.append(len(chunk))\n    data += chunk\n' +
      'print(sizes[0], len(data), hashlib.sha256(data).hexdigest())\n');
    await host.head();
    const body = Buffer.from(Array.from({ length: size }, (_, i) => i % 251));
    host.socket.end(body);
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const [first, total, digest] = r.stream('stdout').trim().split(' ');
    assert.equal(Number(total), size);
    assert.equal(digest, crypto.createHash('sha256').update(body).digest('hex'));
    // Sent while the cell slept: queued on the worker's port, in one recv() (one suspension).
    assert.ok(Number(first) > 64 * 1024, `the first recv() got ${first} bytes`);
  });

  it("ends a handshake after a recv() that timed out at the socket's timeout", async () => {
    const host = await park();
    const id = client.startExec(`${CONNECT}${TIMED_OUT_RECV}s.settimeout(1)\n` +
      `try:\n    ${HANDSHAKE}except TimeoutError as e:\n    print('timed out')\n`);
    await host.head();
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.stream('stdout'), 'timed out\n');
    host.socket.destroy();
  });

  it('refuses a handshake after bytes the code has not read, and no ClientHello goes out', async () => {
    const host = await park();
    const answer = 'HTTP/1.1 200 Connection established\r\n\r\n';
    const id = client.startExec(`${CONNECT}s.recv(${answer.length})\n` +
      "import time\ntime.sleep(0.3)\n" +
      `try:\n    ${HANDSHAKE}except ssl.SSLError as e:\n    print('refused:', e)\n`);
    await host.head();
    host.socket.write(`${answer}unread`);
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.match(r.stream('stdout'), /^refused: .*bytes the code has not read/);
    assert.equal(host.data.length, 0, 'nothing reached the proxy after the CONNECT');
    host.socket.destroy();
  });

  // Hostile code calls the helper itself (pyodide_egress.py keeps it).
  const startTlsWith = (options, send) => 'import socket\nfrom pyodide.ffi import run_sync\n' +
    'from sandbox_runner import pyodide_egress as pe\n' +
    "s = socket.create_connection(('127.0.0.1', 3128))\n" +
    (send ? "s.sendall(b'CONNECT example.test:443 HTTP/1.1\\r\\n\\r\\n')\n" : '') +
    `print(run_sync(pe._helpers[0].startTls(s.fileno(), ${JSON.stringify(JSON.stringify(options))})))\n` +
    's.close()\n';

  it('refuses TLS options node:tls would throw on, and closing the socket closes its proxy connection', async () => {
    const host = await park();
    const r = await client.exec(startTlsWith({ minVersion: 'bogus' }, true));
    assert.match(r.stream('stdout'), /"ok":false.*minVersion is not a TLS version/);
    await host.head();
    await host.until(() => host.ended, "the proxy connection's end");
    host.socket.destroy();
  });

  it('keeps the worker when a stream whose TLS options were refused is cut later', async () => {
    // Nothing sent: the relay cuts the waiting stream after 10 s, with a reason (an error on
    // the worker's side of the stream).
    const r = await client.exec(startTlsWith({ alpn: 5 }, false));
    assert.match(r.stream('stdout'), /alpn must be a list/);
    await sleep(10500);
    assert.equal((await client.exec('marker')).result, "'kept'");
  });
});
