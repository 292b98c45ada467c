// Issue 27: work is bounded by its caller. A cancelled run must end its work in sandboxd
// within seconds, also when its Execute stream is backed up: code that reads none of its
// tool calls' answers can make sandboxd stop reading the stream, a write of an answer then
// blocks holding it, and the old gateway queued the run's `cancel` behind that write (and
// blocked the canceller with it), so the run went on until sandboxd's timeout. Now a
// stream that has not ended within --sandbox_cancel_grace of the cancel gets its gRPC call
// cancelled.
//  - Through the real gateway over HTTP, against a stand-in sandboxd (gRPC, the real
//    proto) whose Execute stops reading after `start`: notifications/cancelled must reach
//    it as a cancelled call, and the MCP session's next run works.
//  - Against the real sandboxd, code that stalls its runner's reader and floods tool calls
//    (everything.echo, MiB each) is cancelled and ends as cancelled (not at its 300 s
//    timeout), and the MCP session's next run, which waited behind it, works in a new
//    sandbox and says why the old one went. (The real sandboxd keeps reading such a
//    stream, bounding the runner's queue instead, so the cancel itself went through before
//    too; the old gateway's next run often said only "no session 's-…'".)
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, test } from "node:test";
import {
  GatewayHttp, NODE_PEERS, Sandboxd, everythingStdio, runPython, stopAll, tempDir, text, writeConfig,
} from "./harness.mjs";

const require = createRequire(path.join(NODE_PEERS, "noop.js"));
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const PROTO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../proto/sandbox/v1/sandbox.proto");

// A sandbox.v1 server on a unix socket. Execute of code that contains "STALL" reports
// that it runs and then reads nothing more from its stream (it ends it only when the call
// is cancelled, or after 120 s: `never cancelled`); other code finishes at once.
async function standInSandboxd() {
  const def = protoLoader.loadSync(PROTO, { includeDirs: [path.resolve(path.dirname(PROTO), "../..")], keepCase: true, enums: String, longs: String, defaults: true, oneofs: true });
  const { SandboxService } = grpc.loadPackageDefinition(def).sandbox.v1;
  const server = new grpc.Server();
  const state = { sessions: 0 };
  let ended;
  state.stallEnded = new Promise((resolve) => { ended = resolve; });  // how the stalled call ended
  const unimplemented = (_call, cb) => cb({ code: grpc.status.UNIMPLEMENTED, details: "not in the stand-in" });
  server.addService(SandboxService.service, {
    CreateSession: (_call, cb) => cb(null, { id: `s-${++state.sessions}`, state: "READY" }),
    DeleteSession: (_call, cb) => cb(null, {}),
    ListFiles: (_call, cb) => cb(null, { files: [] }),
    GetSession: unimplemented, ListSessions: unimplemented, ResetSession: unimplemented,
    Run: unimplemented, GetInfo: unimplemented, UploadFile: unimplemented, DownloadFile: unimplemented,
    Execute: (call) => {
      call.once("data", (m) => {
        const { session_id: sessionId, code } = m.start;
        call.write({ started: { session_id: sessionId, execution_id: "1" } });
        if (!code.includes("STALL")) {
          call.write({ finished: { status: "OK", stdout: "ran\n", execution_id: "1" } });
          call.end();
          return;
        }
        call.write({ output: { stream: "STDOUT", text: "stalled\n" } });
        call.pause();  // reads nothing more: the gateway's cancel message is never taken
        const bound = setTimeout(() => {
          call.write({ finished: { status: "TIMEOUT", error: { type: "Timeout", message: "never cancelled" } } });
          call.end();
          ended("never cancelled");
        }, 120000);
        call.on("cancelled", () => { clearTimeout(bound); ended("cancelled"); });
      });
      call.on("error", () => {});
    },
  });
  const socket = path.join(tempDir("standin-"), "sandboxd.sock");
  await new Promise((resolve, reject) => server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(),
    (err) => (err ? reject(err) : resolve())));
  return { endpoint: `unix:${socket}`, state, stop: () => new Promise((r) => server.tryShutdown(() => r())) };
}

// Code that stops its runner reading (so the answers of its tool calls are never taken) and
// sends `n` everything.echo calls of `mib` MiB straight on the runner's connection.
const STALLED_FLOOD = (n, mib) => `
import gc, time
runner = [o for o in gc.get_objects() if type(o).__name__ == "Runner"][0]
state = runner.current_exec(); conn = state.conn
real = conn._sock
class Stall:
    def __getattr__(self, n): return getattr(real, n)
    def recv_into(self, *a, **k): time.sleep(3600)
conn._sock = Stall()
msg = "x" * int(${mib} * 1024 * 1024)
for i in range(${n}):
    conn.send({"type": "tool_call", "id": state.id, "call_id": "f%d" % i, "server": "everything",
               "tool": "echo", "arguments": {"message": msg}})
    time.sleep(0.05)
print("flooded", flush=True)
time.sleep(3600)
`;

