'use strict';
// The egress relay's connections over a MessagePort, for a runner whose process may not
// open sockets (the wasm tier: its jail refuses socket(), so no loopback relay can exist).
// The worker's fetch() (egress_fetch.js) opens a PortStream for each connection; the main
// thread's Channel hands the PortStream of the same id to the relay (egress.js), which copies
// it to and from one parked host connection, as it does a local client in a container: a
// stream takes that connection at its first data, not at its open.
//
// Both ends are the same Duplex. Messages, either way: {t: 'd', s, b} (bytes: an ArrayBuffer,
// transferred), {t: 'e', s} (no more bytes: a half-close), {t: 'a', s, n} (pieces charged n
// bytes were read), {t: 'x', s, why} (cut; `why` optional); and from the worker {t: 'open', s}
// and {t: 'tls', s, o, n} (run TLS with the options `o` on the host connection, having
// received n bytes; egress_tls.js), which the main thread answers once with {t: 'tlsr', s, r}
// (the handshake's outcome, python_tls.js's handshakeInfo() or handshakeError()); a refusal
// cuts the stream too. A side sends at most WINDOW bytes its peer has not acknowledged, in pieces of at
// most PIECE bytes, each counted at least MIN_CHARGE bytes (a piece costs its receiver a
// Buffer and an ArrayBuffer whatever its length; an empty one is malformed), and
// acknowledges pieces once its reader has taken them out of the stream's buffer (no
// readable high-water mark: nothing waits there acknowledged), ACK_AT bytes at a time. So
// what one stream holds is bounded both ways, in bytes and in pieces, a reader that stops
// (a full host socket, a fetch body not read) stops its writer, and a peer that never reads
// its port is queued one acknowledgement per ACK_AT bytes it sent, not one per piece. A
// peer that sends past the window, or an empty piece, has its stream cut; other malformed
// messages are dropped. The main thread takes at most MAX_STREAMS streams of one worker.

const { Duplex } = require('stream');
const { onPortData } = require('./common');

// A piece stays under the mmap threshold sandboxd starts the wasm tier's Node with (32 KiB,
// docs/wasm-tier.md "Memory"): each is an ArrayBuffer allocated by its sender and freed by
// its receiver, and one of a mapping's own costs page faults and a TLB flush of every thread.
const PIECE = 16 * 1024;
const WINDOW = 256 * 1024;
const MIN_CHARGE = 1024;
// A writer waits only once WINDOW is unacknowledged, so acknowledging half of it at a time
// never holds one back.
const ACK_AT = WINDOW / 2;
const MAX_STREAMS = 128;
// Opens the main thread refuses a worker (its own race with a stream still ending here, or
// code posting opens on the port itself): MAX_REFUSED at once, then MAX_REFUSED a minute.
// One more and the worker loses its channel: each refusal is an answer queued to the
// worker outside any heap limit.
const MAX_REFUSED = 4 * MAX_STREAMS;
const REFUSED_REFILL_MS = 60000;
const WHY_CHARS = 200;

const isId = (v) => Number.isSafeInteger(v) && v > 0;
const charge = (bytes) => Math.max(bytes, MIN_CHARGE);

class PortStream extends Duplex {
  constructor(channel, id) {
    super({ allowHalfOpen: true, readableHighWaterMark: 0 });
    Object.assign(this, { channel, id, sent: 0, acked: 0, unacked: 0,
      pending: null, cut: false, ended: false, received: 0, delivered: 0,
      tlsHandler: null,           // main thread: takes the one `tls` request, once paired
      tlsAsked: false,            // worker: it sent its one `tls` request
      tlsAnswer: null });         // worker: resolves that request until answered
  }

