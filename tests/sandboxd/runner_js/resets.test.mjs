// Namespace resets that happen between execs or behind the runner's back (attack round 21):
// a forged `done`, a worker that dies while the session is idle. Whatever replaces the
// namespace outside an exec is reported on the next exec's done (namespace_reset).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RunnerContainer } from './harness.mjs';

const RESET_NOTE = /namespace was reset.*every variable and function defined so far is lost/s;

describe('javascript runner: resets between execs', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  it('ignores a done the cell forges through parentPort', async () => {
    await client.exec('var keep = 42; keep');
    // round 21's fd.js: a well-formed done for the running exec, then the real result later
    const id = client.newId() + 1;
    const r = await client.exec("const { parentPort } = require('worker_threads'); " +
      `parentPort.postMessage({ t: 'done', id: ${id}, status: 'ok', result: "'F'", error: null, ` +
      "outputBytes: 0, droppedBytes: 0 }); await new Promise((r) => setTimeout(r, 300)); 'real'");
    assert.equal(r.done.id, id);
    assert.equal(r.result, "'real'");
    await sleep(100);
    const next = await client.exec('typeof keep');
    assert.equal(next.result, "'number'");
    assert.equal(next.done.namespace_reset, undefined);
  });

  it('reports a namespace lost while no exec runs on the next exec', async () => {
    await client.exec('var gone = 1; setTimeout(() => process.exit(0), 50); "armed"');
    await sleep(500);
    const next = await client.exec('typeof gone');
    assert.equal(next.status, 'ok');
    assert.equal(next.result, "'undefined'");
    assert.equal(next.done.namespace_reset, true);
    assert.match(next.stream('stderr'), /exited with code 0/);
    assert.match(next.stream('stderr'), RESET_NOTE);
    const after = await client.exec('1');
    assert.equal(after.done.namespace_reset, undefined, 'reported once');
  });
});
