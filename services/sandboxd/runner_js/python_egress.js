'use strict';
// Python's own sockets in a wasm session with egress (docs/wasm-tier.md, "Egress"), in the
// Python worker. Pyodide's NodeSockFS gives Python blocking sockets whose system calls
// suspend the cell's stack (JSPI) while a promise settles; it asks a connect function for
// each connection. This one reaches exactly one address, the relay's, which exists only
// here: 127.0.0.1:RELAY_PORT, named by the proxy variables Python's os.environ gets. Each
// connection to it is a stream over the worker's egress port (egress_channel.js), which the
// main thread pairs with a connection of sandboxd's proxy, as the loopback relay does in a
// container; every check is the proxy's. Any other address is refused (ECONNREFUSED), so
// code reaches nothing the proxy does not allow, with or without the variables.
//
// TLS: Pyodide's ssl module has no OpenSSL; its SSLSocket.do_handshake asks NodeSockFS to
// start TLS on the socket, which calls the connection's startTls(). Here that asks the main
// thread to run node:tls on the host connection (egress_tls.js), with the options Python's
// context chose (pyodide_egress.py sets them through startTls() below: server name, trusted
// CAs, whether to verify; python_tls.js), so certificates are checked as CPython's ssl
// checks them; the stream then carries clear text.
//
// A cell blocked in recv(), send(), poll() or a handshake is suspended, and the interrupt
// buffer's SIGINT only runs Python's handler in the host's frames meanwhile: the waits here
// last at most SLICE_MS at a time, and one that finds SIGINT in the buffer returns EINTR, on
// which CPython checks its signals and raises KeyboardInterrupt in the cell. An interrupted
// send() cuts its connection (what it wrote may still go out, and a retry would send it twice).
//
// A socket with a timeout is non-blocking underneath (CPython polls for the event, then
// calls send() or recv()). A non-blocking send() hands up to SEND_BUFFER bytes to the
// connection and returns, as a kernel's socket buffer takes them; the socket is not
// writable again (no POLLOUT, EAGAIN) until the connection has taken that write, so the
// poll before the next send() waits for it within the timeout, and a peer that reads
// nothing ends in TimeoutError. A write that fails after its send() returned fails the
// next send().

const { receiveMessageOnPort } = require('worker_threads');
const { PIECE } = require('./egress_channel');
const { checkOptions, normalizeKey } = require('./python_tls');

const RELAY_HOST = '127.0.0.1';
const RELAY_PORT = 3128;
const NO_PROXY = 'localhost,127.0.0.1,::1';
const SLICE_MS = 20;
// What one non-blocking send() takes at most: Linux's largest TCP send buffer by default.
// sendall() offers the rest again, and the rest is copied out of the heap each time.
const SEND_BUFFER = 4 << 20;
// Messages one recv() takes off the egress port at most, and the least its buffer holds.
const GATHER_MESSAGES = 64;
const GATHER_BUFFER = 256 * 1024;
// Emscripten's system calls answer -errno with WASI's numbers.
const EAGAIN = 6;
const EINTR = 27;
const O_NONBLOCK = 2048;
const POLLIN = 1;
const POLLOUT = 4;
const POLLERR = 8;
const POLLHUP = 16;

// The proxy variables of a Python session on the wasm tier.
function proxyVariables() {
  const url = `http://${RELAY_HOST}:${RELAY_PORT}`;
  return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url,
    NO_PROXY, no_proxy: NO_PROXY };
}

// How `promise` settled ({value} or {error}), waiting SLICE_MS at a time: {interrupted} once
// `signal` holds SIGINT, {timedOut} past `end` (a Date.now() value).
async function waitSliced(promise, signal, end = Infinity) {
  const settled = promise.then((value) => ({ value }), (error) => ({ error }));
  for (;;) {
    let timer;
    const slice = new Promise((resolve) => {
      timer = setTimeout(resolve, Math.max(0, Math.min(SLICE_MS, end - Date.now())), null);
    });
    const outcome = await Promise.race([settled, slice]);
    clearTimeout(timer);
    if (outcome) return outcome;
    if (Atomics.load(signal, 0) !== 0) return { interrupted: true };
    if (Date.now() >= end) return { timedOut: true };
  }
}

