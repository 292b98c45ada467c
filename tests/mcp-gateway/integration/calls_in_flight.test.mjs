// Issue 27: work in flight after a request is dispatched, against the real gateway and
// sandboxd. The request budgets stop charging a body once it reaches its handler; a
// tools/call or resources/read then runs on a thread of its own, holding its arguments (a
// read: its file several times over) until its response is sent. Bounded per credential
// and overall (--max_calls_in_flight[_per_credential], --max_call_bytes_in_flight
// [_per_credential], --max_resource_reads_in_flight[_per_credential]): past a bound the call
// is answered at once with an error naming the flag, no thread started.
//  - One token's run_python calls queued behind a sleeping run on each of its sessions,
//    each client hanging up after the 2025-11-25 priming event (the call lives on for
//    --resume_grace): unbounded, 120 calls of 2 MiB took the gateway to ~760 MiB and +120
//    threads.
//  - One token's many concurrent resources/read of an 8 MB file on sockets that never read:
//    unbounded, 64 of them peaked at ~500-640 MiB.
// Memory and threads are read from /proc/<pid>/status (VmHWM: the peak).
import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import {
  gatewaySuite, listToolNames, procStatus, runPython, text, waitFor,
} from "./harness.mjs";

const MiB = 1 << 20;

const { startGateway } = gatewaySuite({ tokens: 2 });

function head(g, token, session, length, accept, protocol = "2025-11-25") {
  return `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nAccept: ${accept}\r\nMCP-Protocol-Version: ${protocol}\r\n` +
    (session ? `Mcp-Session-Id: ${session}\r\n` : "") + `Content-Length: ${length}\r\n\r\n`;
}

// POSTs `message` on a socket of its own. `until(reply)` says when to resolve (with the
// socket and what arrived); the socket closing resolves too.
function post(g, token, session, message, { accept = "application/json, text/event-stream",
  until = () => false } = {}) {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify(message));
    const socket = net.connect(g.port, "127.0.0.1");
    let reply = "";
    let settled = false;
    const settle = () => { if (!settled) { settled = true; resolve({ socket, reply }); } };
    socket.on("error", (e) => (settled ? undefined : reject(e)));
    socket.on("close", settle);
    socket.on("data", (d) => {
      if (reply.length < 4096) reply += d.toString("latin1").slice(0, 4096);
      if (until(reply)) settle();
    });
    socket.write(head(g, token, session, body.length, accept));
    socket.write(body);
  });
}

// A whole HTTP response with Content-Length has arrived.
function complete(reply) {
  const end = reply.indexOf("\r\n\r\n");
  const length = /Content-Length: (\d+)/i.exec(reply);
  return end >= 0 && length && reply.length >= end + 4 + Number(length[1]);
}

async function initialize(g, token) {
  const { socket, reply } = await post(g, token, null, { jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } },
  { accept: "application/json", until: complete });
  socket.destroy();
  const id = /Mcp-Session-Id: (\S+)/i.exec(reply);
  assert.ok(id, reply.slice(0, 300));
  return id[1];
}

// Ends an MCP session (its calls are cancelled).
function deleteSession(g, token, session) {
  return new Promise((resolve) => {
    const socket = net.connect(g.port, "127.0.0.1");
    socket.on("error", resolve);
    socket.on("close", resolve);
    socket.on("data", () => {});
    socket.write(`DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: Bearer ${token}\r\n` +
      `MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: ${session}\r\nConnection: close\r\n\r\n`);
  });
}

const callOf = (id, code, timeout = 150) => ({ jsonrpc: "2.0", id, method: "tools/call",
  params: { name: "run_python", arguments: { code, timeout_seconds: timeout } } });

