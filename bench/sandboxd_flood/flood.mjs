// The other sessions' latency while some sessions flood sandboxd with frames (issue 47's
// fairness; --runner_cpu_millis). Sandboxed code that writes runner frames itself, as fast
// as its socket takes them, makes sandboxd parse them on that session's reader thread;
// without a share per session those readers take sandboxd's CPU from everyone else.
//
// For each --runner_cpu_millis value (the built default, then 0: no limit), alternated
// `--rounds` times: a daemon of its own, one witness session timing Run `print(1)` every
// 50 ms while idle and while `--flooders` sessions flood, and sandboxd's CPU meanwhile.
// Prints a markdown table.
//
//   SANDBOXD_BIN=build/services/sandboxd/sandboxd NODE_PEERS=deploy/node/node_modules \
//     node bench/sandboxd_flood/flood.mjs [--flooders 6] [--seconds 20] [--rounds 2]
import fs from "node:fs";
import { call, numberArg, sleep, withDaemon } from "../sandboxd_daemon.mjs";

const FLOODERS = numberArg("flooders", 6), SECONDS = numberArg("seconds", 20), ROUNDS = numberArg("rounds", 2);
const BIN = process.env.SANDBOXD_BIN;
if (!BIN) throw new Error("set SANDBOXD_BIN");

// Code of a flooding session: from a thread, frames straight onto the runner's socket
// (under its send lock), each an `output` of an execution that does not exist holding
// 131,067 numbers, just under sandboxd's value budget, until `seconds` have passed.
const floodCode = (seconds) => `
import gc, sys, threading, time
rm = sys.modules['sandbox_runner.runner']
conn = [o for o in gc.get_objects() if isinstance(o, rm.Runner)][0]._conn
body = b'{"type":"output","id":999999,"chunks":[],"x":[' + b','.join([b'0'] * 131067) + b']}'
frame = len(body).to_bytes(4, 'big') + body
def flood():
    end = time.time() + ${seconds}
    while time.time() < end:
        with conn._send_lock:
            conn._sock.sendall(frame)
threading.Thread(target=flood, daemon=True).start()
print('flooding')`;

const cpuMs = (pid) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
const quantile = (a, p) => [...a].sort((x, y) => x - y)[Math.floor(p * (a.length - 1))];

async function timeRuns(c, id, until) {
  const lat = [];
  while (Date.now() < until) {
    const t = process.hrtime.bigint();
    await call(c, "Run", { session_id: id, code: "print(1)" });
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    await sleep(50);
  }
  return lat;
}

async function measure(millis) {
  const flags = ["--pool_size=2", "--js_pool_size=0", "--max_sessions=32"];
  if (millis !== null) flags.push(`--runner_cpu_millis=${millis}`);
  return withDaemon(BIN, flags, async ({ client: c, pid }) => {
    const witness = await call(c, "CreateSession", { owner: "witness" });
    await timeRuns(c, witness.id, Date.now() + 1000);  // warm
    const idle = await timeRuns(c, witness.id, Date.now() + 5000);
    const flooders = [];
    for (let i = 0; i < FLOODERS; i++) flooders.push((await call(c, "CreateSession", { owner: "flooder" })).id);
    const cpu0 = cpuMs(pid), t0 = Date.now();
    await Promise.all(flooders.map((id) => call(c, "Run", { session_id: id, code: floodCode(SECONDS) })));
    const during = await timeRuns(c, witness.id, t0 + (SECONDS - 1) * 1000);
    const cores = (cpuMs(pid) - cpu0) / (Date.now() - t0);
    await sleep(1500);
    for (const id of [...flooders, witness.id]) await call(c, "DeleteSession", { session_id: id }).catch(() => {});
    return { idle, during, cores };
  });
}

const rows = [];
for (let r = 0; r < ROUNDS; r++) {
  for (const millis of [null, 0]) {
    const m = await measure(millis);
    const f = (x) => x.toFixed(2);
    rows.push(`| ${millis === null ? "as built (default)" : millis} | ${f(quantile(m.idle, 0.5))} / ${f(quantile(m.idle, 0.99))} | ` +
      `${f(quantile(m.during, 0.5))} / ${f(quantile(m.during, 0.9))} / ${f(quantile(m.during, 1))} (${m.during.length}) | ${m.cores.toFixed(2)} |`);
    console.error(rows[rows.length - 1]);
  }
}
console.log(`${FLOODERS} sessions flooding frames for ${SECONDS} s; the witness runs print(1) every 50 ms.\n`);
console.log("| --runner_cpu_millis | witness Run idle p50 / p99 (ms) | during the flood p50 / p90 / max (runs) | sandboxd's CPU during the flood (cores) |");
console.log("|---|---|---|---|");
for (const row of rows) console.log(row);
