'use strict';
// The idle watchdog: while no exec runs, the main thread pings the worker every
// WATCHDOG_PING_MS (or every `boundMs`, when that is shorter); a worker that does not answer
// within `boundMs` (the runner's --idle-watchdog-ms) is stuck in code the last cell left
// running in the background: a synchronous loop in a timer, or an endless chain of promise
// callbacks (`function f() { Promise.resolve().then(f) } f()`) that never lets its event loop
// turn. It would hold the session's CPU quota while the session is idle and make the next exec
// wait for its timeout; the runner replaces it instead. Background code that yields (timers,
// setInterval, I/O) answers the pings between its callbacks and keeps running.

const { WATCHDOG_PING_MS } = require('./common');

class IdleWatchdog {
  // onStuck(ns): `ns` did not answer a ping within `boundMs`. boundMs 0: no watchdog.
  constructor(boundMs, onStuck) {
    this.boundMs = boundMs;
    this.intervalMs = Math.min(WATCHDOG_PING_MS, boundMs);
    this.onStuck = onStuck;
    this.ns = null;               // the namespace watched (idle), or null
    this.timer = null;            // the next ping, or the deadline of the awaited pong
    this.seq = 0;
    this.awaiting = 0;            // the ping whose pong is awaited; 0: none
  }

  // Watch the idle namespace `ns`; nothing changes when it is watched already.
  watch(ns) {
    if (!this.boundMs || this.ns === ns) return;
    this.stop();
    this.ns = ns;
    this.schedule(() => this.ping(), this.intervalMs);
  }

  // An exec starts, or the namespace goes: no pings, and a pong still on its way is ignored.
  stop() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ns = null;
    this.awaiting = 0;
  }

  pong(ns, n) {
    if (ns !== this.ns || n !== this.awaiting) return;
    clearTimeout(this.timer);
    this.awaiting = 0;
    this.schedule(() => this.ping(), this.intervalMs);
  }

  ping() {
    const ns = this.ns;
    this.awaiting = ++this.seq;
    ns.post({ t: 'ping', n: this.awaiting });
    this.schedule(() => {
      this.stop();
      this.onStuck(ns);
    }, this.boundMs);
  }

  schedule(fn, ms) {
    this.timer = setTimeout(fn, ms);
    this.timer.unref();
  }
}

module.exports = { IdleWatchdog };
