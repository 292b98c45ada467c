'use strict';
// The runner's main thread: accepts sandboxd's connections, dispatches their frames, runs
// execs one at a time in the namespace (namespace.js), interrupts them (terminating the
// worker when an interrupt cannot land within INTERRUPT_GRACE_MS; the idle watchdog of
// watchdog.js replaces one that is stuck while no exec runs), and serves file frames
// (files.js). It never runs user code and shares no globals with the worker.

const { RUNNER_VERSION, DEFAULT_TOOL_CALLS_IN_FLIGHT, INTERRUPT_GRACE_MS, CELL_PREFIX, log, cap,
  ERROR_MESSAGE_LIMIT, WORKER_EXIT_WAIT_MS, STUCK_WORKER_LIMIT, verdictTimeout,
  clearVerdictTimeout } = require('./common');
const { ProtocolError, frameField } = require('./protocol');
const { parseCatalog } = require('./catalog');
const { Connection } = require('./connection');
const { Namespace } = require('./namespace');
const { PythonNamespace } = require('./namespace_python');
const { SNAPSHOT_REFUSED_EXIT } = require('./python_files');
const { OutputBatcher } = require('./output');
const { ToolCalls, ExecCalls } = require('./tool_calls');
const { FileTransfers, FILE_FRAMES, checkFileFrame } = require('./files');
const { IdleWatchdog } = require('./watchdog');
const { proxyEnvironment } = require('./egress');
const fs = require('fs');
const { MessageChannel } = require('worker_threads');

// How long a reset waits for the old worker to reap the processes it had started.
const REAP_WAIT_MS = 1000;
// A worker that ends before it is ready is started again after START_RETRY_MS, then twice
// that; the third such end in a row ends the runner (a start costs seconds of CPU, and one
// that fails for good, such as a file it needs being gone, would fail forever).
const START_ATTEMPTS = 3;
const START_RETRY_MS = 1000;

class Runner {
  constructor(options) {
    this.bundle = options.bundle;
    this.heapMb = options.heapMb;
    this.ownPidNamespace = options.ownPidNamespace;
    this.env = options.env;       // user code's process.env / os.environ (main.js)
    this.token = options.token || null;  // sandboxd's token for this runner, in every ready
    // The EgressRelay (egress.js) when the runner listens on a path or has --egress-fd;
    // null: no egress.
    this.egress = options.egress || null;
    this.egressOn = false;
    this.egressPort = null;       // the relay's port once egress is on (null: over ports)
    this.egressChannel = null;    // the current namespace's egress port (egress_channel.js)
    // Python in Pyodide (python_files.js's files) instead of JavaScript; null: JavaScript.
    this.python = options.python || null;
    this.pythonVersion = this.python ? this.python.version : '';  // the worker's ready confirms
    this.workerName = this.python ? 'Python (Pyodide) worker' : 'JavaScript worker';
    this.conn = null;
    this.queue = [];              // {conn, frame}: exec, reset, set_catalog, in order
    this.early = new Set();       // queued exec frames an interrupt already ended
    this.current = null;          // the running exec
    this.catalog = [];
    this.catalogRaw = { servers: [] };  // as set_catalog sent it (the Python side parses it)
    this.execs = 0;               // execs in this namespace (ready.execs)
    this.cells = 0;               // cell file names: <cell-1>, <cell-2>, ...
    this.output = new OutputBatcher();
    this.calls = new ToolCalls(Boolean(this.python));
    this.files = new FileTransfers(options.workspace);
    this.ns = null;
    this.nsReady = false;
    this.pendingReset = null;     // why the namespace was replaced while no exec ran
    this.stuckWorkers = new Set();  // terminated namespaces whose worker has not exited
    this.startFailures = 0;         // workers in a row that ended before they were ready
    this.watchdog = new IdleWatchdog(options.idleWatchdogMs || 0, (ns) => this.onStuck(ns));
    // Settles when the first namespace is ready: main.js listens after it (or a bound), so
    // a pooled container sandboxd has connected to is ready to run at once.
    this.firstReady = new Promise((resolve) => { this.onFirstReady = resolve; });
    this.newNamespace();
  }

