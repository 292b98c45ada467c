// Issue 27, defects 2 and 3, against the real gateway and sandboxd:
//  - an MCP session belongs to the credential that created it: with --token=A,B, B cannot
//    run code in, read, resume or end A's session, and is told exactly what an unknown
//    session id gets;
//  - resuming a stream does not multiply memory: 300 non-reading resumptions of a finished
//    call with a 6 MB response keep the gateway under 256 MiB (VmHWM), and a finished
//    stream cannot be kept alive past --resume_grace by re-attaching it.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { GatewayHttp, Sandboxd, everythingStdio, procStatus, stopAll, waitFor, writeConfig } from "./harness.mjs";

const PROTOCOL = "2025-11-25";
const INIT = {
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};
const runPython = (id, code) => ({
  jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_python", arguments: { code } },
});

let sandboxd, config;
before(async () => {
  // Stdout up to 16 MiB, so that one run can answer with a 6 MB result; an Execute stream
  // then holds up to twice that and the displays (2 MiB).
  sandboxd = new Sandboxd(["--max_output_bytes=16777216", "--max_stream_buffer_bytes=37748736"]);
  await sandboxd.start();
  config = writeConfig({ everything: everythingStdio() });
});
after(async () => {
  await sandboxd?.stop();
  await stopAll();
});

async function startGateway(args, tokens) {
  const g = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, extraArgs: args });
  g.env.MCP_GATEWAY_TOKEN = tokens.join(",");  // a command line is readable by other users
  g.token = tokens[0];
  await g.start();
  return g;
}

// One request with fetch; the SSE or JSON body as text.
async function request(g, token, method, { session, body, headers = {} } = {}) {
  const res = await fetch(g.url, {
    method,
    headers: {
      Authorization: `Bearer ${token}`, Accept: method === "GET" ? "text/event-stream" : "application/json, text/event-stream",
      "Content-Type": "application/json", "MCP-Protocol-Version": PROTOCOL,
      ...(session ? { "Mcp-Session-Id": session } : {}), ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(120000),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

async function initialize(g, token) {
  const r = await request(g, token, "POST", { body: INIT });
  assert.equal(r.status, 200, r.text);
  const session = r.headers.get("mcp-session-id");
  const ack = await request(g, token, "POST", { session, body: { jsonrpc: "2.0", method: "notifications/initialized" } });
  assert.equal(ack.status, 202);
  return session;
}

// The JSON messages of an SSE body.
const messages = (sse) => sse.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)));

describe("sessions belong to their credential", () => {
  let g;
  const A = randomBytes(16).toString("hex");
  const B = randomBytes(16).toString("hex");
  before(async () => { g = await startGateway([], [A, B]); });
  after(async () => { await g?.stop(); });

  test("token B cannot run code in, read, resume or DELETE token A's session", async () => {
    const a = await initialize(g, A);
    let r = await request(g, A, "POST", { session: a, body: runPython(2, "secret = 41\nprint('set')") });
    assert.equal(r.status, 200, r.text);
    const eventId = /^id: (\d+-\d+)$/m.exec(r.text)?.[1];
    assert.ok(eventId, r.text);

    // What an unknown session id gets: B must get exactly that for A's.
    const unknown = await request(g, B, "POST", { session: "0".repeat(32), body: runPython(3, "print(1)") });
    assert.equal(unknown.status, 404);
    const attempts = [
      ["POST", { body: runPython(3, "print(secret)\nsecret = 666") }],
      ["POST", { body: { jsonrpc: "2.0", id: 4, method: "tools/list" } }],
      ["GET", {}],
      ["GET", { headers: { "Last-Event-ID": eventId } }],
      ["DELETE", {}],
    ];
    for (const [method, opts] of attempts) {
      const got = await request(g, B, method, { session: a, ...opts });
      assert.equal(got.status, 404, `${method} ${JSON.stringify(opts)}: ${got.text}`);
      assert.equal(got.text, unknown.text, `${method}: the same body as an unknown session`);
    }
    // A's session is intact: its variable unchanged, and A can still end it.
    r = await request(g, A, "POST", { session: a, body: runPython(5, "print(secret)") });
    assert.equal(r.status, 200, r.text);
    const result = messages(r.text).find((m) => m.id === 5);
    assert.match(JSON.stringify(result.result), /41/);
    assert.doesNotMatch(JSON.stringify(result.result), /666/);
    r = await request(g, A, "DELETE", { session: a });
    assert.equal(r.status, 200);
    r = await request(g, A, "POST", { session: a, body: { jsonrpc: "2.0", id: 6, method: "tools/list" } });
    assert.equal(r.status, 404);
  });
});

// A raw HTTP request on its own socket that reads until `until(text)` holds, then stops
// reading (the socket stays open: a client that does not read).
function rawUntil(g, head, until) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(g.port, "127.0.0.1");
    let text = "";
    socket.on("error", () => {});
    socket.on("data", (d) => {
      text += d.toString("latin1");
      if (until(text)) {
        socket.pause();
        socket.removeAllListeners("data");
        resolve({ socket, text });
      } else if (/^HTTP\/1\.1 [45]\d\d/.test(text) && text.includes("\r\n\r\n")) {
        reject(new Error(`refused: ${text.slice(0, 400)}`));
      }
    });
    socket.on("close", () => reject(new Error(`closed after: ${text.slice(0, 400)}`)));
    socket.write(head);
  });
}

