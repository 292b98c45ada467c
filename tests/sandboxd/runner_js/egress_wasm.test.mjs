// The egress relay of the wasm tier's runner (docs/runner-protocol.md, "Egress relay"):
// sandbox_runner.js on deploy/wasm's Node gets egress.sock bound and listening as fd 6
// (--egress-fd 6), as sandboxd passes it; this test plays sandboxd's proxy, dialing in to it.
// The worker has no loopback relay and no proxy variables: its fetch() (and Pyodide's
// pyfetch) reaches the parked connections over its egress port. And the port's streams
// (egress_channel.js) on their own: the window holds a writer whose reader does not read, and
// a peer that sends past it is cut; and the relay's side of those streams in this process:
// a stream takes a parked connection at its first data, not at its open.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { MessageChannel } from 'node:worker_threads';
import { NODE_MALLOC_MMAP_THRESHOLD, WasmRunner, makeWasmSnapshot, wasmFiles } from './harness.mjs';
import { Parked, RESPONSE, answerWith, fetchOutcome, refusedFetch } from './egress_host.mjs';

const require = createRequire(import.meta.url);
const { Channel, WINDOW, PIECE, MIN_CHARGE, ACK_AT, MAX_STREAMS } =
  require('../../../services/sandboxd/runner_js/egress_channel.js');
const { EgressRelay } = require('../../../services/sandboxd/runner_js/egress.js');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const answer = answerWith;

async function egressOn(client) {
  const reply = await client.reply('egress_on', { type: 'egress' });
  assert.equal(reply.error, undefined, reply.error);
  assert.equal(reply.port, undefined, 'no loopback relay in the wasm tier');
}

