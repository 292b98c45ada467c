// tests/common/hosts.sh, the multi-host tests' hosts: made on a free /24, reachable from
// the root namespace and from each other, cut off and linked again, and removed entirely
// (processes in them too), twice over and after a crash. Needs root.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, describe, test } from "node:test";

const HOSTS = path.join(import.meta.dirname, "hosts.sh");
const hosts = (...args) => execFileSync("bash", [HOSTS, ...args], { encoding: "utf8" }).trim();
const NAME = `ht${process.pid.toString(36)}`;
const OTHER = `hu${process.pid.toString(36)}`;
const PORT = 8080;

// True when a connection to address:PORT opens within a second.
const reaches = (address) => new Promise((resolve) => {
  const c = net.connect({ host: address, port: PORT, timeout: 1000 }, () => { c.end(); resolve(true); });
  c.on("timeout", () => { c.destroy(); resolve(false); });
  c.on("error", () => resolve(false));
});
// Whether host `from` (of NAME) reaches address:PORT.
function reachesFrom(from, address) {
  const probe = `require("net").connect({host:"${address}",port:${PORT},timeout:1000},function(){process.exit(0)})`
    + `.on("timeout",()=>process.exit(1)).on("error",()=>process.exit(1))`;
  return spawnSync("bash", [HOSTS, "exec", NAME, String(from), process.execPath, "-e", probe]).status === 0;
}
const left = (name) => ({
  namespaces: execFileSync("ip", ["netns", "list"], { encoding: "utf8" }).split("\n")
    .filter((l) => l.startsWith(`mh-${name}-`)),
  bridge: spawnSync("ip", ["link", "show", `mhbr-${name}`]).status === 0,
  state: fs.existsSync(`/run/sandbox-hosts/${name}`),
});
const nothingLeft = { namespaces: [], bridge: false, state: false };

describe("hosts.sh", () => {
  after(() => {
    hosts("down", NAME);
    hosts("down", OTHER);
  });

  test("up makes hosts on a /24 of their own, each reached at its address", async () => {
    const prefix = hosts("up", NAME, "2");
    assert.match(prefix, /^10\.246\.\d+$/);
    assert.equal(hosts("addr", NAME, "0"), `${prefix}.1`);
    assert.equal(hosts("addr", NAME, "2"), `${prefix}.3`);
    // No other interface of the root namespace has an address in it.
    const addrs = execFileSync("ip", ["-4", "-o", "addr", "show"], { encoding: "utf8" }).split("\n")
      .filter((l) => l.includes(` ${prefix}.`));
    assert.deepEqual(addrs.map((l) => l.split(/\s+/)[1]), [`mhbr-${NAME}`]);
    // Another name gets another /24.
    assert.notEqual(hosts("up", OTHER, "1"), prefix);
    const again = spawnSync("bash", [HOSTS, "up", NAME, "1"], { encoding: "utf8" });
    assert.equal(again.status, 2);
    assert.match(again.stderr, /exist already/);
  });

  test("a host is reached from the root namespace and from another host; cut, from neither", async () => {
    const address = hosts("addr", NAME, "2");
    const server = spawn("bash", [HOSTS, "exec", NAME, "2", process.execPath, "-e",
      `require("net").createServer((c)=>c.end()).listen(${PORT},"${address}",()=>console.log("up"))`],
    { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((r) => server.stdout.once("data", r));
    assert.equal(await reaches(address), true, "from the root namespace");
    assert.equal(reachesFrom(1, address), true, "from host 1");
    assert.equal(await reaches(hosts("addr", OTHER, "1")), false, "nothing listens on the other hosts");

    hosts("cut", NAME, "2");
    assert.equal(await reaches(address), false, "cut off: the root namespace");
    assert.equal(reachesFrom(1, address), false, "cut off: host 1");
    assert.equal(server.exitCode, null, "its processes live on");
    hosts("restore", NAME, "2");
    assert.equal(await reaches(address), true, "linked again");

    // down kills what runs in the hosts.
    const exited = new Promise((r) => server.once("exit", (code, signal) => r(signal)));
    hosts("down", NAME);
    const alive = new Promise((r) => setTimeout(() => r("still running after 5 s"), 5000).unref());
    assert.equal(await Promise.race([exited, alive]), "SIGKILL");
    assert.deepEqual(left(NAME), nothingLeft);
    hosts("down", NAME);  // again: nothing to do, no error
  });

  test("dns gives a host's execs a resolv.conf of their own; down removes it", () => {
    hosts("up", NAME, "2");
    hosts("dns", NAME, "2", "10.246.255.53");
    const machine = fs.readFileSync("/etc/resolv.conf", "utf8");
    assert.equal(hosts("exec", NAME, "2", "cat", "/etc/resolv.conf"), "nameserver 10.246.255.53");
    assert.equal(hosts("exec", NAME, "1", "cat", "/etc/resolv.conf"), machine.trim(), "host 1 resolves as the machine");
    assert.equal(fs.readFileSync("/etc/resolv.conf", "utf8"), machine, "the machine's is untouched");
    // Still in the host's network namespace: its address.
    assert.match(hosts("exec", NAME, "2", "ip", "-4", "-o", "addr", "show", "eth0"), new RegExp(hosts("addr", NAME, "2")));
    assert.equal(spawnSync("bash", [HOSTS, "dns", NAME, "2", "not-an-address"]).status, 2);
    hosts("down", NAME);
    assert.equal(fs.existsSync(`/run/sandbox-hosts/${NAME}.resolv-2`), false);
    assert.deepEqual(left(NAME), nothingLeft);
  });

  test("down removes hosts whose state file is gone (an up that crashed)", () => {
    hosts("up", NAME, "2");
    fs.rmSync(`/run/sandbox-hosts/${NAME}`);
    hosts("down", NAME);
    assert.deepEqual(left(NAME), nothingLeft);
  });
});
