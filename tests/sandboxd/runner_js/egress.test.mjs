// The egress relay of the JavaScript runner (docs/runner-protocol.md, "Egress relay"):
// egress.sock exists before `ready` and takes no connection until the `egress` frame; then
// this test plays sandboxd's proxy (connections parked on egress.sock) and the worker's
// fetch() reaches it: http:// as absolute-URI requests, https:// as a CONNECT tunnel whose
// first bytes are a TLS ClientHello. A reset keeps the variables and the dispatcher.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { RunnerContainer } from './harness.mjs';
import { Parked, answerWith, fetchOutcome, refusedFetch } from './egress_host.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('javascript runner: egress relay', () => {
  let runner;
  let client;
  let egressPath;
  let existedBeforeReady;
  let port;
  before(async () => {
    runner = await RunnerContainer.start();
    egressPath = path.join(runner.dir, 'egress.sock');
    existedBeforeReady = fs.existsSync(egressPath);
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  const park = () => Parked.open(egressPath);
  // Exec `id`'s request arrives on `host` as `headPattern` and is answered with RESPONSE;
  // returns the head and the exec's result.
  const answer = (host, id, headPattern) => answerWith(client, host, id, headPattern);
  const egressOn = async () => {
    const reply = await client.reply('egress_on', { type: 'egress' });
    assert.equal(reply.error, undefined, reply.error);
    return reply.port;
  };

  it('binds egress.sock before ready and closes every connection until egress', async () => {
    assert.ok(existedBeforeReady, 'egress.sock did not exist when runner.sock appeared');
    assert.equal(fs.statSync(egressPath).mode & 0o777, 0o777);
    const early = await park();
    await early.until(() => early.ended, 'the close of a connection before egress', 5000);
    assert.equal(early.data.length, 0);
    const r = await client.exec('Object.keys(process.env).filter((k) => /proxy/i.test(k))');
    assert.equal(r.result, '[]');
  });

  it('turns egress on once, answering the same port, and the running worker gets the variables', async () => {
    const running = client.startExec('await new Promise((r) => setTimeout(r, 1500)); 1');
    port = await egressOn();    // answered before that exec's done
    assert.equal((await client.finishExec(running)).result, '1');
    assert.ok(Number.isInteger(port) && port > 0, String(port));
    assert.equal(await egressOn(), port);
    const r = await client.exec("['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', " +
      "'NO_PROXY', 'no_proxy'].map((k) => process.env[k]).join(' ')");
    const url = `http://127.0.0.1:${port}`;
    assert.equal(r.result, `'${[url, url, url, url, 'localhost,127.0.0.1,::1', 'localhost,127.0.0.1,::1'].join(' ')}'`);
  });

  it('sends an http:// fetch as an absolute-URI request to a parked connection', async () => {
    const host = await park();
    const id = client.startExec("const r = await fetch('http://example.test/x?y=1', { headers: { 'X-T': 'q' } }); " +
      "[r.status, r.headers.get('x-a'), await r.text()].join(' ')");
    const [head, result] = await answer(host, id, /^GET http:\/\/example\.test\/x\?y=1 HTTP\/1\.1\r\n/);
    assert.match(head, /\r\nhost: example\.test\r\n/i);
    assert.match(head, /\r\nx-t: q\r\n/i);
    assert.equal(result, "'200 1 hello relay'");
  });

  it('tunnels an https:// fetch with CONNECT, then TLS for the origin', async () => {
    const host = await park();
    const id = client.startExec(fetchOutcome('https://example.test/secure'));
    const head = await host.head();
    assert.match(head, /^CONNECT example\.test:443 HTTP\/1\.1\r\n/);
    assert.match(head, /\r\nhost: example\.test:443\r\n/i);
    host.socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
    const hello = await host.until((d) => d.length >= 5 && d.length >= 5 + d.readUInt16BE(3), 'ClientHello');
    assert.equal(hello[0], 0x16, 'a TLS handshake record');
    assert.equal(hello[5], 0x01, 'a ClientHello');
    assert.ok(hello.includes('example.test'), 'the SNI names the origin');
    host.socket.destroy();
    const r = await client.finishExec(id);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.match(r.result, /^'failed: /);
  });

  it("checks the origin's certificate inside the tunnel", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-cert-'));
    const [keyFile, certFile] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
      '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=example.test',
      '-addext', 'subjectAltName=DNS:example.test'], { stdio: 'ignore' });
    const host = await park();
    const id = client.startExec(fetchOutcome('https://example.test/self-signed'));
    assert.match(await host.head(), /^CONNECT example\.test:443 /);
    host.socket.removeAllListeners('data');
    host.socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
    const secure = new tls.TLSSocket(host.socket, { isServer: true,
      key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile) });
    secure.on('error', () => {});
    const r = await client.finishExec(id);
    fs.rmSync(dir, { recursive: true, force: true });
    assert.match(r.result, /^'failed: self[- ]signed certificate/);
  });

  it("shows the proxy's refusal of a CONNECT in the error", async () => {
    const host = await park();
    assert.match(await refusedFetch(client, host),
      /^"failed: the egress proxy answered 403 Forbidden to CONNECT other\.test:443: egress refused: other\.test:443 is not/);
  });

  it('skips parked connections that sandboxd closed', async () => {
    const dead = [await park(), await park()];
    const live = await park();
    for (const d of dead) d.socket.destroy();
    await sleep(300);
    const id = client.startExec("await (await fetch('http://example.test/live')).text()");
    const [, result] = await answer(live, id, /^GET http:\/\/example\.test\/live HTTP\/1\.1\r\n/);
    assert.equal(result, "'hello relay'");
  });

  it('reaches localhost names directly (NO_PROXY), other names through the relay', async () => {
    const host = await park();
    const id = client.startExec("const http = require('http'); " +
      "const srv = http.createServer((q, s) => s.end('local ' + q.url)); " +
      "await new Promise((r) => srv.listen(0, '127.0.0.1', r)); " +
      "const local = await (await fetch(`http://127.0.0.1:${srv.address().port}/l?q`)).text(); " +
      "srv.close(); local + ', ' + await (await fetch('http://example.test/after-local')).text()");
    const [, result] = await answer(host, id, /^GET http:\/\/example\.test\/after-local HTTP\/1\.1\r\n/);
    assert.equal(result, "'local /l?q, hello relay'");
  });

  it('copies 64 MiB from a client to the host connection', async () => {
    const host = await park();
    let received = 0;
    let first = 0;
    const ended = new Promise((resolve) => host.socket.on('end', resolve));
    host.socket.removeAllListeners('data');
    host.socket.on('data', (d) => {
      if (!first) first = Date.now();
      received += d.length;
    });
    const started = Date.now();
    const r = await client.exec(`const s = require('net').connect(${port}, '127.0.0.1'); ` +
      'const chunk = Buffer.alloc(1 << 20, 120); ' +
      "for (let i = 0; i < 64; i++) if (!s.write(chunk)) await new Promise((r) => s.once('drain', r)); " +
      "s.end(); await new Promise((r) => s.once('finish', r)); 'sent'", { timeout: 30000 });
    assert.equal(r.result, "'sent'");
    await ended;
    const seconds = (Date.now() - started) / 1000;
    assert.equal(received, 64 * 1024 * 1024);
    console.log(`# relay (JavaScript): 64 MiB in ${seconds.toFixed(3)} s, ` +
      `${(64 * 1048576 / seconds / 1e6).toFixed(0)} MB/s (exec included)`);
    host.socket.destroy();
  });

  it('keeps the variables and fetch() through the relay after a reset', async () => {
    await client.reset();
    const env = await client.exec('process.env.HTTPS_PROXY');
    assert.equal(env.result, `'http://127.0.0.1:${port}'`);
    const host = await park();
    const id = client.startExec("await (await fetch('http://example.test/after-reset')).text()");
    const [, result] = await answer(host, id, /^GET http:\/\/example\.test\/after-reset HTTP\/1\.1\r\n/);
    assert.equal(result, "'hello relay'");
  });

  // Opens `count` connections to the relay that send nothing, kept in globalThis.idle.
  const openIdle = (count) => `globalThis.idle = []; for (let i = 0; i < ${count}; i++) { ` +
    `const s = require('net').connect(${port}, '127.0.0.1'); s.on('error', () => {}); ` +
    "await new Promise((r) => s.once('connect', r)); idle.push(s); } ";

  it('leaves the parked connections to clients that send: idle ones hold none', async () => {
    const hosts = [await park(), await park()];
    await sleep(200);
    const id = client.startExec(openIdle(3) + 'await new Promise((r) => setTimeout(r, 200)); ' +
      "const body = await (await fetch('http://example.test/beside-idle')).text(); " +
      "idle[1].write('later'); await new Promise((r) => setTimeout(r, 500)); " +
      'for (const s of idle) s.destroy(); body');
    await hosts[0].until((d) => d.includes('\r\n\r\n'), 'the request beside 3 idle clients', 3000);
    const [head, result] = await answer(hosts[0], id, /^GET http:\/\/example\.test\/beside-idle HTTP\/1\.1\r\n/);
    assert.ok(head);
    assert.equal(result, "'hello relay'");
    assert.equal((await hosts[1].until((d) => d.length >= 5, "an idle client's first bytes", 3000)).toString(), 'later');
    hosts[1].socket.destroy();
  });

  it('closes a client that sends nothing after 10 s; one that closes first takes no host', async () => {
    const host = await park();
    await sleep(200);
    const r = await client.exec(openIdle(1) + 'idle[0].end(); ' +
      "const s = require('net').connect(" + port + ", '127.0.0.1'); s.on('error', () => {}); " +
      "const t = Date.now(); await new Promise((r) => s.once('close', r)); Date.now() - t",
    { timeout: 30000 });
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const waited = Number(r.result);
    assert.ok(waited > 9500 && waited < 12000, `closed after ${waited} ms`);
    assert.equal(host.data.length, 0);
    assert.ok(!host.ended, 'the client that closed first took the parked connection');
    host.socket.destroy();
  });

  it('closes the connection on an egress frame whose id is not an int', async () => {
    client.send({ type: 'egress', id: '1' });
    assert.ok(await client.atEof(5000));
  });
});

