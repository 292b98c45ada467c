// The idle watchdog's verdict (watchdog.js) on time the runner itself did not run: a deadline
// that fires late finds the worker's pong still behind it in the event loop, as it is when
// the wasm tier's CPU limit stopped the runner with SIGSTOP and a loaded machine schedules
// the main thread first once it runs again. Here the main thread is held by a synchronous
// wait, which delays its timers the same way; no runner process is needed.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { IdleWatchdog } = require('../../../services/sandboxd/runner_js/watchdog.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(cond, ms = 10000) {
  for (const end = Date.now() + ms; !cond() && Date.now() < end;) await sleep(20);
}
const hold = (ms) => {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* the runner does not run */ }
};

// A namespace whose worker answers each ping on the next turn of the event loop, after the
// main thread was held for `holdMs` (0: answers at once); `answers` false: never answers.
function fakeNamespace(watchdog, { holdMs = 0, answers = true } = {}) {
  const ns = {
    pings: 0,
    post(m) {
      ns.pings++;
      if (!answers) return;
      setImmediate(() => {
        if (holdMs) hold(holdMs);
        setImmediate(() => watchdog.pong(ns, m.n));
      });
    },
  };
  return ns;
}

describe('javascript runner: the idle watchdog\'s deadline', () => {
  it('does not judge a worker by time in which the runner did not run', async () => {
    const stuck = [];
    const watchdog = new IdleWatchdog(300, (ns) => stuck.push(ns));
    const ns = fakeNamespace(watchdog, { holdMs: 1000 });
    watchdog.watch(ns);
    await sleep(1800);
    watchdog.stop();
    assert.ok(ns.pings >= 2, `pinged ${ns.pings} times`);
    assert.equal(stuck.length, 0, 'the worker was judged stuck while the runner was held');
  });

  it('still replaces a worker that does not answer', async () => {
    const stuck = [];
    const watchdog = new IdleWatchdog(300, (ns) => stuck.push(ns));
    const ns = fakeNamespace(watchdog, { answers: false });
    watchdog.watch(ns);
    await until(() => stuck.length > 0);
    watchdog.stop();
    assert.deepEqual(stuck, [ns]);
  });

  it('replaces a worker that never answers, however late the runner is each time', async () => {
    const stuck = [];
    const watchdog = new IdleWatchdog(200, (ns) => stuck.push(ns));
    const ns = fakeNamespace(watchdog, { answers: false });
    const late = setInterval(() => hold(300), 50);  // every deadline fires late
    watchdog.watch(ns);
    await until(() => stuck.length > 0);
    clearInterval(late);
    watchdog.stop();
    assert.deepEqual(stuck, [ns], 'a runner that is always late still judges, after a bound');
  });
});