describe("work in flight after dispatch", () => {
  test("a token's detached calls are bounded per credential; threads and memory stay bounded", async () => {
    const g = await startGateway(["--resume_grace=600s"]);
    const [A] = g.tokens;
    const sessions = [];
    for (let i = 0; i < 4; i++) sessions.push(await initialize(g, A));
    // A sleeping run on each session's sandbox: the calls below wait behind it.
    const sleepers = [];
    for (const s of sessions) {
      sleepers.push(await post(g, A, s, callOf(1, "import time; time.sleep(200)", 250),
        { until: (r) => r.includes("id:") }));
    }
    const beforeThreads = procStatus(g.proc.pid, "Threads");
    const beforeRss = procStatus(g.proc.pid, "VmRSS");
    try {
      // 4 x 30 calls of 2 MiB of code, then 4 x 30 small ones, each client leaving after
      // the priming event: unbounded, 240 threads and ~700 MiB.
      const big = "pass\n#" + "x".repeat(2 * MiB);
      let id = 100;
      for (const code of [big, "pass"]) {
        for (const s of sessions) {
          for (let k = 0; k < 30; k++) {
            const { socket } = await post(g, A, s, callOf(id++, code), { until: (r) => r.includes("id:") });
            socket.destroy();
          }
        }
      }
      const peak = procStatus(g.proc.pid, "VmHWM");
      const nowThreads = procStatus(g.proc.pid, "Threads");
      console.log(`240 detached calls of one token: threads ${beforeThreads} -> ${nowThreads}, ` +
        `VmRSS ${beforeRss.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
      // At most --max_calls_in_flight_per_credential (64) calls, a thread each (and a few
      // the gateway starts for its own ends).
      assert.ok(nowThreads <= beforeThreads + 72, `threads ${beforeThreads} -> ${nowThreads}`);
      // The bytes the calls hold: at most --max_call_bytes_in_flight_per_credential (16 MiB)
      // of arguments, and the copies a request passes through on its way in.
      assert.ok(peak < beforeRss + 128, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
      // Every call so far was started or refused; one more is refused at once, the flag named.
      const probe = await post(g, A, sessions[0], callOf(id++, "pass"),
        { accept: "application/json", until: complete });
      probe.socket.destroy();
      assert.match(probe.reply, /"error".*--max_calls?_(bytes_)?in_flight_per_credential/s, probe.reply);
      // Token B has bounds of its own.
      assert.deepEqual(await listToolNames(g, 1), ["run_python", "run_javascript"]);
    } finally {
      for (const s of sleepers) s.socket.destroy();
      for (const s of sessions) await deleteSession(g, A, s);
    }
  });
  test("a token's concurrent resources/read of an 8 MB file are bounded; memory stays bounded", async () => {
    const g = await startGateway(["--spill_stdout_bytes=0"]);
    const [A] = g.tokens;
    const uri = "sandbox://session/default/out/big.bin";
    const clients = [];
    const sockets = [];
    try {
      for (let i = 0; i < 4; i++) {
        const c = await g.client(`reader-${i}`);
        clients.push(c);
        const made = await runPython(c, "import os\nos.makedirs('out', exist_ok=True)\n" +
          "open('out/big.bin', 'wb').write(os.urandom(8 * 1024 * 1024 - 4096))");
        assert.ok(!made.isError, text(made));
      }
      const before = procStatus(g.proc.pid, "VmRSS");
      // 64 reads at once, 16 per session, on sockets that take the first KiBs and then
      // never read again. Each settles refused (a whole small answer), streaming (the
      // answer's first KiB), or closed (past the pending-write budget).
      const started = (r) => complete(r) || (r.includes("\r\n\r\n") &&
        r.length - r.indexOf("\r\n\r\n") >= 1024);
      const reads = [];
      for (let i = 0; i < 64; i++) {
        const session = clients[i % 4].transport.sessionId;
        reads.push(post(g, A, session, { jsonrpc: "2.0", id: 1000 + i, method: "resources/read", params: { uri } },
          { accept: "application/json", until: started }).then((r) => { r.socket.pause(); sockets.push(r.socket); return r; }));
      }
      const replies = (await Promise.all(reads)).map((r) => r.reply);
      const peak = procStatus(g.proc.pid, "VmHWM");
      const refused = replies.filter((r) => /max_resource_reads_in_flight/.test(r));
      console.log(`64 concurrent reads of an 8 MB file: ${refused.length} refused; gateway VmRSS ` +
        `${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
      // Unbounded, ~40 MB per read in flight (the file, its base64, the JSON, the framing).
      assert.ok(peak < before + 160, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
      assert.ok(refused.length > 0, replies[63].slice(0, 400));
      assert.match(refused[0], /"error".*--max_resource_reads_in_flight(_per_credential)?=/s);
      assert.deepEqual(await listToolNames(g, 1), ["run_python", "run_javascript"]);
      for (const s of sockets) s.destroy();
      // Once they are gone (and the reads they started are cancelled), a read of A is served whole.
      await waitFor(() => clients[0].readResource({ uri }).then(
        (read) => read.contents[0].blob.length > 10_000_000, () => false), "a read of A is served");
    } finally {
      for (const s of sockets) s.destroy();
      for (const c of clients) await c.close();
    }
  });
});