  // The worker's side: asks the main thread to run TLS on this stream's host connection
  // (egress_tls.js), which then carries what the worker writes and reads in clear. Resolves
  // with the handshake's outcome. Every byte must have gone both ways first: TLS starts on
  // the host side after the last byte the worker wrote and before the first it has not read.
  startTls(options) {
    const refused = (message) => Promise.resolve({ ok: false, verifyFailed: false, message });
    if (this.tlsAsked || this.destroyed) return refused('TLS cannot start on this connection now');
    if (this.readableLength > 0) return refused('the connection holds bytes not yet read');
    if (this.pending || this.writableLength > 0) return refused('the connection holds bytes not yet sent');
    this.tlsAsked = true;
    const answer = new Promise((resolve) => { this.tlsAnswer = resolve; });
    this.post({ t: 'tls', s: this.id, o: options, n: this.received });
    return answer;
  }

  // The main thread's side: the outcome of a `tls` request.
  answerTls(r) {
    this.post({ t: 'tlsr', s: this.id, r });
  }

  // The main thread's side: a `tls` request refused, and the stream cut with it. The worker
  // checks what it can first, so only a hostile or racing worker gets here, and cutting keeps
  // what a worker can make this side post to one answer and one cut per stream.
  refuseTls(message) {
    this.answerTls({ ok: false, verifyFailed: false, message });
    this.destroy(new Error(message));
  }

  post(message, transfer) {
    if (!this.cut) this.channel.post(message, transfer);
  }

  _write(chunk, encoding, callback) {
    this.pending = { chunk, at: 0, callback };
    this.sendPending();
  }

  // Sends what the window allows of the chunk being written; its callback once all is sent.
  sendPending() {
    const p = this.pending;
    if (!p) return;
    while (p.at < p.chunk.length && this.sent - this.acked < WINDOW && !this.cut) {
      const piece = p.chunk.subarray(p.at, p.at + PIECE);
      const bytes = piece.buffer.slice(piece.byteOffset, piece.byteOffset + piece.length);
      this.post({ t: 'd', s: this.id, b: bytes }, [bytes]);
      this.sent += charge(piece.length);
      this.delivered += piece.length;
      p.at += piece.length;
    }
    if (p.at >= p.chunk.length) {
      this.pending = null;
      p.callback();
    }
  }

  _final(callback) {
    this.post({ t: 'e', s: this.id });
    callback();
  }

  // Node asks _read() for more only while the buffer is under the high-water mark: with a
  // mark of 0, a reader that takes the whole buffer in one read() would not be asked before
  // more comes, and none would come.
  read(n) {
    const chunk = super.read(n);
    if (this.readableLength === 0) this._read();
    return chunk;
  }

  _read() {
    if (this.unacked < ACK_AT) return;
    this.post({ t: 'a', s: this.id, n: this.unacked });
    this.unacked = 0;
  }

  _destroy(err, callback) {
    // A stream that ended both ways cleanly owes its peer nothing; otherwise it is cut.
    if (!(this.readableEnded && this.writableFinished)) {
      this.post({ t: 'x', s: this.id, why: err ? String(err.message).slice(0, WHY_CHARS) : undefined });
    }
    this.cut = true;
    this.channel.forget(this);
    if (this.tlsAnswer) {
      this.tlsAnswer({ ok: false, verifyFailed: false,
        message: err ? err.message : 'the connection closed before TLS started' });
    }
    callback(err);
  }

