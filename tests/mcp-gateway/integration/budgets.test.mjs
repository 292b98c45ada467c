// Issue 27: bytes a token holder can make the gateway hold across connections, against the
// real gateway and sandboxd.
//  - Requests being received are charged to the credential's budget and the gateway's
//    (--max_request_bytes_in_flight[_per_credential]): one token trickling 4 MiB bodies,
//    or endless headers on its kept-alive connections, gets 503 past its share, and
//    another token is served.
//  - Responses queued for clients that do not read are charged the same way
//    (--max_pending_write_bytes[_per_credential]): one token asking for 8 MB resources on
//    many connections it never reads loses those connections past its share.
//  - Those budgets of one credential add up in its share of the gateway's ceiling
//    (--max_buffered_bytes_per_credential): bodies it holds leave less for its responses.
//  - A client's message may hold only so many JSON values (--max_message_json_values):
//    a 3 MB body of a million empty arrays would parse into ~60 MiB.
//  - Two tokens holding the ceiling down to its reserve leave a third its medium tool
//    results and answers (fair shares of the reserve; the write overdraft).
// Memory is read from /proc/<pid>/status (VmHWM: the peak).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  gatewaySuite, listToolNames, procStatus, runPython, text, track, waitFor,
} from "./harness.mjs";
import { startHugeAnswerUpstream } from "./fixtures/huge_answer_upstream.mjs";

const UNREAD = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "unread_responses.py");
const MiB = 1 << 20;

const { startGateway } = gatewaySuite({ tokens: 2 });

// Python defining one(): awaits `call`, returns `ok` (an expression of its result r), or
// 'ERR ' and the start of the error.
const one = (call, ok) => [
  "async def one():",
  "    try:",
  `        r = await ${call}`,
  `        return ${ok}`,
  "    except Exception as e:",
  "        return 'ERR ' + str(e)[:300]",
];

// Sends the headers of a POST declaring `length` bytes of body and all but the last byte
// of it; resolves with the socket once the gateway answered (a refusal) or took it all
// (the request is held, its body unfinished).
function trickleBody(g, token, length) {
  return new Promise((resolve) => {
    const socket = net.connect(g.port, "127.0.0.1");
    let reply = "";
    let settled = false;
    const settle = () => { if (!settled) { settled = true; resolve({ socket, reply: () => reply }); } };
    socket.on("error", settle);
    socket.on("close", settle);
    socket.on("data", (d) => { reply += d; if (reply.includes("\r\n\r\n")) settle(); });
    socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
      `Content-Length: ${length}\r\n\r\n`);
    socket.write(Buffer.alloc(length - 1, " "), () => setTimeout(settle, 50));
  });
}

// initialize over a socket of its own (Connection: close); the new session's id.
function rawInitialize(g, token) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(g.port, "127.0.0.1");
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
      protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    let reply = "";
    socket.on("error", reject);
    socket.on("data", (d) => { reply += d; });
    socket.on("close", () => {
      const id = /Mcp-Session-Id: (\S+)/i.exec(reply);
      if (id) resolve(id[1]); else reject(new Error(reply.slice(0, 300)));
    });
    socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
      `Connection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  });
}

// A connection that made one request (ping, in `session`) and is kept alive: it has passed
// the checks with `token`.
function keptAlive(g, token, session) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(g.port, "127.0.0.1");
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    let reply = "";
    socket.on("error", reject);
    socket.on("data", (d) => {
      reply += d;
      const end = reply.indexOf("\r\n\r\n");
      const length = /Content-Length: (\d+)/i.exec(reply);
      if (end < 0 || !length || reply.length < end + 4 + Number(length[1])) return;
      socket.removeAllListeners("data");
      if (/^HTTP\/1\.1 200 /.test(reply)) resolve(socket);
      else reject(new Error(reply.slice(0, 300)));
    });
    socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
      `Mcp-Session-Id: ${session}\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  });
}

