// The many-machine shape of docs/scaling.md on network namespaces (tests/common/hosts.sh):
// sandboxd on hosts 1-3 (TLS with client certificates, each on its own address), two
// gateway replicas on hosts 4 and 5 listing the three (one handle key, the same tokens),
// and Debian's HAProxy with the shipped deploy/haproxy/haproxy.cfg in the root namespace
// in front of them. The clients talk to HAProxy only.
//   - New sandboxes spread over the hosts, placed by both replicas.
//   - A replica killed (kill -9) while clients run code by handle in a loop loses no
//     sandbox: every SDK v2 (2026-07-28) call that starts once HAProxy's health check can
//     have noticed succeeds on the other replica, each sandbox's variables intact. A 2025
//     session (SDK v1) on the killed replica is gone with it: every later call of that
//     session fails with a 404, and a new session goes on in the same sandbox by its handle.
//   - A host killed (its sandboxd kill -9, its containers removed) fails its sandbox's runs
//     on both replicas at once, naming its endpoint, while both place new sandboxes on the
//     others; a host cut off (link down) holds no call on either replica past the
//     keepalive, and back, it serves its sandbox through both. (multihost.test.mjs checks
//     the same with one gateway and how long each takes.)
// Runs on Node 22 (tests/node22) for the SDK v2 client; needs root (ip netns); HAPROXY
// names the binary.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  DEADLINES_MS, GatewayHttp, HAPROXY_CONFIG, connectClient, connectV2, measured, newSandboxOn, runPython, startHaproxy,
  tempDir, testHosts, text, timed, tlsGatewayArgs, waitFor, writeConfig,
} from "./harness.mjs";

const { hosts, name: NAME, exec, stop, up } = testHosts("gr");
const PORT = 50051;
const RUN_TIMEOUT = 5;  // the runs' timeout_seconds
// How long HAProxy may take to stop sending requests to a dead replica: its health check
// (`default-server check inter Ns fall K` in the shipped file) fails K times, N s apart,
// and a second more for the check under way.
const [, INTER_S, FALL] = /default-server check inter (\d+)s fall (\d+)/.exec(fs.readFileSync(HAPROXY_CONFIG, "utf8"));
const NOTICE_MS = (Number(INTER_S) * Number(FALL) + 1) * 1000;
// The clients' own timeout for a call under load (the runs take milliseconds). A call in
// flight on the replica when it dies may wait for it: the SDK v2 client leaves a call
// pending when its SSE response stream ends without the result.
const LOAD_CALL_TIMEOUT_MS = 4000;
const LOAD_AFTER_MS = 3000;  // how long the clients go on after NOTICE_MS and that timeout
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const stdout = (r) => r.structuredContent?.stdout;