  // -- namespace ---------------------------------------------------------------------

  newNamespace() {
    if (this.ns) this.ns.end();
    this.watchdog.stop();
    this.nsReady = false;
    this.execs = 0;
    const handlers = {
      ready: (m) => {
        if (this.python) this.pythonVersion = m.python;
        ns.post({ t: 'catalog', servers: this.catalog, raw: this.catalogRaw });
        this.nsReady = true;
        this.startFailures = 0;
        this.onFirstReady();
        this.pump();
      },
      out: (stream, text) => this.output.add(stream, text),
      call: (m) => this.onCall(m),
      done: (m) => this.onDone(m),
      pong: (n) => this.watchdog.pong(ns, n),
      lost: (reason, oom) => this.onNamespaceLost(reason, oom),
      display: (bundle) => this.output.display(bundle),
      refused: (message) => {     // a snapshot of other runner files: no session can start
        process.stderr.write(`${message}\n`);
        process.exit(SNAPSHOT_REFUSED_EXIT);
      },
    };
    const ns = this.python ?
      new PythonNamespace(this.bundle, this.heapMb, handlers, this.python, this.env) :
      new Namespace(this.bundle, this.heapMb, handlers, this.workerData(), this.env);
    this.ns = ns;
    if (this.egressOn && this.egressPort === null) this.giveEgressChannel(ns);
  }

  // What a JavaScript worker gets in workerData: its role, and the relay's port once egress
  // is on (the worker installs fetch() through it before it says ready).
  workerData() {
    const data = { sandboxRole: 'worker' };
    if (this.egressPort !== null) data.egressPort = this.egressPort;
    return data;
  }

  // The `egress` frame: answered as soon as the relay is on, whatever runs. Every later
  // worker gets fetch() through the relay, and so does the running one, before any exec sent
  // after the answer (its port carries messages in order): through the relay's loopback port
  // and the proxy variables, or (a relay on --egress-fd, whose process has no sockets) over an
  // egress port of its own.
  turnOnEgress(conn, id) {
    if (!this.egress) {
      conn.send({ type: 'egress_on', id, error: 'this runner has no egress relay (it was ' +
        'given a listening descriptor, not a socket directory, and no --egress-fd)' });
      return;
    }
    this.egress.turnOn().then((port) => {
      if (!this.egressOn) {
        this.egressOn = true;
        this.egressPort = port;
        if (port !== null) {
          Object.assign(this.env, proxyEnvironment(port));
          this.ns.post({ t: 'egress', port, env: proxyEnvironment(port) });
        } else {
          this.giveEgressChannel(this.ns);
        }
      }
      conn.send(port === null ? { type: 'egress_on', id } : { type: 'egress_on', id, port });
    }, (e) => conn.send({ type: 'egress_on', id, error: e.message }));
  }

  // A new egress port for namespace `ns`; the previous namespace's streams are cut.
  giveEgressChannel(ns) {
    const { port1, port2 } = new MessageChannel();
    if (this.egressChannel) this.egressChannel.close();
    this.egressChannel = this.egress.serve(port1);
    ns.post({ t: 'egress', channel: port2 }, [port2]);
  }

  // A fresh namespace in place of the one that ran user code, and with it every process that
  // code started (a reset is a process reset too, as a reset frame is). `idleWhy`: it is
  // replaced while no exec runs (background code, the worker exiting, a stray message), so
  // the next exec says so. `then(stuckNote)` runs once the old worker is gone (or stuck, which
  // `stuckNote` then says) and the new one starts; nothing runs in between (nsReady is false).
  replaceNamespace(idleWhy, then = () => {}) {
    const report = Boolean(idleWhy) && this.execs > 0;
    this.nsReady = false;
    this.watchdog.stop();
    this.retireNamespace().then((stuckNote) => {
      if (report) this.pendingReset = stuckNote ? `${idleWhy}; ${stuckNote}` : idleWhy;
      const ending = this.stuckWorkers.size >= STUCK_WORKER_LIMIT;
      if (!ending) this.newNamespace();
      then(stuckNote);
      if (ending) this.endRunner(`${this.stuckWorkers.size} terminated workers are stuck`);
    });
  }

