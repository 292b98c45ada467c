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
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.env.NODE_PEERS ?? "", "x.js"));
const grpc = require("@grpc/grpc-js");
const loader = require("@grpc/proto-loader");
const here = path.dirname(new URL(import.meta.url).pathname);
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const FLOODERS = arg("flooders", 6), SECONDS = arg("seconds", 20), ROUNDS = arg("rounds", 2);
const BIN = process.env.SANDBOXD_BIN;
if (!BIN || !process.env.NODE_PEERS) throw new Error("set SANDBOXD_BIN and NODE_PEERS");
const runner = path.join(path.dirname(BIN), "sandbox_runner.pyz");
const def = loader.loadSync("sandbox/v1/sandbox.proto", {
  includeDirs: [path.resolve(here, "../../proto")], keepCase: true, longs: Number, enums: String,
  defaults: true, oneofs: true,
});
const SandboxService = grpc.loadPackageDefinition(def).sandbox.v1.SandboxService;

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

const call = (c, m, req, ms = 60000) =>
  new Promise((res, rej) => c[m](req, { deadline: Date.now() + ms }, (e, r) => (e ? rej(e) : res(r))));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-flood-"));
  const sock = path.join(dir, "s.sock");
  const args = [`--socket=${sock}`, `--state_dir=${dir}/state`, `--pool_size=2`, "--js_pool_size=0",
    `--runner=${runner}`, "--max_sessions=32"];
  if (millis !== null) args.push(`--runner_cpu_millis=${millis}`);
  const d = spawn(BIN, args, { stdio: ["ignore", "ignore", fs.openSync(`${dir}/log`, "w")] });
  try {
    const c = new SandboxService(`unix://${sock}`, grpc.credentials.createInsecure());
    for (let i = 0; ; i++) {
      try { await call(c, "GetInfo", {}, 1000); break; } catch (e) { if (i > 100) throw e; await sleep(100); }
    }
    const witness = await call(c, "CreateSession", { owner: "witness" });
    await timeRuns(c, witness.id, Date.now() + 1000);  // warm
    const idle = await timeRuns(c, witness.id, Date.now() + 5000);
    const flooders = [];
    for (let i = 0; i < FLOODERS; i++) flooders.push((await call(c, "CreateSession", { owner: "flooder" })).id);
    const cpu0 = cpuMs(d.pid), t0 = Date.now();
    await Promise.all(flooders.map((id) => call(c, "Run", { session_id: id, code: floodCode(SECONDS) })));
    const during = await timeRuns(c, witness.id, t0 + (SECONDS - 1) * 1000);
    const cores = (cpuMs(d.pid) - cpu0) / (Date.now() - t0);
    await sleep(1500);
    for (const id of [...flooders, witness.id]) await call(c, "DeleteSession", { session_id: id }).catch(() => {});
    c.close();
    return { idle, during, cores };
  } finally {
    d.kill("SIGTERM");
    await new Promise((r) => d.on("exit", r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
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
