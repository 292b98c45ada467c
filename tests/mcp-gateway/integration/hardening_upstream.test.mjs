// An upstream MCP server against the gateway, with the real binaries (issue 27): a hostile
// HTTP upstream answering a tool call with a 400 MiB message (a JSON body, chunked or with
// a Content-Length, or one SSE event) must not make the gateway hold it. Reading stops at
// --max_upstream_message_bytes, the sandboxed code gets an error that names the upstream
// and the flag, and the same upstream still answers the next call.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { gatewaySuite, procStatus, runPython, text, waitFor } from "./harness.mjs";
import { startHugeAnswerUpstream } from "./fixtures/huge_answer_upstream.mjs";
import { startStallingSseUpstream } from "./fixtures/stalling_sse_upstream.mjs";

const BIG = 400 << 20;

// Python defining `one(i)`, which awaits `call` (an expression that may use i) and returns
// `ok` (an expression of its result r), or 'ERR ' and the start of the error.
const one = (call, ok = "'OK'") => [
  "import asyncio",
  "async def one(i=0):",
  "    try:",
  `        r = await ${call}`,
  `        return ${ok}`,
  "    except Exception as e:",
  "        return 'ERR ' + str(e)[:300]",
];

describe("an upstream's answers against the gateway", () => {
  const { startGateway } = gatewaySuite();
  let upstream;
  let gateway;

  before(async () => { upstream = await startHugeAnswerUpstream(); });
  after(async () => { await upstream?.close(); });

  test("a 400 MiB answer is not read whole; the call fails clearly and the upstream still serves", async () => {
    gateway = await startGateway([], { servers: { huge: { type: "http", url: upstream.url } } });
    const client = await gateway.client("hostile-upstream");
    const before = procStatus(gateway.proc.pid, "VmRSS");
    const r = await runPython(client, [
      "for tool in ['big', 'big_sized', 'big_sse']:",
      "    try:",
      `        r = await getattr(mcp_huge, tool)(bytes=${BIG})`,
      "        print(tool, 'RESULT', len(str(r)))",
      "    except Exception as e:",
      "        print(tool, 'ERR', str(e)[:300])",
      "print('small:', await mcp_huge.small())",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000 });
    await client.close();
    const peak = procStatus(gateway.proc.pid, "VmHWM");
    const out = text(r);
    console.log(`gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB after ` +
      `three ${BIG >> 20} MiB answers; the upstream got to write ` +
      `${JSON.stringify(Object.fromEntries(Object.entries(upstream.sent).map(([k, v]) => [k, v >> 20])))} MiB\n${out}`);
    assert.equal(gateway.proc.exitCode, null, gateway.log.slice(-2000));
    assert.ok(peak < 200, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
    for (const tool of ["big", "big_sized", "big_sse"]) {
      // The call is named once (the sandbox's ToolError), then the upstream's words.
      assert.match(out, new RegExp(`${tool} ERR huge\\.${tool}: upstream "huge" tool "${tool}": the upstream ` +
        `sent a message larger than 16777216 bytes \\(--max_upstream_message_bytes\\)`), out);
    }
    assert.match(out, /small: .*ok-small/, out);
  });

  test("an answer of a million JSON values is dropped, not built", async () => {
    const before = procStatus(gateway.proc.pid, "VmRSS");
    const client = await gateway.client("dense-upstream");
    const r = await runPython(client, [
      ...one("mcp_huge.dom()", "str(r)[:40]"),
      "for line in await asyncio.gather(*[one() for _ in range(4)]):",
      "    print(line)",
      "print('small:', await mcp_huge.small())",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
    await client.close();
    const peak = procStatus(gateway.proc.pid, "VmHWM");
    const out = text(r);
    console.log(`gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB after four ` +
      `3 MB answers of a million values\n${out}`);
    // Built, each would be a ~200 MiB document: four at a time took the gateway past 500 MiB.
    assert.ok(peak < 200, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
    assert.equal(out.split("\n").filter((l) => /^ERR huge\.dom: upstream "huge" tool "dom": .*holds more than \d+ values/.test(l)).length, 4, out);
    assert.match(out, /small: .*ok-small/, out);
  });

  // Each call reads its answer on a connection of its own, so one run gathering many calls
  // of a tool with a large (legitimate-sized) result could have them all read, parsed and
  // dumped at once (64 calls of 7.5 MiB take an unbounded gateway to 765 MiB). Answers are
  // charged to the caller's credential as they arrive (its tool-call bytes, inside its
  // share of --max_buffered_bytes); past it a call fails clearly and the others go on.
  test("many large answers at once are bounded as they arrive", async () => {
    const g = await startGateway([], { servers: { huge: { type: "http", url: upstream.url } } });
    const client = await g.client("many-large-answers");
    const before = procStatus(g.proc.pid, "VmRSS");
    const r = await runPython(client, [
      ...one(`(mcp_huge.big_sse if i % 2 else mcp_huge.big)(bytes=${6 << 20})`),
      "for line in await asyncio.gather(*[one(i) for i in range(48)]):",
      "    print(line)",
      "print('small:', await mcp_huge.small())",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000 });
    await client.close();
    const peak = procStatus(g.proc.pid, "VmHWM");
    const out = text(r);
    const lines = out.split("\n");
    const ok = lines.filter((l) => l === "OK").length;
    const busy = lines.filter((l) => /^ERR .*(was not read: receiving it|was dropped: holding it).* would pass the gateway's --max_\w+=\d+/.test(l)).length;
    console.log(`48 answers of 6 MiB at once: ${ok} delivered, ${busy} refused while receiving; ` +
      `gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
    assert.ok(peak < 256, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB\n${out.slice(0, 2000)}`);
    assert.ok(ok >= 1, out.slice(0, 2000));
    assert.ok(busy >= 1, out.slice(0, 2000));
    assert.match(out, /small: .*ok-small/, out.slice(-500));
  });

  // Answers being received are charged to their caller's tool-call budget, not to one budget
  // for everyone (--max_upstream_bytes_in_flight), which one token gathering many large
  // answers could keep full so that another token's single large call fails. A token floods
  // only its own.
  test("one token's flood of large answers leaves another token's large call alone", async () => {
    const g = await startGateway([], { tokens: 2, servers: { huge: { type: "http", url: upstream.url } } });
    const flooder = await g.client("answer-flooder", g.as(0));
    const victim = await g.client("answer-victim", g.as(1));
    const flood = runPython(flooder, [
      "import time",
      ...one(`mcp_huge.big(bytes=${6 << 20})`),
      "end, rounds, refused = time.time() + 12, 0, 0",
      "while time.time() < end:",
      "    rounds += 1",
      "    refused += sum(1 for x in await asyncio.gather(*[one() for _ in range(24)]) if x != 'OK')",
      "print('rounds', rounds, 'refused', refused)",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
    const victimRun = runPython(victim, [
      "import asyncio",
      "await asyncio.sleep(3)",
      "for i in range(6):",
      "    try:",
      `        r = await mcp_huge.big(bytes=${6 << 20})`,
      "        print('OK')",
      "    except Exception as e:",
      "        print('ERR', str(e)[:300])",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
    const [flooded, victimResult] = await Promise.all([flood, victimRun]);
    await flooder.close();
    await victim.close();
    const floodOut = text(flooded);
    const victimOut = text(victimResult);
    console.log(`flooder: ${floodOut.trim()}; victim:\n${victimOut}`);
    const refused = Number(/refused (\d+)/.exec(floodOut)?.[1] ?? 0);
    assert.ok(refused > 0, `the flood never filled its own budget, so it proves nothing: ${floodOut}`);
    assert.equal(victimOut.split("\n").filter((l) => l === "OK").length, 6, victimOut);
  });

  // A stdio upstream's answers are read on one thread and parsed at once. Each is charged
  // to its caller as it is parsed (not left waiting for its caller's thread uncounted, to
  // be charged only after being dumped again), and dropped there with a clear error when
  // the caller's budget cannot hold it: here a 6 MiB answer, charged twice, never fits a
  // 10 MB budget.
  test("a stdio upstream's large answers are charged to their caller as they are parsed", async () => {
    const g = await startGateway(["--max_tool_call_bytes_in_flight_per_credential=10000000"], {
      servers: { big: { command: "python3", args: [new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname, "plain"] } },
    });
    const client = await g.client("stdio-large-answers");
    const r = await runPython(client, [
      ...one(`mcp_big.hello(bytes=${6 << 20})`),
      "for line in await asyncio.gather(*[one() for _ in range(8)]):",
      "    print(line)",
      "print('small:', await mcp_big.hello())",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000 });
    await client.close();
    const out = text(r);
    const dropped = out.split("\n").filter((l) => /^ERR big\.hello: .*the answer \(about \d+ bytes\) was dropped: holding it until it is taken \(charged 2 times\) would pass the gateway's --max_tool_call_bytes_in_flight_per_credential=10000000/.test(l)).length;
    assert.equal(dropped, 8, out.slice(0, 3000));
    assert.match(out, /small: .*hello/, out.slice(-500));
  });

  // An upstream's notifications/progress, if parsed, copied about nine times and forwarded
  // whole, would let four stdio upstreams sending 15 MiB progress messages for one run
  // take the gateway to 345 MiB. A message is clipped to 1 KiB before any copy,
  // and upstreams' progress reaches the client at a bounded rate. (11 MiB messages: one
  // upstream may hold a quarter of --max_upstream_bytes_in_flight, 24 MiB, for a line that
  // charges no caller, so 15 MiB ones are refused as they are read.)
  test("upstreams' huge progress floods are clipped and thinned on their way to the client", async () => {
    const script = new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname;
    const servers = {};
    for (const name of ["p1", "p2", "p3", "p4"]) servers[name] = { command: "python3", args: [script, "plain"] };
    const g = await startGateway([], { servers });
    const client = await g.client("progress-floods");
    const updates = [];
    const r = await runPython(client, [
      "import asyncio",
      `calls = [f(progress=10, progress_bytes=${11 << 20}) for f in (mcp_p1.hello, mcp_p2.hello, mcp_p3.hello, mcp_p4.hello)]`,
      "print(await asyncio.gather(*calls))",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000, onprogress: (p) => updates.push(p.message || "") });
    await client.close();
    const peak = procStatus(g.proc.pid, "VmHWM");
    const out = text(r);
    const relayed = updates.filter((m) => /^p\d\.hello: p+… \(11534336 bytes\)/.test(m));
    console.log(`40 progress messages of 11 MiB: ${relayed.length} relayed, longest ${Math.max(...updates.map((m) => m.length))} ` +
      `characters; gateway peak RSS ${peak.toFixed(0)} MiB`);
    assert.ok(peak < 256, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB`);
    assert.ok(relayed.length >= 1, updates.map((m) => m.slice(0, 80)).join("\n"));
    for (const m of updates) assert.ok(m.length < 1200, `a progress message of ${m.length} characters`);
    assert.match(out, /\['hello', 'hello', 'hello', 'hello'\]/, out.slice(0, 1000));
  });

  // A server's request is answered from the reader thread with its id echoed: a 15 MiB id,
  // to a server that does not read its stdin, would hold that thread and the copies until
  // the server died. Only integer ids and strings of up to 256 bytes are answered.
  test("a server's requests with huge ids get no answer; short ones do", async () => {
    const g = await startGateway([], {
      servers: { big: { command: "python3", args: [new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname, "plain"] } },
    });
    const client = await g.client("server-request-ids");
    const r = await runPython(client, [
      `await mcp_big.hello(requests=4, id_bytes=${1 << 20})`,
      "print(await mcp_big.hello(report=True))",
    ].join("\n"), { timeout_seconds: 120 });
    await client.close();
    assert.match(text(r), /^replies: 7$/m, text(r).slice(0, 1000));
  });

  // A stdio upstream's lines are charged while they are buffered and parsed, or four
  // upstreams of 15 MiB messages of any kind pass 256 MiB with no client reading. Each line
  // is charged (twice) to --max_upstream_bytes_in_flight while it is buffered and
  // dispatched: here a 6 MiB answer cannot fit 10 MB, is skipped, its call fails saying
  // why, and the charge is released for the next lines.
  test("a stdio upstream's lines are charged to the receive budget while they are read", async () => {
    const g = await startGateway(["--max_upstream_bytes_in_flight=10000000"], {
      servers: { big: { command: "python3", args: [new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname, "plain"] } },
    });
    const client = await g.client("stdio-line-charge");
    const r = await runPython(client, [
      "for size in (6 << 20, 0, 6 << 20, 0, 3 << 20):",
      "    try:",
      "        print(len(await mcp_big.hello(bytes=size)) if size else await mcp_big.hello())",
      "    except Exception as e:",
      "        print('ERR', str(e)[:300])",
    ].join("\n"), { timeout_seconds: 120 });
    await client.close();
    const lines = text(r).split("\n").filter((l) => l);
    const refused = /^ERR big\.hello: .*the answer was not read: the gateway is receiving too many bytes from upstreams now \(its --max_upstream_bytes_in_flight=10000000\)/;
    assert.match(lines[0], refused, text(r));
    assert.equal(lines[1], "hello", text(r));
    assert.match(lines[2], refused, text(r));
    assert.equal(lines[3], "hello", text(r));
    assert.equal(lines[4], String(3 << 20), "a line within the budget is read whole: " + text(r));
  });

  // Each stdio upstream reads one line at a time, charged to --max_upstream_bytes_in_flight
  // while it is read, so three upstreams that each begin a 15.5 MiB line and never end it
  // could hold all 96 MiB for as long as they live, and every other upstream's answers
  // would be refused. An upstream already holding bytes may not take the last eighth; a
  // line that cannot fit is skipped and holds nothing.
  test("upstreams whose lines never end leave room for every other upstream's answers", async () => {
    const script = new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname;
    const servers = { huge: { type: "http", url: upstream.url } };
    for (const name of ["s1", "s2", "s3"]) servers[name] = { command: "python3", args: [script, "stall-line"] };
    const g = await startGateway([], { servers });
    // Two lines fit below the last eighth; the third is refused (without the last eighth
    // kept, all three would be held and nothing refused).
    await waitFor(() => /a message dropped: the gateway is receiving too many bytes/.test(g.log),
      "a stalled upstream's line to be refused");
    const client = await g.client("stalled-lines");
    const r = await runPython(client, [
      ...one(`mcp_huge.big(bytes=${4 << 20})`),
      "for _ in range(3):",
      "    print(await one())",
      "print('small:', await mcp_huge.small())",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
    await client.close();
    const out = text(r);
    assert.equal(out.split("\n").filter((l) => l === "OK").length, 3, out.slice(0, 2000));
    assert.match(out, /small: .*ok-small/, out.slice(-500));
  });
  // Stalled lines that fit below the last eighth would otherwise be held for as long as
  // their upstreams live (2 x 31.8 MiB of the 96 MiB). A line that gets no byte for
  // --upstream_message_idle_timeout while incomplete is abandoned: its charge and buffer
  // are released, the call it answered fails naming the flag, and the rest of its line is
  // skipped.
  test("a line that stops growing is abandoned after --upstream_message_idle_timeout", async () => {
    const script = new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname;
    const servers = { huge: { type: "http", url: upstream.url }, st: { command: "python3", args: [script, "plain"] } };
    // 4.5 MiB lines (9.4 MB charged) fit one upstream's quarter of 40 MB; three of them
    // fit below the last eighth and, held, would leave less than a 6 MiB answer needs.
    for (const name of ["s1", "s2", "s3", "s4"]) servers[name] = { command: "python3", args: [script, "stall-line", "4.5"] };
    const g = await startGateway(["--upstream_message_idle_timeout=1s", "--max_upstream_bytes_in_flight=40000000"], { servers });
    const settled = () => new Set([...g.log.matchAll(/upstream (s\d): a message (abandoned|dropped)/g)].map((m) => m[1]));
    await waitFor(() => settled().size === 4, "every stalled line to be abandoned or refused");
    assert.match(g.log, /upstream s\d: a message abandoned: nothing more of it came for 1s while it was incomplete \(--upstream_message_idle_timeout\); the rest of its line is skipped/);
    const peak = procStatus(g.proc.pid, "VmHWM");
    await waitFor(() => procStatus(g.proc.pid, "VmRSS") < peak - 10, "the abandoned lines' buffers to be freed");
    const client = await g.client("stalled-answers");
    const r = await runPython(client, [
      ...one(`mcp_huge.big(bytes=${6 << 20})`, "len(str(r))"),
      "print('big:', await one())",
      ...one(`mcp_st.hello(stall=${1 << 20})`),
      "print('stall:', await one())",
      "print('after:', await mcp_st.hello())",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
    await client.close();
    const out = text(r);
    console.log(`gateway peak RSS ${peak.toFixed(0)} MiB, ${procStatus(g.proc.pid, "VmRSS").toFixed(0)} MiB after\n${out.slice(0, 1000)}`);
    assert.match(out, /^big: \d{7}/m, out.slice(0, 2000));
    assert.match(out, /^stall: ERR st\.hello: .*the upstream began its answer and sent nothing more of it for 1s \(--upstream_message_idle_timeout\)/m, out.slice(0, 2000));
    assert.match(out, /^after: .*hello/m, out.slice(-500));
  });

  // The same on HTTP: an event a Streamable HTTP upstream's GET stream begins and never
  // ends would hold its part of --max_upstream_bytes_in_flight until the stream ends (its
  // read timeout is an hour). An event that gets no byte for
  // --upstream_message_idle_timeout while incomplete is abandoned: the stream is cut (its
  // charge and buffer released) and reopened. Held, three of these 4.5 MiB events would
  // leave less than a 6 MiB answer needs.
  test("a GET stream's event that stops growing is abandoned after --upstream_message_idle_timeout", async () => {
    const staller = await startHugeAnswerUpstream({ stallGetBytes: Math.floor(4.5 * (1 << 20)) });
    try {
      const servers = { huge: { type: "http", url: upstream.url } };
      for (const name of ["s1", "s2", "s3", "s4"]) servers[name] = { type: "http", url: staller.url };
      const g = await startGateway(["--upstream_message_idle_timeout=1s", "--max_upstream_bytes_in_flight=40000000"], { servers });
      const settled = () => new Set([...g.log.matchAll(
        /upstream (s\d): (an event abandoned|the gateway is receiving too many bytes from upstreams)/g)].map((m) => m[1]));
      await waitFor(() => settled().size === 4, "every stalled GET stream's event to be abandoned or refused");
      assert.match(g.log, /upstream s\d: an event abandoned: nothing more of it came for 1s while it was incomplete \(--upstream_message_idle_timeout\); its GET stream was cut and is reopened/);
      await waitFor(() => staller.gets >= 8, "the cut GET streams to be reopened");
      const client = await g.client("stalled-get-events");
      const r = await runPython(client, [
        ...one(`mcp_huge.big(bytes=${6 << 20})`, "len(str(r))"),
        "print('big:', await one())",
      ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
      await client.close();
      const out = text(r);
      console.log(`gateway peak RSS ${procStatus(g.proc.pid, "VmHWM").toFixed(0)} MiB, ` +
        `${procStatus(g.proc.pid, "VmRSS").toFixed(0)} MiB after; ${staller.gets} GET streams\n${out.slice(0, 500)}`);
      assert.match(out, /^big: \d{7}/m, out.slice(0, 2000));
    } finally {
      await staller.close();
    }
  });

  // The same on a legacy SSE upstream's one stream: the stalled event is abandoned, the
  // stream cut (the upstream reconnects), and the 6 MiB answer passes.
  test("a legacy SSE stream's event that stops growing is abandoned after --upstream_message_idle_timeout", async () => {
    const staller = await startStallingSseUpstream({ bytes: Math.floor(4.5 * (1 << 20)), stalls: 4 });
    try {
      const servers = { huge: { type: "http", url: upstream.url } };
      for (const name of ["t1", "t2", "t3", "t4"]) servers[name] = { type: "sse", url: staller.url };
      const g = await startGateway(["--upstream_message_idle_timeout=1s", "--max_upstream_bytes_in_flight=40000000"], { servers });
      const settled = () => new Set([...g.log.matchAll(
        /upstream (t\d)\b.*(an event abandoned|receiving too many bytes)/g)].map((m) => m[1]));
      await waitFor(() => settled().size === 4, "every stalled SSE stream's event to be abandoned or refused");
      assert.match(g.log, /upstream t\d: an event abandoned: nothing more of it came for 1s while it was incomplete \(--upstream_message_idle_timeout\); its SSE stream was cut and is reopened/);
      await waitFor(() => staller.gets >= 8, "the cut SSE streams to be reopened");
      const client = await g.client("stalled-sse-events");
      const r = await runPython(client, [
        ...one(`mcp_huge.big(bytes=${6 << 20})`, "len(str(r))"),
        "print('big:', await one())",
      ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
      await client.close();
      const out = text(r);
      console.log(`gateway peak RSS ${procStatus(g.proc.pid, "VmHWM").toFixed(0)} MiB; ${staller.gets} SSE streams\n${out.slice(0, 500)}`);
      assert.match(out, /^big: \d{7}/m, out.slice(0, 2000));
    } finally {
      await staller.close();
    }
  });

  // A stdio upstream's answer lines, charged while read to the budget every credential
  // shares, would let one token's large stdio answers leave another token's answers no
  // room: three of A's lines below would hold 37 MB of it (each within its upstream's
  // quarter), and B's answer would be refused. Once a line's id is read it is charged to
  // its caller's part: here token A's four 5.9 MiB answers that stall mid-line (held as
  // long as they stay incomplete) fit only one in A's 20 MB part, and token B's 7 MiB
  // answer still fits the 50 MB budget.
  test("one token's stdio answers being read are charged to it, not to every token", async () => {
    const script = new URL("./fixtures/hostile_upstream.py", import.meta.url).pathname;
    const servers = { huge: { type: "http", url: upstream.url } };
    const stallers = ["s1", "s2", "s3", "s4"];
    for (const name of stallers) servers[name] = { command: "python3", args: [script, "plain"] };
    const g = await startGateway(["--upstream_message_idle_timeout=0", "--max_upstream_bytes_in_flight=50000000",
      "--max_upstream_bytes_in_flight_per_credential=20000000"], { tokens: 2, servers });
    const a = await g.client("stdio-answers-a", g.as(0));
    const b = await g.client("stdio-answers-b", g.as(1));
    const stalls = runPython(a, [
      ...one(`globals()['mcp_s' + str(i)].hello(stall=${Math.floor(5.9 * (1 << 20))})`),
      "print(await asyncio.gather(*[one(i) for i in range(1, 5)]))",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 }).catch((e) => e);
    await waitFor(() => stallers.every((name) => g.log.includes(`upstream ${name} stderr: stalled`)),
      "all of token A's answers to stall");
    const r = await runPython(b, [
      ...one(`mcp_huge.big(bytes=${7 << 20})`, "len(str(r))"),
      "print('big:', await one())",
    ].join("\n"), { timeout_seconds: 120 }, { timeout: 180000 });
    const out = text(r);
    await b.close();
    await a.close();
    await stalls;
    assert.match(out, /^big: \d{7}/m, out.slice(0, 2000));
    assert.match(g.log, /a message dropped: the gateway is receiving too many bytes from upstreams \(--max_upstream_bytes_in_flight_per_credential=20000000\)/);
  });
});
