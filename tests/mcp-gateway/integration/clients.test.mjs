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
    const clients = await Promise.all([...Array(8).keys()].map((i) => gateway.client(`c${i}`)));
    await Promise.all(clients.map((c, i) => runPython(c, `mine = ${i}\nr = await mcp_everything.echo(message=str(${i}))`)));
    const results = await Promise.all(clients.map((c) => runPython(c, "mine")));
    assert.deepEqual(results.map((r) => r.structuredContent.result), [..."01234567"]);
    // DELETE ends each MCP session and its sandbox session.
    await Promise.all(clients.map(async (c) => { await c.transport.terminateSession(); await c.close(); }));
    await gateway.stop();
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
