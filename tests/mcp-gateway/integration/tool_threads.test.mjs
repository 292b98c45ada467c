// Tool calls made by sandboxed code are counted per credential over all its runs and over
// everyone (--max_tool_calls_in_flight_per_credential, --max_tool_calls_in_flight_total),
// because each call in flight holds a gateway thread: with only one run's calls bounded
// (--max_tool_calls_in_flight, 64), one token's 16 sandboxes each gathering 64 calls of a
// slow upstream tool would hold 1,055 gateway threads, and three tokens ~3,100. Here two
// tokens' sessions gather many slow calls with small caps: the gateway's threads
// (/proc/<pid>/status) stay within the caps plus a fixed base, the calls past them get a
// ToolError naming the flag, and a third token's call is answered meanwhile.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { everythingStdio, gatewaySuite, procStatus, runPython, text, waitFor } from "./harness.mjs";

const PER_CREDENTIAL = 8;
const TOTAL = 12;

// Gathers `n` calls of everything's slow tool (`seconds` each, a progress notification a
// second); prints how many were answered and the errors of the others.
const FLOOD = (n, seconds) => `
import asyncio, json
async def one():
    try:
        await mcp_everything.trigger_long_running_operation(duration=${seconds}, steps=${seconds})
        return "ok"
    except Exception as e:
        return str(e)
rs = await asyncio.gather(*[one() for i in range(${n})])
print(json.dumps({"ok": rs.count("ok"), "errors": [r for r in rs if r != "ok"]}))
`;

describe("tool calls in flight across runs", () => {
  const { startGateway } = gatewaySuite({ tokens: 3, servers: { everything: everythingStdio() } });

  test("one token's sandboxes cannot hold a thread per slow tool call; others are served", async () => {
    const g = await startGateway([`--max_tool_calls_in_flight_per_credential=${PER_CREDENTIAL}`,
      `--max_tool_calls_in_flight_total=${TOTAL}`]);
    // Token A: 3 sessions, token C: 2 (each a sandbox, made before the flood), token B: 1.
    const tokens = [0, 0, 0, 2, 2, 1];
    const clients = await Promise.all(tokens.map((t, i) => g.client(`client-${i}`, g.as(t))));
    try {
      for (const r of await Promise.all(clients.map((c) => runPython(c, "print('ready')")))) {
        assert.ok(!r.isError, text(r));
      }
      const before = procStatus(g.proc.pid, "Threads");
      let peak = before;
      const sampler = setInterval(() => { peak = Math.max(peak, procStatus(g.proc.pid, "Threads")); }, 100);
      // Each run of a flood has its calls in flight (progress from one of them) or is done
      // (every call refused): all its calls were admitted or refused by then.
      const flood = (cls) => cls.map((cl) => {
        let resolveBusy;
        const busy = new Promise((r) => { resolveBusy = r; });
        const run = runPython(cl, FLOOD(16, 10), { timeout_seconds: 60 }, {
          onprogress: (p) => { if (/long-running/.test(p.message ?? "")) resolveBusy(); } });
        run.then(resolveBusy, resolveBusy);
        return { run, busy };
      });
      let a, c;
      try {
        // A: 48 slow calls at once (each run's own cap, 64, lets all through): it gets its 8.
        a = flood(clients.slice(0, 3));
        await Promise.all(a.map((r) => r.busy));
        // C: 32 more. Holding calls, it may not take the total's last eighth: 3 of them.
        c = flood(clients.slice(3, 5));
        await Promise.all(c.map((r) => r.busy));
        // B, holding none, gets that last one.
        const b = await runPython(clients[5], "print(await mcp_everything.echo(message='from B'))");
        assert.ok(!b.isError, text(b));
        assert.match(b.structuredContent.stdout, /from B/);
        a = await Promise.all(a.map((r) => r.run));
        c = await Promise.all(c.map((r) => r.run));
      } finally {
        clearInterval(sampler);
      }
      const outcome = (runs) => runs.map((r) => {
        assert.ok(!r.isError, text(r));
        return JSON.parse(r.structuredContent.stdout);
      }).reduce((sum, o) => ({ ok: sum.ok + o.ok, errors: [...sum.errors, ...o.errors] }), { ok: 0, errors: [] });
      const [ofA, ofC] = [outcome(a), outcome(c)];
      console.log(`slow calls with caps ${PER_CREDENTIAL}/${TOTAL}: A ${ofA.ok} of 48 answered, C ${ofC.ok} ` +
        `of 32; gateway threads ${before} -> peak ${peak}`);
      // At most TOTAL calls hold a worker; each run has its request's thread and at most one
      // idle worker; a few more the gateway starts for its own ends.
      assert.ok(peak <= before + TOTAL + 2 * 6 + 8, `threads ${before} -> ${peak}`);
      assert.ok(ofA.ok >= PER_CREDENTIAL && ofA.errors.length > 0, JSON.stringify(ofA));
      for (const e of ofA.errors) assert.match(e, /--max_tool_calls_in_flight_per_credential=8\b.*await some first/, e);
      assert.ok(ofC.ok >= 1 && ofC.errors.length > 0, JSON.stringify(ofC));
      for (const e of ofC.errors) assert.match(e, /--max_tool_calls_in_flight_total=12\b.*await some first/, e);
      // Every call has ended: the workers are gone with their runs.
      await waitFor(() => procStatus(g.proc.pid, "Threads") <= before + 4, "the workers to end");
    } finally {
      for (const c of clients) await c.close();
    }
  });
});
