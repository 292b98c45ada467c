'use strict';
// The egress relay (docs/egress.md, "The relay inside"; docs/runner-protocol.md, "Egress
// relay"), on the main thread. The session has no network; sandboxd's proxy dials into
// `egress.sock`, a unix socket in the socket directory, and keeps connections parked there.
// Once sandboxd turns egress on (the `egress` frame), the relay listens on 127.0.0.1 (the
// kernel picks the port), pairs each local client, once it has sent its first bytes, with the
// oldest parked host connection and copies bytes both ways. Every check is the host's: the
// relay neither reads nor limits what it copies. Node cannot bind without listening, so until
// then egress.sock takes connections and closes them at once.
//
// The host counts a connection as parked until its first bytes arrive: a client paired
// before it sent any would hold one while the host dials no replacement, and a few clients
// that connect and send nothing (a pool that pre-connects) would stall every other one. So a
// client waits among the waiting until its first bytes (closed at EOF or error, and WAIT_MS
// after it came, as one waiting for a host connection is).
//
// In the wasm tier sandboxd binds egress.sock itself and passes it listening (--egress-fd),
// and the jail refuses socket(): the relay accepts on that descriptor once egress is on, has
// no loopback listener and sets no proxy variables. Its clients are then the worker's
// fetch() connections, each a stream over the worker's egress port (egress_channel.js).

const net = require('net');
const path = require('path');
const { log } = require('./common');
const { listen, listenOnFd } = require('./connection');
const { Channel, PortStream } = require('./egress_channel');

const SOCKET_NAME = 'egress.sock';
const MAX_PARKED = 64;          // host connections kept parked
const MAX_WAITING = 256;        // local clients not yet paired: before their first bytes, or
                                // waiting for a parked host connection
const WAIT_MS = 10000;          // how long after it came a local client may stay unpaired
const NO_PROXY = 'localhost,127.0.0.1,::1';

// The variables that point HTTP clients at the relay on `port`.
function proxyEnvironment(port) {
  const url = `http://127.0.0.1:${port}`;
  return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url,
    NO_PROXY, no_proxy: NO_PROXY };
}

// Copies both ways; the end of one direction half-closes the other socket (both are
// allowHalfOpen), an error destroys both, and each socket goes once both its sides ended.
// Returns the function that stops the copy.
function pipeBoth(a, b) {
  const cut = () => {
    a.destroy();
    b.destroy();
  };
  const added = [];
  const on = (side, event, listener) => {
    side.on(event, listener);
    added.push([side, event, listener]);
  };
  on(a, 'error', cut);
  on(b, 'error', cut);
  // A side destroyed before both its directions ended (a worker stream its channel closed,
  // a socket reset) takes the other with it, or that one would wait for the proxy's idle cut.
  for (const side of [a, b]) {
    on(side, 'close', () => {
      if (!(side.readableEnded && side.writableFinished)) cut();
    });
  }
  a.pipe(b);
  b.pipe(a);
  const stop = () => {
    a.unpipe(b);
    b.unpipe(a);
    for (const [side, event, listener] of added) side.off(event, listener);
  };
  return stop;
}

// pipeBoth(a, b), and a worker stream `a` may then ask for TLS on `b` once (egress_tls.js),
// which goes on over the TLS connection. Loaded on a request: a runner none asks loads no
// node:tls.
function relay(a, b) {
  const stop = pipeBoth(a, b);
  if (a instanceof PortStream) {
    a.tlsHandler = (request) => require('./egress_tls').startHostTls(a, b, stop, pipeBoth, request);
  }
}

class EgressRelay {
  // egress.sock in `socketDir`, made before the runner's own socket (sandboxd seals the
  // directory once it has connected). A failure is logged and answered to `egress` frames.
  static async create(socketDir) {
    const relayObject = new EgressRelay(path.join(socketDir, SOCKET_NAME));
    try {
      relayObject.hostServer = await listen(relayObject.path, (s) => relayObject.onHost(s),
        { allowHalfOpen: true });
    } catch (e) {
      relayObject.error = `cannot create ${relayObject.path}: ${e.message}`;
      log(relayObject.error);
    }
    return relayObject;
  }

  // The relay on `fd`, a unix socket sandboxd bound and listens on: nothing accepts on it
  // until egress is on.
  static onFd(fd) {
    const relayObject = new EgressRelay(`fd ${fd}`);
    relayObject.fd = fd;
    return relayObject;
  }

