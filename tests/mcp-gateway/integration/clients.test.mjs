// Several MCP clients at once: 8 HTTP clients on one gateway, two stdio gateways on one
// sandboxd, each keeping its own state; sessions end with the MCP session.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { GatewayHttp, Sandboxd, everythingStdio, runPython, stdioGateway, stopAll, text, waitFor, writeConfig } from "./harness.mjs";

describe("many clients", () => {
  let sandboxd, config;

  before(async () => {
    sandboxd = new Sandboxd(["--max_sessions=32"]);
    await sandboxd.start();
    config = writeConfig({ everything: everythingStdio() });
  });
  after(async () => {
    await sandboxd?.stop();
    await stopAll();
  });

  const sessionCount = () => sandboxd.sessions().length;

  test("8 concurrent HTTP clients each keep their own state", async () => {
    const gateway = new GatewayHttp({ config, sandboxd: sandboxd.endpoint });
    await gateway.start();
    const start = sessionCount();
    const clients = await Promise.all([...Array(8).keys()].map((i) => gateway.client(`c${i}`)));
    const first = await Promise.all(clients.map((c, i) => runPython(c, `mine = ${i}\nr = await mcp_everything.echo(message=str(${i}))`)));
    const failed = first.findIndex((r) => r.isError);
    if (failed >= 0) {
      assert.fail(`client ${failed}'s first run: ${text(first[failed])}\ngateway:\n${gateway.log}\n` +
        `runners:\n${sandboxd.runnerLogs()}`);
    }
    const results = await Promise.all(clients.map((c) => runPython(c, "mine")));
    assert.deepEqual(results.map((r) => r.structuredContent.result), [..."01234567"]);
    assert.equal(sessionCount(), start + 8, "one sandbox session per MCP session");
    // DELETE ends each MCP session and its sandbox session.
    await Promise.all(clients.map(async (c) => { await c.transport.terminateSession(); await c.close(); }));
    await waitFor(() => sessionCount() === start, "the sandbox sessions to be deleted");
    await gateway.stop();
  });

  test("one gateway spreads sessions over several sandboxd endpoints", async () => {
    const second = new Sandboxd();
    await second.start();
    await Promise.all([sandboxd.serving(), second.serving()]);
    const gateway = new GatewayHttp({ config, sandboxd: `${sandboxd.endpoint},${second.endpoint}` });
    await gateway.start();
    const before = sessionCount();
    const a = await gateway.client("a");
    const b = await gateway.client("b");
    await runPython(a, "where = 'a'");
    await runPython(b, "where = 'b'");
    assert.equal(sessionCount() - before, 1, "one session on the first sandboxd");
    assert.equal(second.sessions().length, 1, "one session on the second sandboxd");
    // Each session stays on the sandboxd that created it.
    assert.equal((await runPython(a, "where")).structuredContent.result, "'a'");
    assert.equal((await runPython(b, "where")).structuredContent.result, "'b'");
    await a.close();
    await b.close();
    await gateway.stop();
    await second.stop();
  });

  test("two stdio gateways share one sandboxd without seeing each other", async () => {
    const a = await stdioGateway({ config, sandboxd: sandboxd.endpoint });
    const b = await stdioGateway({ config, sandboxd: sandboxd.endpoint });
    await runPython(a.client, "secret = 'a'");
    await runPython(b.client, "secret = 'b'");
    assert.equal((await runPython(a.client, "secret")).structuredContent.result, "'a'");
    assert.equal((await runPython(b.client, "secret")).structuredContent.result, "'b'");
    const before = sessionCount();
    await a.client.close();  // stdin EOF ends the gateway and its sandbox session
    await waitFor(() => sessionCount() === before - 1, "a's sandbox session to be deleted");
    assert.equal((await runPython(b.client, "secret")).structuredContent.result, "'b'");
    await b.client.close();
  });
});
