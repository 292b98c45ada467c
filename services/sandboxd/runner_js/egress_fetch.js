'use strict';
// fetch() through the egress relay, in the worker of a session with egress (egress.js runs
// the relay on the main thread). Node 18's fetch ignores HTTP_PROXY and its bundled undici
// exposes no ProxyAgent, so this is the global dispatcher fetch() calls: an object with
// dispatch(opts, handler) in the shape that undici calls it (opts {origin, path, method,
// headers (a flat [name, value, ...] array, or an object), body (null, a string, bytes or an
// async iterable), upgrade}; handler onConnect(abort), onHeaders(status, rawHeaders, resume,
// statusText), onData(chunk), onComplete(rawTrailers), onError(err)), on node:http and
// node:tls. https origins go through a `CONNECT host:port` tunnel to the relay, then TLS to
// the origin (servername = host, certificates checked as by https); http origins go as
// absolute-URI requests to the relay; localhost names (NO_PROXY) are reached directly.
// Nothing here reaches what user code could not reach with node:net.
//
// The relay is reached by node:net on its loopback port (containers), or, in a process that
// may not open sockets (the wasm tier), by a stream over the worker's egress port
// (egress_channel.js); the rest is the same. Node 24+'s fetch (undici 7+) reads the global
// dispatcher from another slot and calls it with handlers of a newer shape, which
// olderHandler() turns into the one ProxiedRequest calls.

const fs = require('fs');
const http = require('http');
const net = require('net');
const tls = require('tls');
const { Channel } = require('./egress_channel');

const GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');     // Node 18-22's fetch
const GLOBAL_DISPATCHER_2 = Symbol.for('undici.globalDispatcher.2');   // Node 24+'s
const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '::1']);
const REFUSAL_BYTES = 4096;     // of a refused CONNECT's body, for the error message
const REFUSAL_WAIT_MS = 2000;

// Request headers for node:http: {name: value or [values]}, from undici's forms.
function headerObject(headers) {
  const out = Object.create(null);
  const add = (name, value) => {
    const key = String(name).toLowerCase();
    if (key in out) out[key] = [].concat(out[key], String(value));
    else out[key] = String(value);
  };
  if (Array.isArray(headers)) {
    if (headers.length && Array.isArray(headers[0])) for (const [k, v] of headers) add(k, v);
    else for (let i = 0; i + 1 < headers.length; i += 2) add(headers[i], headers[i + 1]);
  } else if (headers && typeof headers === 'object') {
    for (const [k, v] of Object.entries(headers)) {
      for (const one of [].concat(v)) add(k, one);
    }
  }
  return out;
}

const latin1 = (list) => list.map((text) => Buffer.from(text, 'latin1'));

// The body of a refused CONNECT (the host proxy says why there), up to REFUSAL_BYTES.
function readRefusal(socket, head, then) {
  let text = head.toString('latin1');
  const finish = () => {
    clearTimeout(timer);
    socket.destroy();
    then(text.slice(0, REFUSAL_BYTES).trim());
  };
  const timer = setTimeout(finish, REFUSAL_WAIT_MS);
  socket.on('data', (d) => {
    text += d.toString('latin1');
    if (text.length >= REFUSAL_BYTES) finish();
  });
  socket.on('end', finish);
  socket.on('error', finish);
}

// One dispatch: settles the handler once (onComplete or onError).
class ProxiedRequest {
  // connectRelay(): a new connection to the relay (a net.Socket or a Duplex).
  constructor(connectRelay, opts, handler, requests) {
    Object.assign(this, { connectRelay, opts, handler, requests });
    this.url = new URL(opts.path, opts.origin);
    this.settled = false;
    this.sockets = [];            // everything to destroy on abort
  }

  start() {
    this.requests.add(this);
    try {
      this.handler.onConnect((err) => this.abort(err));
    } catch (e) {
      this.abort(e);
    }
    if (this.settled) return;
    const { protocol, hostname } = this.url;
    const host = hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(this.url.port) || (protocol === 'https:' ? 443 : 80);
    const direct = LOCAL_HOSTS.has(host);
    if (this.opts.upgrade) this.abort(new Error('fetch: upgrades are not supported through the egress proxy'));
    else if (protocol === 'http:' && direct) this.send(this.opts.path, () => net.connect(port, host));
    else if (protocol === 'http:') {
      this.send(`http://${this.url.host}${this.opts.path}`, this.connectRelay);
    } else if (protocol === 'https:' && direct) {
      this.send(this.opts.path, () => tls.connect(tlsOptions(host, { port })));
    } else if (protocol === 'https:') this.tunnel(host, port);
    else this.abort(new TypeError(`fetch: ${protocol} URLs are not supported`));
  }

