// An upstream MCP server against the gateway, with the real binaries (issue 27): a hostile
// HTTP upstream answering a tool call with a 400 MiB message (a JSON body, chunked or with
// a Content-Length, or one SSE event) must not make the gateway hold it. Reading stops at
// --max_upstream_message_bytes, the sandboxed code gets an error that names the upstream
// and the flag, and the same upstream still answers the next call.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { gatewaySuite, procStatus, runPython, text } from "./harness.mjs";
import { startHugeAnswerUpstream } from "./fixtures/huge_answer_upstream.mjs";

const BIG = 400 << 20;

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
      "import asyncio",
      "async def one():",
      "    try:",
      "        return str(await mcp_huge.dom())[:40]",
      "    except Exception as e:",
      "        return 'ERR ' + str(e)[:200]",
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

  // Attack round 5 (F6): each call reads its answer on a connection of its own, so one run
  // gathering many calls of a tool with a large (legitimate-sized) result had them all
  // read, parsed and dumped at once: 64 calls of 7.5 MiB took the gateway to 765 MiB.
  // Answers are charged as they arrive (--max_upstream_bytes_in_flight); past it a call
  // fails clearly and the others go on.
  test("many large answers at once are bounded as they arrive", async () => {
    const g = await startGateway([], { servers: { huge: { type: "http", url: upstream.url } } });
    const client = await g.client("many-large-answers");
    const before = procStatus(g.proc.pid, "VmRSS");
    const r = await runPython(client, [
      "import asyncio",
      "async def one(i):",
      "    try:",
      `        r = await (mcp_huge.big_sse if i % 2 else mcp_huge.big)(bytes=${6 << 20})`,
      "        return 'OK'",
      "    except Exception as e:",
      "        return 'ERR ' + str(e)[:300]",
      "for line in await asyncio.gather(*[one(i) for i in range(48)]):",
      "    print(line)",
      "print('small:', await mcp_huge.small())",
    ].join("\n"), { timeout_seconds: 240 }, { timeout: 300000 });
    await client.close();
    const peak = procStatus(g.proc.pid, "VmHWM");
    const out = text(r);
    const lines = out.split("\n");
    const ok = lines.filter((l) => l === "OK").length;
    const busy = lines.filter((l) => /^ERR .*--max_upstream_bytes_in_flight=/.test(l)).length;
    console.log(`48 answers of 6 MiB at once: ${ok} delivered, ${busy} refused while receiving; ` +
      `gateway VmRSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
    assert.ok(peak < 256, `the gateway's peak RSS reached ${peak.toFixed(0)} MiB\n${out.slice(0, 2000)}`);
    assert.ok(ok >= 1, out.slice(0, 2000));
    assert.ok(busy >= 1, out.slice(0, 2000));
    assert.match(out, /small: .*ok-small/, out.slice(-500));
  });
});