// The shape of connection NodeSockFS reads and writes (a WinterCG socket): web streams over
// `duplex`, `opened` once it can carry bytes, `closed` once it is gone. Bytes are read from
// the duplex only when a read asks.
class RelayConnection {
  constructor(duplex, opened) {
    duplex.on('error', () => {});      // a read or write reports it
    this.duplex = duplex;
    this.opened = opened;
    opened.catch(() => {});
    this.closed = new Promise((resolve) => duplex.once('close', () => resolve()));
    this.tlsOptions = null;
    this.abandonRead = null;
    this.readable = new ReadableStream({ pull: (controller) => this.pull(controller),
      cancel: () => {} }, { highWaterMark: 0 });
    this.writable = new WritableStream({
      write: (chunk) => new Promise((resolve, reject) => {
        if (duplex.destroyed || duplex.writableEnded) {
          reject(new Error('EPIPE: the connection is closed'));
          return;
        }
        duplex.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength),
          (e) => (e ? reject(new Error(`EPIPE: ${e.message}`)) : resolve()));
      }),
      close: () => duplex.end(),
      abort: () => duplex.destroy(),
    });
  }

  // The next chunk, or the end.
  async pull(controller) {
    const chunk = await new Promise((resolve, reject) => {
      const duplex = this.duplex;
      const done = (fn, value) => {
        for (const [event, listener] of listeners) duplex.off(event, listener);
        this.abandonRead = null;
        fn(value);
      };
      const cut = () => done(reject, duplex.errored || new Error('ECONNRESET: the connection was cut'));
      const listeners = [
        ['readable', () => {
          const next = duplex.read();
          if (next !== null) done(resolve, next);
        }],
        ['end', () => done(resolve, null)], ['error', cut], ['close', cut],
      ];
      const first = duplex.read();
      if (first !== null) return resolve(first);
      if (duplex.readableEnded) return resolve(null);
      if (duplex.destroyed) return cut();
      for (const [event, listener] of listeners) duplex.on(event, listener);
      this.abandonRead = () => done(resolve, null);
    });
    if (chunk === null) controller.close();
    else controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
  }

  close() {
    this.duplex.destroy();
    return this.closed;
  }

  // TLS on the host side of this connection, with the options startTls() below checked and
  // set: the same stream, in clear once `opened` (the handshake) resolves. `handshake`
  // resolves with the main thread's answer.
  startTls() {
    const handshake = this.duplex.startTls(this.tlsOptions);
    const opened = handshake.then((r) => {
      if (!r.ok) throw new Error(r.message);
      return {};
    });
    const next = new RelayConnection(this.duplex, opened);
    next.handshake = handshake;
    return next;
  }
}

function refusedConnection() {
  const opened = Promise.reject(new Error('ECONNREFUSED'));
  opened.catch(() => {});
  return { opened, closed: Promise.resolve(), readable: null, writable: null,
    close: () => Promise.resolve() };
}

// The one connect function NodeSockFS gets: the relay's address, over `channel`.
function connectThroughRelay(channel) {
  return (address) => {
    if (address === null || typeof address !== 'object' || address.hostname !== RELAY_HOST ||
        address.port !== RELAY_PORT) {
      return refusedConnection();
    }
    const stream = channel.open();
    // The channel refuses an open past its limit on the next tick.
    const opened = new Promise((resolve, reject) => process.nextTick(() =>
      (stream.destroyed ? reject(new Error('ECONNREFUSED')) : resolve({}))));
    return new RelayConnection(stream, opened);
  };
}