describe("sandboxd on three hosts, two gateway replicas on two more, HAProxy in front", () => {
  let daemons, endpoints;  // daemons[i] on host i + 1 at endpoints[i]
  const replicas = [];  // replicas[i] on host i + 4, HAProxy's gateway(i + 1)
  let haproxy, client;

  const auth = () => replicas[0].authHeaders;
  const logs = () => `\nreplicas said:\n${replicas.map((g) => g.log).join("\n")}\nHAProxy said:\n${haproxy.log}`;
  const counts = () => daemons.map((d) => d.sessions().length);
  const run = (code, sandbox, c = client, timeout = undefined) =>
    runPython(c, code, { timeout_seconds: RUN_TIMEOUT, ...(sandbox ? { sandbox } : {}) }, timeout ? { timeout } : {});
  // A call made while no other is in flight, and the replica that answered it.
  async function served(call) {
    const before = await haproxy.answered();
    const { value, ms } = await timed(call());
    const after = await haproxy.answered();
    const by = Object.keys(after).filter((k) => after[k] > before[k]);
    assert.equal(by.length, 1, `one replica answered the call: ${JSON.stringify({ before, after })}`);
    return { value, ms, by: by[0] };
  }
  const newSandbox = async (code) => {
    let by;
    const s = await newSandboxOn(daemons, async () => { const r = await served(() => run(code)); by = r.by; return r.value; },
      logs);
    return { ...s, by };
  };
  async function assertKeeps({ handle, host, value }) {
    const { value: r, by } = await served(() => run("print(x)", handle));
    assert.equal(r.isError, false, `host ${host + 1} through ${by}: ${text(r)}`);
    assert.equal(stdout(r), `${value}\n`, `host ${host + 1} through ${by}`);
    return by;
  }

  before(async () => {
    let tls;
    ({ tls, daemons, endpoints } = await up(5, 3, PORT));
    const config = writeConfig({});
    const key = path.join(tempDir("grkey-"), "handle_key");
    for (const i of [4, 5]) {
      const g = new GatewayHttp({ config, sandboxd: endpoints.join(","),
        extraArgs: [...tlsGatewayArgs(tls), `--handle_key_file=${key}`, "--log_level=debug"], prefix: exec(i), host: hosts("addr", NAME, String(i)) });
      if (replicas.length) { g.tokens = replicas[0].tokens; g.token = replicas[0].token; }
      replicas.push(g);
      await g.start();  // the first makes the key; the second reads it
    }
    haproxy = await startHaproxy(replicas);
    client = await connectV2(haproxy.url, auth(), "sdk-v2-replicas");
  });
  after(async () => {
    await client?.close();
    for (const g of replicas) await g.stop();
    await stop({ daemons });
  });

  const sandboxes = [];  // one per host, x = its `value`
  test("new sandboxes spread over the three hosts, placed by both replicas", async () => {
    const by = [];
    for (let i = 0; i < 3; ++i) {
      // A replica places on endpoint loads it asked for up to a second ago (its load watch
      // asks every 250 ms while sandboxes come, and a slow answer leaves the last one in
      // use): the other replica's new sandbox counts in its choice after that.
      if (i > 0) await new Promise((r) => setTimeout(r, 1500));
      const s = await newSandbox(`x = ${(i + 1) * 100}`);
      sandboxes.push({ ...s, value: (i + 1) * 100 });
      by.push(s.by);
    }
    assert.deepEqual(sandboxes.map((s) => s.host).sort(), [0, 1, 2], `one new sandbox on each host (by ${by})${logs()}`);
    assert.deepEqual(counts(), [1, 1, 1]);
    for (const s of sandboxes) by.push(await assertKeeps(s));
    assert.deepEqual([...new Set(by)].sort(), ["gateway1", "gateway2"], `answered by ${by}${logs()}`);
  });

  // Runs `x += 1; print(x)` on `sandbox` through `c` until `done()`: each call's start time
  // and its printed value or its error.
  async function loop(c, sandbox, done) {
    const calls = [];
    while (!done()) {
      const t = performance.now();
      const r = await run("x += 1\nprint(x)", sandbox, c, LOAD_CALL_TIMEOUT_MS).catch((e) => e);
      if (r instanceof Error || r.isError) {
        calls.push({ t, ms: performance.now() - t, error: r instanceof Error ? r.message : text(r) });
        await sleep(50);
      } else {
        calls.push({ t, value: Number(stdout(r)) });
      }
    }
    return calls;
  }
  // A loop's successful calls count on from `first`, one each, or two where a failed call
  // between them may have run before its answer was lost.
  function assertCounts(calls, first, what) {
    let last = first, failed = 0;
    for (const c of calls) {
      if (c.error !== undefined) { ++failed; continue; }
      assert.ok(c.value > last && c.value <= last + 1 + failed, `${what}: ${c.value} after ${last}, ${failed} failed between`);
      last = c.value;
      failed = 0;
    }
    return last;
  }

  test("a replica killed mid-load loses no sandbox; its 2025 sessions end with a 404", async () => {
    const clients = await Promise.all(sandboxes.map((_, i) => connectV2(haproxy.url, auth(), `sdk-v2-load-${i}`)));
    const legacy = await connectClient(haproxy.url, auth(), "sdk-v1-load");
    const first = await run("x = 0\nprint('set')", undefined, legacy);
    assert.equal(first.isError, false, text(first));
    const home = await haproxy.homeOf(legacy);
    const killed = replicas[home === "gateway1" ? 0 : 1];
    const before = sandboxes.map((s) => daemons[s.host].sessions().map((r) => r.id).sort());

    let killedAt = Infinity, stopAt = Infinity;
    const done = () => performance.now() > stopAt;
    const loops = [...sandboxes.map((s, i) => loop(clients[i], s.handle, done)), loop(legacy, undefined, done)];
    await sleep(1000);
    await killed.stop("SIGKILL");
    killedAt = performance.now();
    stopAt = killedAt + Math.max(NOTICE_MS, LOAD_CALL_TIMEOUT_MS) + LOAD_AFTER_MS;
    const results = await Promise.all(loops);
    try {
      await checkLoad(results, { killedAt, before, legacy, legacyHandle: first.structuredContent.sandbox });
    } finally {
      for (const c of clients) await c.close();
      await killed.start(killed.port);  // for the tests below
      await haproxy.seenUp(home);
    }
  });
  // The v2 loops' calls (results[0..2], on sandboxes[i]) and those of the 2025 session
  // `legacy` (results[3], its sandbox's handle `legacyHandle`), with the replica killed at
  // `killedAt`; `before`: the hosts' sandboxes then.
  async function checkLoad(results, { killedAt, before, legacy, legacyHandle }) {
    for (const [i, calls] of results.slice(0, 3).entries()) {
      const what = `sandbox on host ${sandboxes[i].host + 1}`;
      const late = calls.filter((c) => c.t > killedAt + NOTICE_MS);
      const failed = calls.filter((c) => c.error !== undefined);
      console.log(`# ${what}: ${calls.length} calls, ${failed.length} failed: ${failed.slice(0, 3).map((c) =>
        `started ${Math.round(c.t - killedAt)} ms after the kill, failed after ${Math.round(c.ms)} ms: ${c.error}`)
        .join("; ")}`);
      assert.ok(calls.filter((c) => c.t < killedAt && c.value).length >= 2, `${what}: calls before the kill`);
      assert.ok(late.length >= 3, `${what}: only ${late.length} calls after HAProxy could notice`);
      assert.deepEqual(late.filter((c) => c.error !== undefined), [], `${what}: calls after ${NOTICE_MS} ms failed${logs()}`);
      sandboxes[i].value = assertCounts(calls, sandboxes[i].value, what);
      await assertKeeps(sandboxes[i]);  // x as the last call printed it
    }
    assert.deepEqual(sandboxes.map((s) => daemons[s.host].sessions().map((r) => r.id).sort()), before,
      "the hosts hold the same sandboxes");

    const legacyCalls = results[3];
    const after = legacyCalls.filter((c) => c.t > killedAt);
    console.log(`# 2025 session: ${legacyCalls.length} calls, after the kill: ${after[0]?.error}`);
    assert.ok(after.length >= 1, "the 2025 session made calls after the kill");
    assert.deepEqual(after.filter((c) => c.error === undefined), [], "no call of the session ran after its replica died");
    for (const c of after.filter((c) => c.t > killedAt + NOTICE_MS)) assert.match(c.error, /404|session/i);
    const last = assertCounts(legacyCalls, 0, "the 2025 session's sandbox");
    // A call in flight when the replica died may have run, its answer lost.
    const inFlight = legacyCalls.filter((c) => c.t < killedAt && c.value === undefined && c.t > legacyCalls.findLast(
      (d) => d.value !== undefined).t).length;
    await legacy.close().catch(() => {});
    const again = await connectClient(haproxy.url, auth(), "sdk-v1-again");
    const r = await run("print(x)", legacyHandle, again);
    assert.equal(r.isError, false, text(r));
    const x = Number(stdout(r));
    assert.ok(x >= last && x <= last + inFlight, `a new session goes on in the sandbox by its handle: x = ${x} after ${last}`);
    await again.close();
  }

  test("a killed host fails its sandbox on both replicas, naming it; both place new ones elsewhere", async () => {
    const dead = sandboxes.find((s) => s.host === 2);
    await daemons[2].stop("SIGKILL");  // no clean-up: what a crashed host leaves
    daemons[2].removeContainers();
    const by = [];
    for (let i = 0; i < 2; ++i) {
      const { value: r, ms, by: replica } = await served(() => run("print(x)", dead.handle));
      measured(`a run on the killed host's sandbox through ${replica} fails after`, ms);
      assert.equal(r.isError, true, text(r));
      assert.ok(text(r).includes(endpoints[2]), `the error names ${endpoints[2]}: ${text(r)}`);
      assert.match(text(r), /unavailable/i);
      assert.ok(ms < DEADLINES_MS.run(RUN_TIMEOUT), `failed after ${ms} ms`);
      by.push(replica);
    }
    for (let i = 0; i < 4; ++i) {
      const s = await newSandbox("x = 'new'");
      assert.notEqual(s.host, 2, `${s.by} placed a sandbox on the killed host`);
      by.push(s.by);
    }
    for (const s of sandboxes.filter((s) => s.host !== 2)) by.push(await assertKeeps(s));
    assert.deepEqual([...new Set(by.slice(0, 2))].sort(), ["gateway1", "gateway2"], `answered by ${by}`);
    assert.deepEqual([...new Set(by.slice(2, 6))].sort(), ["gateway1", "gateway2"], `placed by ${by}`);
  });

  test("a host cut off holds no call on either replica past the keepalive; back, both serve it", async () => {
    const cut = sandboxes.find((s) => s.host === 1);
    hosts("cut", NAME, "2");
    // A run on the cut host held by each replica at once (HAProxy's current streams).
    const inFlight = async () => Object.values(await haproxy.column("scur")).map(Number);
    const stuck = [];
    for (let i = 0; i < 2; ++i) {
      stuck.push(timed(run("print(x)", cut.handle).catch((e) => e)));
      await waitFor(async () => (await inFlight()).filter((n) => n > 0).length === i + 1,
        `run ${i + 1} on the cut-off host held by ${i + 1} replicas`, 5000);
    }
    // Not through served(): the held runs may end meanwhile. Round robin: one each.
    for (let i = 0; i < 2; ++i) {
      const { ms, value: s } = await timed(newSandboxOn(daemons, () => run("x = 'new'"), logs));
      assert.ok(ms < DEADLINES_MS.create, `placed after ${ms} ms: a create waited on the cut-off host`);
      assert.equal(s.host, 0, "placed on the host still linked");
    }
    for (const { value: r, ms } of await Promise.all(stuck)) {
      if (r instanceof Error) throw r;
      measured("a run on the cut-off host's sandbox fails after", ms);
      assert.equal(r.isError, true, text(r));
      assert.ok(text(r).includes(endpoints[1]), `the error names ${endpoints[1]}: ${text(r)}`);
      assert.ok(ms < DEADLINES_MS.keepalive + DEADLINES_MS.slack, `held ${ms} ms`);
    }

    hosts("restore", NAME, "2");
    const by = [await assertKeeps(cut), await assertKeeps(cut)];
    assert.deepEqual(by.sort(), ["gateway1", "gateway2"], "both replicas reach the host again");
  });
});
