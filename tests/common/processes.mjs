// Process plumbing shared by the Node.js integration tests: processes that die with the
// test process, a real sandboxd on a private socket and state directory, and waiting.
//   SANDBOXD_BIN (set by ctest) is the daemon under test.
//   SANDBOXD_TEST_ISOLATION=wasm (set by ctest for the gateway_wasm_* copies) runs every
//   Sandboxd on the wasm tier by default (docs/wasm-tier.md); a test's own flags still win.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

export function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the tests through ctest (scripts/test.sh)`);
  return v;
}

// Spawns a process that dies with this test process: setpriv sets PR_SET_PDEATHSIG
// (SIGKILL) and then execs the program, so the pid is the program's own.
export function spawnTied(command, args = [], options = {}) {
  return spawn("setpriv", ["--pdeathsig", "KILL", "--", command, ...args], options);
}
// The same for SDK transports that spawn their own server process.
export function tiedCommand(command, args = []) {
  return { command: "setpriv", args: ["--pdeathsig", "KILL", "--", command, ...args] };
}

// A detached shell that removes a sandboxd's containers if this process dies without
// cleaning up (a crash, ctest's timeout kill): it waits for "done" on its stdin, and an
// end of file without it means we are gone. sandboxd keeps containers across its own
// restarts by design, so nothing else would remove them.
// The wasm tier's sessions are detached processes that outlive sandboxd the same way: the
// pids in its records (wasm-records/*.json) go too, each only while it is the one recorded.
const KILL_RECORDED_WASM = path.join(path.dirname(fileURLToPath(import.meta.url)), "kill_recorded_wasm.sh");
function containerWatchdog(stateDir, dir) {
  const script = `while read -r w; do [ "$w" = done ] && exit 0; done; sleep 1; ` +
    `for i in 1 2 3; do ids=$(podman ps -aq --filter "label=io.sandboxd.state-dir=$1"); ` +
    `[ -z "$ids" ] && break; podman rm -f -t 0 $ids; sleep 1; done; ` +
    `sh '${KILL_RECORDED_WASM}' "$1"/wasm-records/*.json; rm -rf "$1-wasm" "$2"`;
  const w = spawn("sh", ["-c", script, "watchdog", stateDir, dir],
    { detached: true, stdio: ["pipe", "ignore", "ignore"] });
  w.unref();
  w.stdin.unref?.();
  w.stdin.on("error", () => {});
  return w;
}

const children = new Set();
export function track(child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  return child;
}
const daemons = new Set();
export async function stopAll() {
  for (const c of [...children]) c.kill("SIGTERM");
  for (let i = 0; i < 50 && children.size; i++) await sleep(100);
  for (const c of [...children]) c.kill("SIGKILL");
  // sandboxd keeps session containers across its own restarts by design; a test run
  // must not leave any behind.
  for (const d of daemons) {
    d.removeContainers();
    d.watchdog.stdin.end("done\n");
  }
  daemons.clear();
}
process.on("exit", () => { for (const c of children) c.kill("SIGKILL"); });

export function tempDir(prefix = "gwtest-") {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function waitFor(pred, what, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// A free loopback port (bound and released).
export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}

// True when something accepts connections at `where` (a unix socket path or {host, port}).
export function canConnect(where) {
  return new Promise((resolve) => {
    const c = net.connect(where, () => { c.end(); resolve(true); });
    c.on("error", () => resolve(false));
  });
}

// podman's removal of a container whose creation a killed sandboxd cut short can leave it
// in runc, out of every list of podman's (docs/architecture.md, "Session records"); a
// daemon removes its own at its next start, and a test's daemon has none. Every container
// carries its labels as annotations: those of `stateDir` that runc still holds go here.
// Rootful podman's runc only (its state under /run/runc); rootless runs keep theirs in
// podman's user namespace, which goes with the test's.
function removeRuncStrays(stateDir) {
  if (process.getuid() !== 0) return;
  // runc 1.1 fails a list when a container it walks past is removed meanwhile (another
  // test's session ending): that race clears on a second look.
  let run;
  for (let attempt = 0; attempt < 5; ++attempt) {
    run = spawnSync("runc", ["list", "--format=json"], { encoding: "utf8" });
    if (run.status === 0) break;
  }
  if (run.status !== 0) throw new Error(`runc list --format=json failed: ${run.stderr}`);
  const listed = JSON.parse(run.stdout) ?? [];
  for (const c of listed) {
    if (c.annotations?.["io.sandboxd.state-dir"] === stateDir) {
      spawnSync("runc", ["delete", "--force", c.id], { stdio: "ignore" });  // gone meanwhile: as good
    }
  }
}

const WASM_DEFAULTS = process.env.SANDBOXD_TEST_ISOLATION === "wasm"
  ? ["--isolation=wasm", "--allowed_isolations=wasm", `--wasm_dir=/tmp/sandboxd-test-wasm-${process.getuid()}`]
  : [];

export class Sandboxd {
  // `prefix`: a command that runs sandboxd and keeps its pid (it execs), as
  // `hosts.sh exec NAME I` does to run it on another host.
  constructor(extraArgs = [], { prefix = [], bin = undefined } = {}) {
    this.prefix = prefix;
    this.bin = bin;  // another build than SANDBOXD_BIN's (a benchmark's "before")
    this.dir = tempDir("sbxd-");
    this.socket = path.join(this.dir, "sandboxd.sock");
    this.stateDir = path.join(this.dir, "state");
    this.extraArgs = [...WASM_DEFAULTS, ...extraArgs];
    this.log = "";
    this.watchdog = containerWatchdog(this.stateDir, this.dir);
    daemons.add(this);
  }
  // Podman's `rm` can fail while a container of a killed daemon is still being torn down
  // (exit 125): asked again, up to 5 times, until none of this daemon's is left; the last
  // failure is thrown with what podman said.
  removeContainers() {
    const listed = () => execFileSync("podman", ["ps", "-aq", "--filter", `label=io.sandboxd.state-dir=${this.stateDir}`])
      .toString().split("\n").filter(Boolean);
    for (let attempt = 1; ; ++attempt) {
      const ids = listed();
      if (!ids.length) break;
      const rm = spawnSync("podman", ["rm", "-f", "-t", "0", ...ids], { encoding: "utf8" });
      if (rm.status === 0 && attempt < 10) continue;
      if (attempt >= 5) throw new Error(`podman rm -f ${ids.join(" ")} (${rm.status}): ${rm.stderr || "still listed"}`);
      execFileSync("sleep", ["0.2"]);
    }
    removeRuncStrays(this.stateDir);
    this.killWasmSessions();
  }
  // Each wasm session's Node and, under bubblewrap, its sandbox's init (the record's *pid
  // fields), when the process at that pid is still the one recorded (its start time).
  killWasmSessions() {
    const dir = path.join(this.stateDir, "wasm-records");
    if (!fs.existsSync(dir)) return;
    const records = fs.readdirSync(dir).filter((n) => n.endsWith(".json")).map((n) => path.join(dir, n));
    if (records.length) execFileSync("sh", [KILL_RECORDED_WASM, ...records], { stdio: "ignore" });
  }
  get endpoint() { return `unix:${this.socket}`; }
  // Until its first session start succeeds, sandboxd's GetInfo says it is not serving and
  // the gateway places sessions elsewhere.
  async serving() {
    await waitFor(() => this.log.includes("health SERVING"), `sandboxd on ${this.socket} to serve`, 60000);
  }
  async start() {
    const command = [...this.prefix, this.bin ?? required("SANDBOXD_BIN"), `--socket=${this.socket}`,
      `--state_dir=${this.stateDir}`, "--pool_size=2", ...this.extraArgs];
    this.proc = track(spawnTied(command[0], command.slice(1),
      { stdio: ["ignore", "ignore", "pipe"] }));
    this.proc.stderr.on("data", (d) => { this.log += d; });
    await waitFor(() => canConnect(this.socket), `sandboxd on ${this.socket}`, 30000);
  }
  // Sessions sandboxd knows about, from its records: [{id, container}].
  sessions() {
    const dir = path.join(this.stateDir, "sessions");
    if (!fs.existsSync(dir)) return [];
    return fs.readdirSync(dir).filter((f) => f.endsWith(".json")).map((f) => {
      const rec = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
      return { id: f.slice(0, -5), container: rec.container_name };
    });
  }
  // What the wasm tier's runners said (the end of each live session's stderr file), for a
  // failure message: a run that hung there is explained in its runner's log.
  runnerLogs() {
    const dir = path.join(this.stateDir, "wasm-records");
    if (!fs.existsSync(dir)) return "";
    return fs.readdirSync(dir).filter((n) => n.endsWith(".log"))
      .map((n) => `${n}:\n${fs.readFileSync(path.join(dir, n), "utf8").slice(-4000)}`).join("\n");
  }
  async stop(signal = "SIGTERM") {
    // Gone already: exited, or killed by a signal (exitCode stays null then).
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.kill(signal);
    await exited;
  }
}
