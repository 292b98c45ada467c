// Fair shares and bounded listings with the real binaries: one credential cannot take
// every sandbox slot (the gateway caps sandboxes per credential across all its MCP
// sessions, and sandboxd caps each owner), and sandboxed code that answers sandboxd's
// file_list frames itself with huge listings cannot grow the gateway.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import {
  GatewayHttp, Sandboxd, everythingStdio, gatewaySuite, procStatus, runPython, stopAll, text,
  threadsNamed, waitFor, writeConfig,
} from "./harness.mjs";

// A gateway whose clients authenticate with one of two tokens (from the environment).
async function twoTokenGateway(sandboxd, extraArgs) {
  const gateway = new GatewayHttp({ config: writeConfig({}), sandboxd: sandboxd.endpoint, extraArgs, tokens: 2 });
  await gateway.start();
  return { gateway, as: (i) => gateway.as(i) };
}

// Token A opens `mcpSessions` MCP sessions and runs in `names` sandbox sessions of each;
// returns how many runs got a sandbox, and the open clients.
async function grab(gateway, headers, mcpSessions, names) {
  const clients = [];
  let ran = 0;
  const refusals = [];
  for (let i = 0; i < mcpSessions; ++i) {
    const c = await gateway.client(`greedy-${i}`, headers);
    clients.push(c);
    for (const name of names) {
      const r = await runPython(c, "1 + 1", { session: name });
      if (!r.isError) ++ran;
      else refusals.push(text(r));
    }
  }
  return { clients, ran, refusals };
}