// A recv() gets what has arrived, not one piece (NodeSockFS reads one chunk a wait, and a
// wait is a suspension of the cell: 64 of them a MiB). What has arrived may still be queued
// on the egress port, behind the cell's own suspension: up to GATHER_MESSAGES of them are
// taken off it in order (the channel routes each, as its 'message' handler would), then the
// stream's buffered pieces go into the socket's buffer, and several pieces are copied into
// one buffer the socket keeps (Pyodide copies a recv's result into the heap before the
// socket's next recv) rather than into a new one each time.
function gather(c, length) {
  const duplex = c.wcgSocket && c.wcgSocket.duplex;
  if (!duplex || !duplex.channel || c.readPending || !c.reader) return null;
  for (let n = 0; n < GATHER_MESSAGES && c.recvBufferBytes + duplex.readableLength < length; n++) {
    const m = receiveMessageOnPort(duplex.channel.port);
    if (!m) break;
    duplex.channel.onMessage(m.message);
  }
  while (c.recvBufferBytes < length && duplex.readableLength > 0) {
    // A piece as it came (at most PIECE bytes: a read of that length takes it whole).
    const chunk = duplex.read(Math.min(PIECE, duplex.readableLength));
    if (chunk === null) break;
    c.recvBuffer.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
    c.recvBufferBytes += chunk.length;
  }
  if (c.recvBuffer.length < 2) return null;
  const n = Math.min(length, c.recvBufferBytes);
  if (!c.gathered || c.gathered.length < n) c.gathered = new Uint8Array(Math.max(n, GATHER_BUFFER));
  const out = c.gathered.subarray(0, n);
  for (let at = 0; at < n;) {
    const b = c.recvBuffer[0];
    const part = Math.min(b.length, n - at);
    out.set(b.subarray(0, part), at);
    at += part;
    if (part === b.length) c.recvBuffer.shift();
    else c.recvBuffer[0] = b.subarray(part);
  }
  c.recvBufferBytes -= n;
  return out;
}

// NodeSockFS's socket operations with their waits sliced, non-blocking sends and gathered
// receives (see the top). `c.writeInFlight`: the promise of a non-blocking send()'s write until the connection
// has taken it; `c.writeFailed`: the -errno a write failed with after its send() returned.
function interruptible(ops, signal) {
  const wrapped = {
    ...ops,
    poll(c) {
      const events = ops.poll(c);
      return c.writeInFlight ? events & ~POLLOUT : events;
    },
    async pollAsync(c, events, timeout) {
      const ready = () => wrapped.poll(c) & (events | POLLERR | POLLHUP);
      const now = ready();
      if (now || timeout === 0) return now;
      const waits = [ops.pollAsync(c, events & ~POLLOUT, timeout)];
      if (c.writeInFlight && (events & POLLOUT)) waits.push(c.writeInFlight);
      await Promise.race(waits);
      return ready();
    },
    async recvmsgAsync(c, length) {
      if (!(c.stream.flags & O_NONBLOCK)) {
        while (c.reader && !(ops.poll(c) & POLLIN)) {
          if (Atomics.load(signal, 0) !== 0) return -EINTR;
          await ops.pollAsync(c, POLLIN, SLICE_MS);
        }
      }
      return gather(c, length) || ops.recvmsgAsync(c, length);
    },
    async sendmsgAsync(c, data) {
      if (c.writeFailed) return c.writeFailed;
      if (c.stream.flags & O_NONBLOCK) {
        if (c.writeInFlight) return -EAGAIN;
        const taken = data.length > SEND_BUFFER ? data.subarray(0, SEND_BUFFER) : data;
        c.writeInFlight = ops.sendmsgAsync(c, taken).then((n) => {
          if (n < 0) c.writeFailed = n;
          c.writeInFlight = null;
        });
        return taken.length;
      }
      const outcome = await waitSliced(settledWrites(c).then(() => c.writeFailed ||
        ops.sendmsgAsync(c, data)), signal);
      if (!outcome.interrupted) return outcome.value;
      if (c.wcgSocket) c.wcgSocket.close();
      return -EINTR;
    },
  };
  return wrapped;
}

// Settles once no non-blocking send()'s write is in flight on the socket `c`.
async function settledWrites(c) {
  while (c.writeInFlight) await c.writeInFlight;
}

