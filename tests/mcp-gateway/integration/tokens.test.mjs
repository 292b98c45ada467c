// The bearer token against another local user (uid 65534 through setpriv): a token file
// in a directory others can write (a sticky one, like /tmp) is created without giving them
// the token or the file, and no log line or command line shows the token.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { GATEWAY_BIN, freePort, stopAll, tempDir, track, waitFor, writeConfig } from "./harness.mjs";

const NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"];

// What the other user runs: `plant DIR PID` creates the name the gateway used for its
// temporary file (<token>.<pid>.tmp), world-writable, and keeps it open; after a line on
// stdin it prints what that file and the token file hold, or why it could not read them.
const ATTACKER = `
import os, sys
d, pid = sys.argv[1], sys.argv[2]
os.umask(0)
fd = os.open(os.path.join(d, "token.%s.tmp" % pid), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
print("planted", flush=True)
sys.stdin.readline()
os.lseek(fd, 0, 0)
print("planted", repr(os.read(fd, 4096)))
try:
    print("token", repr(open(os.path.join(d, "token")).read()))
except OSError as e:
    print("token", "denied:", e.strerror)
`;

// The attacker, as uid 65534, from a directory it can read (not the one it attacks:
// the old code made that one 0700).
function attacker(dir, pid) {
  const home = tempDir("gwattacker-");
  fs.chmodSync(home, 0o755);
  const script = path.join(home, "attacker.py");
  fs.writeFileSync(script, ATTACKER, { mode: 0o644 });
  const proc = track(spawn("setpriv", [...NOBODY, "/usr/bin/python3", script, dir, String(pid)],
    { stdio: ["pipe", "pipe", "pipe"] }));
  const a = { out: "" };
  proc.stdout.on("data", (d) => { a.out += d; });
  proc.stderr.on("data", (d) => { a.out += d; });
  a.planted = () => waitFor(() => a.out.includes("planted"), "the attacker's plant", 10000);
  a.report = async () => {
    const exited = new Promise((r) => proc.once("exit", r));
    proc.stdin.end("go\n");
    await exited;
    return a.out;
  };
  return a;
}

// A world-writable sticky directory, as /tmp is.
function stickyDir() {
  const dir = tempDir("gwtoken-");
  fs.chmodSync(dir, 0o1777);
  return dir;
}

// A gateway whose pid is known before it starts: a shell that waits for a line on stdin,
// then execs the gateway (same pid).
async function heldGateway(args, env = {}) {
  const port = await freePort();
  const proc = track(spawn("setpriv", ["--pdeathsig", "KILL", "--", "sh", "-c", 'read _ && exec "$0" "$@"',
    GATEWAY_BIN, "--transport=http", `--listen=127.0.0.1:${port}`, `--config=${writeConfig({})}`,
    "--sandboxd=unix:/nonexistent/sandboxd.sock", ...args],
  { stdio: ["pipe", "ignore", "pipe"], env: { ...process.env, MCP_GATEWAY_TOKEN: "", ...env } }));
  const gw = { proc, port, log: "", url: `http://127.0.0.1:${port}/mcp` };
  proc.stderr.on("data", (d) => { gw.log += d; });
  gw.release = () => proc.stdin.write("go\n");
  gw.ready = () => waitFor(() => gw.log.includes("claude mcp add"), "the ready snippet", 30000);
  return gw;
}

async function initialize(url, token) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      Authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
  });
  await r.body?.cancel();
  return r.status;
}

describe("bearer tokens against other local users", () => {
  after(() => stopAll());

  test("a temporary file planted in a sticky directory captures neither the token nor the file", async () => {
    const dir = stickyDir();
    const file = path.join(dir, "token");
    const gw = await heldGateway([`--token_file=${file}`]);
    const other = attacker(dir, gw.proc.pid);
    await other.planted();
    gw.release();
    await gw.ready();
    const token = fs.readFileSync(file, "utf8").trim();
    assert.match(token, /^[0-9a-f]{64}$/);
    const seen = await other.report();
    assert.ok(!seen.includes(token), `the other user read the token:\n${seen}`);
    assert.match(seen, /token denied/);
    const st = fs.lstatSync(file);
    assert.equal(st.uid, process.getuid());
    assert.equal(st.mode & 0o7777, 0o600);
    assert.equal(fs.statSync(dir).mode & 0o7777, 0o1777, "the directory's mode was changed");
    assert.equal(await initialize(gw.url, token), 200);
    assert.ok(!gw.log.includes(token), "the token appears in the gateway's log");
  });

  test("a token file another user placed first is refused, with the reason", async () => {
    const dir = stickyDir();
    const file = path.join(dir, "token");
    execFileSync("setpriv", [...NOBODY, "sh", "-c", `umask 077; echo 0123456789abcdef0123456789abcdef > ${file}`]);
    const gw = await heldGateway([`--token_file=${file}`]);
    gw.release();
    const code = await new Promise((r) => gw.proc.once("exit", r));
    assert.notEqual(code, 0);
    assert.match(gw.log, /not a regular file owned by us/);
  });

  test("--token is hidden from the command line and warned about; no log line carries it", async () => {
    const token = "f".repeat(16) + Date.now().toString(16);
    const gw = await heldGateway([`--token=${token}`]);
    gw.release();
    await gw.ready();
    const cmdline = fs.readFileSync(`/proc/${gw.proc.pid}/cmdline`, "utf8");
    assert.ok(!cmdline.includes(token), "the token is still in /proc/<pid>/cmdline");
    assert.match(gw.log, /--token on the command line is readable by every local user/);
    assert.ok(gw.log.includes("$MCP_GATEWAY_TOKEN"));
    assert.equal(await initialize(gw.url, token), 200);
    const fromEnv = "e".repeat(16) + Date.now().toString(16);
    const gw2 = await heldGateway([], { MCP_GATEWAY_TOKEN: fromEnv });
    gw2.release();
    await gw2.ready();
    assert.equal(await initialize(gw2.url, fromEnv), 200);
    assert.doesNotMatch(gw2.log, /--token on the command line/);
    for (const [g, t] of [[gw, token], [gw2, fromEnv]]) {
      assert.ok(!g.log.includes(t), `the token appears in the gateway's log:\n${g.log}`);
    }
  });
});