describe('javascript runner: fetch() and NODE_EXTRA_CA_CERTS', () => {
  // The options fetch() connects with, from the runner's module (no container needed).
  const { tlsOptions } = createRequire(import.meta.url)('../../../services/sandboxd/runner_js/egress_fetch.js');

  it('trusts the file as it is now, building the context again only when its text changes', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-ca-'));
    const ca = path.join(dir, 'ca.pem');
    const makeCa = (name) => execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt',
      'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', path.join(dir, `${name}.key`), '-out', ca,
      '-days', '1', '-subj', `/CN=${name}`], { stdio: 'ignore' });
    const saved = process.env.NODE_EXTRA_CA_CERTS;
    try {
      delete process.env.NODE_EXTRA_CA_CERTS;
      assert.equal(tlsOptions('example.test').secureContext, undefined, "without the variable: Node's own");
      makeCa('first');
      process.env.NODE_EXTRA_CA_CERTS = ca;
      const first = tlsOptions('example.test', { port: 443 });
      assert.ok(first.secureContext instanceof tls.SecureContext);
      assert.equal(first.ca, undefined);
      assert.equal(first.servername, 'example.test');
      // Building one takes 25-45 ms (Node's ~140 roots): a connection reuses it.
      assert.equal(tlsOptions('other.test').secureContext, first.secureContext);
      makeCa('second');
      const second = tlsOptions('example.test').secureContext;
      assert.notEqual(second, first.secureContext, 'a changed file is read again');
      assert.equal(tlsOptions('example.test').secureContext, second);
      fs.rmSync(ca);
      assert.equal(tlsOptions('example.test').secureContext, undefined, 'an unreadable file adds nothing');
    } finally {
      if (saved === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
      else process.env.NODE_EXTRA_CA_CERTS = saved;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