describe('wasm runner: egress over the passed egress.sock', () => {
  let runner;
  let client;
  let park;
  before(async () => {
    runner = await WasmRunner.start({ language: 'javascript', heapMb: 128, egress: true, env: [] });
    park = () => Parked.open(path.join(runner.dir, 'egress.sock'));
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  it('turns egress on without a port or proxy variables', async () => {
    const running = client.startExec('await new Promise((r) => setTimeout(r, 1000)); 1');
    await egressOn(client);
    assert.equal((await client.finishExec(running)).result, '1');
    await egressOn(client);
    const r = await client.exec('Object.keys(process.env).filter((k) => /proxy/i.test(k))');
    assert.equal(r.result, '[]');
  });

  it('sends an http:// fetch as an absolute-URI request to a parked connection', async () => {
    const host = await park();
    const id = client.startExec("const r = await fetch('http://example.test/x?y=1', { headers: { 'X-T': 'q' } }); " +
      "[r.status, r.headers.get('x-a'), await r.text()].join(' ')");
    const [head, result] = await answer(client, host, id, /^GET http:\/\/example\.test\/x\?y=1 HTTP\/1\.1\r\n/);
    assert.match(head, /\r\nx-t: q\r\n/i);
    assert.equal(result, "'200 1 hello relay'");
  });

  it('tunnels an https:// fetch with CONNECT, then TLS for the origin', async () => {
    const host = await park();
    const id = client.startExec(fetchOutcome('https://example.test/secure'));
    assert.match(await host.head(), /^CONNECT example\.test:443 HTTP\/1\.1\r\n/);
    host.socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
    const hello = await host.until((d) => d.length >= 5 && d.length >= 5 + d.readUInt16BE(3), 'ClientHello');
    assert.equal(hello[0], 0x16, 'a TLS handshake record');
    assert.ok(hello.includes('example.test'), 'the SNI names the origin');
    host.socket.destroy();
    const r = await client.finishExec(id);
    assert.match(r.result, /^'failed: /);
  });

  it("shows the proxy's refusal of a CONNECT in the error", async () => {
    const host = await park();
    assert.match(await refusedFetch(client, host),
      /^"failed: the egress proxy answered 403 Forbidden to CONNECT other\.test:443: egress refused: other\.test:443 is not/);
  });

  it('copies 16 MiB up and 16 MiB down through one stream', async () => {
    const host = await park();
    const size = 16 * 1024 * 1024;
    const id = client.startExec(`const r = await fetch('http://example.test/up', { method: 'POST', ` +
      `body: new Uint8Array(${size}).fill(120) }); const b = new Uint8Array(await r.arrayBuffer()); ` +
      'b.length + " " + b.every((x) => x === 121)', { timeout: 60000 });
    const head = await host.head();
    assert.match(head, /^POST http:\/\/example\.test\/up HTTP\/1\.1\r\n/);
    await host.until((d) => d.length >= size, 'the body', 30000);
    assert.ok(host.data.subarray(0, size).every((x) => x === 120));
    host.socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`);
    const chunk = Buffer.alloc(1 << 20, 121);
    for (let i = 0; i < 16; i++) {
      if (!host.socket.write(chunk)) await new Promise((r) => host.socket.once('drain', r));
    }
    host.socket.end();
    const r = await client.finishExec(id, { timeout: 60000 });
    assert.equal(r.result, `'${size} true'`, JSON.stringify(r.error));
  });

  it('fails a fetch that no parked connection takes within the wait, saying so', async () => {
    const r = await client.exec(fetchOutcome('http://example.test/nobody'), { timeout: 20000 });
    assert.match(r.result, /no connection to the egress proxy within 10 s/);
  });

  it('keeps fetch() through the relay after a reset (a new worker, a new port)', async () => {
    await client.reset();
    const host = await park();
    const id = client.startExec("await (await fetch('http://example.test/after-reset')).text()");
    const [, result] = await answer(client, host, id, /^GET http:\/\/example\.test\/after-reset HTTP\/1\.1\r\n/);
    assert.equal(result, "'hello relay'");
  });
});

describe('wasm runner: Python fetches through the relay', () => {
  let runner;
  let client;
  before(async () => {
    const snapshot = makeWasmSnapshot(wasmFiles());
    runner = await WasmRunner.start({ snapshot, egress: true, env: [] });
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  it('pyfetch, js.fetch and urllib go through it, and a socket reaches nothing else', async () => {
    await egressOn(client);
    const host = await Parked.open(path.join(runner.dir, 'egress.sock'));
    const id = client.startExec('from pyodide.http import pyfetch\n' +
      "r = await pyfetch('http://example.test/py')\n" +
      'print(r.status, await r.string())\n');
    const head = await host.head();
    assert.match(head, /^GET http:\/\/example\.test\/py HTTP\/1\.1\r\n/);
    assert.match(head, /\r\nhost: example\.test\r\n/i);
    host.socket.end(RESPONSE);
    const r = await client.finishExec(id);
    assert.equal(r.stream('stdout'), '200 hello relay\n', JSON.stringify(r.error));
    const second = await Parked.open(path.join(runner.dir, 'egress.sock'));
    const jsId = client.startExec('import js\n' +
      "r = await js.fetch('http://example.test/js')\nprint(r.status, await r.text())\n");
    assert.match(await second.head(), /^GET http:\/\/example\.test\/js HTTP\/1\.1\r\n/);
    second.socket.end(RESPONSE);
    assert.equal((await client.finishExec(jsId)).stream('stdout'), '200 hello relay\n');
    // urllib reads the proxy variables: its socket reaches the relay, and nothing else.
    const third = await Parked.open(path.join(runner.dir, 'egress.sock'));
    const urllibId = client.startExec('import os, socket, urllib.request\n' +
      "print(os.environ['HTTP_PROXY'])\n" +
      "r = urllib.request.urlopen('http://example.test/u', timeout=5)\n" +
      'print(r.status, r.read().decode())\n' +
      "try:\n    socket.create_connection(('127.0.0.1', 80), timeout=5)\n" +
      'except OSError as e:\n    print(type(e).__name__)\n');
    assert.match(await third.head(), /^GET http:\/\/example\.test\/u HTTP\/1\.1\r\n/);
    third.socket.end(RESPONSE);
    const out = await client.finishExec(urllibId);
    assert.equal(out.stream('stdout'), 'http://127.0.0.1:3128\n200 hello relay\nConnectionRefusedError\n',
      JSON.stringify(out.error));
    await client.reset();       // a new worker from the snapshot gets its own egress port
    const fourth = await Parked.open(path.join(runner.dir, 'egress.sock'));
    const resetId = client.startExec('from pyodide.http import pyfetch\n' +
      "r = await pyfetch('http://example.test/after-reset')\nprint(r.status)\n");
    assert.match(await fourth.head(), /^GET http:\/\/example\.test\/after-reset HTTP\/1\.1\r\n/);
    fourth.socket.end(RESPONSE);
    assert.equal((await client.finishExec(resetId)).stream('stdout'), '200\n');
  });
});

describe('egress channel streams', () => {
  const channels = [];  // closed after each test, also one that failed halfway
  afterEach(() => { for (const c of channels.splice(0)) c.close(); });
  const pair = () => {
    const { port1, port2 } = new MessageChannel();
    const opened = [];
    const main = new Channel(port1, (s) => opened.push(s));
    const worker = new Channel(port2);
    // A Channel unrefs its port (a worker's must not keep the runner alive); here the test's
    // own awaits are all that is left, so the ports keep this process running until closed.
    port1.ref();
    port2.ref();
    channels.push(main, worker);
    return { main, worker, opened };
  };
  // Waits for `done()`, for at most 5 s; then says what did not happen.
  const until = async (done, what) => {
    for (let i = 0; i < 500 && !done(); i++) await sleep(10);
    assert.ok(done(), what);
  };
  // The main thread's end of the first stream the worker opened, once its open arrived.
  const firstOpened = async (opened) => {
    await until(() => opened.length > 0, 'the open reached the main thread');
    return opened[0];
  };

  it('closes every port a message brings, wherever it sits in it', async () => {
    const { port1, port2 } = new MessageChannel();
    channels.push(new Channel(port1, () => {}));
    port1.ref();
    const kept = [];
    const post = (message) => {
      const { port1: sent, port2: other } = new MessageChannel();
      other.on('message', () => {});
      kept.push(new Promise((resolve) => other.once('close', resolve)));
      port2.postMessage(message(sent), [sent]);
    };
    post((p) => ({ t: 'open', s: 1, c: p }));
    post((p) => ({ t: 'd', s: 1, b: new ArrayBuffer(1), extra: [p] }));
    post((p) => ({ s: 'not an id', c: p }));
    post((p) => ({ t: 'tls', s: 7, o: { deep: [p] }, n: 0 }));
    post((p) => p);
    const outcome = await Promise.race([Promise.all(kept).then(() => 'closed'),
      sleep(3000).then(() => 'still open')]);
    port2.close();
    assert.equal(outcome, 'closed');
  });

  it('holds a writer at the window while its reader does not read', async () => {
    const { main, worker, opened } = pair();
    const up = worker.open();
    let written = 0;
    const chunk = Buffer.alloc(PIECE);
    for (let i = 0; i < 64; i++) {
      if (!up.write(chunk)) break;
      written += chunk.length;
    }
    await sleep(200);  // the writer fills the window meanwhile
    const reader = await firstOpened(opened);
    reader.pause();
    assert.ok(up.sent - up.acked <= WINDOW, `${up.sent - up.acked} bytes in flight`);
    assert.ok(up.sent <= WINDOW + reader.readableHighWaterMark + PIECE, `${up.sent} sent`);
    let got = 0;
    reader.on('data', (d) => { got += d.length; });
    reader.resume();
    up.end();
    await new Promise((r) => reader.on('end', r));
    assert.equal(got, up.sent);
    assert.ok(written > 0);
    main.close();
    worker.close();
  });

  it('posts pieces that malloc serves from its heaps, not a mapping each', async () => {
    // Every piece is an ArrayBuffer the sender allocates and the receiver frees; at or over
    // Node's mmap threshold each one is an mmap, 16 page faults and an munmap that flushes
    // the TLB of every thread, which halved the relay's throughput.
    const { main, worker, opened } = pair();
    const sizes = [];
    const post = worker.port.postMessage.bind(worker.port);
    worker.port.postMessage = (m, transfer) => {
      if (m && m.t === 'd') sizes.push(m.b.byteLength);
      return post(m, transfer);
    };
    const up = worker.open();
    const sent = Buffer.alloc(1 << 20);
    for (let i = 0; i < sent.length; i++) sent[i] = i % 251;
    up.end(sent);
    const reader = await firstOpened(opened);
    const got = [];
    await new Promise((resolve) => {
      reader.on('data', (d) => got.push(d));
      reader.on('end', resolve);
    });
    assert.ok(Buffer.concat(got).equals(sent), 'the bytes arrive in order');
    // malloc's chunk is the request plus its 8-byte header, rounded up to 16.
    const over = sizes.filter((n) => n + 16 > NODE_MALLOC_MMAP_THRESHOLD);
    assert.deepEqual(over, [], `pieces of ${PIECE} bytes`);
    main.close();
    worker.close();
  });

  it('refuses a worker its stream past the cap before it reaches the main thread', async () => {
    const { main, worker, opened } = pair();
    const streams = [];
    for (let i = 0; i < MAX_STREAMS; i++) streams.push(worker.open());
    const over = worker.open();
    const refused = await new Promise((r) => over.on('error', r));
    assert.match(refused.message, /over 128 egress connections are open at once/);
    await sleep(50);
    assert.equal(opened.length, MAX_STREAMS);
    main.close();
    worker.close();
  });

  it('closes the channel of a worker that floods it with opens past the cap', async () => {
    const { main, worker, opened } = pair();
    for (let i = 0; i < MAX_STREAMS; i++) worker.open();
    let answers = 0;
    worker.port.on('message', (m) => { if (m.t === 'x' && m.s >= 1000000) answers++; });
    for (let i = 0; i < 4000; i++) worker.post({ t: 'open', s: 1000000 + i });
    await sleep(300);
    assert.equal(opened.length, MAX_STREAMS);
    assert.ok(main.closed, 'the flood was answered open by open');
    assert.ok(answers <= 4 * MAX_STREAMS, `${answers} refusals answered`);
    worker.close();
  });

  it('closes the channel of a worker that frees a slot between floods', async () => {
    const { main, worker, opened } = pair();
    for (let i = 0; i < MAX_STREAMS; i++) worker.open();
    await until(() => opened.length === MAX_STREAMS, 'every open reached the main thread');
    let next = 1000000;
    for (let round = 0; round < 10 && !main.closed; round++) {
      for (let i = 0; i < MAX_STREAMS; i++) worker.post({ t: 'open', s: next++ });
      await sleep(20);
      opened.shift().destroy();      // a slot free again: the next open is accepted
      await sleep(20);
      worker.post({ t: 'open', s: next++ });
      await sleep(20);
    }
    assert.ok(main.closed, 'accepted opens between floods reset the refusals');
    worker.close();
  });

  // The worker posts `count` pieces of `size` bytes to a paused reader, ignoring its
  // acknowledgements: how the main thread's stream ends within 5 s, and the bytes it held.
  const flood = async (count, size) => {
    const { main, worker, opened } = pair();
    const up = worker.open();
    const reader = await firstOpened(opened);
    reader.pause();
    let held = -1;
    const cut = new Promise((r) => reader.on('error', (e) => { held = reader.readableLength; r(e); }));
    for (let i = 0; i < count; i++) {
      const b = new ArrayBuffer(size);
      worker.post({ t: 'd', s: up.id, b }, [b]);
    }
    const outcome = await Promise.race([cut, sleep(5000).then(() => new Error('not cut'))]);
    main.close();
    worker.close();
    return { outcome, held };
  };

  it('cuts a stream whose peer sends past the window', async () => {
    const { outcome } = await flood(WINDOW / PIECE + 2, PIECE);
    assert.match(outcome.message, /past its window/);
  });

  it('counts each piece at least MIN_CHARGE bytes, so tiny pieces cannot pile up', async () => {
    // Each piece costs its receiver a Buffer and an ArrayBuffer whatever its length: 1-byte
    // pieces are cut once their charges pass the window, at most (WINDOW + PIECE) /
    // MIN_CHARGE of them held.
    const { outcome, held } = await flood(4096, 1);
    assert.match(outcome.message, /past its window/);
    assert.ok(held >= 0 && held <= (WINDOW + PIECE) / MIN_CHARGE, `${held} pieces held`);
  });

  it('cuts a stream whose peer sends an empty piece', async () => {
    const { outcome } = await flood(1, 0);
    assert.match(outcome.message, /an empty piece/);
  });

  it('acknowledges ACK_AT bytes at a time, not each piece', async () => {
    // A worker that never reads its port would have every acknowledgement queued to it.
    const { main, worker, opened } = pair();
    const up = worker.open();
    let acks = 0;
    const onMessage = up.onMessage.bind(up);
    up.onMessage = (m) => { if (m.t === 'a') acks++; onMessage(m); };
    const pieces = 1024;
    for (let i = 0; i < pieces; i++) up.write(Buffer.alloc(1));
    up.end();
    const reader = await firstOpened(opened);
    let got = 0;
    reader.on('data', (d) => { got += d.length; });
    await new Promise((r) => reader.on('end', r));
    await until(() => acks >= 1, 'an acknowledgement');
    assert.equal(got, pieces);
    assert.ok(acks >= 1 && acks <= (pieces * MIN_CHARGE) / ACK_AT, `${acks} acknowledgements`);
    main.close();
    worker.close();
  });

  it('acknowledges only what the reader took, not what waits in its buffer', async () => {
    const { main, worker, opened } = pair();
    const up = worker.open();
    const reader = await firstOpened(opened);
    reader.pause();
    up.write(Buffer.alloc(ACK_AT));
    await until(() => reader.readableLength > 0, 'the pieces reached the reader');
    await sleep(100);
    assert.equal(up.acked, 0, 'pieces the paused reader holds were acknowledged');
    // Node 22+ hands out one piece per read() of a paused stream, Node 20 all of them.
    while (reader.read() !== null);
    await until(() => up.acked === up.sent, 'what the reader took acknowledged');
    main.close();
    worker.close();
  });
});

describe('egress relay: worker streams wait for their first data', () => {
  let dir;
  let relay;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-streams-'));
    relay = await EgressRelay.create(dir);
    await relay.turnOn();
  });
  after(() => {
    relay.hostServer.close();
    relay.localServer.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  // The relay serving one end of a port; the worker's Channel on the other.
  const serve = () => {
    const { port1, port2 } = new MessageChannel();
    const main = relay.serve(port1);
    const worker = new Channel(port2);
    port1.ref();
    port2.ref();
    return { main, worker };
  };
  const park = () => Parked.open(path.join(dir, 'egress.sock'));
  // serve() with `n` host connections parked, which the relay has taken by the time it returns.
  async function paired(n) {
    const { main, worker } = serve();
    const hosts = [];
    for (let i = 0; i < n; i++) hosts.push(await park());
    await sleep(100);
    return { main, worker, hosts };
  }

  it('leaves the parked connections to streams that send: idle ones hold none', async () => {
    const { main, worker, hosts } = await paired(2);
    const idle = [worker.open(), worker.open(), worker.open()];
    await sleep(100);
    const busy = worker.open();
    busy.write('GET http://example.test/ HTTP/1.1\r\n\r\n');
    assert.equal(await hosts[0].head(1000), 'GET http://example.test/ HTTP/1.1\r\n\r\n');
    idle[1].write('later');
    assert.equal((await hosts[1].until((d) => d.length >= 5, "an idle stream's first data", 1000)).toString(), 'later');
    for (const host of hosts) host.socket.destroy();
    main.close();
    worker.close();
  });

  it('takes the host connection with a stream its channel closes', async () => {
    const { main, worker, hosts: [host] } = await paired(1);
    const stream = worker.open();
    stream.on('error', () => {});
    stream.write('GET http://example.test/ HTTP/1.1\r\n\r\n');
    await host.head(1000);
    const closed = new Promise((r) => host.socket.on('end', () => r('closed')));
    worker.close();
    const outcome = await Promise.race([closed, sleep(3000).then(() => 'still open')]);
    host.socket.destroy();
    main.close();
    assert.equal(outcome, 'closed');
  });

  // A worker stream that CONNECTed through `host` and read the proxy's answer.
  async function tunnel(worker, host) {
    const stream = worker.open();
    stream.on('error', () => {});
    stream.write('CONNECT example.test:443 HTTP/1.1\r\n\r\n');
    await host.head(1000);
    host.socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
    assert.match((await readSome(stream)).toString(), /^HTTP\/1\.1 200 /);
    return stream;
  }
  const readSome = (stream) => new Promise((resolve, reject) => {
    const next = () => {
      const chunk = stream.read();
      if (chunk === null) return stream.once('readable', next);
      resolve(chunk);
    };
    stream.once('error', reject);
    next();
  });
  // An origin for `host`'s connection: TLS with `cert` for example.test, answering 'pong:'
  // and what it read.
  const serveTls = (host, cert) => {
    host.socket.removeAllListeners('data');
    const secure = new tls.TLSSocket(host.socket, { isServer: true, ...cert });
    secure.on('error', () => {});
    secure.on('data', (d) => secure.write(`pong:${d}`));
    return secure;
  };
  let cert;
  const certificate = () => {
    if (cert) return cert;
    const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-tls-'));
    const [key, crt] = [path.join(certDir, 'key.pem'), path.join(certDir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
      '-nodes', '-keyout', key, '-out', crt, '-days', '1', '-subj', '/CN=example.test',
      '-addext', 'subjectAltName=DNS:example.test'], { stdio: 'ignore' });
    cert = { key: fs.readFileSync(key), cert: fs.readFileSync(crt) };
    fs.rmSync(certDir, { recursive: true, force: true });
    return cert;
  };

  it("runs TLS on the host connection at the worker's request, the stream then in clear", async () => {
    const { main, worker, hosts: [host] } = await paired(1);
    const stream = await tunnel(worker, host);
    const origin = serveTls(host, certificate());
    const r = await stream.startTls({ host: 'example.test', ca: certificate().cert.toString() });
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(r.cert.subject.CN, 'example.test');
    stream.write('ping');
    assert.equal((await readSome(stream)).toString(), 'pong:ping');
    // A second request, from a worker that ignores its own refusal, is refused by the relay,
    // which cuts the stream.
    assert.match((await stream.startTls({})).message, /cannot start/);
    stream.tlsAsked = false;
    const closed = new Promise((resolve) => stream.once('close', resolve));
    assert.match((await stream.startTls({})).message, /cannot start/);
    await closed;
    origin.destroy();
    main.close();
    worker.close();
  });

  it('refuses TLS to a stream not yet paired, holding bytes in flight or over the PEM cap, cutting it', async () => {
    const { main, worker, hosts } = await paired(2);
    const cut = (stream) => new Promise((resolve) => stream.once('close', resolve));
    const idle = worker.open();
    idle.on('error', () => {});
    const idleCut = cut(idle);
    assert.match((await idle.startTls({ host: 'example.test' })).message, /cannot start/);
    await idleCut;
    const stream = await tunnel(worker, hosts[0]);
    hosts[0].socket.write('junk');
    assert.equal((await readSome(stream)).toString(), 'junk');
    stream.received -= 4;                    // a worker that claims it never got them
    assert.match((await stream.startTls({ host: 'example.test' })).message, /bytes the code has not read/);
    await hosts[0].until(() => hosts[0].ended, "the host connection's end", 1000);
    assert.equal(hosts[0].data.length, 0, 'no ClientHello went out');
    // Building a context blocks the main thread: the worker's own check is bypassed here.
    const big = await tunnel(worker, hosts[1]);
    const r = await big.startTls({ host: 'example.test', ca: 'x'.repeat(512 * 1024 + 1) });
    assert.match(r.message, /over 524288/);
    await hosts[1].until(() => hosts[1].ended, "the host connection's end", 1000);
    main.close();
    worker.close();
  });

  it('answers at most one refusal a stream, however many requests a worker posts', async () => {
    const { port1, port2 } = new MessageChannel();
    const main = relay.serve(port1);
    const answers = [];
    port2.on('message', (m) => answers.push(m));
    for (let i = 0; i < 100; i++) port2.postMessage({ t: 'tls', s: 1, o: {}, n: 0 });
    port2.postMessage({ t: 'open', s: 2 });
    for (let i = 0; i < 100; i++) port2.postMessage({ t: 'tls', s: 2, o: {}, n: 0 });
    await sleep(200);
    assert.deepEqual(answers.map((m) => `${m.t} ${m.s}`), ['tlsr 2', 'x 2']);
    main.close();
    port2.close();
  });

  it('answers a refused certificate as a verification failure and closes the host connection', async () => {
    const { main, worker, hosts: [host] } = await paired(1);
    const stream = await tunnel(worker, host);
    const origin = serveTls(host, certificate());
    const closed = new Promise((resolve) => origin.once('end', resolve));
    const r = await stream.startTls({ host: 'example.test' });
    assert.equal(r.ok, false);
    assert.equal(r.verifyFailed, true, JSON.stringify(r));
    await closed;
    main.close();
    worker.close();
  });

  it('closes the host connection of a stream cut during its handshake', async () => {
    const { main, worker, hosts: [host] } = await paired(1);
    const stream = await tunnel(worker, host);
    const answer = stream.startTls({ host: 'example.test' });
    await host.until((d) => d.length > 0, 'ClientHello', 1000);
    stream.destroy();
    assert.equal((await answer).ok, false);
    await host.until(() => host.ended, "the host connection's end", 1000);
    main.close();
    worker.close();
  });

  it('cuts a stream that sends nothing after 10 s, and one that ends first takes no host', async () => {
    const { main, worker, hosts: [host] } = await paired(1);
    worker.open().end();
    const idle = worker.open();
    idle.on('data', () => {});
    const started = Date.now();
    const error = await new Promise((r) => idle.on('error', r));
    const waited = Date.now() - started;
    assert.match(error.message, /no connection to the egress proxy within 10 s/);
    assert.ok(waited > 9500 && waited < 12000, `cut after ${waited} ms`);
    assert.equal(host.data.length, 0);
    assert.ok(!host.ended, 'the stream that ended first took the parked connection');
    host.socket.destroy();
    main.close();
    worker.close();
  });
});
