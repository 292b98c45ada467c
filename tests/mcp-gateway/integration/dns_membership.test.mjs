// Membership by DNS (issue 46): sandboxd on three hosts, each a network namespace with its
// own address on one bridge (tests/common/hosts.sh), over TLS with client certificates, and
// one gateway on a fourth host given `--sandboxd=dns:///sandboxd.test:50051`. The name is
// answered by a real DNS server, Debian's dnsmasq on the bridge's address, from a hosts file
// the test rewrites and SIGHUPs; the gateway's host resolves through it (`hosts.sh dns`).
// Through the SDK v2 client pinned to 2026-07-28, by handle:
//   - new sandboxes spread over the hosts DNS lists;
//   - a host added to DNS takes new sandboxes without a gateway restart, within one
//     re-resolution period (--sandboxd_resolve_interval);
//   - a host removed from DNS keeps serving its sandbox's handle and gets no new sandbox;
//   - a gateway started after that (same handle key) still runs that sandbox by its handle:
//     the address sealed in it is dialled though DNS no longer lists it.
// Runs on Node 22 (tests/node22) for the SDK v2 client; needs root (ip netns, port 53).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  GatewayHttp, Sandboxd, connectV2, measured, newSandboxOn, runPython, spawnTied, tempDir, testHosts, text,
  tlsGatewayArgs, tlsMaterial, tlsSandboxdArgs, track, waitFor, writeConfig,
} from "./harness.mjs";

const { hosts, name: NAME, exec, stop } = testHosts("dm");
const PORT = 50051;
const DNS_NAME = "sandboxd.test";  // what sandboxd's certificate names (--sandboxd_tls_server_name)
const RESOLVE_INTERVAL_MS = 1000;  // the gateway's --sandboxd_resolve_interval here