  // CONNECT host:port to the relay, then TLS to the origin inside the tunnel.
  tunnel(host, port) {
    const target = `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
    const req = http.request({ method: 'CONNECT', path: target, headers: { host: target },
      createConnection: () => {
        const socket = this.connectRelay();
        this.sockets.push(socket);
        return socket;
      } });
    this.sockets.push(req);
    req.on('error', (e) => this.abort(e));
    req.on('connect', (res, socket, head) => {
      this.sockets.push(socket);
      if (res.statusCode !== 200) {
        readRefusal(socket, head, (body) => this.abort(new Error(`the egress proxy answered ` +
          `${res.statusCode} ${res.statusMessage || ''} to CONNECT ${target}${body ? `: ${body}` : ''}`)));
        return;
      }
      if (head.length) socket.unshift(head);
      this.send(this.opts.path, () => tls.connect(tlsOptions(host, { socket })));
    });
    req.end();
  }

  // The request on the connection `connect()` makes, as `path` (origin or absolute form).
  send(requestPath, connect) {
    if (this.settled) return;
    const headers = headerObject(this.opts.headers);
    if (!('host' in headers)) headers.host = this.url.host;
    const req = http.request({ method: this.opts.method, path: requestPath, headers,
      setHost: false, createConnection: () => {
        const socket = connect();
        this.sockets.push(socket);
        return socket;
      } });
    this.sockets.push(req);
    req.on('error', (e) => this.abort(e));
    req.on('response', (res) => this.receive(res));
    this.writeBody(req, this.opts.body);
  }

  async writeBody(req, body) {
    try {
      if (body === null || body === undefined) req.end();
      else if (typeof body === 'string' || body instanceof Uint8Array) req.end(body);
      else {
        for await (const chunk of body) {
          if (this.settled) return;
          if (!req.write(chunk)) {
            await new Promise((resolve) => {
              req.once('drain', resolve);
              req.once('close', resolve);
            });
          }
        }
        req.end();
      }
    } catch (e) {
      this.abort(e);
    }
  }

  receive(res) {
    this.sockets.push(res);
    res.on('error', (e) => this.abort(e));
    res.on('close', () => {
      if (!res.complete) this.abort(new Error('fetch: the connection closed before the response ended'));
    });
    try {
      const resume = () => res.resume();
      if (this.handler.onHeaders(res.statusCode, latin1(res.rawHeaders), resume,
        res.statusMessage) === false) res.pause();
    } catch (e) {
      this.abort(e);
      return;
    }
    res.on('data', (chunk) => {
      if (this.settled) return;
      try {
        if (this.handler.onData(chunk) === false) res.pause();
      } catch (e) {
        this.abort(e);
      }
    });
    res.on('end', () => this.settle(() => this.handler.onComplete(latin1(res.rawTrailers))));
  }

  settle(call) {
    if (this.settled) return;
    this.settled = true;
    this.requests.delete(this);
    try {
      call();
    } catch (e) {
      // the handler's own failure: nothing left to tell it
    }
  }

  abort(err) {
    if (this.settled) return;
    for (const s of this.sockets) s.destroy();
    this.settle(() => this.handler.onError(err || new Error('fetch: aborted')));
  }
}

// Node reads NODE_EXTRA_CA_CERTS once, at start; a session sets it later (a CA it was
// given, written to its workspace), so fetch() reads the file named there when it connects:
// those certificates are trusted beside Node's own, as they would be from the start.
function extraCertificates() {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  if (!file) return null;
  try {
    return fs.readFileSync(file, 'latin1');
  } catch (e) {
    return null;  // as Node at start: an unreadable file adds nothing
  }
}

// A context with Node's ~140 root certificates takes 25-45 ms to build, longer than the
// rest of a 1 MiB fetch: the one for the file's current text is kept, and built again only
// when the text changes.
let extraContext = { text: null, context: null };

function secureContext() {
  const extra = extraCertificates();
  if (!extra) return null;
  if (extraContext.text !== extra) {
    const context = tls.createSecureContext({ ca: [...tls.rootCertificates, extra] });
    extraContext = { text: extra, context };
  }
  return extraContext.context;
}

function tlsOptions(host, more) {
  const options = { host, ALPNProtocols: ['http/1.1'], ...more };
  if (!net.isIP(host)) options.servername = host;
  const context = secureContext();
  if (context) options.secureContext = context;
  return options;
}

// Response headers (raw [name, value, ...] buffers) as undici 7+ hands them to a handler:
// {lower-case name: value, or [values] when repeated}.
function headerValues(raw) {
  const out = Object.create(null);
  for (let i = 0; i + 1 < (raw || []).length; i += 2) {
    const name = raw[i].toString('latin1').toLowerCase();
    const value = raw[i + 1].toString('latin1');
    out[name] = name in out ? [].concat(out[name], value) : value;
  }
  return out;
}

// A handler of undici 7+'s shape (onRequestStart(controller, context), onResponseStart(
// controller, status, headers, statusText), onResponseData(controller, chunk),
// onResponseEnd(controller, trailers), onResponseError(controller, err); the controller
// aborts, pauses and resumes) as one of the older shape; others as they are.
function olderHandler(handler) {
  if (typeof handler.onResponseStart !== 'function') return handler;
  let abort = () => {};
  let resume = () => {};
  let paused = false;
  const controller = { aborted: false, reason: null, rawHeaders: [], rawTrailers: [],
    get paused() { return paused; },
    abort(reason) {
      controller.aborted = true;
      controller.reason = reason;
      abort(reason);
    },
    pause() { paused = true; },
    resume() {
      paused = false;
      resume();
    } };
  return {
    onConnect(abortRequest) {
      abort = abortRequest;
      if (typeof handler.onRequestStart === 'function') handler.onRequestStart(controller, {});
    },
    onHeaders(status, rawHeaders, resumeResponse, statusText) {
      resume = resumeResponse;
      controller.rawHeaders = rawHeaders;     // what undici 7+'s fetch reads the headers from
      handler.onResponseStart(controller, status, headerValues(rawHeaders), statusText);
      return !paused;
    },
    onData(chunk) {
      handler.onResponseData(controller, chunk);
      return !paused;
    },
    onComplete(trailers) {
      controller.rawTrailers = trailers;
      handler.onResponseEnd(controller, headerValues(trailers));
    },
    onError(err) { handler.onResponseError(controller, err); },
  };
}

class EgressDispatcher {
  constructor(connectRelay) {
    this.connectRelay = connectRelay;
    this.requests = new Set();
  }

  dispatch(opts, handler) {
    new ProxiedRequest(this.connectRelay, opts, olderHandler(handler), this.requests).start();
    return true;
  }

  close(callback) {
    if (typeof callback === 'function') queueMicrotask(callback);
    return Promise.resolve();
  }

  destroy(err, callback) {
    const cb = typeof err === 'function' ? err : callback;
    for (const r of [...this.requests]) r.abort(err instanceof Error ? err : new Error('fetch: dispatcher destroyed'));
    if (typeof cb === 'function') queueMicrotask(cb);
    return Promise.resolve();
  }
}

// fetch() through the relay: `relay` is its port on 127.0.0.1, or a MessagePort to the main
// thread's relay or the Channel over one (egress_channel.js); `environment` (the proxy variables; null: the worker
// started with them, or there are none) goes into this thread's process.env.
function installEgress(relay, environment) {
  if (environment) Object.assign(process.env, environment);
  let connectRelay;
  if (typeof relay === 'number') connectRelay = () => net.connect(relay, '127.0.0.1');
  else {
    const channel = relay instanceof Channel ? relay : new Channel(relay);
    connectRelay = () => channel.open();
  }
  const dispatcher = new EgressDispatcher(connectRelay);
  for (const slot of [GLOBAL_DISPATCHER, GLOBAL_DISPATCHER_2]) {
    try {
      Object.defineProperty(globalThis, slot, { value: dispatcher, writable: true,
        enumerable: false, configurable: false });
    } catch (e) {
      // user code made the slot read-only: its fetch() is its own business
    }
  }
}

module.exports = { installEgress, EgressDispatcher, headerObject, tlsOptions };
