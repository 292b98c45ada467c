// Gateway replicas behind a real load balancer: Debian's HAProxy with the shipped
// deploy/haproxy/haproxy.cfg (round robin; 2025 sessions stuck to their replica by
// Mcp-Session-Id), two gateways with one key file on one sandboxd.
//   - A 2026-07-28 client (SDK v2, pinned) keeps its variables while the replicas are
//     killed in turn between its calls: each call is served by whichever one is alive.
//   - A subscriptions/listen stream on one replica hears of a file that a run through the
//     other left (resources/list_changed by looking at sandboxd).
//   - A 2025 client (SDK v1) stays on its replica; when that replica dies, or is stopped
//     for an update, a new session on the other one continues in the same sandbox through
//     the handle.
//   - sandboxd on another machine: its TCP port over TLS with client certificates, reached
//     at the host's own non-loopback address; a gateway without TLS refuses to start, one
//     with another CA's certificate is refused by sandboxd; one whose every connection's
//     first bytes come 1.5 s late (a loaded host, a long link) is reached.
// Runs on Node 22 (tests/node22) for the SDK v2 client; HAPROXY names the binary.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  GATEWAY_BIN, GatewayHttp, Sandboxd, connectClient, connectV2, freePort, openListen, refusedSession, runPython,
  startHaproxy, stopAll, tempDir, text, tlsGatewayArgs, tlsMaterial, tlsSandboxdArgs, writeConfig,
} from "./harness.mjs";

const handleOf = (r) => r.structuredContent?.sandbox;

// A TCP relay on `host` to `target` (host:port) that holds the target's bytes for `delay` ms
// after each connection opens, as a loaded host or a long link does with its handshake:
// { endpoint, connections(), close() }.
async function slowRelay(host, target, delay) {
  const at = target.lastIndexOf(":");
  const sockets = new Set();
  let connections = 0;
  const server = net.createServer((client) => {
    ++connections;
    const peer = net.connect(Number(target.slice(at + 1)), target.slice(0, at));
    for (const s of [client, peer]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => { client.destroy(); peer.destroy(); sockets.delete(s); });
    }
    client.pipe(peer);
    peer.pause();
    setTimeout(() => peer.pipe(client), delay);
  });
  await new Promise((resolve) => server.listen(0, host, resolve));
  return {
    endpoint: `${host}:${server.address().port}`,
    connections: () => connections,
    close: () => { for (const s of sockets) s.destroy(); server.close(); },
  };
}
// The printed part of a result (its last line names the handle).
const printed = (r) => text(r).split("\n[sandbox]")[0].trim();

