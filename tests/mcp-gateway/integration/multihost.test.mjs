// sandboxd on three hosts, each a network namespace with its own address on one bridge
// (tests/common/hosts.sh), reached over TLS with client certificates by one gateway in the
// root namespace that lists the three (`--sandboxd a:50051,b:50051,c:50051`). Through the
// SDK v2 client pinned to 2026-07-28, by handle:
//   - new sandboxes spread over the hosts;
//   - a host whose sandboxd is killed (kill -9, its containers removed) fails only its own
//     sandboxes, with an error naming its endpoint, within the call's deadline; the other
//     hosts keep theirs and take the new ones;
//   - a host cut off (its link down, its processes alive) holds no call past its deadline
//     and is passed over for new sandboxes; linked again, it serves its sandboxes with
//     their variables.
// How long each failure took to be seen is printed (`# measured:` lines), not asserted.
// Runs on Node 22 (tests/node22) for the SDK v2 client; needs root (ip netns).
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import {
  DEADLINES_MS, GatewayHttp, connectV2, measured, newSandboxOn, runPython, testHosts, text, timed, tlsGatewayArgs,
  writeConfig,
} from "./harness.mjs";

const { hosts, name: NAME, stop, up } = testHosts("gw");
const PORT = 50051;  // each host has its own address, so every sandboxd takes the same port
// The runs' timeout_seconds here, and the gateway's deadlines (harness.mjs).
const RUN_TIMEOUT = 1;
const RUN_DEADLINE_MS = DEADLINES_MS.run(RUN_TIMEOUT);
const { create: CREATE_DEADLINE_MS, list: LIST_DEADLINE_MS, slack: CALL_SLACK_MS, keepalive: KEEPALIVE_MS } =
  DEADLINES_MS;

describe("sandboxd on three hosts (network namespaces)", () => {
  let daemons, endpoints;  // daemons[i] on host i + 1 at endpoints[i]
  let gateway, client;

  // run_python by handle (a new sandbox without one), with RUN_TIMEOUT.
  const run = (code, sandbox) => runPython(client, code, { timeout_seconds: RUN_TIMEOUT, ...(sandbox ? { sandbox } : {}) });
  const counts = () => daemons.map((d) => d.sessions().length);
  // A new sandbox holding `code`'s variables: its handle and the index of its host.
  const newSandbox = (code) => newSandboxOn(daemons, () => run(code), () => gateway.log);
  async function assertKeeps({ handle, host }, value) {
    const r = await run("print(x)", handle);
    assert.equal(r.isError, false, `host ${host + 1}: ${text(r)}`);
    assert.equal(r.structuredContent.stdout, `${value}\n`);
  }

  before(async () => {
    let tls;
    ({ tls, daemons, endpoints } = await up(3, 3, PORT));
    gateway = new GatewayHttp({ config: writeConfig({}), sandboxd: endpoints.join(","), extraArgs: tlsGatewayArgs(tls) });
    await gateway.start();
    client = await connectV2(gateway.url, gateway.authHeaders, "sdk-v2-multihost");
  });
  after(async () => {
    await stop({ client, gateway, daemons });
    assert.equal(fs.existsSync(`/run/netns/mh-${NAME}-1`), false, "hosts.sh down left a namespace");
  });

  const sandboxes = [];  // one per host, x = its `value`
  test("new sandboxes spread over the three hosts, each reached at its own address", async () => {
    for (let i = 0; i < 3; ++i) sandboxes.push({ ...await newSandbox(`x = ${i + 1}\nprint('set')`), value: i + 1 });
    assert.deepEqual(sandboxes.map((s) => s.host).sort(), [0, 1, 2], "one new sandbox on each host");
    assert.deepEqual(counts(), [1, 1, 1]);
    for (const s of sandboxes) await assertKeeps(s, s.value);
    assert.match(gateway.log, /TCP endpoints over TLS/);
  });

  test("a killed host fails only its own sandboxes, naming its endpoint; new ones go elsewhere", async () => {
    const dead = sandboxes.find((s) => s.host === 2);
    await daemons[2].stop("SIGKILL");  // no clean-up: what a crashed host leaves
    daemons[2].removeContainers();

    const { value: r, ms } = await timed(run("print(x)", dead.handle));
    measured("a run on the killed host's sandbox fails after", ms);
    console.log(`# error: ${text(r)}`);
    assert.equal(r.isError, true, text(r));
    assert.ok(text(r).includes(endpoints[2]), `the error names ${endpoints[2]}: ${text(r)}`);
    assert.match(text(r), /unavailable/i);
    assert.ok(ms < RUN_DEADLINE_MS, `failed after ${ms} ms`);

    for (const s of sandboxes.filter((s) => s.host !== 2)) await assertKeeps(s, s.value);
    for (let i = 0; i < 2; ++i) {
      const { value: s, ms: placed } = await timed(newSandbox("x = 'new'"));
      measured(`new sandbox ${i + 1} with a host killed placed in`, placed);
      assert.notEqual(s.host, 2, "no sandbox placed on the killed host");
    }
  });

  test("a host cut off holds no call past its deadline and is passed over; back, it serves again", async () => {
    const cut = sandboxes.find((s) => s.host === 1);
    const live = sandboxes.find((s) => s.host === 0);
    hosts("cut", NAME, "2");
    // The run on the cut host waits while the others go on.
    const stuck = timed(run("print(x)", cut.handle).catch((e) => e));  // awaited below, whatever fails before
    const placed = [];
    for (let i = 0; i < 2; ++i) {
      const { value: s, ms } = await timed(newSandbox("x = 'new'"));
      measured(`new sandbox ${i + 1} with a host cut off placed in`, ms);
      assert.ok(ms < CREATE_DEADLINE_MS, `placed after ${ms} ms: a create waited on the cut-off host`);
      placed.push(s.host);
    }
    assert.deepEqual(placed, [0, 0], "new sandboxes go to the host still linked");
    await assertKeeps(live, live.value);
    const { value: listed, ms: listMs } = await timed(client.listResources());
    measured("resources/list with a host cut off (and one killed) answers after", listMs);
    assert.ok(Array.isArray(listed.resources));
    assert.ok(listMs < LIST_DEADLINE_MS + CALL_SLACK_MS, `resources/list held ${listMs} ms`);

    const { value: r, ms } = await stuck;
    if (r instanceof Error) throw r;
    measured("a run on the cut-off host's sandbox fails after", ms);
    console.log(`# error: ${text(r)}`);
    assert.equal(r.isError, true, text(r));
    assert.ok(text(r).includes(endpoints[1]), `the error names ${endpoints[1]}: ${text(r)}`);
    assert.ok(ms < KEEPALIVE_MS + CALL_SLACK_MS,
      `held ${ms} ms: the keepalive (${KEEPALIVE_MS} ms) did not notice the host was gone`);

    hosts("restore", NAME, "2");
    const { ms: back } = await timed(assertKeeps(cut, cut.value));
    measured("the restored host's sandbox answers again after", back);
  });
});
