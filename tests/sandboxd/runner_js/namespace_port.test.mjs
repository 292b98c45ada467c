// The runtime's port between the runner's main thread and a namespace's worker
// (namespace.js), against a worker that speaks the protocol with hostile intent: a port it
// puts in a valid message is closed on arrival, so nothing it posts on the other end can
// pile up in the runner. No runner process is needed: the worker is a script of the test's.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);
const { Namespace } = require('../../../services/sandboxd/runner_js/namespace.js');

// Pongs 1 with a port in it, and pongs 2 once the port's other end closed.
const WORKER = `
const { MessageChannel, workerData } = require('worker_threads');
const { port1, port2 } = new MessageChannel();
port2.on('message', () => {});
port2.once('close', () => workerData.port.postMessage({ t: 'pong', n: 2 }));
workerData.port.postMessage({ t: 'pong', n: 1, extra: { deep: [port1] } }, [port1]);
setInterval(() => {}, 1000);
`;

describe('javascript runner: the namespace port', () => {
  it('closes a port a worker puts in a message', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'namespace-port-'));
    const script = path.join(dir, 'worker.js');
    fs.writeFileSync(script, WORKER);
    const pongs = [];
    const lost = [];
    const handlers = { ready() {}, out() {}, call() {}, done() {}, pong: (n) => pongs.push(n),
      lost: (why) => lost.push(why) };
    const ns = new Namespace(script, 64, handlers);
    try {
      for (let i = 0; i < 150 && !pongs.includes(2); i++) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(lost, []);
      assert.deepEqual(pongs, [1, 2], "the port's other end was not closed");
    } finally {
      await ns.end(5000);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