describe("gateway replicas behind HAProxy", () => {
  let sandboxd, haproxy, url;
  const replicas = [];
  const auth = () => replicas[0].authHeaders;

  // The stick table's entries.
  async function tableUsed() {
    const out = await haproxy.ask("show table gateways");
    const used = /used:(\d+)/.exec(out);
    if (!used) throw new Error(`show table: ${out}`);
    return Number(used[1]);
  }
  const homeOf = (client) => haproxy.homeOf(client);
  const seenUp = (name) => haproxy.seenUp(name);
  const kill = (i) => replicas[i].stop("SIGKILL");

  before(async () => {
    sandboxd = new Sandboxd();
    await sandboxd.start();
    const config = writeConfig({});
    const key = path.join(tempDir("gwkey-"), "handle_key");
    for (let i = 0; i < 2; ++i) {
      const g = new GatewayHttp({ config, sandboxd: sandboxd.endpoint, extraArgs: [`--handle_key_file=${key}`,
        "--resources_poll_interval=200ms"] });
      if (i > 0) { g.tokens = replicas[0].tokens; g.token = replicas[0].token; }
      replicas.push(g);
      await g.start();  // the first creates the key; the second reads it
    }
    haproxy = await startHaproxy(replicas);
    url = haproxy.url;
  });
  after(async () => {
    for (const g of replicas) await g.stop();
    await sandboxd?.stop();
    await stopAll();
  });

  // Only a replica's answer puts a session id in the stick table: with `stick on` storing
  // the id of every request, refused ones too, a client without a token could fill the
  // table and push other clients' sessions out.
  test("only a replica's answer puts a session id in the stick table, never a request", async () => {
    const before = await tableUsed();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(url, { method: "POST", body: "{}", headers: { "Content-Type": "application/json",
        Accept: "application/json, text/event-stream", "Mcp-Session-Id": randomBytes(16).toString("hex") } });
      assert.equal(res.status, 401);
    }
    assert.equal(await tableUsed(), before, "ids sent by requests are not stored");
    const c = await connectClient(url, auth(), "sdk-v1-table");
    assert.equal(await tableUsed(), before + 1, "initialize's answer stores its id");
    await c.close();
  });

  test("a listen stream on one replica hears of a file a run through the other left", async () => {
    const stream = await openListen(replicas[0].url, auth(), "r1", { resourcesListChanged: true });
    assert.deepEqual((await stream.next()).params.notifications, { resourcesListChanged: true });
    const c = await connectV2(replicas[1].url, auth(), "sdk-v2-other");
    const r = await runPython(c, "import os\nos.makedirs('/workspace/out', exist_ok=True)\n"
      + "open('/workspace/out/elsewhere.txt', 'w').write('from replica 2')");
    assert.equal(r.isError, false, text(r));
    const change = await stream.next();  // replica 1 found it by looking (--resources_poll_interval)
    assert.equal(change.method, "notifications/resources/list_changed");
    stream.close();
    await c.close();
  });

  test("a 2026-07-28 client keeps its variables while the replicas die in turn", async () => {
    const c = await connectV2(url, auth());
    const first = await runPython(c, "x = 41\nprint('set')");
    assert.equal(first.isError, false, text(first));

    // With one replica alive, it served the call: each of the next two is served by another.
    await kill(0);
    const second = await runPython(c, "x += 1\nprint(x)", { sandbox: handleOf(first) });
    assert.equal(second.isError, false, text(second));
    assert.equal(printed(second), "42");

    await replicas[0].start(replicas[0].port);
    await seenUp("gateway1");
    await kill(1);
    const third = await runPython(c, "x += 1\nprint(x)", { sandbox: handleOf(second) });
    assert.equal(third.isError, false, text(third));
    assert.equal(printed(third), "43");
    await c.close();
    await replicas[1].start(replicas[1].port);
    await seenUp("gateway2");
  });

  test("a replica stopped for an update (SIGTERM) leaves its 2025 sessions' sandboxes to their handles", async () => {
    const legacy = await connectClient(url, auth(), "sdk-v1-update");
    const first = await runPython(legacy, "z = 'kept'\nprint('set')");
    assert.equal(first.isError, false, text(first));
    const home = await homeOf(legacy);
    const i = home === "gateway1" ? 0 : 1;
    await replicas[i].stop();  // SIGTERM: its MCP sessions end
    await legacy.close().catch(() => {});
    const again = await connectClient(url, auth(), "sdk-v1-after-update");
    const r = await runPython(again, "print(z)", { sandbox: handleOf(first) });
    assert.equal(r.isError, false, text(r));
    assert.equal(printed(r), "kept");
    await again.close();
    await replicas[i].start(replicas[i].port);
    await seenUp(home);
  });

  test("a 2025 session stays on its replica, and its handle outlives that replica", async () => {
    const legacy = await connectClient(url, auth(), "sdk-v1");
    const first = await runPython(legacy, "y = 7\nprint('set')");
    assert.equal(first.isError, false, text(first));
    const home = await homeOf(legacy);
    // Round robin alone would send every other request to the replica without the session
    // (404 there).
    for (let i = 0; i < 4; ++i) {
      const r = await runPython(legacy, "y += 1\nprint(y)");
      assert.equal(r.isError, false, text(r));
      assert.equal(printed(r), String(8 + i));
    }
    await kill(home === "gateway1" ? 0 : 1);
    await refusedSession(legacy, (c) => runPython(c, "print(y)"));
    await legacy.close().catch(() => {});
    const again = await connectClient(url, auth(), "sdk-v1-again");
    const r = await runPython(again, "print(y)", { sandbox: handleOf(first) });
    assert.equal(r.isError, false, text(r));
    assert.equal(printed(r), "11");
    await again.close();
  });
});

describe("sandboxd's TCP port on this machine, its own certificate pinned", () => {
  // The set-up docs/scaling.md gives for one machine: sandboxd makes a key pair in its
  // state directory, the gateway pins its certificate. Nothing goes in plaintext.
  const dir = tempDir("own-tls-");
  const token = path.join(dir, "token");
  let sandboxd, endpoint;
  before(async () => {
    endpoint = `127.0.0.1:${await freePort()}`;
    sandboxd = new Sandboxd([`--listen_tcp=${endpoint}`, `--tcp_token_file=${token}`]);
    await sandboxd.start();
  });
  after(async () => {
    await sandboxd?.stop();
    await stopAll();
  });

  test("a gateway that pins <state_dir>/tls/cert.pem runs code there", async () => {
    const g = new GatewayHttp({ config: writeConfig({}), sandboxd: endpoint, extraArgs: [
      `--sandboxd_token_file=${token}`, `--sandboxd_tls_ca_file=${path.join(sandboxd.stateDir, "tls", "cert.pem")}`] });
    await g.start();
    try {
      const c = await g.client("own-tls");
      const r = await runPython(c, "print(6 * 7)");
      assert.equal(r.isError, false, text(r) + g.log);
      assert.equal(printed(r), "42");
      await c.close();
    } finally {
      await g.stop();
    }
  });
});