  // Ends the namespace's worker and every process its code started: they are killed first
  // (which also frees a worker waiting for one, as in execSync), and again once the worker has
  // exited, since until then its background code could start more. Resolves
  // with null, or with a note for the user when the worker has not exited within
  // WORKER_EXIT_WAIT_MS.
  async retireNamespace() {
    const old = this.ns;
    if (this.ownPidNamespace) killOtherProcesses();
    const exited = await old.end(WORKER_EXIT_WAIT_MS);
    if (this.ownPidNamespace) killOtherProcesses();
    if (exited) return null;
    this.stuckWorkers.add(old);
    log(`a terminated worker did not exit within ${WORKER_EXIT_WAIT_MS} ms ` +
      `(${this.stuckWorkers.size} stuck)`);
    old.exited.then(() => {
      this.stuckWorkers.delete(old);
      log(`a stuck worker exited (${this.stuckWorkers.size} stuck)`);
    });
    return stuckWorkerNote(this.stuckWorkers.size);
  }

  // Ends the runner for good, which sandboxd reports as the session lost ("the container
  // exited with code 143"). process.exit() would wait for the stuck worker threads, which never
  // end, so the runner ends itself with SIGTERM (no handler: the kernel ends the process) once
  // its last frames are out, or after a second.
  endRunner(reason) {
    log(`ending the runner: ${reason}`);
    const kill = () => process.kill(process.pid, 'SIGTERM');
    setTimeout(kill, 1000);
    if (this.conn && this.conn.alive) this.conn.socket.end(kill);
    else kill();
  }

  // The idle watchdog's verdict: `ns` did not answer while no exec ran.
  onStuck(ns) {
    if (ns !== this.ns || this.current || !this.nsReady) return;
    const bound = this.watchdog.boundMs;
    log(`the idle namespace did not answer within ${bound} ms; terminating the worker`);
    this.replaceNamespace(`code left running in the background kept the ${this.workerName} busy ` +
      `(it did not answer the runner within ${bound} ms while no execution was running: a ` +
      'synchronous loop, or an endless chain of promise callbacks), so the worker was terminated');
  }

  onNamespaceLost(reason, outOfMemory) {
    log(`namespace lost: ${reason}`);
    const cur = this.current;
    if (!this.nsReady) {                       // it died starting: do not spin
      this.startFailures++;
      if (this.startFailures >= START_ATTEMPTS) {
        this.endRunner(`the ${this.workerName} failed to start ${START_ATTEMPTS} times in a row ` +
          `(the last time: ${reason})`);
      } else {
        setTimeout(() => this.newNamespace(), START_RETRY_MS * this.startFailures);
      }
      return;
    }
    const why = outOfMemory ? `the JavaScript heap limit (${this.heapMb} MiB) was reached` : reason;
    if (!cur) {
      this.replaceNamespace(why);
      return;
    }
    this.replaceNamespace(null, (stuckNote) => {
      if (this.current !== cur) return;
      const stuck = stuckNote ? `; ${stuckNote}` : '';
      this.output.note('stderr', `\n[${why}: the namespace was reset; every variable and ` +
        `function defined so far is lost${stuck}]\n`);
      this.finishExec(cur, 'error', null, {
        type: outOfMemory ? 'OutOfMemoryError' : 'RunnerError',
        message: cap(`${why}; the namespace was reset${stuck}`, ERROR_MESSAGE_LIMIT), traceback: '' },
      null, true);
    });
  }

  // -- execs ---------------------------------------------------------------------------

