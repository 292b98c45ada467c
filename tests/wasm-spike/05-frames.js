'use strict';
// Experiment 5, the child: speaks the runner protocol's framing (4-byte big-endian length +
// JSON) over a socket it inherits as fd 3, relaying `exec` to Pyodide in a worker thread
// (02-interrupt.js's worker). 05-frames-harness.py is the parent (sandboxd's part).
//   node 05-frames.js connected SNAPSHOT   fd 3 is a connected stream socket
//   node 05-frames.js listening SNAPSHOT   fd 3 is a listening socket: accept, serve, repeat
// Frames: ping -> pong; exec {id, code} -> done {id, status, result}; probe -> probe_result
// (whether this process can make a new socket / connect somewhere: it must not). Python's
// `await call_tool(server, tool, args)` becomes a tool_call frame {id, call_id, server,
// tool, arguments}; the parent's tool_result {call_id, ok, result} resolves it.
const net = require('net');
const { startWorker } = require('./02-interrupt');

function frames(socket, onFrame) {
  let buf = Buffer.alloc(0);
  socket.on('data', (data) => {
    buf = Buffer.concat([buf, data]);
    while (buf.length >= 4) {
      const n = buf.readUInt32BE(0);
      if (buf.length < 4 + n) break;
      const frame = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
      buf = buf.subarray(4 + n);
      onFrame(frame);
    }
  });
  return (frame) => {
    const body = Buffer.from(JSON.stringify(frame), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length);
    socket.write(Buffer.concat([head, body]));
  };
}

function probe() {
  return new Promise((resolve) => {
    let s;
    try {
      s = net.connect(1, '127.0.0.1');
    } catch (e) {
      resolve(`refused at once: ${e.code || e.message}`);
      return;
    }
    s.on('error', (e) => resolve(`refused: ${e.code || e.message}`));
    s.on('connect', () => resolve('CONNECTED'));
  });
}

async function main() {
  const [mode, snapshot] = process.argv.slice(2);
  let send = null;
  let execId = 0;
  const w = startWorker(snapshot, (m) => send && send({ type: 'tool_call', id: execId,
    call_id: m.call_id, server: m.server, tool: m.tool, arguments: m.arguments }));
  await w.ready;
  const serve = (socket) => {
    send = frames(socket, async (f) => {
      if (f.type === 'ping') send({ type: 'pong', id: f.id });
      else if (f.type === 'tool_result') {
        w.worker.postMessage({ type: 'tool_result', call_id: f.call_id, result: f.result });
      } else if (f.type === 'exec') {
        execId = f.id;
        const d = await w.run(f.code);
        send({ type: 'done', id: f.id, status: d.status, result: d.result });
      } else if (f.type === 'probe') send({ type: 'probe_result', id: f.id, result: await probe() });
    });
    send({ type: 'ready', pid: process.pid, node: process.version });
    socket.on('error', () => {});
  };
  if (mode === 'connected') {
    const socket = new net.Socket({ fd: 3, readable: true, writable: true });
    serve(socket);
    socket.on('close', () => process.exit(0));
  } else {
    net.createServer(serve).listen({ fd: 3 });
  }
}
main().catch((e) => { console.error(`FAILED: ${e && e.stack}`); process.exit(1); });
