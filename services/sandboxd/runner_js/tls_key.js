'use strict';
// The private key of a wasm session's TLS client certificate (python_tls.js), checked for
// what it costs to use before OpenSSL parses it. The runner's main thread builds the secure
// context, and parsing some keys is unbounded work there: OpenSSL derives a DSA or DH key's
// public half (g^x mod p) while it reads the key, seconds for a 10 KB key and hours within
// the options' size cap, and an RSA key's CRT primes set what each signature costs. So only
// the kinds TLS clients sign with are taken, within sizes that bound that work: RSA and
// RSA-PSS of at most MAX_RSA_BITS whose numbers agree (checkRsa), EC on a named curve,
// Ed25519 and Ed448; each as one unencrypted PKCS#8 block ("PRIVATE KEY"), which the
// worker makes of whatever the code gave (normalizeKey) and the main thread re-encodes from
// the bytes it checked, so OpenSSL reads exactly those.

const crypto = require('crypto');

const MAX_RSA_BITS = 4096;
// A PKCS#8 RSA key of 4096 bits: 2.4 KB.
const MAX_KEY_BYTES = 3 * 1024;
// An EC or Edwards key's PKCS#8 form: about 240 bytes at P-521 with its public key.
const MAX_SMALL_KEY_BYTES = 1024;
const KINDS = new Map([
  ['2a864886f70d010101', 'rsa'], ['2a864886f70d01010a', 'rsa'],   // rsaEncryption, RSASSA-PSS
  ['2a8648ce3d0201', 'ec'],                                       // id-ecPublicKey
  ['2b6570', 'small'], ['2b6571', 'small'],                       // Ed25519, Ed448
]);
const SEQUENCE = 0x30;
const INTEGER = 0x02;
const OCTET_STRING = 0x04;
const OID = 0x06;

class KeyRefused extends TypeError {}

// The DER element at `at` of `der`: {tag, start, end} of its contents. Definite lengths of at
// most 4 bytes that fit in `der`, or it throws.
function element(der, at, limit = der.length) {
  if (at + 2 > limit) throw new KeyRefused('the TLS key is not well-formed DER');
  const tag = der[at];
  let length = der[at + 1];
  let start = at + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || start + bytes > limit) throw new KeyRefused('the TLS key is not well-formed DER');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[start + i];
    start += bytes;
  }
  if (start + length > limit) throw new KeyRefused('the TLS key is not well-formed DER');
  return { tag, start, end: start + length };
}

// The elements inside the constructed element `e`, all of them, in order.
function children(der, e) {
  const out = [];
  for (let at = e.start; at < e.end;) {
    const child = element(der, at, e.end);
    out.push(child);
    at = child.end;
  }
  return out;
}

// An RSAPrivateKey whose signatures cost about what a genuine key's of its size do: two
// primes of about half the modulus each, a modulus of at most MAX_RSA_BITS, the numbers
// positive and consistent (n = pq, the CRT parts derived from d, e and d inverse), and a
// public exponent of at most 64 bits. OpenSSL's blinding raises to e, a signature its CRT
// self-check refuses is made again with d over the whole modulus (a quarter of a second at
// 8192 bits, each handshake), and each CRT half costs as the cube of its prime's size: a
// 64-bit p beside a 4000-bit q costs 30-50 ms a signature where a genuine 4096-bit key
// costs 5. Whether p and q are prime is not checked (that would cost more than it saves):
// composites fail the self-check, and their signature costs what one with the whole d does,
// about 25 ms at 4096 bits.
function checkRsa(der, key) {
  const inner = element(der, key.start, key.end);
  const fields = inner.tag === SEQUENCE && inner.end === key.end ? children(der, inner) : [];
  if (fields.length !== 9 || fields.some((f) => f.tag !== INTEGER || f.end === f.start ||
      der[f.start] & 0x80)) {
    throw new KeyRefused('the TLS key is an RSA key of more than two primes or not well-formed');
  }
  const [version, n, e, d, p, q, dp, dq, qinv] =
    fields.map((f) => BigInt(`0x${der.toString('hex', f.start, f.end)}`));
  const bits = (x) => x.toString(2).length;
  if (bits(n) > MAX_RSA_BITS) throw new KeyRefused(`the TLS key is an RSA key over ${MAX_RSA_BITS} bits`);
  if (Math.min(bits(p), bits(q)) < bits(n) / 2 - 8) {
    throw new KeyRefused('the TLS key is an RSA key whose primes are not half its size');
  }
  if (version !== 0n || bits(e) > 64 || e < 3n || p < 3n || q < 3n || p * q !== n ||
      d >= n || dp !== d % (p - 1n) || dq !== d % (q - 1n) || (qinv * q) % p !== 1n ||
      (e * dp) % (p - 1n) !== 1n || (e * dq) % (q - 1n) !== 1n) {
    throw new KeyRefused('the TLS key is an RSA key whose numbers do not agree');
  }
}

