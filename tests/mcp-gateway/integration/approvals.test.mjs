// Approvals with real parts: sandboxd and Podman, the npm memory server with the operator's
// rules in its mcpServers entry (ask for delete_* and create_entities, deny read_graph), and
// the TypeScript SDK client with an elicitation handler playing the person. Approve once,
// for the rest of the run (a loop of 10 is asked once), decline (the code gets ToolError and
// goes on), 50 gathered calls asked in one question, cancel, no answer (declined at --approval_timeout while the run goes on), a
// client without the capability (refused, saying how an operator allows it), and a denied
// tool (not in the code's catalog at all).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Client, GatewayHttp, MEMORY, Sandboxd, StreamableHTTPClientTransport, runPython, sdkTypes, stopAll, tempDir, text,
  writeConfig,
} from "./harness.mjs";

// A client that answers each elicitation with `answer(request)` (and records the requests).
async function askingClient(gateway, answer) {
  const asked = [];
  const c = new Client({ name: "approver", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  c.setRequestHandler(sdkTypes.ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return answer(request.params);
  });
  await c.connect(new StreamableHTTPClientTransport(new URL(gateway.url),
    { requestInit: { headers: gateway.authHeaders } }));
  return { c, asked };
}

const accept = (decision) => () => ({ action: "accept", content: { decision } });

// Creates an entity, then tries to delete it `times` times, printing what each call did.
const deleteLoop = (name, times) => `
await mcp_memory.create_entities(entities=[{"name": "${name}", "entityType": "t", "observations": []}])
for i in range(${times}):
    try:
        await mcp_memory.delete_entities(entityNames=["${name}"])
        print("deleted")
    except ToolError as e:
        print("refused:", e.message)
`;

describe("approvals", () => {
  let sandboxd, gateway;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    const memory = { command: "node", args: [MEMORY],
      env: { MEMORY_FILE_PATH: `${tempDir("gwmem-")}/memory.json` },
      approval: { ask: ["delete_*", "create_entities"], deny: ["read_graph"] } };
    gateway = new GatewayHttp({ config: writeConfig({ memory }), sandboxd: sandboxd.endpoint,
      // Wider than the default gather window: the 50 gathered calls must join one question
      // also on a loaded CI machine.
      extraArgs: ["--approval_timeout=2s", "--approval_gather=100ms"] });
    await gateway.start();
  });
  after(async () => {
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("the model and the code see which tools ask, and a denied tool is not there at all", async () => {
    const { c } = await askingClient(gateway, accept("once"));
    const description = (await c.listTools()).tools[0].description;
    assert.match(description, /delete_entities/);
    assert.doesNotMatch(description, /read_graph/);
    const r = await runPython(c, "print('read_graph' in dir(mcp_memory), 'search_nodes' in dir(mcp_memory))\n"
      + "help(mcp_memory.delete_entities)");
    assert.match(r.structuredContent.stdout, /^False True\n/, text(r));
    assert.match(r.structuredContent.stdout, /\[needs approval\]/);
    await c.close();
  });

  test("approve once asks each call; for the run asks once for a loop of 10", async () => {
    const once = await askingClient(gateway, accept("once"));
    let r = await runPython(once.c, deleteLoop("a", 2));
    assert.equal(r.structuredContent.stdout, "deleted\ndeleted\n", text(r));
    assert.equal(once.asked.length, 3, "create_entities and two deletes");
    assert.match(once.asked[1].message, /tool "delete_entities" of server "memory"/);
    assert.deepEqual(once.asked[1].requestedSchema.properties.decision.enum, ["once", "run", "sandbox"]);
    await once.c.close();

    const run = await askingClient(gateway, accept("run"));
    r = await runPython(run.c, deleteLoop("b", 10));
    assert.equal(r.structuredContent.stdout, "deleted\n".repeat(10), text(r));
    assert.equal(run.asked.length, 2, "once for create_entities, once for the ten deletes");
    r = await runPython(run.c, deleteLoop("c", 1));
    assert.equal(run.asked.length, 4, "a new run asks again");
    await run.c.close();
  });

  test("50 calls gathered at once are one question, approvable one by one", async () => {
    const { c, asked } = await askingClient(gateway, (p) => {
      if (/create_entities/.test(p.message)) return { action: "accept", content: { decision: "once" } };
      const content = { decision: "once" };
      for (const key of Object.keys(p.requestedSchema.properties)) if (key.startsWith("call_")) content[key] = key !== "call_7";
      return { action: "accept", content };
    });
    const r = await runPython(c, `
import asyncio
await mcp_memory.create_entities(entities=[{"name": f"g{i}", "entityType": "t", "observations": []} for i in range(50)])
async def one(i):
    try:
        await mcp_memory.delete_entities(entityNames=[f"g{i}"])
        return "ok"
    except ToolError:
        return "refused"
results = await asyncio.gather(*[one(i) for i in range(50)])
print(results.count("ok"), results.count("refused"))
`);
    assert.equal(r.structuredContent.stdout, "49 1\n", text(r));
    assert.equal(asked.length, 2, "one question for create_entities, one for the 50 deletes");
    assert.match(asked[1].message, /wants to make 50 calls/);
    await c.close();
  });

  test("decline and cancel are ToolErrors the code handles; nothing reaches the upstream", async () => {
    let calls = 0;
    const { c } = await askingClient(gateway, (p) => {
      calls++;
      if (/create_entities/.test(p.message)) return { action: "accept", content: { decision: "run" } };
      return { action: calls % 2 ? "decline" : "cancel" };
    });
    const r = await runPython(c, deleteLoop("d", 2) + "\nprint('went on')");
    const lines = r.structuredContent.stdout.trim().split("\n");
    assert.equal(lines.length, 3, text(r));
    assert.match(lines[0], /^refused: .*(declined|cancelled) by the user/);
    assert.match(lines[1], /^refused: .*(declined|cancelled) by the user/);
    assert.notEqual(lines[0], lines[1]);
    assert.equal(lines[2], "went on");
    await c.close();
  });

  test("an unanswered approval is declined at the timeout, and other clients' runs go on meanwhile", async () => {
    const silent = await askingClient(gateway, () => new Promise(() => {}));
    const other = await askingClient(gateway, accept("once"));
    const slow = runPython(silent.c, deleteLoop("e", 1).replace('await mcp_memory.create_entities', 'pass #'));
    const quick = await runPython(other.c, "print(6 * 7)");
    assert.equal(quick.structuredContent.stdout, "42\n", "another client's run did not wait");
    const r = await slow;
    assert.match(r.structuredContent.stdout, /^refused: .*nobody answered within 2s/, text(r));
    await Promise.all([silent.c.close(), other.c.close()]);
  });

  test("a client that cannot be asked is refused, and told how an operator allows the tool", async () => {
    const c = await gateway.client("no-elicitation");
    const r = await runPython(c, deleteLoop("f", 1).replace('await mcp_memory.create_entities', 'pass #'));
    assert.match(r.structuredContent.stdout,
      /^refused: .*cannot be asked \(it declared no elicitation capability\)\. An operator can allow it with "approval": \{"allow": \["delete_entities"\]\}/,
      text(r));
    await c.close();
  });
});
