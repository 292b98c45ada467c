'use strict';
// TLS on the host side of a worker's egress stream, on the main thread (docs/wasm-tier.md,
// "Egress"). A wasm session's Python sockets ask for TLS on their relay connection
// (python_egress.js); running it in the worker would push every byte through that thread's
// Wasm-bound event loop twice (cipher text in, clear text out). Here node:tls runs directly
// on the host socket, and the stream carries clear text: one copy fewer per byte and the
// cipher work where no cell waits on it.
//
// The worker's request names the options (checked again here: the worker runs the session's
// code) and how many bytes it has received. TLS may start only at a point both sides agree
// on: every byte the host sent is delivered to the worker and read, and every byte the
// worker wrote before its request is written to the host socket (what the relay has not yet
// copied is written first). Otherwise, and for a second request or one before pairing
// (egress_channel.js), the answer is a refusal and the stream is cut.
//
// Building a secure context blocks this thread, which also carries the runner's protocol
// (an interrupt among it): 40-200 ms a MiB of PEM text, which python_tls.js caps at 512 KiB
// a request, never decrypting a key (the worker does), and requests start one per turn of
// the event loop, so sandboxd's frames are read between any two builds. python_tls.js keeps the last few contexts, and each request
// needs a stream paired with a connection of sandboxd's proxy, whose caps bound how many
// there are.

const tls = require('tls');
const { connectOptions, handshakeInfo, handshakeError } = require('./python_tls');

const refusal = (message) => ({ ok: false, verifyFailed: false, message });
const queue = [];               // requests not yet started: [stream, sock, stop, pipeBoth, request]

// Queues the worker's `request` ({o, n}) for `stream`, relayed to the host socket `sock` by
// relay() (egress.js) until `stop()`; on success the stream is copied to and from the TLS
// connection by `pipeBoth(stream, secure)` (egress.js). The worker is answered once.
function startHostTls(...args) {
  queue.push(args);
  if (queue.length === 1) setImmediate(next);
}

function next() {
  run(...queue.shift());
  if (queue.length > 0) setImmediate(next);
}

function run(stream, sock, stop, pipeBoth, request) {
  if (stream.destroyed) return;
  if (sock.readableLength > 0 || stream.pending || stream.writableLength > 0 ||
      request.n !== stream.delivered) {
    stream.refuseTls('the connection holds bytes the code has not read');
    return;
  }
  if (stream.readableEnded || sock.writableEnded || sock.readableEnded || sock.destroyed) {
    stream.refuseTls('the connection is closing');
    return;
  }
  let options;
  try {
    options = connectOptions(request.o);
  } catch (e) {
    stream.refuseTls(String((e && e.message) || e));
    return;
  }
  stop();
  for (let rest = stream.read(); rest !== null; rest = stream.read()) sock.write(rest);
  const secure = tls.connect({ ...options, socket: sock });
  secure.on('error', () => {});      // the handshake's is answered below, later ones cut the relay
  let settled = false;
  const fail = (outcome) => {
    if (settled) return;
    settled = true;
    stream.answerTls(outcome);
    secure.destroy();
    sock.destroy();
    stream.destroy();
  };
  secure.once('secureConnect', () => {
    if (settled) return;
    settled = true;
    stream.answerTls(handshakeInfo(secure));
    pipeBoth(stream, secure);
  });
  secure.once('error', (e) => fail(handshakeError(e, secure)));
  secure.once('close', () => fail(refusal('the connection closed during the TLS handshake')));
  stream.once('close', () => fail(refusal('the connection was cut during the TLS handshake')));
}

module.exports = { startHostTls };
