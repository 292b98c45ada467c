// What the Node benchmarks that drive sandboxd directly share (bench/sandboxd_flood,
// bench/sandboxd_churn): the sandbox.v1 client from the repository's proto, and a daemon of
// their own for each measurement, in a fresh directory, ended and cleaned up after.
//
//   const m = await withDaemon(bin, ["--pool_size=0"], async ({ client, pid, stateDir }) => {
//     const s = await call(client, "CreateSession", {});
//     ...
//   });
//
// NODE_PEERS names a node_modules with @grpc/grpc-js and @grpc/proto-loader
// (deploy/node/node_modules once scripts/setup.sh has run).
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

if (!process.env.NODE_PEERS) throw new Error("set NODE_PEERS (e.g. deploy/node/node_modules)");
const require = createRequire(path.join(path.resolve(process.env.NODE_PEERS), "x.js"));
const grpc = require("@grpc/grpc-js");
const loader = require("@grpc/proto-loader");
const here = path.dirname(new URL(import.meta.url).pathname);
const def = loader.loadSync("sandbox/v1/sandbox.proto", {
  includeDirs: [path.resolve(here, "../proto")], keepCase: true, longs: Number, enums: String,
  defaults: true, oneofs: true,
});
const SandboxService = grpc.loadPackageDefinition(def).sandbox.v1.SandboxService;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A unary call as a promise, with a deadline.
export const call = (c, m, req, ms = 60000) =>
  new Promise((res, rej) => c[m](req, { deadline: Date.now() + ms }, (e, r) => (e ? rej(e) : res(r))));

// A number of --flag N on the command line, else `dflt`.
export const numberArg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};

// Runs `fn({client, pid, stateDir})` against `bin` started with its own socket, state
// directory and runner (the one beside the binary) plus `flags`, once it answers GetInfo;
// then stops it (SIGTERM, waited for) and removes the directory, whatever `fn` did.
export async function withDaemon(bin, flags, fn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-bench-"));
  const sock = path.join(dir, "s.sock"), stateDir = `${dir}/state`;
  const args = [`--socket=${sock}`, `--state_dir=${stateDir}`,
    `--runner=${path.join(path.dirname(bin), "sandbox_runner.pyz")}`, ...flags];
  const d = spawn(bin, args, { stdio: ["ignore", "ignore", fs.openSync(`${dir}/log`, "w")] });
  const client = new SandboxService(`unix://${sock}`, grpc.credentials.createInsecure());
  try {
    for (let i = 0; ; i++) {
      try { await call(client, "GetInfo", {}, 1000); break; } catch (e) { if (i > 100) throw e; await sleep(100); }
    }
    return await fn({ client, pid: d.pid, stateDir });
  } finally {
    client.close();
    d.kill("SIGTERM");
    await new Promise((r) => (d.exitCode !== null ? r() : d.on("exit", r)));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
