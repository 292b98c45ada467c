// Sessions that come and go (issue 47): four clients each create a session and delete it at
// once, in a loop, against a daemon at --max_sessions=4 --pool_size=0, so every create is a
// cold start and every delete a removal. Compares sandboxd binaries (or flag sets) in
// alternated rounds. Per round: creates done in the window, the machine's CPU per
// create-and-delete (all processes, /proc/stat, from the window's start until the last
// container is gone), the daemon's containers (`podman ps -a`, sampled every 0.5 s) and how
// long removals lag behind the window. Prints a markdown table.
//
//   CHURN_VARIANTS='api=build/services/sandboxd/sandboxd;cli=build/services/sandboxd/sandboxd --podman_api=false' \
//     NODE_PEERS=deploy/node/node_modules node bench/sandboxd_churn/churn.mjs [--seconds 30] [--rounds 2]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { call, numberArg, sleep, withDaemon } from "../sandboxd_daemon.mjs";

const SECONDS = numberArg("seconds", 30), ROUNDS = numberArg("rounds", 2), CLIENTS = 4;
if (!process.env.CHURN_VARIANTS) throw new Error("set CHURN_VARIANTS");
// "label=binary flag flag;label=binary ..."
const variants = process.env.CHURN_VARIANTS.split(";").map((v) => {
  const eq = v.indexOf("=");
  if (eq <= 0) throw new Error(`CHURN_VARIANTS: "${v}" is not label=binary [flags]`);
  const [bin, ...flags] = v.slice(eq + 1).trim().split(/\s+/);
  return { label: v.slice(0, eq), bin, flags };
});

// The machine's busy jiffies (every CPU, all but idle and iowait).
const busyJiffies = () => {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  return f.reduce((a, b) => a + b, 0) - f[3] - f[4];
};
const containers = (stateDir) =>
  execFileSync("podman", ["ps", "-aq", "--filter", `label=io.sandboxd.state-dir=${stateDir}`], { encoding: "utf8" })
    .split("\n").filter(Boolean).length;

async function measure(v) {
  const flags = ["--pool_size=0", "--js_pool_size=0", `--max_sessions=${CLIENTS}`, ...v.flags];
  return withDaemon(v.bin, flags, async ({ client: c, stateDir }) => {
    await sleep(3000);  // the start-up check's container gone, podman's service listening
    const jiffies0 = busyJiffies(), t0 = Date.now(), until = t0 + SECONDS * 1000;
    let creates = 0, failures = 0, sampling = true;
    const counts = [];
    const sampler = (async () => {
      while (sampling) { counts.push(containers(stateDir)); await sleep(500); }
    })();
    await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => {
      while (Date.now() < until) {
        try {
          const s = await call(c, "CreateSession", { owner: `churn-${i}` });
          ++creates;
          await call(c, "DeleteSession", { session_id: s.id });
        } catch (e) { ++failures; await sleep(50); }
      }
    }));
    const ended = Date.now();
    while (containers(stateDir) > 0 && Date.now() - ended < 60000) await sleep(100);
    const drained = Date.now();
    sampling = false;
    await sampler;
    const cpuMs = (busyJiffies() - jiffies0) * 10;
    return { creates, failures, cpuPer: cpuMs / Math.max(creates, 1), max: Math.max(...counts),
      mean: counts.reduce((a, b) => a + b, 0) / counts.length, lag: drained - ended };
  });
}

const rows = [];
for (let r = 0; r < ROUNDS; r++) {
  for (const v of variants) {
    const m = await measure(v);
    rows.push(`| ${v.label} | ${m.creates}${m.failures ? ` (${m.failures} failed)` : ""} | ${m.cpuPer.toFixed(0)} ms | ` +
      `${m.max} / ${m.mean.toFixed(1)} | ${(m.lag / 1000).toFixed(1)} s |`);
    console.error(rows[rows.length - 1]);
  }
}
console.log(`${CLIENTS} clients creating and deleting sessions for ${SECONDS} s, --max_sessions=${CLIENTS} --pool_size=0.\n`);
console.log("| variant | creates | machine CPU per create and delete | containers max / mean | last removal after the window |");
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(row);
