// Interrupts (an awaiting cell keeps the namespace; a synchronous loop costs it, and says
// so), queued execs, connection loss, and a heap blow-up that ends only the namespace.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOG, RunnerContainer, textResult } from './harness.mjs';

describe('javascript runner: interrupts and limits', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start({ extraArgs: ['--heap-mb', '64'] });
    [client] = await runner.connect();
    await client.setCatalog(CATALOG);
  });
  after(() => runner && runner.stop());

  it('interrupts a cell awaiting a promise and keeps the namespace', async () => {
    await client.exec('const kept = 7');
    const id = client.startExec('console.log("waiting"); await new Promise(() => {})');
    // Interrupted once it runs: its output has come.
    assert.deepEqual((await client.expect('output')).chunks, [['stdout', 'waiting\n']]);
    client.send({ type: 'interrupt', id });
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    assert.doesNotMatch(r.stream('stderr'), /reset/);
    assert.equal((await client.exec('kept')).result, '7');
  });

  it('interrupts a cell waiting for a tool result and rejects the call', async () => {
    const id = client.startExec('globalThis.p = mcp_everything.echo({ message: "x" }).catch((e) => e.message);' +
      ' await p; await new Promise(() => {})');
    const call = await client.expect('tool_call');
    client.send({ type: 'interrupt', id });
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    client.send({ type: 'tool_result', call_id: call.call_id, ok: true, result: textResult('1') });
    assert.equal((await client.exec('await p')).result,
      "'everything.echo: the execution ended before the tool result arrived'");
  });

  it('keeps the namespace of a cell that reaches an await within a second of the interrupt', async () => {
    // A worker that answers late (busy, or not scheduled on a loaded machine) is not
    // terminated before INTERRUPT_GRACE_MS (1 s).
    await client.exec('const stays = 8');
    const id = client.startExec('console.log("busy"); const until = Date.now() + 400; ' +
      'while (Date.now() < until) {} await new Promise(() => {})');
    await client.expect('output');
    client.send({ type: 'interrupt', id });
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    assert.doesNotMatch(r.stream('stderr'), /reset/);
    assert.equal((await client.exec('stays')).result, '8');
  });

  it('stops while(true){} by terminating the worker, and says the namespace was reset', async () => {
    await client.exec('const lost = 1');
    const id = client.startExec('console.log("spinning"); while (true) {}');
    await client.expect('output');
    client.send({ type: 'interrupt', id });
    const started = Date.now();
    const r = await client.finishExec(id);
    assert.equal(r.status, 'interrupted');
    assert.ok(Date.now() - started < 3000);
    assert.match(r.stream('stderr'), /namespace was reset and every variable and function defined so far is lost/);
    const after = await client.exec('typeof lost');
    assert.equal(after.result, "'undefined'");
    const tools = await client.exec('typeof mcp_everything.echo');
    assert.equal(tools.result, "'function'", 'the catalog is applied to the new namespace');
    const [, ready] = await runner.connect();
    assert.equal(ready.execs, 2, 'execs count since the reset');
    [client] = [runner.clients[runner.clients.length - 1]];
  });

  it('ends a queued exec at once when it is interrupted', async () => {
    const running = client.startExec('await new Promise((r) => setTimeout(r, 300)); 1');
    const queued = client.startExec('globalThis.ranQueued = true');
    client.send({ type: 'interrupt', id: queued });
    const first = await client.finishExec(running);
    assert.equal(first.status, 'ok');
    const second = await client.finishExec(queued);
    assert.equal(second.status, 'interrupted');
    assert.equal((await client.exec('typeof ranQueued')).result, "'undefined'");
  });

  it('ignores an interrupt for another id', async () => {
    const id = client.startExec('await new Promise((r) => setTimeout(r, 100)); "done"');
    client.send({ type: 'interrupt', id: id + 50 });
    assert.equal((await client.finishExec(id)).status, 'ok');
  });

  it('interrupts the exec of a lost connection and sends nothing of it to the next', async () => {
    const id = client.startExec('console.log("old"); await new Promise(() => {})');
    await client.expect('output');
    client.close();
    const [next, ready] = await runner.connect();
    client = next;
    assert.equal(ready.type, 'ready');
    const r = await client.exec('"fresh"');
    assert.equal(r.result, "'fresh'");
    assert.ok(r.frames.every((f) => f.id !== id));
  });

  it('a heap blow-up ends only the namespace', async () => {
    await client.exec('const before = 1');
    const r = await client.exec('const hog = []; while (true) hog.push(new Array(1e5).fill(Math.random()))',
      { timeout: 30000 });
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'OutOfMemoryError');
    assert.match(r.stream('stderr'), /heap limit \(64 MiB\).*namespace was reset/);
    assert.equal((await client.exec('typeof before')).result, "'undefined'");
    assert.equal((await client.exec('1 + 1')).result, '2');
  });
});