// Starts unread_responses.py: `connections` requests for the 8 MB out/big.txt of `session`
// that are never read. Resolves once each has its first bytes, with the counts of those the
// gateway kept open and closed, and the reader to kill.
async function holdUnread(g, token, session, connections) {
  const reader = track(spawn("python3", [UNREAD, String(g.port), token, session,
    "sandbox://session/default/out/big.txt", String(connections)], { stdio: ["ignore", "pipe", "inherit"] }));
  let out = "";
  reader.stdout.on("data", (d) => { out += d; });
  try {
    await new Promise((resolve, reject) => {
      reader.stdout.on("data", () => { if (out.includes("holding")) resolve(); });
      reader.once("exit", (code) => reject(new Error(`the reader exited (${code}): ${out}`)));
    });
  } catch (e) {
    reader.kill("SIGKILL");
    throw e;
  }
  const [, open, closed] = /holding (\d+) (\d+)/.exec(out).map(Number);
  return { reader, open, closed, out: out.trim() };
}

describe("what a token holder can make the gateway hold across connections", () => {
  test("trickled bodies past the credential's budget get 503, and another token is served", async () => {
    const g = await startGateway();
    const [A] = g.tokens;
    const before = procStatus(g.proc.pid, "VmRSS");
    const held = [];
    try {
      // 48 connections of 4 MiB each: 192 MiB of bodies if the gateway held them all.
      for (let i = 0; i < 48; i++) held.push(await trickleBody(g, A, 4 * MiB));
      const refused = held.filter((h) => /^HTTP\/1\.1 503 /.test(h.reply()));
      const waiting = held.filter((h) => h.reply() === "");
      const peak = procStatus(g.proc.pid, "VmHWM");
      console.log(`48 trickled 4 MiB bodies: ${waiting.length} held, ${refused.length} refused with 503; ` +
        `gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
      assert.ok(refused.length > 0, `no body was refused: ${held[47].reply().slice(0, 200)}`);
      assert.match(refused[0].reply(), /Retry-After: 1/);
      assert.match(refused[0].reply(), /max_request_bytes_in_flight/);
      // The default per-credential budget (16 MiB) holds four 4 MiB bodies at once.
      assert.ok(waiting.length <= 4, `${waiting.length} bodies held`);
      assert.ok(peak < before + 64, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
      // Token B has a budget of its own.
      assert.deepEqual(await listToolNames(g, 1), ["run_python", "run_javascript"]);
    } finally {
      for (const h of held) h.socket.destroy();
    }
    // Released: A's bodies are accepted again once its connections are gone.
    const again = await trickleBody(g, A, 4 * MiB);
    assert.equal(again.reply(), "", "a body of A is read again");
    again.socket.destroy();
  });

  test("headers that never end on a token's kept-alive connections are bounded by its budget", async () => {
    const g = await startGateway(["--http_header_timeout=600s"]);
    const [A] = g.tokens;
    // A's requests go over sockets of their own: a kept-alive connection's next headers are
    // charged to the credential that used it last, and the witness's pooled fetch must not
    // ride on one of A's.
    const session = await rawInitialize(g, A);
    const before = procStatus(g.proc.pid, "VmRSS");
    const sockets = [];
    const replies = [];
    try {
      // 2000 connections x 59 KB of one header field: 113 MiB if the gateway held them all.
      for (let i = 0; i < 2000; i++) {
        const socket = await keptAlive(g, A, session);
        sockets.push(socket);
        const reply = { text: "" };
        replies.push(reply);
        socket.on("data", (d) => { reply.text += d; });
        socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nX-Pad: ${"a".repeat(59000)}`);
      }
      await new Promise((r) => setTimeout(r, 500));  // let the last ones be read (not a bound)
      const refused = replies.filter((r) => /^HTTP\/1\.1 503 /.test(r.text)).length;
      const peak = procStatus(g.proc.pid, "VmHWM");
      console.log(`2000 kept-alive connections sending endless headers: ${refused} refused with 503; ` +
        `gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
      assert.ok(refused > 0, "no connection was refused");
      assert.ok(peak < before + 64, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
      assert.deepEqual(await listToolNames(g, 1), ["run_python", "run_javascript"]);
    } finally {
      for (const s of sockets) s.destroy();
    }
    // A's budget comes back as its connections close.
    await waitFor(() => keptAlive(g, A, session).then((s) => { s.destroy(); return true; }, () => false),
      "a request of A is read again");
  });

  test("a message of a million JSON values is refused before it is built", async () => {
    const g = await startGateway();
    const [A] = g.tokens;
    const session = await rawInitialize(g, A);
    // A 3 MB ping (within --max_body_bytes) whose _meta holds a million empty arrays.
    const body = JSON.stringify({ jsonrpc: "2.0", id: 5, method: "ping", params: { _meta: { junk: "JUNK" } } })
      .replace('"JUNK"', "[" + "[],".repeat(1000000) + "[]]");
    const post = () => fetch(g.url, { method: "POST", body, headers: {
      Authorization: `Bearer ${A}`, "Content-Type": "application/json", Accept: "application/json",
      "Mcp-Session-Id": session } }).then(async (r) => ({ status: r.status, text: await r.text() }));
    const before = procStatus(g.proc.pid, "VmRSS");
    const replies = [];
    // Four at a time: 12 MB of bodies fit in the credential's request budget (16 MiB).
    for (let round = 0; round < 6; round++) replies.push(...await Promise.all(Array.from({ length: 4 }, post)));
    const peak = procStatus(g.proc.pid, "VmHWM");
    console.log(`24 pings of a million values: gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
    for (const r of replies) {
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.text, /-32700.*values/, r.text.slice(0, 300));
    }
    // Parsed whole, each would be a ~60 MiB document, two at a time (the event-loop threads).
    assert.ok(peak < before + 64, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
    assert.deepEqual(await listToolNames(g, 1), ["run_python", "run_javascript"]);
  });

  test("responses a token's clients never read are bounded by its budget", async () => {
    const g = await startGateway(["--spill_stdout_bytes=0"]);
    const [A] = g.tokens;
    const client = await g.client("token-a");
    let session;
    try {
      const made = await runPython(client, "import os\nos.makedirs('out', exist_ok=True)\nopen('out/big.txt', 'w').write('x' * 8_000_000)");
      assert.ok(!made.isError, text(made));
      session = client.transport.sessionId;
      const before = procStatus(g.proc.pid, "VmRSS");
      const { reader, open, closed, out } = await holdUnread(g, A, session, 40);
      try {
        const peak = procStatus(g.proc.pid, "VmHWM");
        const now = procStatus(g.proc.pid, "VmRSS");
        console.log(`40 unread 8 MB responses (${out}): gateway VmRSS ${before.toFixed(0)} MiB before, ` +
          `${now.toFixed(0)} MiB while held, peak ${peak.toFixed(0)} MiB`);
        // Unbounded, the gateway would hold about 40 x 8 MB = 305 MiB of queued responses.
        // The default per-credential budget (48 MiB) keeps six; the others are closed.
        assert.ok(closed > 0 && open <= 6, out);
        // A read's copies are charged to the token's share while it is built: with the
        // share held by unread answers, further reads are refused with an error (before,
        // they were all built, and only their connections closed: "holding 6 34 0").
        const refused = Number(out.trim().split(/\s+/)[3]);
        assert.ok(refused > 0, out);
        assert.ok(peak < before + 128, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
        assert.deepEqual(await listToolNames(g, 1), ["run_python", "run_javascript"]);
      } finally {
        reader.kill("SIGKILL");
      }
      // A's own client still works once its unread connections are gone.
      const result = await runPython(client, "print(len(open('out/big.txt').read()))");
      assert.match(text(result), /8000000/);
    } finally {
      await client.close();
    }
  });

  test("one token's bodies and unread responses add up in its share of the ceiling", async () => {
    // A share of 24 MiB: 16 MiB of bodies (all the request budget allows) leave room for
    // one 8 MB response, where the write budget alone would keep six.
    const g = await startGateway(["--spill_stdout_bytes=0", `--max_buffered_bytes_per_credential=${24 * MiB}`]);
    const [A] = g.tokens;
    const client = await g.client("token-a");
    const held = [];
    try {
      const made = await runPython(client, "import os\nos.makedirs('out', exist_ok=True)\nopen('out/big.txt', 'w').write('x' * 8_000_000)");
      assert.ok(!made.isError, text(made));
      const session = client.transport.sessionId;
      for (let i = 0; i < 4; i++) held.push(await trickleBody(g, A, 4 * MiB));
      assert.ok(held.every((h) => h.reply() === ""), held.map((h) => h.reply().slice(0, 100)).join("|"));
      const { reader, open, closed, out } = await holdUnread(g, A, session, 6);
      try {
        console.log(`4 held 4 MiB bodies, then 6 unread 8 MB responses: ${open} kept, ${closed} closed`);
        assert.ok(open <= 1 && closed >= 5, out);
      } finally {
        reader.kill("SIGKILL");
      }
    } finally {
      for (const h of held) h.socket.destroy();
    }
    // A's share comes back as its connections close.
    await waitFor(() => trickleBody(g, A, 4 * MiB).then((h) => { h.socket.destroy(); return h.reply() === ""; }),
      "a body of A is read again");
    await client.close();
  });

  // Two credentials, each inside its share (half the ceiling), hold the ceiling down to
  // its reserve (the last eighth); a third credential's results past a 64th of the ceiling
  // must still take the reserve, and its connections must not be closed when a response
  // write is refused. Here the two hold request bodies they never finish (charged whole
  // when their headers arrive: the same state as a flood of large results, without its
  // races); the third token's calls come after.
  test("two tokens holding the ceiling leave a third its medium results and its answers", async () => {
    const upstream = await startHugeAnswerUpstream();
    // The ceiling and shares at their defaults (128 and 64 MiB); bodies may take all of them.
    const g = await startGateway([`--max_request_bytes_in_flight=${128 * MiB}`,
      `--max_request_bytes_in_flight_per_credential=${64 * MiB}`],
    { tokens: 3, servers: { huge: { type: "http", url: upstream.url } } });
    const held = [];
    const refusals = [];
    try {
      for (const i of [0, 1]) {
        for (let n = 0; n < 40; n++) {
          const h = await trickleBody(g, g.tokens[i], 4 * MiB);
          held.push(h);
          if (h.reply() === "" && !h.socket.destroyed) continue;
          refusals.push(h.reply().split("\r\n")[0] || "closed without an answer");
          break;
        }
      }
      // A holds its share (16 bodies), B the ceiling down to its reserve (12 bodies: past
      // its fair share, a third of the ceiling, the last 16 MiB are not for B).
      const holding = held.filter((h) => h.reply() === "" && !h.socket.destroyed).length;
      const victim = await g.client("victim", g.as(2));
      const medium = [];
      for (let i = 0; i < 5; i++) {
        const r = await runPython(victim, [
          ...one(`mcp_huge.big_sized(bytes=${3 * MiB})`, "len(r)"),
          "print(await one())",
        ].join("\n"));
        medium.push(text(r).trim());
      }
      const small = [];
      for (let i = 0; i < 10; i++) {
        const c = await g.client(`small-${i}`, g.as(2));
        try {
          small.push(text(await runPython(c, "print(1)")).trim());
        } finally {
          await c.close();
        }
      }
      await victim.close();
      console.log(`two tokens hold ${holding} bodies of 4 MiB, then: ${refusals.join(", ")}; ` +
        `the third token's 3 MiB results: ` +
        `${medium.join(" | ").slice(0, 600)}; small runs: ${small.join(",").replace(/\n/g, " ")}`);
      assert.equal(holding, 28, "the ceiling is held down to its reserve");
      // Their next bodies are refused with an answer, not a closed connection (the 503
      // holds no budget: it is written from the overdraft).
      assert.deepEqual(refusals, ["HTTP/1.1 503 Service Unavailable", "HTTP/1.1 503 Service Unavailable"]);
      const has = (out, line) => out.split("\n").includes(line);
      assert.ok(medium.every((out) => has(out, String(3 * MiB))), medium.join("\n").slice(0, 2000));
      assert.ok(small.every((out) => has(out, "1")), small.join("\n").slice(0, 2000));
      assert.doesNotMatch(g.log, /closing one with/, "a connection was closed for want of budget");
    } finally {
      for (const h of held) h.socket.destroy();
      await upstream.close();
    }
  });
});