  constructor(socketPath) {
    this.path = socketPath;
    this.fd = null;               // --egress-fd: the relay's clients come over ports
    this.error = null;
    this.hostServer = null;
    this.localServer = null;      // the loopback listener, once on (not on a descriptor)
    this.starting = null;         // resolves with the port once on
    this.on = false;
    this.parked = [];             // {sock, drop} in arrival order
    this.waiting = [];            // {client, timer, ready: it sent bytes} in arrival order
  }

  // Resolves with the relay's port (the same one on every call), or null for a relay on a
  // descriptor (whose clients come through serve()); rejects with the reason.
  turnOn() {
    if (!this.starting) this.starting = this.start();
    return this.starting;
  }

  async start() {
    if (this.fd !== null) {
      this.hostServer = await listenOnFd(this.fd, (s) => this.onHost(s), { allowHalfOpen: true })
        .catch((e) => {
          this.starting = null;
          throw new Error(`cannot accept on ${this.path}: ${e.message}`);
        });
      this.on = true;
      return null;
    }
    if (!this.hostServer) throw new Error(this.error || 'the relay has no socket');
    const local = net.createServer({ allowHalfOpen: true, pauseOnConnect: true },
      (client) => this.onClient(client));
    await new Promise((resolve, reject) => {
      local.once('error', reject);
      local.listen(0, '127.0.0.1', resolve);
    }).catch((e) => {
      this.starting = null;       // a later frame tries again
      throw new Error(`cannot listen: ${e.message}`);
    });
    local.on('error', (e) => log(`egress relay: ${e.message}`));
    this.localServer = local;
    this.on = true;
    return local.address().port;
  }

  // A worker's egress port (the other end of `port`): each stream it opens is a client.
  // The returned Channel's close() cuts them all.
  serve(port) {
    return new Channel(port, (stream) => this.onClient(stream));
  }

  onHost(sock) {
    if (!this.on) {
      sock.destroy();
      return;
    }
    sock.on('error', () => {});
    const waiter = this.waiting.find((w) => w.ready);
    if (waiter) {
      this.leave(waiter);
      relay(waiter.client, sock);
    } else if (this.parked.length < MAX_PARKED) {
      // A parked connection that is readable (EOF, or bytes before its client) is dead.
      const entry = { sock, drop: () => this.drop(entry) };
      for (const event of ['data', 'end', 'close']) sock.on(event, entry.drop);
      this.parked.push(entry);
    } else {
      sock.destroy();
    }
  }

  drop(entry) {
    const at = this.parked.indexOf(entry);
    if (at >= 0) this.parked.splice(at, 1);
    entry.sock.destroy();
  }

  // `client`, a socket or a worker's stream, waits for its first bytes, then for a parked
  // connection.
  onClient(client) {
    client.on('error', () => {});
    if (this.waiting.length >= MAX_WAITING) {
      client.destroy(new Error(`over ${MAX_WAITING} egress connections wait for the proxy`));
      return;
    }
    const waiter = { client, timer: null, ready: false };
    waiter.timer = setTimeout(() => {
      this.leave(waiter);
      client.destroy(new Error(`no connection to the egress proxy within ${WAIT_MS / 1000} s`));
    }, WAIT_MS);
    this.waiting.push(waiter);
    client.once('data', (chunk) => {
      client.pause();
      client.unshift(chunk);        // pipe() sends it first
      waiter.ready = true;
      this.pair(waiter);
    });
    client.once('end', () => {
      if (this.leave(waiter)) client.destroy();
    });
    client.once('close', () => this.leave(waiter));
    client.resume();                // a socket comes paused (pauseOnConnect)
  }

  pair(waiter) {
    const entry = this.parked.shift();
    if (!entry) return;
    for (const event of ['data', 'end', 'close']) entry.sock.off(event, entry.drop);
    this.leave(waiter);
    relay(waiter.client, entry.sock);
  }

  // Whether `waiter` was waiting; it no longer is.
  leave(waiter) {
    const at = this.waiting.indexOf(waiter);
    if (at < 0) return false;
    this.waiting.splice(at, 1);
    clearTimeout(waiter.timer);
    return true;
  }
}

module.exports = { EgressRelay, proxyEnvironment, SOCKET_NAME };