describe("sandboxd hosts found by DNS (dnsmasq, network namespaces)", () => {
  const daemons = [];  // daemons[i] on host i + 1
  const endpoints = [];
  const hostsFile = path.join(tempDir("dns-"), "hosts");
  let dnsmasq, gateway, client;

  const counts = () => daemons.map((d) => d.sessions().length);
  // DNS lists `which` hosts (indices into daemons) from now on.
  const writeHosts = (which) =>
    fs.writeFileSync(hostsFile, which.map((i) => `${endpoints[i].split(":")[0]} ${DNS_NAME}\n`).join(""));
  function listInDns(which) {
    writeHosts(which);
    dnsmasq.kill("SIGHUP");
  }
  // What the gateway's host resolves the name to, through dnsmasq.
  const resolved = () => {
    try {
      return hosts("exec", NAME, "4", "getent", "ahostsv4", DNS_NAME).split("\n")
        .filter((l) => l.includes("STREAM")).map((l) => l.split(/\s+/)[0]).sort();
    } catch { return []; }
  };
  // Placement asks each listed host's load (GetInfo, on a connection of its own begun when
  // DNS lists the host) with a 500 ms deadline, and one that lets it pass goes last for 2 s:
  // a first TLS handshake on a loaded machine can take longer. The gateway logs, at debug,
  // when a host answers. resources/list asks every listed host, 5 s at most each.
  const dialAll = () => client.listResources();
  const answering = (i) => gateway.log.includes(`sandboxd at ${endpoints[i]}: answers placement's GetInfo`);
  // The gateway's debug lines saying what it read of each host when it placed a sandbox.
  const placements = () => gateway.log.split("\n").filter((l) => l.includes("placing a new sandbox")).join("\n");
  const run = (code, sandbox) => runPython(client, code, { timeout_seconds: 5, ...(sandbox ? { sandbox } : {}) });
  const newSandbox = (code) => newSandboxOn(daemons, () => run(code), () => gateway.log);

  before(async () => {
    hosts("up", NAME, "4");  // sandboxd on 1-3, the gateway on 4
    const tls = tlsMaterial([DNS_NAME]);
    for (const i of [1, 2, 3]) {
      endpoints.push(`${hosts("addr", NAME, String(i))}:${PORT}`);
      daemons.push(new Sandboxd([...tlsSandboxdArgs(endpoints[i - 1], tls), "--pool_size=1"],
        { prefix: exec(i) }));
    }
    const bridge = hosts("addr", NAME, "0");
    // Listed before dnsmasq starts: a SIGHUP before it handles one would end it.
    writeHosts([0, 1]);
    dnsmasq = track(spawnTied("dnsmasq", ["--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
      "--no-hosts", `--addn-hosts=${hostsFile}`, `--listen-address=${bridge}`, "--bind-interfaces", "--port=53",
      "--user=root", "--pid-file=", "--log-facility=-"], { stdio: ["ignore", "ignore", "inherit"] }));
    hosts("dns", NAME, "4", bridge);
    await waitFor(() => resolved().length === 2, `dnsmasq on ${bridge} to answer ${DNS_NAME}`, 10000);
    await Promise.all(daemons.map((d) => d.start()));
    await Promise.all(daemons.map((d) => d.serving()));
    gateway = new GatewayHttp({
      config: writeConfig({}), sandboxd: `dns:///${DNS_NAME}:${PORT}`,
      extraArgs: [...tlsGatewayArgs(tls), `--sandboxd_tls_server_name=${DNS_NAME}`,
        `--handle_key_file=${path.join(tempDir("dnskey-"), "handle_key")}`,
        `--sandboxd_resolve_interval=${RESOLVE_INTERVAL_MS}ms`, "--log_level=debug"],
      prefix: exec(4), host: hosts("addr", NAME, "4"),
    });
    await gateway.start();
    client = await connectV2(gateway.url, gateway.authHeaders, "sdk-v2-dns-membership");
    await dialAll();
  });
  after(async () => {
    await stop({ client, gateway, daemons });
    assert.equal(fs.existsSync(`/run/sandbox-hosts/${NAME}.resolv-4`), false, "hosts.sh down left host 4's resolv.conf");
  });

  const sandboxes = [];
  test("new sandboxes spread over the hosts DNS lists", async () => {
    for (let i = 0; i < 2; ++i) sandboxes.push({ ...await newSandbox(`x = ${i + 1}`), value: i + 1 });
    assert.deepEqual(sandboxes.map((s) => s.host).sort(), [0, 1], "one on each listed host");
    assert.deepEqual(counts(), [1, 1, 0], "none on the host DNS does not list");
    assert.ok(gateway.log.includes(`new sandboxes go to 2 address(es); added ${endpoints[0]}, ${endpoints[1]}; gone none`),
      gateway.log);
  });

  test("a host added to DNS takes new sandboxes within one re-resolution period", async () => {
    listInDns([0, 1, 2]);
    const t0 = performance.now();
    await waitFor(() => resolved().length === 3, "dnsmasq to list the third host", 5000);
    await waitFor(() => gateway.log.includes(`go to 3 address(es); added ${endpoints[2]};`),
      "the gateway to place on the third host",
      RESOLVE_INTERVAL_MS + 1000);
    measured("the added host is placed on after", performance.now() - t0);
    await dialAll();
    await waitFor(() => answering(2), "the gateway to hear the third host's load", 10000);
    const s = await newSandbox("x = 3");
    assert.equal(s.host, 2, `the new host, the least loaded; the gateway placed:\n${placements()}`);
    sandboxes.push({ ...s, value: 3 });
  });

  test("a host removed from DNS keeps serving its handle and gets no new sandbox", async () => {
    listInDns([1, 2]);
    await waitFor(() => resolved().length === 2, "dnsmasq to drop the first host", 5000);
    await waitFor(() => gateway.log.includes(`new sandboxes go to 2 address(es); added none; gone ${endpoints[0]}\n`),
      "the gateway to stop placing on the first host", RESOLVE_INTERVAL_MS + 5000);
    // Every host holds one sandbox: without the removal, the first would be first in line.
    assert.deepEqual(counts(), [1, 1, 1]);
    for (let i = 0; i < 2; ++i) {
      const s = await newSandbox("x = 'new'");
      assert.notEqual(s.host, 0, "no new sandbox on the host gone from DNS");
    }
    const gone = sandboxes.find((s) => s.host === 0);
    const r = await run("print(x)", gone.handle);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, `${gone.value}\n`);
  });

  test("a gateway started after the host left DNS runs its sandbox by the handle", async () => {
    await client.close();
    await gateway.stop();
    gateway.log = "";
    await gateway.start(gateway.port);
    client = await connectV2(gateway.url, gateway.authHeaders, "sdk-v2-dns-membership-again");
    assert.ok(gateway.log.includes(`new sandboxes go to 2 address(es); added ${endpoints[1]}, ${endpoints[2]}; gone none\n`),
      gateway.log);
    const gone = sandboxes.find((s) => s.host === 0);
    const r = await run("print(x)", gone.handle);
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, `${gone.value}\n`);
  });
});