describe("sandboxd on another machine (TLS)", () => {
  // An address of this host that is not loopback: to sandboxd's port, a peer there is as
  // good as one on another machine.
  const address = Object.values(os.networkInterfaces()).flat()
    .find((i) => i && i.family === "IPv4" && !i.internal)?.address;
  let sandboxd, endpoint, tls;
  const tlsArgs = (client = "client") => [`--sandboxd=${endpoint}`, ...tlsGatewayArgs(tls, client)];

  before(async () => {
    assert.ok(address, "this test needs an IPv4 address that is not loopback");
    tls = tlsMaterial([address]);
    endpoint = `${address}:${await freePort()}`;
    sandboxd = new Sandboxd(tlsSandboxdArgs(endpoint, tls));
    await sandboxd.start();
  });
  after(async () => {
    await sandboxd?.stop();
    await stopAll();
  });

  test("a gateway runs code there over TLS with its client certificate", async () => {
    const g = new GatewayHttp({ config: writeConfig({}), sandboxd: endpoint, extraArgs: tlsArgs().slice(1) });
    await g.start();
    try {
      const c = await g.client("tls");
      const r = await runPython(c, "print(6 * 7)");
      assert.equal(r.isError, false, text(r) + g.log);
      assert.equal(printed(r), "42");
      assert.match(g.log, /TCP endpoints over TLS/);
      await c.close();
    } finally {
      await g.stop();
    }
  });

  test("without a CA to check sandboxd with, the gateway does not start, on loopback neither", () => {
    for (const e of [endpoint, "127.0.0.1:50051"]) {
      const out = spawnSync(GATEWAY_BIN, ["--transport=http", "--listen=127.0.0.1:0", `--config=${writeConfig({})}`,
        `--sandboxd=${e}`, `--sandboxd_token_file=${tls.token}`], { encoding: "utf8", timeout: 30000,
        env: { ...process.env, MCP_GATEWAY_TOKEN: "t".repeat(32) } });
      assert.equal(out.status, 2, out.stderr);
      assert.match(out.stderr, /reaches only over TLS.*--sandboxd_tls_ca_file/s);
    }
  });

  // gRPC cuts a connection attempt after its minimum connect timeout: one of about a
  // second never reached a host whose handshake takes longer.
  test("a sandboxd whose answers come 1.5 s late on each new connection is reached", async () => {
    const relay = await slowRelay(address, endpoint, 1500);
    const g = new GatewayHttp({ config: writeConfig({}), sandboxd: relay.endpoint, extraArgs: tlsArgs().slice(1) });
    try {
      await g.start();
      const c = await g.client("slow-handshake");
      const r = await runPython(c, "print(6 * 7)");
      assert.equal(r.isError, false, `${text(r)} (${relay.connections()} connections)${g.log}`);
      assert.equal(printed(r), "42");
      await c.close();
    } finally {
      await g.stop();
      relay.close();
    }
  });

  // gRPC logs a failed TLS handshake itself; the line goes through the gateway's log (its
  // format, escaped, at most ten a second), not to stderr in gRPC's own format.
  test("gRPC's line for a sandboxd address that speaks no TLS is in the gateway's log", async () => {
    const peer = net.createServer((s) => { s.on("error", () => {}); s.end("HTTP/1.1 400 Bad Request\r\n\r\n"); });
    await new Promise((resolve) => peer.listen(0, address, resolve));
    const g = new GatewayHttp({ config: writeConfig({}), sandboxd: `${address}:${peer.address().port}`,
      extraArgs: tlsArgs().slice(1) });
    try {
      await g.start();
      const c = await g.client("no-tls-peer");
      const r = await runPython(c, "print(1)");
      assert.equal(r.isError, true, text(r));
      assert.match(g.log, /warning grpc: .*Handshake failed/, g.log);
      assert.doesNotMatch(g.log, /^[EWI]\d{4} \d\d:\d\d/m, "a line in gRPC's own format");
      await c.close();
    } finally {
      await g.stop();
      peer.close();
    }
  });

  test("a client certificate of another CA is refused by sandboxd", async () => {
    const g = new GatewayHttp({ config: writeConfig({}), sandboxd: endpoint, extraArgs: tlsArgs("other-client").slice(1) });
    await g.start();
    try {
      const c = await g.client("other-ca");
      const had = sandboxd.sessions().length;
      const r = await runPython(c, "print(1)");
      assert.equal(r.isError, true, text(r));
      assert.match(text(r), /unavailable/i);
      assert.equal(sandboxd.sessions().length, had, "sandboxd made a sandbox for a client it refused");
      await c.close();
    } finally {
      await g.stop();
    }
  });
});
