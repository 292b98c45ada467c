// Tool and parameter names an upstream chooses, end to end: the TypeScript SDK client ->
// mcp-gateway (HTTP) -> sandboxd (real Podman, both runners) -> an upstream whose names are
// `then`, keywords, non-ASCII, the Python server object's own attributes and colliding
// properties (fixtures/odd_names_upstream.mjs).
// The sandbox names them as codemode::Catalog computes them (docs/runner-protocol.md,
// "Catalog") and every call reaches the upstream under its real name.
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { NODE_PEERS, gatewaySuite, runPython, text } from "./harness.mjs";

const ODD = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "odd_names_upstream.mjs");

describe("odd tool and parameter names", () => {
  const suite = gatewaySuite({ servers: { odd: { command: "node", args: [ODD, NODE_PEERS] } } });
  let client;
  before(async () => {
    client = await (await suite.startGateway()).client();
  });
  after(async () => client?.close());

  test("run_python: keywords get a _, others are sanitised, the rest go in **kwargs", async () => {
    const r = await runPython(client, `import inspect, json
def sent(r):
    r = json.loads(r) if isinstance(r, str) else r
    return [r["tool"], r["arguments"]]
print(json.dumps([sent(await mcp_odd.then()), sent(await mcp_odd.class_()),
                  sent(await mcp_odd.caf___tool()),
                  sent(await mcp_odd.args(max_results=3, from_="f", a_b="y", café="z",
                                          class_="k", __x__="d", **{"a b": "w"})),
                  str(inspect.signature(mcp_odd.args)),
                  sent(await mcp_odd.__class___()), sent(await mcp_odd.__dict___()),
                  type(mcp_odd).__name__], ensure_ascii=False))`);
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(JSON.parse(r.structuredContent.stdout), [
      ["then", {}], ["class", {}], ["café-tool", {}],
      ["args", { "max-results": 3, from: "f", a_b: "y", "café": "z", class: "k", __x__: "d", "a b": "w" }],
      "(__x__: str = None, a_b: str = None, café: str = None, class_: str = None, " +
        "from_: str = None, max_results: int = None, **kwargs)",
      ["__class__", {}], ["__dict__", {}], "MCPServer",
    ]);
  });

  test("run_javascript: `then` is the method then_, and awaiting the server object settles", async () => {
    const r = await client.callTool({ name: "run_javascript", arguments: { code: `
const sent = (r) => { const o = typeof r === 'string' ? JSON.parse(r) : r; return [o.tool, o.arguments]; };
const same = (await mcp_odd) === mcp_odd;
console.log(JSON.stringify([same, typeof mcp_odd.then, sent(await mcp_odd.then_()), sent(await mcp_odd.class_()),
  sent(await mcp_odd.caf___tool()), sent(await mcp_odd.args({ 'max-results': 3, 'a b': 'w' })),
  sent(await mcp_odd.__class___())]));` } },
    undefined, { timeout: 60000 });
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(JSON.parse(r.structuredContent.stdout), [
      true, "undefined", ["then", {}], ["class", {}], ["café-tool", {}],
      ["args", { "max-results": 3, "a b": "w" }], ["__class__", {}],
    ]);
  });
});