// An ECPrivateKey whose curve, if it names one, is the algorithm's.
function checkEc(der, key, curve) {
  const inner = element(der, key.start, key.end);
  const fields = inner.tag === SEQUENCE && inner.end === key.end ? children(der, inner) : [];
  const parameters = fields.find((f) => f.tag === 0xa0);
  if (fields.length < 2) throw new KeyRefused('the TLS key is an EC key not well-formed');
  if (parameters) {
    const named = element(der, parameters.start, parameters.end);
    if (named.tag !== OID || named.end !== parameters.end ||
        !der.subarray(named.start, named.end).equals(der.subarray(curve.start, curve.end))) {
      throw new KeyRefused('the TLS key must be an EC key on a named curve');
    }
  }
}

// Throws a KeyRefused unless `der` is a PKCS#8 PrivateKeyInfo (version 0: no attributes, no
// public key besides) of a kind and size above.
function checkPkcs8(der) {
  if (der.length > MAX_KEY_BYTES) throw new KeyRefused('the TLS key is longer than any kind allows');
  const top = element(der, 0);
  if (top.tag !== SEQUENCE || top.end !== der.length) throw new KeyRefused('the TLS key is not a PKCS#8 key');
  const parts = children(der, top);
  const [version, algorithm, key] = parts;
  if (parts.length !== 3 || version.tag !== INTEGER || version.end - version.start !== 1 ||
      der[version.start] !== 0 || algorithm.tag !== SEQUENCE || key.tag !== OCTET_STRING) {
    throw new KeyRefused('the TLS key is not a PKCS#8 key');
  }
  const [oid, parameters] = children(der, algorithm);
  const kind = oid && oid.tag === OID ? KINDS.get(der.toString('hex', oid.start, oid.end)) : undefined;
  if (kind === undefined) throw new KeyRefused('the TLS key must be an RSA, EC, Ed25519 or Ed448 key');
  if (kind === 'rsa') return checkRsa(der, key);
  if (kind === 'ec') {
    if (!parameters || parameters.tag !== OID) throw new KeyRefused('the TLS key must be an EC key on a named curve');
    checkEc(der, key, parameters);
  }
  if (der.length > MAX_SMALL_KEY_BYTES) throw new KeyRefused('the TLS key is longer than its kind allows');
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([A-Za-z0-9+/=\r\n]*?)-----END \1-----/g;

// The private key PEM blocks of `text` (whatever their kind): [{label, body}].
function privateKeyBlocks(text) {
  return [...text.matchAll(BLOCK)].map((m) => ({ label: m[1], body: m[2] }))
    .filter((b) => b.label.endsWith('PRIVATE KEY'));
}

// The DER of a base64 body, or throws: only the alphabet, padding only at the end, so no
// decoder reads other bytes out of it than this one.
function bodyDer(body) {
  const compact = body.replace(/\r?\n/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0) {
    throw new KeyRefused('the TLS key is not well-formed PEM');
  }
  return Buffer.from(compact, 'base64');
}

function toPem(der) {
  const lines = der.toString('base64').match(/.{1,64}/g) || [];
  return `-----BEGIN PRIVATE KEY-----\n${lines.join('\n')}\n-----END PRIVATE KEY-----\n`;
}

// The main thread's side: `pem` holds one key, unencrypted PKCS#8 of a kind and size above;
// that key re-encoded from the bytes checked. Throws a KeyRefused.
function checkedKey(pem) {
  const keys = privateKeyBlocks(pem);
  if (keys.length !== 1) throw new KeyRefused('the TLS key must be one PEM private key');
  if (keys[0].label === 'ENCRYPTED PRIVATE KEY') {
    throw new KeyRefused('the TLS key is encrypted and no password was given for it');
  }
  if (keys[0].label !== 'PRIVATE KEY') throw new KeyRefused('the TLS key must be a PKCS#8 key');
  const der = bodyDer(keys[0].body);
  checkPkcs8(der);
  return toPem(der);
}

// The worker's side: the key of checked options `c` decrypted with their passphrase, as
// PKCS#8 PEM and checked as the main thread will; no passphrase. A PKCS#8 key in clear is
// checked before it is parsed (parsing a DSA key is what costs); others are parsed first,
// on the worker, where that is the cell's own time. Throws KeyRefused (also for a wrong
// passphrase: OpenSSL's own error for one is "bad decrypt", or, when the wrongly decrypted
// bytes happen to end in valid padding, one in 256, a decoder's) or node:crypto's error.
function normalizeKey(c) {
  if (c.key === undefined) return { ...c, passphrase: undefined };
  const keys = privateKeyBlocks(c.key);
  if (keys.length === 1 && keys[0].label === 'PRIVATE KEY') checkPkcs8(bodyDer(keys[0].body));
  const encrypted = keys.some((k) => k.label === 'ENCRYPTED PRIVATE KEY' || /Proc-Type: *4,ENCRYPTED/.test(k.body));
  let key;
  try {
    key = crypto.createPrivateKey({ key: c.key, passphrase: c.passphrase })
      .export({ type: 'pkcs8', format: 'pem' });
  } catch (e) {
    if (e.code === 'ERR_OSSL_CRYPTO_INTERRUPTED_OR_CANCELLED') {
      throw new KeyRefused('the TLS key is encrypted and no password was given for it');
    }
    if (!encrypted || c.passphrase === undefined) throw e;
    throw new KeyRefused(`the TLS key cannot be decrypted with the password given (${e.message})`);
  }
  return { ...c, key: checkedKey(key), passphrase: undefined };
}

module.exports = { checkedKey, normalizeKey };