// poll() and select() on sockets, sliced. select() reports a negative answer through errno
// alone, so errno is set as well.
function slicedPoll(py, pollAll, signal) {
  return async (fds, nfds, timeout) => {
    if (timeout === 0) return pollAll(fds, nfds, 0);
    const end = timeout < 0 ? Infinity : Date.now() + timeout;
    for (;;) {
      const left = end - Date.now();
      const n = await pollAll(fds, nfds, Math.max(0, Math.min(SLICE_MS, left)));
      if (n !== 0 || left <= SLICE_MS) return n;
      if (Atomics.load(signal, 0) !== 0) {
        py._module.HEAP32[py._module.___errno_location() >> 2] = EINTR;
        return -EINTR;
      }
    }
  };
}

// TLS on the socket `fd` of `py` with pyodide_egress.py's options (JSON); the JSON of
// python_tls.js's handshakeInfo() or handshakeError(), or {interrupted} or {timedOut}.
async function startTls(py, fd, optionsJson, signal) {
  const failed = (message) => JSON.stringify({ ok: false, verifyFailed: false, message });
  const sock = py.FS.filesystems.NODESOCKFS.getSocket(fd);
  const connection = sock && sock.wcgSocket;
  if (!(connection instanceof RelayConnection)) return failed('not a connected socket');
  let options;
  try {
    options = JSON.parse(optionsJson);
    connection.tlsOptions = normalizeKey(checkOptions(options));
  } catch (e) {
    return failed(String(e.message || e));
  }
  const timeout = typeof options.timeout === 'number' && options.timeout > 0 ? options.timeout : null;
  const end = timeout === null ? Infinity : Date.now() + timeout * 1000;
  // TLS takes the connection's writer over: what a non-blocking send() wrote goes out first.
  const written = await waitSliced(settledWrites(sock), signal, end);
  if (written.interrupted || written.timedOut) return JSON.stringify({ ok: false, ...written });
  if (sock.writeFailed) return failed(`the connection failed (errno ${-sock.writeFailed})`);
  // A read NodeSockFS left waiting (a recv() that timed out) would hold the start until the
  // peer sends, which it does only after the handshake. Bytes it read ahead are clear text
  // the code never read: TLS cannot start after them (the stream refuses bytes unread too).
  connection.abandonRead?.();
  if (sock.recvBufferBytes > 0) return failed('the connection holds bytes the code has not read');
  let started;
  try {
    started = await py._api._nodeSock.startTls(fd);
  } catch (e) {
    return failed(`TLS could not start: ${e.message || e}`);
  }
  const secureConnection = sock.wcgSocket;
  if (started < 0 || !secureConnection || !secureConnection.handshake) {
    return failed(`TLS could not start (errno ${-started})`);
  }
  const outcome = await waitSliced(secureConnection.handshake, signal, end);
  if (outcome.interrupted || outcome.timedOut) {
    secureConnection.close();
    return JSON.stringify({ ok: false, ...outcome });
  }
  return JSON.stringify(outcome.value);
}

// Python's sockets through `channel` (the worker's egress Channel), by Pyodide's
// `initializeNodeSockFS` (what useNodeSockFS() calls; worker_python.js keeps it from user
// code); `signal`, the interrupt buffer's Int32Array. Then pyodide_egress.install() sets the
// proxy variables and gives the ssl module its TLS through startTls().
async function installPythonEgress(py, initializeNodeSockFS, channel, signal) {
  await initializeNodeSockFS(connectThroughRelay(channel));
  const SOCKFS = py._module.SOCKFS;
  const create = SOCKFS.createSocket;
  let ops = null;
  SOCKFS.createSocket = (...args) => {
    const sock = create(...args);
    ops = ops || interruptible(sock.sock_ops, signal);
    sock.sock_ops = ops;
    return sock;
  };
  SOCKFS.pollAsync = slicedPoll(py, SOCKFS.pollAsync, signal);
  const helpers = { startTls: (fd, optionsJson) => startTls(py, fd, optionsJson, signal) };
  const egress = py.pyimport('sandbox_runner.pyodide_egress');
  egress.install(helpers, JSON.stringify(proxyVariables()));
  egress.destroy();
}

module.exports = { installPythonEgress, proxyVariables, RELAY_PORT };
