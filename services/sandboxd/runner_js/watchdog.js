'use strict';
// The idle watchdog: while no exec runs, the main thread pings the worker every
// WATCHDOG_PING_MS (or every `boundMs`, when that is shorter); a worker that does not answer
// within `boundMs` (the runner's --idle-watchdog-ms) is stuck in code the last cell left
// running in the background: a synchronous loop in a timer, or an endless chain of promise
// callbacks (`function f() { Promise.resolve().then(f) } f()`) that never lets its event loop
// turn. It would hold the session's CPU quota while the session is idle and make the next exec
// wait for its timeout; the runner replaces it instead. Background code that yields (timers,
// setInterval, I/O) answers the pings between its callbacks and keeps running.

const { WATCHDOG_PING_MS, verdictTimeout, clearVerdictTimeout } = require('./common');

class IdleWatchdog {
  // onStuck(ns): `ns` did not answer a ping within `boundMs`. boundMs 0: no watchdog.
  constructor(boundMs, onStuck) {
    this.boundMs = boundMs;
    this.intervalMs = Math.min(WATCHDOG_PING_MS, boundMs);
    this.onStuck = onStuck;
    this.ns = null;               // the namespace watched (idle), or null
    this.nextPing = null;         // the timer of the next ping, or null
    this.deadline = null;         // the awaited pong's (a verdictTimeout: time in which the
                                  // runner did not run is not held against the worker)
    this.seq = 0;
    this.awaiting = 0;            // the ping whose pong is awaited; 0: none
  }

  // Watch the idle namespace `ns`; nothing changes when it is watched already.
  watch(ns) {
    if (!this.boundMs || this.ns === ns) return;
    this.stop();
    this.ns = ns;
    this.schedulePing();
  }

  // An exec starts, or the namespace goes: no pings, and a pong still on its way is ignored.
  stop() {
    clearTimeout(this.nextPing);
    clearVerdictTimeout(this.deadline);
    this.nextPing = null;
    this.deadline = null;
    this.ns = null;
    this.awaiting = 0;
  }

  pong(ns, n) {
    if (ns !== this.ns || n !== this.awaiting) return;
    clearVerdictTimeout(this.deadline);
    this.deadline = null;
    this.awaiting = 0;
    this.schedulePing();
  }

  ping() {
    const ns = this.ns;
    this.nextPing = null;
    this.awaiting = ++this.seq;
    ns.post({ t: 'ping', n: this.awaiting });
    this.deadline = verdictTimeout(() => {
      this.stop();
      this.onStuck(ns);
    }, this.boundMs, { unref: true });
  }

  schedulePing() {
    this.nextPing = setTimeout(() => this.ping(), this.intervalMs);
    this.nextPing.unref();
  }
}

module.exports = { IdleWatchdog };
