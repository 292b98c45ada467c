// A worker blocked in a system call (readFileSync on a FIFO nobody writes to) cannot be
// terminated: terminate() lands only in JavaScript, so its thread and memory stay after every
// timeout until the container's memory limit ends the session. The runner says so on the exec
// that hit it and ends itself at STUCK_WORKER_LIMIT (3).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RunnerContainer } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Runs `code`, which writes a line and then blocks, and interrupts it once the line is out.
async function blockAndInterrupt(client, code) {
  const id = client.startExec(`console.log('blocking'); ${code}`);
  await client.expect('output');
  client.send({ type: 'interrupt', id });
  const r = await client.finishExec(id);
  assert.equal(r.status, 'interrupted');
  assert.equal(r.done.namespace_reset, true);
  return r;
}

describe('javascript runner: workers stuck in a system call', () => {
  let runner;
  let client;
  before(async () => {
    runner = await RunnerContainer.start();
    [client] = await runner.connect();
  });
  after(() => runner && runner.stop());

  it('frees a worker waiting for a child process by killing the child: not stuck', async () => {
    const r = await blockAndInterrupt(client, "require('child_process').execSync('sleep 1000')");
    assert.doesNotMatch(r.stream('stderr'), /did not exit/);
    assert.equal((await client.exec('1 + 1')).result, '2');
  });

  it('says so when a terminated worker stays stuck, and ends the runner at the limit', async () => {
    const fifo = (n) => `require('child_process').execSync('mkfifo /tmp/stuck-${n}'); ` +
      `require('fs').readFileSync('/tmp/stuck-${n}')`;
    const stuckNow = async (n, count) => {
      const r = await blockAndInterrupt(client, fifo(n));
      assert.match(r.stream('stderr'), new RegExp('the worker did not exit within 500 ms of being ' +
        `terminated .*; ${count} such workers? (is|are) stuck now, and at 3 the runner ends`));
      assert.equal((await client.exec('1 + 1')).result, '2', 'the next exec still runs');
    };
    await stuckNow(1, 1);
    await stuckNow(2, 2);
    // a writer frees the first one: it exits at last and no longer counts
    await client.exec("require('fs').writeFileSync('/tmp/stuck-1', 'x')");
    await sleep(300);
    await stuckNow(3, 2);
    const last = await blockAndInterrupt(client, fifo(4));
    assert.match(last.stream('stderr'), /3 such workers are stuck now, the limit: the runner ends/);
    assert.ok(await client.atEof(5000), 'the runner closes the connection');
    for (let i = 0; i < 100 && runner.exited === null; i++) await sleep(50);
    assert.equal(runner.exited, 143, 'the runner ended itself with SIGTERM');
  });
});
