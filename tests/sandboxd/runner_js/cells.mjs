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

// A cell's prelude (either worker): `watchFileHandles()`, which watches every way code could
// be handed an object as `this` or as a receiver (EventEmitter's methods replaced, accessors
// on EventEmitter.prototype, AsyncWrap.prototype (a zlib stream's handle leads there) and
// Object.prototype for what a constructor sets and a promise reads, a proxy at the end of
// the first two's chains, a 'close' listener, getters util.inspect runs), uses FileHandles every way fs offers (its own and those fs.promises
// makes for a path), puts all back, and resolves to how many objects it saw and how many of
// them, or of what they and the handles and streams reach, are Node's FileHandles (own kFd
// and kRefs) or their binding handles (releaseFD).
export const WATCH_FILE_HANDLES = `const watchFileHandles = async () => {
  const fs = process.getBuiltinModule('fs');
  const EE = process.getBuiltinModule('events');
  const seen = new Set();
  const undo = [];
  const watch = (fn) => { try { undo.push(fn()); } catch {} };
  for (const name of ['emit', 'on', 'once', 'addListener', 'prependListener', 'removeListener', 'off']) {
    const original = EE.prototype[name];
    watch(() => {
      EE.prototype[name] = function (...args) { seen.add(this); return original.apply(this, args); };
      return () => { EE.prototype[name] = original; };
    });
  }
  const zlib = process.getBuiltinModule('zlib').createGzip();
  let asyncWrap = zlib._handle;
  while (!Object.hasOwn(asyncWrap, 'getAsyncId')) asyncWrap = Object.getPrototypeOf(asyncWrap);
  zlib.close();
  for (const target of [EE.prototype, asyncWrap, Object.prototype]) {
    for (const key of ['then', '_events', '_eventsCount', '_maxListeners', 'fd', 'close']) {
      watch(() => {
        const before = Object.getOwnPropertyDescriptor(target, key);
        Object.defineProperty(target, key, { configurable: true,
          get() { seen.add(this); return before && 'value' in before ? before.value : undefined; },
          set(v) { seen.add(this); Object.defineProperty(this, key, { value: v, writable: true, configurable: true, enumerable: true }); } });
        return () => (before ? Object.defineProperty(target, key, before) : delete target[key]);
      });
    }
  }
  for (const target of [EE.prototype, asyncWrap]) {
    const chain = Object.getPrototypeOf(target);
    watch(() => {
      Object.setPrototypeOf(target, new Proxy(chain, {
        get(t, k, r) { seen.add(r); return Reflect.get(t, k, r); },
        set(t, k, v, r) { seen.add(r); return Reflect.set(t, k, v, r); },
      }));
      return () => Object.setPrototypeOf(target, chain);
    });
  }
  const roots = [];
  try {
    const fh = await fs.promises.open('watched.txt', 'w+');
    roots.push(fh);
    fh.on('close', function () { seen.add(this); });
    Object.defineProperty(fh, 'g', { get() { seen.add(this); return 1; }, enumerable: true, configurable: true });
    process.getBuiltinModule('util').inspect(fh, { getters: true, showHidden: true });
    await fh.write('watched');
    await fh.read(Buffer.alloc(4), 0, 4, 0);
    await fh.stat();
    await fs.promises.readFile(fh);
    await fs.promises.writeFile(fh, 'x');
    for (const make of [() => fh.createReadStream({ autoClose: false }), () => fh.createWriteStream({ autoClose: false }),
      () => fs.createReadStream(null, { fd: fh, autoClose: false }), () => fh.readLines({ autoClose: false }),
      () => fh.readableWebStream()]) {
      try { roots.push(make()); } catch {}
    }
    for (const s of roots) if (typeof s.on === 'function' && s !== fh) s.on('error', () => {});
    await fh.close();
    for (const use of [() => fs.promises.writeFile('watched2.txt', 'y'), () => fs.promises.appendFile('watched2.txt', 'z'),
      () => fs.promises.readFile('watched2.txt'), () => fs.promises.truncate('watched2.txt', 1),
      async () => { const other = await fs.promises.open('watched2.txt', 'r'); roots.push(other); await other.close(); }]) {
      try { await use(); } catch {}
    }
  } finally {
    for (const fn of undo.reverse()) { try { fn(); } catch {} }
  }
  const isNodes = (o) => {
    const symbols = Object.getOwnPropertySymbols(o).map((s) => s.description);
    const proto = Object.getPrototypeOf(o);
    return (symbols.includes('kFd') && symbols.includes('kRefs')) || (proto !== null && Object.hasOwn(proto, 'releaseFD'));
  };
  const reached = new Set();
  const queue = [...seen, ...roots];
  while (queue.length && reached.size < 20000) {
    const o = queue.shift();
    if (o === null || (typeof o !== 'object' && typeof o !== 'function') || reached.has(o)) continue;
    reached.add(o);
    queue.push(Object.getPrototypeOf(o));
    for (const key of Reflect.ownKeys(o)) {
      const d = Object.getOwnPropertyDescriptor(o, key);
      if (d && 'value' in d) queue.push(d.value);
    }
  }
  return JSON.stringify({ seen: seen.size, nodes: [...reached].filter(isNodes).length });
};
`;
