'use strict';
// TLS for Python's sockets in a wasm session (python_egress.js, egress_tls.js): the options
// pyodide_egress.py sends for one socket, checked and turned into node:tls's, and the
// handshake's outcome in the terms Python's ssl reports.
//
// The worker checks the options before it asks for TLS (checkOptions), so code learns of a
// bad one at once; the main thread, which runs TLS on the host connection, checks them again
// (the worker runs the session's code, so its messages prove nothing) and builds the secure
// context (a bad certificate, key or version throws then). Contexts are kept, by their
// options: one with CAs of its own costs milliseconds to build, tens with Node's roots.

const crypto = require('crypto');
const net = require('net');
const tls = require('tls');
const { checkedKey, normalizeKey } = require('./tls_key');

const VERSIONS = new Set(['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3']);
const MAX_CONTEXTS = 16;             // secure contexts kept, by their options
const MAX_ALPN_NAME = 255;           // bytes of one ALPN protocol name
const MAX_ALPN_NAMES = 64;           // names in the list (a browser offers 2 or 3)
// PEM text (ca, cert, key and passphrase together) one request may carry: building a
// context of it blocks the runner's main thread, 40-200 ms a MiB (egress_tls.js). Debian's
// whole bundle is 0.21 MiB.
const MAX_PEM_BYTES = 512 * 1024;
// Certificates in ca and cert together: OpenSSL's store takes each longer the more it holds,
// 140 ms for 1000 on Node 20, 40 ms on the tier's Node. Debian's bundle holds 144.
const MAX_CERTIFICATES = 1000;
// TLS 1.2's finite-field DHE lets the server choose the group, and the client's side of a
// 10000-bit one is a second of the main thread's time: ECDHE only, as TLS 1.3 offers.
const CIPHERS = `${tls.DEFAULT_CIPHERS}:!kDHE`;
// TLS 1.3's finite-field groups the same way: a server may ask, by HelloRetryRequest, for
// ffdhe8192 (a third of a second on Node 20's OpenSSL). Elliptic curves only, with the
// post-quantum hybrid where this Node's OpenSSL has it (3.5 on; a probe that fails would
// leave its error on OpenSSL's queue for the next call to find).
const GROUPS = (() => {
  const [major, minor] = process.versions.openssl.split('.').map(Number);
  const classic = 'X25519:P-256:P-384:P-521';
  return major > 3 || (major === 3 && minor >= 5) ? `X25519MLKEM768:${classic}` : classic;
})();
const contexts = new Map();

function optionalString(o, name) {
  const v = o[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new TypeError(`the TLS option ${name} must be a string`);
  return v;
}

function optionalVersion(o, name) {
  const v = optionalString(o, name);
  if (v !== undefined && !VERSIONS.has(v)) throw new TypeError(`the TLS option ${name} is not a TLS version`);
  return v;
}

function alpnNames(v) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.length > MAX_ALPN_NAMES || !v.every((p) => typeof p === 'string' &&
      p.length > 0 && Buffer.byteLength(p) <= MAX_ALPN_NAME)) {
    throw new TypeError(`the TLS option alpn must be a list of at most ${MAX_ALPN_NAMES} names ` +
      `of 1 to ${MAX_ALPN_NAME} bytes`);
  }
  return v;
}

function secureContext(options) {
  // Keyed by a digest: the cache holds no option's text.
  const key = crypto.createHash('sha256').update(JSON.stringify(options)).digest('base64');
  let context = contexts.get(key);
  if (!context) {
    context = tls.createSecureContext(options);
    if (contexts.size >= MAX_CONTEXTS) contexts.delete(contexts.keys().next().value);
    contexts.set(key, context);
  }
  return context;
}

