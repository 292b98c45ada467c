// Sandbox handles with real parts: one sandboxd, HTTP gateways sharing a key file, the
// TypeScript SDK client. A handle from one MCP session runs in the same sandbox from
// another, and from another gateway with the same key after the first was killed (what a
// replica behind a load balancer sees); another token's client, a tampered handle and a
// gateway with another key all get the one refusal; produced files are read by handle
// URIs by their credential only; a key file other users can read stops the gateway.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { GATEWAY_BIN, GatewayHttp, Sandboxd, runPython, stopAll, tempDir, text, writeConfig } from "./harness.mjs";

const INVALID = "this sandbox handle is not valid for your credential";
const handleOf = (r) => r.structuredContent?.sandbox;

describe("sandbox handles", () => {
  let sandboxd, config, keyDir, first;
  const gateways = [];
  // A gateway on the shared sandboxd with the key in `dir` and the tokens of `like`.
  async function gateway(dir = keyDir, like = undefined) {
    const g = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, tokens: 2,
      extraArgs: [`--handle_key_file=${path.join(dir, "handle_key")}`] });
    if (like) { g.tokens = like.tokens; g.token = like.token; }
    gateways.push(g);
    await g.start();
    return g;
  }
  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    config = writeConfig({});
    keyDir = tempDir("gwkey-");
    first = await gateway();
  });
  after(async () => {
    for (const g of gateways) await g.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  let handle;
  test("the key file is created private, and a handle runs in its sandbox from another MCP session", async () => {
    const key = fs.statSync(path.join(keyDir, "handle_key"));
    assert.equal(key.mode & 0o777, 0o600);
    const a = await first.client("a");
    const r = await runPython(a, "x = 41\nprint('set')");
    handle = handleOf(r);
    assert.match(handle ?? "", /^sbx1_[A-Za-z0-9_-]+$/, text(r));
    await a.close();
    const b = await first.client("b");  // a new MCP session of the same token
    const again = await runPython(b, "print(x + 1)", { sandbox: handle });
    assert.equal(again.isError, false, text(again));
    assert.match(text(again), /^42\n\[sandbox\] sbx1_/);
    handle = handleOf(again);
    await b.close();
  });

  test("another token's client and a tampered handle get the same refusal", async () => {
    const other = await first.client("other", first.as(1));
    const stolen = await runPython(other, "print(x)", { sandbox: handle });
    assert.equal(stolen.isError, true);
    assert.match(text(stolen), new RegExp(INVALID));
    const tampered = handle.slice(0, 12) + (handle[12] === "A" ? "B" : "A") + handle.slice(13);
    const mine = await first.client("mine");
    const forged = await runPython(mine, "print(x)", { sandbox: tampered });
    assert.equal(text(forged), text(stolen), "no oracle between another owner and a forgery");
    assert.deepEqual(forged.structuredContent, stolen.structuredContent);
    await other.close();
    await mine.close();
  });

  test("produced files are read by the handle's URI, by its credential only", async () => {
    const c = await first.client("files");
    const r = await runPython(c, "import os\nos.makedirs('out', exist_ok=True)\nopen('out/n.txt', 'w').write(str(x))",
      { sandbox: handle });
    const link = r.content.find((b) => b.type === "resource_link");
    assert.ok(link, JSON.stringify(r));
    assert.ok(link.uri.startsWith("sandbox://handle/sbx1_"), link.uri);
    const reader = await first.client("reader");
    const read = await reader.readResource({ uri: link.uri });
    assert.equal(read.contents[0].text, "41");
    await reader.close();
    const other = await first.client("other", first.as(1));
    await assert.rejects(other.readResource({ uri: link.uri }), (e) => e.code === -32002 && e.message.includes(INVALID));
    handle = handleOf(r);
    await c.close();
    await other.close();
  });

  test("a killed gateway's handle works through another with the same key, not with another key", async () => {
    const firstTokens = first;
    first.proc.kill("SIGKILL");  // no clean-up: what a crashed replica leaves
    await new Promise((r) => first.proc.once("exit", r));
    const replica = await gateway(keyDir, firstTokens);
    const c = await replica.client("after-crash");
    const r = await runPython(c, "print(x * 2)", { sandbox: handle });
    assert.equal(r.isError, false, text(r));
    assert.match(text(r), /^82\n/);
    await c.close();
    const stranger = await gateway(tempDir("gwkey-other-"), firstTokens);
    const s = await stranger.client("stranger");
    const refused = await runPython(s, "print(x)", { sandbox: handle });
    assert.equal(refused.isError, true);
    assert.match(text(refused), new RegExp(INVALID));
    await s.close();
  });

  test("a key file others can read stops the gateway with the reason", () => {
    const dir = tempDir("gwkey-open-");
    fs.writeFileSync(path.join(dir, "handle_key"), "ab".repeat(32) + "\n", { mode: 0o644 });
    fs.chmodSync(path.join(dir, "handle_key"), 0o644);
    const run = spawnSync(GATEWAY_BIN, ["--transport=http", "--listen=127.0.0.1:0", `--config=${config}`,
      `--sandboxd=${sandboxd.endpoint}`, `--handle_key_file=${path.join(dir, "handle_key")}`],
    { env: { ...process.env, MCP_GATEWAY_TOKEN: "t".repeat(32) }, encoding: "utf8", timeout: 60000 });
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /handle key file .* can be read or written by other users; run chmod 600/);
    assert.doesNotMatch(run.stderr, /abababab/, "no key in the log");
  });
});
