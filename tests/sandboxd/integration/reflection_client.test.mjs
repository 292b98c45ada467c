// sandboxd through a client that knows nothing but what reflection serves, the way
// grpcurl works: Node's @grpc/grpc-js with grpc-js-reflection-client (from deploy/node),
// no .proto file and no generated code. grpcurl itself is not packaged in Debian 12; this
// stands in for it. Environment (set by ctest): SANDBOXD_BIN, NODE_PEERS.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Sandboxd, required, stopAll, waitFor } from "../../common/processes.mjs";

const require = createRequire(path.join(required("NODE_PEERS"), "noop.js"));
const grpc = require("@grpc/grpc-js");
const { GrpcReflection } = require("grpc-js-reflection-client");

// What grpcurl prints: proto field names, enums as names, 64-bit integers as strings.
const LOADER = { keepCase: true, enums: String, longs: String, defaults: true, oneofs: true };

const unary = (client, method, request) => new Promise((resolve, reject) => {
  client[method](request, { deadline: Date.now() + 60000 }, (err, resp) => (err ? reject(err) : resolve(resp)));
});

describe("sandboxd through reflection only (as grpcurl)", () => {
  let daemon, target, reflection, sandbox, health;

  before(async () => {
    daemon = new Sandboxd(["--pool_size=1"]);
    await daemon.start();
    target = `unix:${daemon.socket}`;
    reflection = new GrpcReflection(target, grpc.credentials.createInsecure());
  });
  after(async () => {
    sandbox?.close();
    health?.close();
    await daemon?.stop();
    await stopAll();
  });

  async function serviceClient(symbol) {
    const descriptor = await reflection.getDescriptorBySymbol(symbol);
    const pkg = descriptor.getPackageObject(LOADER);
    const Ctor = symbol.split(".").reduce((o, k) => o[k], pkg);
    return new Ctor(target, grpc.credentials.createInsecure());
  }

  test("list: every service, health and reflection included", async () => {
    const services = await reflection.listServices();
    for (const s of ["sandbox.v1.SandboxService", "grpc.health.v1.Health",
      "grpc.reflection.v1alpha.ServerReflection"]) {
      assert.ok(services.includes(s), `${s} in ${services}`);
    }
  });

  test("describe: SandboxService's methods and a message's fields", async () => {
    const methods = (await reflection.listMethods("sandbox.v1.SandboxService")).map((m) => m.name);
    for (const m of ["CreateSession", "GetSession", "ListSessions", "DeleteSession", "ResetSession",
      "Execute", "Run", "GetInfo", "UploadFile", "DownloadFile", "ListFiles"]) {
      assert.ok(methods.includes(m), `${m} in ${methods}`);
    }
    const root = (await reflection.getDescriptorBySymbol("sandbox.v1.StartExecution")).getProtobufJsRoot();
    const fields = Object.keys(root.lookupType("sandbox.v1.StartExecution").fields);
    for (const f of ["session_id", "code", "timeout_ms"]) assert.ok(fields.includes(f), `${f} in ${fields}`);
  });

  test("describe and call grpc.health.v1.Health/Check, overall and per service", async () => {
    const root = (await reflection.getDescriptorBySymbol("grpc.health.v1.Health")).getProtobufJsRoot();
    assert.ok(root.lookupService("grpc.health.v1.Health").methods.Check);
    health = await serviceClient("grpc.health.v1.Health");
    // SERVING once the first container started (the pool fills at start).
    await waitFor(async () => (await unary(health, "Check", {})).status === "SERVING", "health SERVING", 60000);
    assert.equal((await unary(health, "Check", { service: "sandbox.v1.SandboxService" })).status, "SERVING");
    await assert.rejects(unary(health, "Check", { service: "no.such.Service" }), (e) => e.code === grpc.status.NOT_FOUND);
  });

  test("CreateSession, Run, Execute with a half-close, ListSessions, DeleteSession", async () => {
    sandbox = await serviceClient("sandbox.v1.SandboxService");
    const info = await unary(sandbox, "GetInfo", {});
    assert.equal(info.serving, true);

    const session = await unary(sandbox, "CreateSession", { label: "demo", owner: "reflection-test" });
    assert.match(session.id, /^s-/);
    assert.equal(session.state, "READY");

    const run = await unary(sandbox, "Run", { session_id: session.id, code: 'x = 21\nprint("hi")\nx * 2' });
    assert.equal(run.status, "OK");
    assert.equal(run.result_repr, "42");
    assert.equal(run.stdout, "hi\n");
    assert.equal(typeof run.duration_ms, "string");  // uint64, printed as a string like grpcurl does

    // Execute as `grpcurl -d @` does it: write `start`, close our side, read to the end.
    const messages = await new Promise((resolve, reject) => {
      const got = [];
      const call = sandbox.Execute({ deadline: Date.now() + 60000 });
      call.on("data", (m) => got.push(m));
      call.on("error", reject);
      call.on("end", () => resolve(got));
      call.write({ start: { session_id: session.id, code: "for i in range(3):\n    print(i)\nx", timeout_ms: 10000 } });
      call.end();
    });
    const kinds = messages.map((m) => m.msg);  // the oneof's name
    assert.equal(kinds[0], "started");
    assert.equal(kinds.at(-1), "finished");
    const stdout = messages.filter((m) => m.msg === "output" && m.output.stream === "STDOUT").map((m) => m.output.text).join("");
    assert.equal(stdout, "0\n1\n2\n");
    const finished = messages.at(-1).finished;
    assert.equal(finished.status, "OK");
    assert.equal(finished.result_repr, "21");

    const listed = await unary(sandbox, "ListSessions", { owner: "reflection-test" });
    assert.deepEqual(listed.sessions.map((s) => s.id), [session.id]);
    await unary(sandbox, "DeleteSession", { session_id: session.id });
    await assert.rejects(unary(sandbox, "GetSession", { session_id: session.id }),
      (e) => e.code === grpc.status.NOT_FOUND);
  });

  test("files: UploadFile as a client stream (grpcurl -d @), ListFiles, DownloadFile", async () => {
    sandbox ??= await serviceClient("sandbox.v1.SandboxService");
    const session = await unary(sandbox, "CreateSession", { label: "files" });
    const payload = Buffer.from(Array.from({ length: 300000 }, (_, i) => (i * 7) % 256));
    const uploaded = await new Promise((resolve, reject) => {
      const call = sandbox.UploadFile({ deadline: Date.now() + 60000 }, (err, r) => (err ? reject(err) : resolve(r)));
      call.write({ start: { session_id: session.id, path: "in/blob.bin" } });
      for (let i = 0; i < payload.length; i += 65536) call.write({ data: payload.subarray(i, i + 65536) });
      call.end();
    });
    assert.equal(uploaded.path, "in/blob.bin");
    assert.equal(uploaded.size, String(payload.length));
    const run = await unary(sandbox, "Run", {
      session_id: session.id,
      code: "import hashlib\nd = open('/workspace/in/blob.bin','rb').read()\nopen('/workspace/out.txt','w').write(hashlib.sha256(d).hexdigest())",
    });
    assert.equal(run.status, "OK", JSON.stringify(run));
    const listed = await unary(sandbox, "ListFiles", { session_id: session.id, path: "" });
    assert.deepEqual(listed.files.map((f) => [f.path, f.type]), [["in", "FILE_TYPE_DIRECTORY"], ["out.txt", "FILE_TYPE_FILE"]]);
    const chunks = await new Promise((resolve, reject) => {
      const got = [];
      const call = sandbox.DownloadFile({ session_id: session.id, path: "out.txt" }, { deadline: Date.now() + 60000 });
      call.on("data", (m) => got.push(m));
      call.on("error", reject);
      call.on("end", () => resolve(got));
    });
    const text = Buffer.concat(chunks.map((c) => c.data)).toString();
    const { createHash } = await import("node:crypto");
    assert.equal(text, createHash("sha256").update(payload).digest("hex"));
    assert.equal(chunks.at(-1).info.size, "64");
    await assert.rejects(unary(sandbox, "ListFiles", { session_id: session.id, path: "../etc" }),
      (e) => e.code === grpc.status.INVALID_ARGUMENT);
    await unary(sandbox, "DeleteSession", { session_id: session.id });
  });
});