  onMessage(m) {
    if (m.t === 'd' && m.b instanceof ArrayBuffer && !this.ended) {
      // What the peer sent and this side has not acknowledged: it sends while that is under
      // WINDOW, a piece at a time. push() is true only when the reader took the piece at
      // once (a buffer that holds anything is over a high-water mark of 0); otherwise
      // _read() acknowledges once the reader has emptied the buffer.
      this.unacked += charge(m.b.byteLength);
      if (this.unacked > WINDOW + PIECE || m.b.byteLength === 0) {
        const what = m.b.byteLength === 0 ? 'an empty piece' : 'past its window';
        this.destroy(new Error(`the egress channel's peer sent ${what}`));
        return;
      }
      this.received += m.b.byteLength;
      if (this.push(Buffer.from(m.b))) this._read();
    } else if (m.t === 'e' && !this.ended) {
      this.ended = true;
      this.push(null);
    } else if (m.t === 'a' && Number.isSafeInteger(m.n) && m.n > 0 && m.n <= this.sent - this.acked) {
      this.acked += m.n;
      this.sendPending();
    } else if (m.t === 'tls') {
      const handler = this.tlsHandler;
      this.tlsHandler = null;
      if (handler && m.o !== null && typeof m.o === 'object' && Number.isSafeInteger(m.n)) handler(m);
      else this.refuseTls('TLS cannot start on this connection now');
    } else if (m.t === 'tlsr' && this.tlsAnswer && m.r !== null && typeof m.r === 'object') {
      this.tlsAnswer(m.r);
      this.tlsAnswer = null;
    } else if (m.t === 'x') {
      this.cut = true;
      this.destroy(typeof m.why === 'string' ? new Error(m.why.slice(0, WHY_CHARS)) : undefined);
    }
  }
}

// One end of a worker's egress port: opens streams (the worker) or takes them (the main
// thread, `onOpen(stream)`), and routes every message to its stream.
class Channel {
  constructor(port, onOpen = null) {
    Object.assign(this, { port, onOpen, streams: new Map(), nextId: 1, closed: false,
      refusals: MAX_REFUSED, refilled: Date.now() });
    onPortData(port, (data) => this.onMessage(data));
    port.on('close', () => this.close());
    port.unref();
  }

  post(message, transfer) {
    if (this.closed) return;
    try {
      this.port.postMessage(message, transfer);
    } catch (e) {
      // the port closed meanwhile: its 'close' ends every stream
    }
  }

  // A worker's stream, refused at once when MAX_STREAMS are open. The main thread counts at
  // most as many (it forgets a stream it cuts before telling the worker, and the worker's
  // messages come in order), so it refuses an open only in a race with a stream still
  // ending on its side.
  open() {
    const stream = this.add(this.nextId++);
    if (this.streams.size > MAX_STREAMS) {
      process.nextTick(() => stream.destroy(new Error(`over ${MAX_STREAMS} egress connections are open at once`)));
      return stream;
    }
    stream.post({ t: 'open', s: stream.id });
    return stream;
  }

  add(id) {
    const stream = new PortStream(this, id);
    this.streams.set(id, stream);
    return stream;
  }

  // Whether another refusal is within MAX_REFUSED (refilled over REFUSED_REFILL_MS); opens
  // accepted in between give none back.
  takeRefusal() {
    const now = Date.now();
    this.refusals = Math.min(MAX_REFUSED,
      this.refusals + ((now - this.refilled) * MAX_REFUSED) / REFUSED_REFILL_MS);
    this.refilled = now;
    if (this.refusals < 1) return false;
    this.refusals -= 1;
    return true;
  }

  forget(stream) {
    if (this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
  }

  onMessage(m) {
    if (m === null || typeof m !== 'object' || !isId(m.s)) return;
    if (m.t === 'open') {
      if (!this.onOpen || this.closed || this.streams.has(m.s)) return;
      if (this.streams.size >= MAX_STREAMS) {
        if (!this.takeRefusal()) return this.close();
        this.post({ t: 'x', s: m.s, why: `over ${MAX_STREAMS} egress connections are open at once` });
        return;
      }
      this.onOpen(this.add(m.s));
      return;
    }
    const stream = this.streams.get(m.s);
    if (stream) stream.onMessage(m);
  }

  // Cuts every stream (their host connections go with them) and closes the port.
  close() {
    if (this.closed) return;
    for (const stream of [...this.streams.values()]) stream.destroy();
    this.closed = true;
    this.port.close();
  }
}

module.exports = { Channel, PortStream, WINDOW, PIECE, MIN_CHARGE, ACK_AT, MAX_STREAMS };