  // A set_catalog at the head of the queue is answered while the namespace still starts
  // (it gets the catalog once ready): CreateSession sends one and waits for its answer, and a
  // pooled container taken soon after its start waited for the worker (about 20 ms under
  // gVisor).
  pump() {
    while (!this.current && this.queue.length &&
           (this.nsReady || this.queue[0].frame.type === 'set_catalog')) {
      const { conn, frame } = this.queue.shift();
      if (!conn.alive) continue;
      if (frame.type === 'exec') this.startExec(conn, frame);
      else if (frame.type === 'reset') this.resetFrame(conn, frame); else if (frame.type === 'set_catalog') {
        this.catalog = frame.servers;
        this.catalogRaw = frame.raw;
        if (this.nsReady) this.ns.post({ t: 'catalog', servers: frame.servers, raw: frame.raw });
        conn.send({ type: 'catalog_set', id: frame.id });
      }
    }
    if (!this.current && this.nsReady) this.watchdog.watch(this.ns);
    else this.watchdog.stop();
  }

  // A reset frame: the old worker, idle, first reaps the processes its code started as they
  // die (Node cannot wait for a child it no longer tracks: killed after the worker, they
  // stayed zombies holding the pids limit, and a session that had used it up could not
  // start its new worker). Then replaceNamespace ends the worker and kills what it started
  // in the meantime. Nothing else runs meanwhile (nsReady is false).
  resetFrame(conn, frame) {
    const done = () => this.replaceNamespace(null, () => {
      this.pendingReset = null;                 // a fresh namespace is what was asked for
      conn.send({ type: 'reset_done', id: frame.id });
      this.pump();
    });
    if (!this.ownPidNamespace) return done();
    killOtherProcesses();
    this.nsReady = false;
    const deadline = Date.now() + REAP_WAIT_MS;
    const poll = () => (!hasChildren() || Date.now() > deadline ? done() : setTimeout(poll, 10));
    poll();
  }

  startExec(conn, frame) {
    const limit = frame.max_tool_calls_in_flight === undefined ?
      DEFAULT_TOOL_CALLS_IN_FLIGHT : frame.max_tool_calls_in_flight;
    const cur = { id: frame.id, conn, calls: new ExecCalls(frame.id, conn, limit), timer: null,
      interrupted: false, namespaceReset: false };
    if (this.early.delete(frame)) {
      conn.send(doneFrame(cur.id, 'interrupted', null, this.interruptedError(), null));
      return;
    }
    this.current = cur;
    this.execs++;
    this.output.begin((f) => conn.send(f), cur.id, frame.max_output_bytes,
      frame.max_display_bytes || 0);
    if (this.pendingReset) this.reportPendingReset(cur);
    const filename = `${CELL_PREFIX}${++this.cells}>`;
    if (this.python) {
      this.ns.post({ t: 'exec', id: cur.id, code: frame.code, filename,
        maxOut: frame.max_output_bytes, maxDisplay: frame.max_display_bytes || 0 });
      return;
    }
    // Required here: a Python session has no acorn (transform.js parses JavaScript with it).
    const { transformCell, transformErrorReport } = require('./transform');
    let code;
    try {
      code = transformCell(frame.code);
    } catch (e) {                 // whatever it is, it ends only this exec
      this.finishExec(cur, 'error', null, transformErrorReport(e, frame.code, filename), null);
      return;
    }
    this.ns.post({ t: 'exec', id: cur.id, code, filename, maxOut: frame.max_output_bytes });
  }

  // The namespace was replaced since the last exec: this exec's done says so, as after a
  // timeout, and its stderr says why.
  reportPendingReset(cur) {
    cur.namespaceReset = true;
    this.output.note('stderr', `[${this.pendingReset}: the namespace was reset since the ` +
      'last execution; every variable and function defined so far is lost]\n');
    this.output.flush();
    this.pendingReset = null;
  }

  onCall(m) {
    const cur = this.current;
    if (!cur) return;             // a call after done: its promise was already rejected
    const ns = this.ns;
    this.calls.submit(cur.calls, m, (k, result) => ns.post({ t: 'result', k, ...result }),
      () => this.output.flush());
  }