const headLines = (g, method, session, extra = []) => [
  `${method} /mcp HTTP/1.1`, `Host: 127.0.0.1:${g.port}`, `Authorization: Bearer ${g.token}`,
  "Accept: application/json, text/event-stream", `MCP-Protocol-Version: ${PROTOCOL}`,
  `Mcp-Session-Id: ${session}`, ...extra];

// Starts run_python printing `bytes` on a raw SSE stream, drops it after the priming event
// and returns the stream number: the call goes on, resumable.
async function startBigCall(g, session, bytes) {
  const body = JSON.stringify(runPython(2, `import sys\nsys.stdout.write("x" * ${bytes})`));
  const head = [...headLines(g, "POST", session, ["Content-Type: application/json", `Content-Length: ${body.length}`]),
    "", body].join("\r\n");
  const { socket, text } = await rawUntil(g, head, (t) => /\nid: \d+-1\n/.test(t));
  socket.destroy();
  return /\nid: (\d+)-1\n/.exec(text)[1];
}

// GET with Last-Event-ID <stream>-1: resolves once the replayed response's chunk header
// (its size) and event id arrived; the client reads nothing more.
const resume = (g, session, stream) => rawUntil(g,
  [...headLines(g, "GET", session, [`Last-Event-ID: ${stream}-1`]), "", ""].join("\r\n"),
  (t) => new RegExp(`\\r\\n([0-9a-f]+)\\r\\nid: ${stream}-2\\n`).test(t));
const chunkSize = (text, stream) => parseInt(new RegExp(`\\r\\n([0-9a-f]+)\\r\\nid: ${stream}-2\\n`).exec(text)[1], 16);

describe("resumption is bounded", () => {
  const gateways = [];
  after(async () => { for (const g of gateways) await g.stop(); });

  test("300 non-reading resumptions of a 6 MB response keep the gateway under 256 MiB", async () => {
    const g = await startGateway(["--spill_stdout_bytes=0", "--resume_grace=600s"], [randomBytes(16).toString("hex")]);
    gateways.push(g);
    const session = await initialize(g, g.token);
    const stream = await startBigCall(g, session, 6_000_000);
    const sockets = [];
    try {
      for (let i = 0; i < 300; i++) {
        const { socket, text } = await resume(g, session, stream);
        sockets.push(socket);
        assert.ok(chunkSize(text, stream) >= 6_000_000, `resumption ${i} replays the whole response`);
      }
      const hwm = procStatus(g.proc.pid, "VmHWM");
      console.log(`gateway VmHWM after 300 resumptions: ${hwm.toFixed(1)} MiB, VmRSS ${procStatus(g.proc.pid, "VmRSS").toFixed(1)} MiB`);
      assert.ok(hwm < 256, `VmHWM ${hwm.toFixed(1)} MiB`);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  test("a finished stream is dropped after --resume_grace however often it is re-attached", async () => {
    const g = await startGateway(["--spill_stdout_bytes=0", "--resume_grace=2s"], [randomBytes(16).toString("hex")]);
    gateways.push(g);
    const session = await initialize(g, g.token);
    const stream = await startBigCall(g, session, 6_000_000);
    const sockets = [];
    try {
      // Re-attach without reading until a resumption no longer gets the response: the
      // stream was forgotten (then the id is unknown and the GET gets the session stream).
      await waitFor(async () => {
        const got = await rawUntil(g, [...headLines(g, "GET", session, [`Last-Event-ID: ${stream}-1`]), "", ""].join("\r\n"),
          (t) => new RegExp(`\\nid: ${stream}-2\\n`).test(t) || /\nid: \d+-1\n/.test(t));
        sockets.push(got.socket);
        return !new RegExp(`\\nid: ${stream}-2\\n`).test(got.text);
      }, "the finished stream to be forgotten", 30000);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});
