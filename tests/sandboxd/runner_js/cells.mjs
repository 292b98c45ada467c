// Preludes of the cells that attack the wasm tier's runner from inside (javascript_wasm*.test.mjs).

// A cell's prelude: `conn`, the runner's connection to sandboxd (its one socket), and `frame`,
// a frame sandboxd would read if it were ever written there.
export const FIND_CONNECTION = `const fs = require('fs');
let conn = -1;
for (let fd = 3; fd < 256; fd++) { try { if (fs.fstatSync(fd).isSocket()) conn = fd; } catch {} }
const body = Buffer.from(JSON.stringify({ type: 'forged', id: 1 }));
const head = Buffer.alloc(4); head.writeUInt32BE(body.length);
const frame = Buffer.concat([head, body]);
`;

// A cell's prelude after FIND_CONNECTION: `serves(h2, serve)`, whether a server session that
// serve(end) makes on http2 module `h2` answers a client's request with `conn`.
export const SERVES = `const { duplexPair } = require('stream');
const serves = async (h2, serve) => {
  try {
    const [a, b] = duplexPair();
    const served = new Promise((resolve) => {
      serve(a).on('error', () => {}).on('stream', (st) => {
        st.respondWithFD(conn); st.ownsFd = true;
        st.on('close', () => resolve('served'));
      });
    });
    const c = h2.connect('http://x', { createConnection: () => b });
    c.on('error', () => {});
    c.request({ ':path': '/' }).on('error', () => {});
    return await Promise.race([served, new Promise((r) => setTimeout(() => r('timeout'), 2000))]);
  } catch {
    return 'no server';
  }
};
`;

// A cell's prelude: libuv's four threadpool threads kept busy for a few seconds, so the
// async calls the cell makes next wait in its queue.
export const BUSY_THREADPOOL = `const nodeCrypto = require('crypto');
for (let i = 0; i < 4; i++) nodeCrypto.pbkdf2('p', 's', 1500000, 64, 'sha512', () => {});
`;