  onDone(m) {
    const cur = this.current;
    if (!cur || m.id !== cur.id) {
      this.ns.lose(`the worker reported the end of exec ${m.id}, which is not running`, false);
      return;
    }
    const status = cur.interrupted && m.status === 'interrupted' ? 'interrupted' :
      (m.status === 'interrupted' ? 'error' : m.status);
    this.finishExec(cur, status, m.result, m.error, m);
  }

  // `namespaceReset`: the namespace was replaced during this exec (done says so).
  finishExec(cur, status, result, error, counts, namespaceReset = false) {
    clearVerdictTimeout(cur.timer);
    const own = this.output.finish();
    this.calls.close(cur.calls, 'the execution ended before the tool result arrived');
    this.current = null;
    const reset = namespaceReset || cur.namespaceReset;
    if (!cur.conn.send(doneFrame(cur.id, status, result, error, counts, own, reset)) &&
        reset) {                  // nobody heard of it: the next exec (a new connection's) says so
      this.pendingReset = 'the namespace was replaced during an execution whose connection ' +
        'was lost';
    }
    this.pump();
  }

  interrupt(conn, id) {
    const cur = this.current;
    if (!cur || cur.conn !== conn || cur.id !== id) {
      const queued = this.queue.find((q) => q.conn === conn && q.frame.type === 'exec' &&
        q.frame.id === id);
      if (queued) this.early.add(queued.frame);
      return;
    }
    if (cur.interrupted) return;
    cur.interrupted = true;
    this.ns.post({ t: 'interrupt', id });
    cur.timer = verdictTimeout(() => this.interruptByTermination(cur), INTERRUPT_GRACE_MS);
  }

  // The worker did not answer an interrupt in time (a synchronous loop): it is terminated
  // and everything the namespace held is lost.
  interruptByTermination(cur) {
    if (this.current !== cur) return;
    log(`exec ${cur.id} did not stop within ${INTERRUPT_GRACE_MS} ms; terminating the worker`);
    this.replaceNamespace(null, (stuckNote) => {
      if (this.current !== cur) return;
      this.output.note('stderr', `\n[the code did not stop within ${INTERRUPT_GRACE_MS} ms of ` +
        `the interrupt (a synchronous loop or a blocking call?), so the ${this.workerName} was ` +
        'terminated: the namespace was reset and every variable and function defined so far ' +
        `is lost${stuckNote ? `; ${stuckNote}` : ''}]\n`);
      this.finishExec(cur, 'interrupted', null, this.interruptedError(), null, true);
    });
  }

  // What a Python session's interrupted cell reports is Python's KeyboardInterrupt.
  interruptedError() {
    return { type: this.python ? 'KeyboardInterrupt' : 'InterruptedError',
      message: 'execution interrupted', traceback: '' };
  }

  // -- connections ---------------------------------------------------------------------

  accept(socket) {
    const conn = new Connection(socket, (c, f) => this.dispatch(c, f), (c) => this.lost(c));
    const old = this.conn;
    this.conn = conn;
    if (old) old.close();
    const ready = this.python ?
      { type: 'ready', runner_version: RUNNER_VERSION, python: this.pythonVersion,
        pid: process.pid, execs: this.execs } :
      { type: 'ready', runner_version: RUNNER_VERSION, runtime: 'javascript',
        node: process.version, pid: process.pid, execs: this.execs };
    if (this.token) ready.token = this.token;
    conn.send(ready);
  }

  lost(conn) {
    if (this.conn === conn) this.conn = null;
    this.queue = this.queue.filter((q) => q.conn !== conn);
    this.files.connectionLost(conn);
    const cur = this.current;
    if (cur && cur.conn === conn) {
      this.calls.close(cur.calls, 'sandboxd connection lost');
      this.interrupt(conn, cur.id);
    }
  }

