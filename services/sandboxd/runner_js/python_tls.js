'use strict';
// TLS for Python's sockets in a wasm session (python_egress.js): the options
// pyodide_egress.py sends for one socket, checked and turned into node:tls's, and the
// handshake's outcome in the terms Python's ssl reports.
//
// Every option is checked before anything touches the connection: tls.connect() wraps the
// stream it is given before it checks its own options, and a wrapper left behind by a throw
// passes the stream's later errors on with no listener, which ends the worker. The secure
// context is built here too (a bad certificate, key or version throws then), and kept: a
// context with CAs of its own costs milliseconds to build, tens with Node's roots.

const net = require('net');
const tls = require('tls');

const VERSIONS = new Set(['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3']);
const MAX_CONTEXTS = 16;             // secure contexts kept, by their options
const MAX_ALPN_NAME = 255;           // bytes of one ALPN protocol name
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
  if (!Array.isArray(v) || !v.every((p) => typeof p === 'string' && p.length > 0 &&
      Buffer.byteLength(p) <= MAX_ALPN_NAME)) {
    throw new TypeError(`the TLS option alpn must be a list of names of 1 to ${MAX_ALPN_NAME} bytes`);
  }
  return v;
}

function secureContext(options) {
  const key = JSON.stringify(options);
  let context = contexts.get(key);
  if (!context) {
    context = tls.createSecureContext(options);
    if (contexts.size >= MAX_CONTEXTS) contexts.delete(contexts.keys().next().value);
    contexts.set(key, context);
  }
  return context;
}

// tls.connect()'s options (but `socket`) for `o`: {host, verify, checkHostname, alpn,
// minVersion, maxVersion, ca (PEM text), roots (Node's bundled roots besides), cert, key,
// passphrase}. Throws a TypeError or node:tls's error.
function connectOptions(o) {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) {
    throw new TypeError('the TLS options must be an object');
  }
  const host = optionalString(o, 'host');
  const verify = o.verify !== false;
  const context = { minVersion: optionalVersion(o, 'minVersion'),
    maxVersion: optionalVersion(o, 'maxVersion'), cert: optionalString(o, 'cert'),
    key: optionalString(o, 'key'), passphrase: optionalString(o, 'passphrase') };
  if (verify) {
    // Node's roots are its default: `ca` replaces them, so none with an empty list.
    const ca = optionalString(o, 'ca');
    if (!o.roots) context.ca = ca ? [ca] : [];
    else if (ca) context.ca = [...tls.rootCertificates, ca];
  }
  const options = { secureContext: secureContext(context), host, ALPNProtocols: alpnNames(o.alpn),
    rejectUnauthorized: verify };
  if (host && !net.isIP(host)) options.servername = host;
  if (o.checkHostname === false) options.checkServerIdentity = () => undefined;
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

module.exports = { connectOptions, handshakeInfo, handshakeError };
