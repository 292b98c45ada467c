// Hostile worker: 128 streams, main readers paused (never read); worker ignores the window and posts
// tiny pieces (size arg: 0 or 1 bytes) until cut, then 5000 more per stream. Measures main memory.
const { MessageChannel } = require('worker_threads');
const { Channel, MAX_STREAMS } = require('/work/main/services/sandboxd/runner_js/egress_channel.js');
const size = +(process.argv[2] || 1), mode = process.argv[3] || 'paused';
const { port1, port2 } = new MessageChannel();
const opened = [], errs = [];
const main = new Channel(port1, s => { opened.push(s); s.on('error', e => errs.push(e.message));
  if (mode === 'first') { s.once('data', () => { s.pause(); }); s.resume(); } });
const wport = port2; port1.ref(); port2.ref();
const mem = () => { global.gc(); global.gc(); const m = process.memoryUsage(); return { heapMB: +(m.heapUsed / 1048576).toFixed(1), abMB: +(m.arrayBuffers / 1048576).toFixed(1), rssMB: (m.rss / 1048576) | 0 }; };
const m0 = mem();
for (let s = 1; s <= MAX_STREAMS; s++) wport.postMessage({ t: 'open', s });
let i = 0;
(function burst() {
  for (let s = 1; s <= MAX_STREAMS; s++) for (let k = 0; k < 50; k++) { const b = new ArrayBuffer(size); wport.postMessage({ t: 'd', s, b }, [b]); }
  if (++i < 6) return setImmediate(burst);  // 300 pieces/stream: past WINDOW+PIECE (272 at MIN_CHARGE)
  setTimeout(() => {
    const held = opened.reduce((a, s) => a + s.readableLength, 0), pieces = opened.reduce((a, s) => a + s.readableBuffer.length, 0);
    console.log(JSON.stringify({ size, mode, m0, m1: mem(), opened: opened.length, live: main.streams.size, cut: errs.length, err0: errs[0], heldBytes: held, heldPieces: pieces }));
    process.exit(0);
  }, 300);
})();