  dispatch(conn, frame) {
    const kind = frame.type;
    if (kind === 'ping') conn.send({ type: 'pong', id: frameField(frame, 'id', 'int') });
    else if (kind === 'tool_result') {
      frameField(frame, 'call_id', 'str');
      frameField(frame, 'ok', 'bool');
      this.calls.resolve(conn, frame);
    } else if (kind === 'interrupt') this.interrupt(conn, frameField(frame, 'id', 'int'));
    else if (kind === 'exec') this.enqueue(conn, checkExec(frame));
    else if (kind === 'egress') this.turnOnEgress(conn, frameField(frame, 'id', 'int'));
    else if (kind === 'reset') {
      frameField(frame, 'id', 'int');
      this.enqueue(conn, frame);
    } else if (kind === 'set_catalog') {
      frameField(frame, 'id', 'int');
      const servers = parseCatalog(frameField(frame, 'catalog', 'object'));
      this.enqueue(conn, { type: 'set_catalog', id: frame.id, servers, raw: frame.catalog });
    } else if (FILE_FRAMES[kind]) this.files.submit(conn, checkFileFrame(frame));
    else log(`ignoring unknown frame type ${JSON.stringify(kind).slice(0, 80)}`);
  }

  enqueue(conn, frame) {
    this.queue.push({ conn, frame });
    this.pump();
  }
}

function checkExec(frame) {
  frameField(frame, 'id', 'int');
  frameField(frame, 'code', 'str');
  if (frameField(frame, 'max_output_bytes', 'int') < 0) {
    throw new ProtocolError('exec.max_output_bytes must not be negative');
  }
  if ('max_display_bytes' in frame && frameField(frame, 'max_display_bytes', 'int') < 0) {
    throw new ProtocolError('exec.max_display_bytes must not be negative');
  }
  if ('max_tool_calls_in_flight' in frame &&
      frameField(frame, 'max_tool_calls_in_flight', 'int') < 1) {
    throw new ProtocolError('exec.max_tool_calls_in_flight must be at least 1');
  }
  return frame;
}

// What the user is told when a terminated worker stays stuck (`count` are now).
function stuckWorkerNote(count) {
  const text = `the worker did not exit within ${WORKER_EXIT_WAIT_MS} ms of being terminated ` +
    '(it is blocked in a system call, such as reading a FIFO that nobody writes to), so its ' +
    `thread and memory stay; ${count} such worker${count === 1 ? ' is' : 's are'} stuck now`;
  return count >= STUCK_WORKER_LIMIT ? `${text}, the limit: the runner ends and the session is lost` :
    `${text}, and at ${STUCK_WORKER_LIMIT} the runner ends and the session is lost`;
}

const NO_OWN_COUNTS = { bytes: 0, dropped: 0, displaysDropped: 0 };

// `counts`: the worker's done message (or null); `own`: the main thread's output counts.
function doneFrame(id, status, result, error, counts, own = NO_OWN_COUNTS, namespaceReset = false) {
  const c = counts || {};
  const frame = { type: 'done', id, status, result, error,
    output_bytes: Math.max(c.outputBytes || 0, own.bytes + own.dropped),
    dropped_bytes: (c.droppedBytes || 0) + own.dropped, displays: c.displays || 0,
    displays_dropped: (c.displaysDropped || 0) + own.displaysDropped };
  if (namespaceReset) frame.namespace_reset = true;
  return frame;
}

// Whether a process of ours is still there, dead or alive (/proc lists processes; the
// worker threads are tasks of this one).
function hasChildren() {
  const me = String(process.pid);
  let names;
  try {
    names = fs.readdirSync('/proc');
  } catch (e) {
    return false;
  }
  return names.some((name) => {
    if (!/^\d+$/.test(name) || name === me) return false;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] === me;
    } catch (e) {
      return false;
    }
  });
}

// End every other process of this PID namespace (what user code left running); only with
// --own-pid-namespace, i.e. in a container of our own (sandboxd starts it with podman's
// --init, so pid 1 is catatonit). kill(-1) signals every process we may signal but init and
// us; worker threads are threads of this process, so they are not hit. The children the old
// worker spawned itself stay zombies until the session ends (node cannot waitpid(-1)); what
// they spawned is reparented to init, which reaps it.
function killOtherProcesses() {
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(-1, 'SIGKILL');
    } catch (e) {
      return;                     // ESRCH: nobody else is left
    }
  }
}

module.exports = { Runner };
