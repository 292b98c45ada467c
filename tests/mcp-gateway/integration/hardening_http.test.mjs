// The gateway's HTTP front against hostile peers, with the real binaries and raw sockets
// (issue 27): chunked bodies whose chunk extension or trailer never ends must not grow the
// gateway, and another local user without a token must not keep a token holder out by
// holding connections or asking again and again (its flood pushes out only its own
// connections: server/http_admission.h).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { gatewaySuite, listToolNames, procStatus, track } from "./harness.mjs";

const FLOOD = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "unauth_flood.py");

// Sends `head`, then `total` bytes of `filler` as fast as the gateway takes them (it may
// answer and close first); resolves with what it answered and how much was sent.
function sendEndless(port, head, filler, total) {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: "127.0.0.1" });
    let reply = "";
    let sent = 0;
    let done = false;
    const finish = () => { if (!done) { done = true; socket.destroy(); resolve({ reply, sent }); } };
    const block = Buffer.alloc(1 << 20, filler);
    const pump = () => {
      while (!done && sent < total) {
        sent += block.length;
        if (!socket.write(block)) return socket.once("drain", pump);
      }
    };
    socket.on("connect", () => { socket.write(head); pump(); });
    socket.on("data", (d) => { reply += d; });
    socket.on("end", finish);
    socket.on("close", finish);
    socket.on("error", finish);
  });
}

describe("the HTTP front against hostile peers", () => {
  const { startGateway } = gatewaySuite();

  test("an endless chunk extension and an endless trailer get 431 and do not grow the gateway", async () => {
    const gateway = await startGateway();
    const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${gateway.token}\r\n` +
      "Content-Type: application/json\r\nAccept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    const before = procStatus(gateway.proc.pid, "VmRSS");
    const total = 384 << 20;
    const { reply: extension, sent: extensionSent } = await sendEndless(gateway.port, head + "1;x=", "a", total);
    const { reply: trailer, sent: trailerSent } =
      await sendEndless(gateway.port, head + "2\r\n{}\r\n0\r\nX-Trailer: ", "b", total);
    const peak = procStatus(gateway.proc.pid, "VmHWM");
    const now = procStatus(gateway.proc.pid, "VmRSS");
    console.log(`gateway VmRSS ${before.toFixed(0)} MiB before, ${now.toFixed(0)} after, ` +
      `peak ${peak.toFixed(0)} MiB, after ${extensionSent >> 20} MiB of chunk extension and ` +
      `${trailerSent >> 20} MiB of trailer (up to ${total >> 20} MiB each, until the gateway answers)`);
    assert.match(extension, /^HTTP\/1\.1 431 /, extension.slice(0, 300));
    assert.match(trailer, /^HTTP\/1\.1 431 /, trailer.slice(0, 300));
    assert.ok(peak < 128, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
    assert.deepEqual(await listToolNames(gateway), ["run_python", "run_javascript"]);
  });

  test("another local user without a token cannot keep a token holder out", async () => {
    const max = 16;
    const gateway = await startGateway([`--max_http_connections=${max}`]);
    // The attacker's script must be readable by uid 65534: a world-readable copy.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-flood-"));
    fs.chmodSync(dir, 0o755);
    const script = path.join(dir, "unauth_flood.py");
    fs.copyFileSync(FLOOD, script);
    fs.chmodSync(script, 0o644);
    const attacker = track(spawn("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
      "--pdeathsig", "KILL", "/usr/bin/python3", script, String(gateway.port), String(3 * max)],
    { stdio: ["ignore", "pipe", "inherit"] }));
    let out = "";
    attacker.stdout.on("data", (d) => { out += d; });
    try {
      await new Promise((resolve, reject) => {
        attacker.stdout.on("data", () => { if (out.includes("holding")) resolve(); });
        attacker.once("exit", (code) => reject(new Error(`the attacker exited (${code}): ${out}`)));
      });
      assert.deepEqual(await listToolNames(gateway), ["run_python", "run_javascript"]);
      assert.equal(attacker.exitCode, null, "the attack was still running");
      console.log(`attacker (uid 65534, ${3 * max} connections): ${out.trim().split("\n").pop()}`);
    } finally {
      attacker.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