describe("capacity is shared fairly among credentials", () => {
  const daemons = [];
  after(async () => {
    for (const d of daemons) await d.stop();
    await stopAll();
  });

  test("the gateway caps sandboxes per credential across all its MCP sessions", async () => {
    const sandboxd = new Sandboxd(["--max_sessions=3", "--pool_size=0"]);
    daemons.push(sandboxd);
    await sandboxd.start();
    const { gateway, as } = await twoTokenGateway(sandboxd, ["--max_sandboxes_per_credential=2"]);
    daemons.push(gateway);
    const a = await grab(gateway, as(0), 3, ["default", "side"]);
    assert.equal(a.ran, 2, a.refusals.join("\n"));
    assert.match(a.refusals[0], /--max_sandboxes_per_credential/);
    const b = await gateway.client("token-b", as(1));
    const r = await runPython(b, "print('b runs')");
    assert.ok(!r.isError, text(r));
    assert.match(text(r), /b runs/);
    for (const c of [...a.clients, b]) await c.close();
  });

  test("sandboxd caps each owner: a full owner gives up its least recently used idle sandbox, never another's", async () => {
    const sandboxd = new Sandboxd(["--max_sessions=3", "--max_sessions_per_owner=2", "--pool_size=0"]);
    daemons.push(sandboxd);
    await sandboxd.start();
    const { gateway, as } = await twoTokenGateway(sandboxd, []);
    daemons.push(gateway);
    const b = await gateway.client("token-b", as(1));
    const kept = await runPython(b, "mine = 'b'");
    assert.ok(!kept.isError, text(kept));
    // Token A's six sandboxes go through two slots: each one past the cap ends A's least
    // recently used idle sandbox (CreateSessionRequest.reclaim_idle), not B's.
    const a = await grab(gateway, as(0), 3, ["default", "side"]);
    assert.equal(a.ran, 6, a.refusals.join("\n"));
    const reclaimed = await runPython(a.clients[0], "print('again')");
    assert.ok(!reclaimed.isError, text(reclaimed));
    assert.match(text(reclaimed), /^again\n\[note\] the previous sandbox session was lost \(session lost: reclaimed: /);
    assert.equal(reclaimed.structuredContent.session_reset, true);
    const still = await runPython(b, "print(mine)");
    assert.equal(text(still), "b\n", "the other owner's sandbox was never reclaimed");
    for (const c of [...a.clients, b]) await c.close();
  });
});

// Code that replaces the runner's answer to file_list: every listing gets as many entries
// as asked for, of `kind`, with 4,000-byte paths under the listed directory (within
// sandboxd's path cap, far beyond any real name).
const HOSTILE_LISTER = (kind) => `
import importlib
files = importlib.import_module("sandbox_runner.files")  # loaded with the first file frame
def hostile_list(self, conn, frame):
    base = frame["path"].rstrip("/")
    entries = [{"path": (base + "/" + str(i) + "-").ljust(4000, "d"), "type": "${kind}",
                "size": 1, "mtime_ms": 1} for i in range(frame["max_entries"])]
    conn.send({"type": "file_list_result", "id": frame["id"], "entries": entries,
               "truncated": False})
files.FileTransfers._list = hostile_list
print("listings replaced")
`;

describe("hostile listings of out/", () => {
  const { startGateway } = gatewaySuite();

  // 1,064 directories of 4 KiB paths per listing took the gateway from 20 to 297 MiB for
  // one run (the walk queued every entry), and 1,000 files of 4 KiB paths stayed in every
  // resources/list.
  test("a sandbox answering its own file_list frames cannot grow the gateway", async () => {
    const gateway = await startGateway();
    const client = await gateway.client("hostile-lister");
    for (const [name, kind] of [["dirs", "directory"], ["files", "file"]]) {
      const r = await runPython(client, HOSTILE_LISTER(kind), { session: name });
      assert.match(text(r), /listings replaced/);
      assert.match(text(r), /could not be listed|not listed/, text(r));
    }
    const peak = procStatus(gateway.proc.pid, "VmHWM");
    console.log(`gateway VmHWM after the hostile runs: ${peak.toFixed(0)} MiB`);
    assert.ok(peak < 128, `the gateway's peak memory was ${peak.toFixed(0)} MiB`);
    const list = await client.listResources();
    for (const res of list.resources) assert.ok(res.name.length <= 1024, res.name.slice(0, 80));
    const ok = await runPython(client, "print('still serving')");
    assert.match(text(ok), /still serving/);
    await client.close();
  });
});

describe("abandoned runs", () => {
  const { startGateway } = gatewaySuite({ sandboxdArgs: ["--pool_size=0"] });

  // Runs of one session queue behind the one running. 30 queued runs whose clients had
  // gone kept 42 threads and 200 MiB until the run ahead ended (up to
  // --max_timeout_seconds): the wait for the session ignored cancellation.
  test("queued runs whose client cancels them end while the run ahead goes on", async () => {
    // No call's thread waits for the session's next call here, so the count of "mcp
    // request" threads says which calls still run.
    const gateway = await startGateway(["--parked_call_threads=0"]);
    const client = await gateway.client("abandoner");
    let headStarted;
    const started = new Promise((r) => { headStarted = r; });
    const head = new AbortController();
    let headDone = false;
    const headRun = runPython(client, "print('head started', flush=True)\nimport time\ntime.sleep(90)",
      { timeout_seconds: 120 }, { signal: head.signal, onprogress: () => headStarted() })
      .catch(() => {}).finally(() => { headDone = true; });
    await started;
    const pid = gateway.proc.pid;
    // A queued run is a tools/call on a worker of its own ("mcp request").
    const workers = () => threadsNamed(pid, "mcp request");
    const before = workers();
    const queued = Array.from({ length: 10 }, () => new AbortController());
    // 512 KiB of code each: ten fit --max_call_bytes_in_flight_per_credential (16 MiB, a
    // call's arguments charged 3 times).
    const runs = queued.map((c, i) => runPython(client, `x = ${i}  # ${"p".repeat(1 << 19)}`, {},
      { signal: c.signal }).catch(() => {}));
    await waitFor(() => workers() >= before + 10, "ten runs queued behind the head", 30000);
    for (const c of queued) c.abort("the client gave up");
    await Promise.all(runs);
    // Bounded only so that the old gateway fails instead of hanging: its threads stay
    // until the head run ends, 90 s on.
    await waitFor(() => workers() <= before, "the queued runs' threads to end", 30000);
    assert.equal(headDone, false, "the queued runs ended while the run ahead still went on");
    head.abort("done");
    await headRun;
    const r = await runPython(client, "print('still serving')");
    assert.match(text(r), /still serving/);
    await client.close();
  });
});

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
time.sleep(3600)
`;

describe("tool-call bytes across sandboxes", () => {
  const { startGateway } = gatewaySuite({
    sandboxdArgs: ["--pool_size=0"], servers: { everything: everythingStdio() },
  });

  // 8 sandboxes of one token, each with a stalled runner sending 20 calls of 3 MiB, took
  // the gateway to 974 MiB (996 MiB peak) and 107 threads: each run's own caps allowed
  // 32 MiB of arguments, and answers waiting to be taken freed their slot.
  test("one credential's stalled runners cannot grow the gateway without bound", async () => {
    const gateway = await startGateway();
    const clients = await Promise.all(Array.from({ length: 8 }, (_, i) => gateway.client(`flood-${i}`)));
    await Promise.all(clients.map((c) => runPython(c, STALLED_FLOOD(20, 3), { timeout_seconds: 15 })
      .catch(() => {})));
    const peak = procStatus(gateway.proc.pid, "VmHWM");
    console.log(`gateway VmHWM after the stalled floods: ${peak.toFixed(0)} MiB`);
    assert.ok(peak < 600, `the gateway's peak memory was ${peak.toFixed(0)} MiB`);
    const r = await runPython(clients[0], "print('still serving')");
    assert.match(text(r), /still serving/);
    for (const c of clients) await c.close();
  });
});