// The checked form of `o`, pyodide_egress.py's options for one socket: {host, verify,
// checkHostname, alpn, minVersion, maxVersion, ca (PEM text), roots (Node's bundled roots
// besides), cert, key, passphrase}. Throws a TypeError. Cheap: nothing is built.
function checkOptions(o) {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) {
    throw new TypeError('the TLS options must be an object');
  }
  const verify = o.verify !== false;
  const c = { host: optionalString(o, 'host'), verify, checkHostname: o.checkHostname !== false,
    alpn: alpnNames(o.alpn), minVersion: optionalVersion(o, 'minVersion'),
    maxVersion: optionalVersion(o, 'maxVersion'), cert: optionalString(o, 'cert'),
    key: optionalString(o, 'key'), passphrase: optionalString(o, 'passphrase'),
    ca: verify ? optionalString(o, 'ca') : undefined, roots: verify && Boolean(o.roots) };
  const pem = [c.ca, c.cert, c.key, c.passphrase].reduce((n, v) => n + (v ? v.length : 0), 0);
  if (pem > MAX_PEM_BYTES) {
    throw new TypeError(`the TLS options carry ${pem} characters of certificates and keys, ` +
      `over ${MAX_PEM_BYTES}`);
  }
  const certificates = [c.ca, c.cert].reduce((n, v) => n + (v ? v.split('-----BEGIN ').length - 1 : 0), 0);
  if (certificates > MAX_CERTIFICATES) {
    throw new TypeError(`the TLS options carry ${certificates} certificates, over ${MAX_CERTIFICATES}`);
  }
  return c;
}

// tls.connect()'s options (but `socket`) for `o`, checked as checkOptions() does. Throws a
// TypeError or node:tls's error (a bad certificate, key or version).
// The key must be what the worker's normalizeKey() made (tls_key.js): decrypting one costs
// what its PBKDF2 iteration count says, minutes at 2^31, and parsing some kinds is unbounded
// work, so the worker does both where that is the cell's own time, and this side takes one
// unencrypted PKCS#8 key of the kinds and sizes tls_key.js bounds, checked before OpenSSL
// reads it.
function connectOptions(o) {
  const c = checkOptions(o);
  if (c.passphrase !== undefined) {
    throw new TypeError('the TLS key must be decrypted before TLS starts');
  }
  const key = c.key === undefined ? undefined : checkedKey(c.key);
  const context = { minVersion: c.minVersion, maxVersion: c.maxVersion, cert: c.cert, key,
    ciphers: CIPHERS, ecdhCurve: GROUPS };
  if (c.verify) {
    // Node's roots are its default: `ca` replaces them, so none with an empty list.
    if (!c.roots) context.ca = c.ca ? [c.ca] : [];
    else if (c.ca) context.ca = [...tls.rootCertificates, c.ca];
  }
  const options = { secureContext: secureContext(context), host: c.host, ALPNProtocols: c.alpn,
    rejectUnauthorized: c.verify };
  if (c.host && !net.isIP(c.host)) options.servername = c.host;
  if (!c.checkHostname) options.checkServerIdentity = () => undefined;
  return options;
}

// What Python's ssl wants of a finished handshake (pyodide_egress.py).
function handshakeInfo(secure) {
  const cert = secure.getPeerCertificate(false) || {};
  const cipher = secure.getCipher() || {};
  return { ok: true, protocol: secure.getProtocol(), alpn: secure.alpnProtocol || null,
    cipher: [cipher.standardName || cipher.name || null, cipher.version || null],
    cert: cert.raw ? { subject: cert.subject || {}, issuer: cert.issuer || {},
      subjectaltname: cert.subjectaltname || '', valid_from: cert.valid_from,
      valid_to: cert.valid_to, serialNumber: cert.serialNumber,
      der: cert.raw.toString('base64') } : null };
}

// A failed handshake: a certificate the checks refused (OpenSSL's verification codes, or
// Node's name check) is `verifyFailed`, as CPython's SSLCertVerificationError.
function handshakeError(e, secure) {
  const code = (secure && secure.authorizationError) || (e && e.code);
  const verifyFailed = (e && e.code === 'ERR_TLS_CERT_ALTNAME_INVALID') ||
    (typeof code === 'string' && /^[A-Z0-9_]+$/.test(code) && !/^E[A-Z]+$/.test(code) &&
     !code.startsWith('ERR_'));
  // Node's hint after a verification error names its own command-line flags.
  const message = String((e && e.message) || e).replace(/; if the root CA is installed locally.*$/s, '');
  return { ok: false, verifyFailed, message };
}

module.exports = { checkOptions, connectOptions, normalizeKey, handshakeInfo, handshakeError };
