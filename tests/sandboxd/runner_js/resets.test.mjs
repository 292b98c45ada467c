// Namespace resets that happen between execs or behind the runner's back: a forged `done`,
// a worker that dies while the session is idle, processes that outlive a reset, and the
// idle watchdog (a background loop that never yields). Whatever replaces the namespace
// outside an exec is reported on the next exec's done (namespace_reset).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RunnerContainer } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RESET_NOTE = /namespace was reset.*every variable and function defined so far is lost/s;

// Run in a cell: the command lines of the container's live processes (zombies left out:
// they have exited, only their parent has not reaped them yet).
function liveProcesses() {
  const fs = require('fs');
  return fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map((p) => {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      if (stat[stat.lastIndexOf(')') + 2] === 'Z') return '';
      return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch (e) {
      return '';
    }
  }).filter(Boolean).join('\n');
}

describe('javascript runner: resets between execs', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  it('ignores a done the cell forges through parentPort', async () => {
    await client.exec('var keep = 42; keep');
    // A well-formed done for the running exec, then the real result later.
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

  it('reports a reset during an exec whose connection was lost on the next connection', async () => {
    await client.exec('var lostWithIt = 1');
    const id = client.startExec('console.log("spinning"); while (true) {}');
    await client.expect('output');
    client.close();             // the runner interrupts it, then terminates the worker
    [client] = await runner.connect();
    await sleep(500);
    const next = await client.exec('typeof lostWithIt');
    assert.ok(next.frames.every((f) => f.id !== id));
    assert.equal(next.result, "'undefined'");
    assert.equal(next.done.namespace_reset, true);
    assert.match(next.stream('stderr'), /during an execution whose connection was lost/);
  });

  it('ends the processes user code started when a timeout resets the namespace', async () => {
    // A detached shell loop must not outlive the reset.
    await client.exec("require('child_process').spawn('/bin/sh', ['-c', " +
      "'while :; do sleep 1; done # r21-loop'], { detached: true, stdio: 'ignore' }).unref()");
    const list = `(${liveProcesses})()`;
    assert.match((await client.exec(list)).result, /r21-loop/);
    const id = client.startExec('console.log("spinning"); while (true) {}');
    await client.expect('output');
    client.send({ type: 'interrupt', id });
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    assert.equal(r.done.namespace_reset, true);
    const left = (await client.exec(list)).result;
    assert.doesNotMatch(left, /r21-loop|sleep/);
    assert.match(left, /sandbox_runner\.js/, 'the runner itself lives on');
  });

  it('ends the processes background code starts while a reset frame runs', async () => {
    // Background code spawning without a pause can start processes after the reset's last
    // kill, before its worker has stopped. Two threads of its own spawn too (they stop only
    // when the worker does), which makes that window wide enough to hit every time.
    const spawner = "const cp = require('child_process'); (function spawnMore() { try { " +
      "cp.spawn('sleep', ['1000'], { detached: true, stdio: 'ignore' }).unref() } catch (e) {} " +
      'setImmediate(spawnMore) })()';
    await client.exec(`const { Worker } = require('worker_threads'); ${spawner}; ` +
      `for (let i = 0; i < 2; i++) new Worker(${JSON.stringify(spawner)}, { eval: true })`);
    await sleep(200);
    await client.reset();
    const left = (await client.exec(`(${liveProcesses})()`)).result;
    assert.doesNotMatch(left, /sleep/);
    assert.match(left, /sandbox_runner\.js/, 'the runner itself lives on');
  });
});

describe('javascript runner: the idle watchdog', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start({ extraArgs: ['--idle-watchdog-ms', '500'] });
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  it('leaves background timers and long execs alone', async () => {
    await client.exec('var ticks = 0; setInterval(() => ticks++, 20); "started"');
    const long = await client.exec('await new Promise((r) => setTimeout(r, 800)); ' +
      'const t0 = Date.now(); while (Date.now() - t0 < 800) {} ticks > 0');
    assert.equal(long.result, 'true');
    await sleep(1200);
    const r = await client.exec('ticks > 40');
    assert.equal(r.result, 'true');
    assert.equal(r.done.namespace_reset, undefined);
  });

  it('replaces a worker that background code keeps busy, and says so on the next exec', async () => {
    // OK at once, then the worker spins: it is replaced, not left busy until the next exec
    // times out.
    await client.exec('var before = 1');
    const spin = await client.exec('function loop() { Promise.resolve().then(loop) } loop(); 1');
    assert.equal(spin.result, '1');
    await sleep(1300);
    const r = await client.exec('typeof before', { timeout: 3000 });
    assert.equal(r.status, 'ok');
    assert.equal(r.result, "'undefined'");
    assert.equal(r.done.namespace_reset, true);
    assert.match(r.stream('stderr'), /did not answer the runner within 500 ms/);
    assert.match(r.stream('stderr'), RESET_NOTE);
  });
});