// Starts `code` with progress, resolves `established` on the first progress message that
// matches `marker`; returns the run's promise (which rejects once the run is cancelled).
function startRun(client, code, marker, signal) {
  let established;
  const seen = new Promise((resolve) => { established = resolve; });
  const run = runPython(client, code, { timeout_seconds: 300 },
    { signal, timeout: 400000, onprogress: (p) => { if (marker.test(p.message || "")) established(); } });
  run.catch(() => {});
  return { run, seen };
}

describe("a cancelled run ends its work in sandboxd", () => {
  const stops = [];
  after(async () => {
    for (const stop of stops.reverse()) await stop();
    await stopAll();
  });

  test("a cancel reaches a sandboxd that reads nothing more from the run's stream", async () => {
    const sandboxd = await standInSandboxd();
    stops.push(sandboxd.stop);
    const gateway = new GatewayHttp({ config: writeConfig({}), sandboxd: sandboxd.endpoint,
      extraArgs: ["--sandbox_cancel_grace=1s"] });
    await gateway.start();
    stops.push(() => gateway.stop());
    const client = await gateway.client("stalled");
    stops.push(() => client.close());
    const abort = new AbortController();
    const { run, seen } = startRun(client, "STALL", /stalled/, abort.signal);
    await seen;
    abort.abort("the test cancels");  // the SDK sends notifications/cancelled
    await assert.rejects(run);
    // The old gateway's cancel sat unread in the stream: the stand-in ends the call itself
    // after 120 s, never cancelled.
    assert.equal(await sandboxd.state.stallEnded, "cancelled");
    const next = await runPython(client, "print('after')");
    assert.equal(next.isError, false, text(next));
    assert.match(text(next), /ran/);
  });

  test("a stalled runner's flood is cancelled, not timed out, and its session's next run says so", async () => {
    const sandboxd = new Sandboxd(["--pool_size=0"]);
    await sandboxd.start();
    stops.push(() => sandboxd.stop());
    const gateway = new GatewayHttp({ config: writeConfig({ everything: everythingStdio() }),
      sandboxd: sandboxd.endpoint });
    await gateway.start();
    stops.push(() => gateway.stop());
    const client = await gateway.client("flood");
    stops.push(() => client.close());
    const abort = new AbortController();
    const { run, seen } = startRun(client, STALLED_FLOOD(20, 3), /flooded/, abort.signal);
    await seen;
    abort.abort("the test cancels");
    await assert.rejects(run);
    // Waits behind the cancelled run (one run at a time per session), then finds its
    // sandbox gone and says why (the old gateway raced the lost session's deletion and
    // often said only "no session 's-…'").
    const next = await runPython(client, "print('after')", {}, { timeout: 400000 });
    assert.equal(next.isError, false, text(next));
    assert.match(text(next), /after/);
    assert.match(text(next), /session was lost[^(]*\((session lost: )?execution was cancelled/, text(next));
    assert.doesNotMatch(text(next), /timeout|timed out/, text(next));
    // sandboxd's own account: interrupted for the cancel, then killed (the runner reads
    // nothing), not ended by its timeout.
    assert.match(sandboxd.log, /execution was cancelled and did not stop within/, sandboxd.log);
    assert.doesNotMatch(sandboxd.log, /exceeded its timeout/);
  });

  // When the cancel has to be forced (the gRPC call cancelled: here at once, with a grace
  // of 0s), the gateway no longer waits for sandboxd's `finished`. The old gateway let the
  // session's next run go to sandboxd at once, where it queued behind the code being
  // stopped and came back `session_lost` without running. Now the session is deleted and
  // the next run works in a new one.
  test("after a forced cancel the MCP session's next run works in a new sandbox", async () => {
    const sandboxd = new Sandboxd(["--pool_size=0"]);
    await sandboxd.start();
    stops.push(() => sandboxd.stop());
    const gateway = new GatewayHttp({ config: writeConfig({ everything: everythingStdio() }),
      sandboxd: sandboxd.endpoint, extraArgs: ["--sandbox_cancel_grace=0s"] });
    await gateway.start();
    stops.push(() => gateway.stop());
    const client = await gateway.client("forced");
    stops.push(() => client.close());
    const abort = new AbortController();
    const { run, seen } = startRun(client, STALLED_FLOOD(4, 1), /flooded/, abort.signal);
    await seen;
    abort.abort("the test cancels");
    await assert.rejects(run);
    const next = await runPython(client, "print('after')", {}, { timeout: 400000 });
    assert.equal(next.isError, false, text(next));
    assert.match(text(next), /after/);
    assert.doesNotMatch(text(next), /timeout|timed out/, text(next));
    assert.match(gateway.log, /did not end within \S+ \(--sandbox_cancel_grace\)/);
  });
});
