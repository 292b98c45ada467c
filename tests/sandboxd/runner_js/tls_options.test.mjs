// The TLS options of a wasm session's Python sockets (runner_js/python_tls.js, tls_key.js;
// docs/wasm-tier.md, "Egress"): what the worker makes of them and what the runner's main
// thread, which builds the secure context, takes. The worker runs the session's code, so
// every check the main thread relies on is made again there, before OpenSSL reads anything.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';

const require = createRequire(import.meta.url);
const nodeCrypto = require('crypto');
const nodeTls = require('tls');
const { checkOptions, connectOptions, normalizeKey } =
  require('../../../services/sandboxd/runner_js/python_tls.js');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-options-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

// DER, written out by hand for keys no tool makes.
const length = (n) => {
  if (n < 128) return Buffer.from([n]);
  const b = [];
  for (; n; n >>= 8) b.unshift(n & 255);
  return Buffer.from([0x80 | b.length, ...b]);
};
const tlv = (tag, value) => Buffer.concat([Buffer.from([tag]), length(value.length), value]);
const seq = (...xs) => tlv(0x30, Buffer.concat(xs));
const int = (bytes) => tlv(0x02, bytes[0] & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
const oid = (hex) => tlv(0x06, Buffer.from(hex, 'hex'));
const pem = (der, label = 'PRIVATE KEY') =>
  `-----BEGIN ${label}-----\n${der.toString('base64').match(/.{1,64}/g).join('\n')}\n-----END ${label}-----\n`;
const odd = (bytes) => {
  const b = crypto.randomBytes(bytes);
  b[0] |= 0x80;
  b[b.length - 1] |= 1;
  return b;
};
const pkcs8 = (algorithm, key) => pem(seq(int(Buffer.from([0])), algorithm, tlv(0x04, key)));
// A DSA key whose parse computes g^x mod p over a p of `pBits`.
const dsaKey = (pBits) => pkcs8(seq(oid('2a8648ce380401'), seq(int(odd(pBits / 8)), int(odd(32)), int(Buffer.from([2])))),
  int(crypto.randomBytes(32)));
// An RSA key of a modulus of `modulusBytes`, `primeBytes` for each CRT part, `primes` of them.
const rsaKey = (modulusBytes, primeBytes, version = 0) => pkcs8(seq(oid('2a864886f70d010101'), tlv(0x05, Buffer.alloc(0))),
  seq(int(Buffer.from([version])), int(odd(modulusBytes)), int(Buffer.from([1, 0, 1])), int(odd(modulusBytes - 1)),
    ...Array.from({ length: 5 }, () => int(odd(primeBytes)))));

// Calls of crypto.createPrivateKey and tls.createSecureContext while `fn` runs.
function parses(fn) {
  const calls = [];
  const saved = [nodeCrypto.createPrivateKey, nodeTls.createSecureContext];
  nodeCrypto.createPrivateKey = (...a) => { calls.push('createPrivateKey'); return saved[0](...a); };
  nodeTls.createSecureContext = (...a) => { calls.push('createSecureContext'); return saved[1](...a); };
  try {
    fn();
  } finally {
    [nodeCrypto.createPrivateKey, nodeTls.createSecureContext] = saved;
  }
  return calls;
}

// What the worker makes of a key, then what the main thread builds of it.
const throughBoth = (key, more = {}) =>
  connectOptions(normalizeKey(checkOptions({ key, verify: false, ...more })));

function openssl(...args) {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

describe('wasm runner: the TLS options of Python sockets', () => {
  it('takes the client keys TLS signs with, in each form Python gives them', () => {
    const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const keys = [
      rsa.export({ type: 'pkcs1', format: 'pem' }), rsa.export({ type: 'pkcs8', format: 'pem' }),
      ec.export({ type: 'sec1', format: 'pem' }), ec.export({ type: 'pkcs8', format: 'pem' }),
      crypto.generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }),
    ];
    const [key, crt] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', key, '-out', crt, '-days', '1', '-subj', '/CN=client.test');
    const cert = fs.readFileSync(crt, 'utf8');
    keys.push(cert + fs.readFileSync(key, 'utf8'));             // certfile holding both
    for (const k of keys) {
      const normalized = normalizeKey(checkOptions({ key: k, verify: false }));
      assert.match(normalized.key, /^-----BEGIN PRIVATE KEY-----\n/);
      assert.ok(connectOptions(normalized).secureContext instanceof tls.SecureContext);
    }
    assert.ok(throughBoth(fs.readFileSync(key, 'utf8'), { cert }).secureContext instanceof tls.SecureContext);
  });

  it('builds no context of a key still encrypted: the worker decrypts it', () => {
    const file = path.join(dir, 'encrypted.pem');
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-aes-128-cbc',
      '-pass', 'pass:secret', '-out', file);
    const encrypted = fs.readFileSync(file, 'utf8');
    assert.match(encrypted, /BEGIN ENCRYPTED PRIVATE KEY/);
    // Decrypting costs what the key's PBKDF2 iteration count says (minutes at 2^31): never
    // on the main thread, which carries the runner's protocol.
    assert.throws(() => connectOptions({ key: encrypted, passphrase: 'secret', verify: false }),
      /must be decrypted before TLS starts/);
    assert.deepEqual(parses(() => assert.throws(() => connectOptions({ key: encrypted, verify: false }),
      /encrypted and no password/)), []);
    assert.throws(() => normalizeKey(checkOptions({ key: encrypted })), /encrypted and no password/);
    const decrypted = normalizeKey(checkOptions({ key: encrypted, passphrase: 'secret', verify: false }));
    assert.match(decrypted.key, /^-----BEGIN PRIVATE KEY-----/);
    assert.equal(decrypted.passphrase, undefined);
    assert.ok(connectOptions(decrypted).secureContext instanceof tls.SecureContext);
    // A wrong password, whichever of OpenSSL's errors it meets (one key in 256 decrypts to
    // valid padding and fails in the decoder instead): many keys, so that both are seen.
    for (let i = 0; i < 512; i++) {
      assert.throws(() => normalizeKey(checkOptions({ key: encrypted, passphrase: `wrong ${i}` })),
        /cannot be decrypted with the password given/);
    }
  });

  it('refuses DSA, DH and key-agreement keys before OpenSSL parses them, on both sides', () => {
    // Parsing a DSA or DH key computes its public half: seconds of the main thread for one
    // of 10 KB, hours within the PEM cap.
    const refused = /must be an RSA, EC, Ed25519 or Ed448 key|longer than any kind allows/;
    for (const key of [dsaKey(40000), dsaKey(2048),
      crypto.generateKeyPairSync('dh', { group: 'modp14' }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
      crypto.generateKeyPairSync('x25519').privateKey.export({ type: 'pkcs8', format: 'pem' })]) {
      assert.deepEqual(parses(() => assert.throws(() => connectOptions({ key, verify: false }), refused)), []);
      assert.deepEqual(parses(() => assert.throws(() => normalizeKey(checkOptions({ key })), refused)), []);
    }
  });

  it('refuses RSA keys whose signatures cost more than a genuine 4096-bit one, and malformed ones', () => {
    // A genuine key's numbers, changed one at a time: OpenSSL signs with whatever it is given,
    // and raises to e, and to d over the whole modulus when its CRT self-check fails.
    const jwk = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
    const number = (name) => Buffer.from(jwk[name], 'base64url');
    const rsa = (changes = {}, algorithm = seq(oid('2a864886f70d010101'), tlv(0x05, Buffer.alloc(0))), more = []) => {
      const fields = ['n', 'e', 'd', 'p', 'q', 'dp', 'dq', 'qi'].map((k) => changes[k] || int(number(k)));
      return pem(seq(int(Buffer.from([0])), algorithm, tlv(0x04, seq(int(Buffer.from([0])), ...fields)), ...more));
    };
    assert.ok(connectOptions({ key: rsa(), verify: false }).secureContext instanceof tls.SecureContext);
    const flipped = (name) => {
      const b = Buffer.from(number(name));
      b[b.length - 1] ^= 2;
      return int(b);
    };
    // Numbers that agree, of a modulus in bounds, but one prime tiny: the other's exponentiation
    // then costs what a key of twice the size would.
    const unbalanced = () => {
      const e = 65537n;
      const prime = (bits) => {
        for (;;) {
          const p = crypto.generatePrimeSync(bits, { bigint: true });
          if ((p - 1n) % e !== 0n) return p;
        }
      };
      const [p, q] = [prime(64), prime(1984)];
      const inverse = (a, m) => {
        let [r0, r1, s0, s1] = [a % m, m, 1n, 0n];
        while (r1 !== 0n) {
          const k = r0 / r1;
          [r0, r1, s0, s1] = [r1, r0 - k * r1, s1, s0 - k * s1];
        }
        return ((s0 % m) + m) % m;
      };
      const d = inverse(e, (p - 1n) * (q - 1n));
      const big = (x) => int(Buffer.from(x.toString(16).padStart(Math.ceil(x.toString(16).length / 2) * 2, '0'), 'hex'));
      return rsa({ n: big(p * q), e: big(e), d: big(d), p: big(p), q: big(q), dp: big(d % (p - 1n)),
        dq: big(d % (q - 1n)), qi: big(inverse(q, p)) });
    };
    for (const [key, why] of [
      [unbalanced(), /primes are not half its size/],
      [rsaKey(1025, 513), /longer than any kind allows/],
      [rsaKey(513, 257), /RSA key over 4096 bits/],
      [rsa({ dp: flipped('dp') }), /do not agree/],
      [rsa({ e: int(Buffer.from('010001', 'hex')), d: flipped('d') }), /do not agree/],
      [rsa({ e: int(odd(16)) }), /do not agree/],               // 128 bits of public exponent
      [rsa({ qi: tlv(0x02, Buffer.from([0xff, 1])) }), /not well-formed/],   // negative
      [rsa({}, undefined, [tlv(0xa0, Buffer.alloc(5000))]), /longer than any kind allows/],
      [rsa({}, undefined, [tlv(0xa0, Buffer.alloc(10))]), /not a PKCS#8 key/],
      [rsaKey(256, 128, 1), /do not agree/],
      [pem(Buffer.from('3003020100', 'hex')), /not a PKCS#8 key/],
      [pem(seq(int(Buffer.from([0])), seq(oid('2a864886f70d010101')), tlv(0x04, Buffer.from('3084ffffffff', 'hex')))),
        /not well-formed DER/],
      [dsaKey(2048).replace(/\n(.{10})/, '\n$1=='), /not well-formed PEM/],
      [rsaKey(256, 128) + rsaKey(256, 128), /one PEM private key/],
    ]) {
      assert.deepEqual(parses(() => assert.throws(() => connectOptions({ key, verify: false }), why)), []);
    }
    // What the main thread reads is re-encoded from the bytes it checked.
    const ok = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' });
    assert.ok(connectOptions({ key: ok.replace(/\n/g, '\r\n'), verify: false }).secureContext instanceof tls.SecureContext);
  });

  it('refuses an EC key of explicit curve parameters', () => {
    const file = path.join(dir, 'explicit.pem');
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-pkeyopt',
      'ec_param_enc:explicit', '-out', file);
    const key = fs.readFileSync(file, 'utf8');
    assert.deepEqual(parses(() => assert.throws(() => connectOptions({ key, verify: false }), /named curve/)), []);
    assert.throws(() => normalizeKey(checkOptions({ key })), /named curve/);
    // The same inside the key: ECPrivateKey's own parameters, which must name the curve too.
    const p256 = oid('2a8648ce3d030107');
    const ec = (inner) => pkcs8(seq(oid('2a8648ce3d0201'), p256),
      seq(int(Buffer.from([1])), tlv(0x04, crypto.randomBytes(32)), ...inner));
    assert.ok(connectOptions({ key: ec([tlv(0xa0, p256)]), verify: false }).secureContext instanceof tls.SecureContext);
    for (const inner of [[tlv(0xa0, seq(int(Buffer.from([1]))))], [tlv(0xa0, oid('2b81040022'))]]) {
      assert.deepEqual(parses(() => assert.throws(() => connectOptions({ key: ec(inner), verify: false }),
        /named curve/)), []);
    }
  });

  it('bounds the ALPN list and the certificates one request carries', () => {
    const names = (n) => Array.from({ length: n }, (_, i) => `p${i}`);
    assert.ok(connectOptions({ verify: false, alpn: names(64) }).ALPNProtocols.length === 64);
    assert.throws(() => checkOptions({ alpn: names(65) }), /at most 64 names/);
    // Counted, not parsed: the smallest blocks (real ones of 200 bytes fit 2600 in the PEM cap).
    const cert = '-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n';
    assert.throws(() => checkOptions({ ca: cert.repeat(600), cert: cert.repeat(401) }), /1001 certificates, over 1000/);
    assert.ok(checkOptions({ ca: cert.repeat(1000) }));
  });

  it('offers no finite-field DHE, whose group the server chooses', async () => {
    // Node 20's OpenSSL offers TLS 1.3's ffdhe groups, which a server may ask for.
    const [key, crt] = [path.join(dir, 'rsa-key.pem'), path.join(dir, 'rsa-cert.pem')];
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', crt, '-days', '1',
      '-subj', '/CN=example.test', '-addext', 'subjectAltName=DNS:example.test');
    const handshake = (ciphers, more = { maxVersion: 'TLSv1.2' }) => new Promise((resolve) => {
      const server = tls.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(crt), ciphers,
        dhparam: 'auto', ...more }, (s) => s.end());
      server.on('tlsClientError', () => {});
      server.listen(0, '127.0.0.1', () => {
        const options = connectOptions({ host: 'example.test', ca: fs.readFileSync(crt, 'utf8') });
        const s = tls.connect({ ...options, port: server.address().port, host: '127.0.0.1' });
        const done = (outcome) => { s.destroy(); server.close(); resolve(outcome); };
        s.once('secureConnect', () => done(`connected ${s.getCipher().name}`));
        s.once('error', (e) => done(`failed: ${e.code || e.message}`));
      });
    });
    assert.equal(await handshake('ECDHE-RSA-AES128-GCM-SHA256'), 'connected ECDHE-RSA-AES128-GCM-SHA256');
    assert.match(await handshake('DHE-RSA-AES128-GCM-SHA256'), /^failed: /);
    assert.match(await handshake(undefined, { minVersion: 'TLSv1.3', ecdhCurve: 'ffdhe2048' }), /^failed: /);
    assert.match(await handshake(undefined, { minVersion: 'TLSv1.3' }), /^connected TLS_/);
  });
});
