// The audit log and trace context end to end: a mixed workload (success, ToolError,
// timeout, cancelled, hostile code) through the TypeScript SDK client, each request with a
// W3C traceparent (in params._meta, or as the HTTP header); then one valid JSON line per
// run and per tool call, none holding code or arguments, each naming the client's trace;
// rotation losing nothing; the upstream receiving the trace in its call's _meta; sandboxd's
// log naming it too.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import {
  GatewayHttp, NODE_PEERS, Sandboxd, connectClient, everythingStdio, stopAll, tempDir, text, writeConfig,
} from "./harness.mjs";

const RECORDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "recording_upstream.mjs");
const dir = tempDir("audit-");
const auditPath = path.join(dir, "audit.jsonl");
const upstreamLog = path.join(dir, "upstream.jsonl");
const hex = (bytes) => randomBytes(bytes).toString("hex");
const traceId = hex(16), clientSpan = hex(8);
const traceparent = `00-${traceId}-${clientSpan}-01`;
const headerTraceId = hex(16);
const SECRET = `secret-argument-${hex(8)}`;
let sandboxd, gateway;

// Every line of the audit log and its rotated files, parsed (a line that is not JSON fails).
function auditLines() {
  const files = fs.readdirSync(dir).filter((f) => f.startsWith("audit.jsonl")).sort().reverse();
  return files.flatMap((f) => fs.readFileSync(path.join(dir, f), "utf8").split("\n").filter(Boolean)
    .map((line) => { try { return JSON.parse(line); } catch { assert.fail(`not JSON in ${f}: ${line}`); } }));
}

before(async () => {
  sandboxd = new Sandboxd();
  await sandboxd.start();
  gateway = new GatewayHttp({
    config: writeConfig({ recording: { command: "node", args: [RECORDER, NODE_PEERS, upstreamLog] },
      everything: everythingStdio() }),
    sandboxd: sandboxd.endpoint,
    extraArgs: [`--audit_log=${auditPath}`, "--audit_max_bytes=4096"],
  });
  await gateway.start();
});

after(async () => {
  await gateway?.stop();
  await sandboxd?.stop();
  await stopAll();
});

const codes = {
  ok: `r = await mcp_recording.record(note="${SECRET}")
e = await mcp_everything.echo(message="${SECRET}")
print(r, e)`,
  toolError: `try:
    await mcp_everything.gzip_file_as_resource(name="x", data="file:///etc/passwd")
except ToolError:
    print("tool error")`,
  timeout: "while True: pass",
  cancelled: "print('waiting', flush=True)\nimport asyncio\nawait asyncio.sleep(30)",
  // Hostile: arguments and output that try to forge audit lines, then a raise.
  hostile: `await mcp_recording.record(note='${SECRET}\\n{"kind": "run", "credential": "forged"}\\u2028\\udcff')
print('\\n{"kind": "tool_call"}')
raise RuntimeError("${SECRET}")`,
};

test("a mixed workload leaves one audit line per run and per call, named by the client's trace", async () => {
  const client = await gateway.client();
  const call = (code, extra = {}, options = {}) => client.callTool(
    { name: "run_python", arguments: { code, ...extra }, _meta: { traceparent } }, undefined,
    { timeout: 120000, ...options });
  assert.match(text(await call(codes.ok)), /recorded/);
  assert.match(text(await call(codes.toolError)), /tool error/);
  assert.equal((await call(codes.timeout, { timeout_seconds: 1 })).isError, true);
  // Cancelled once it runs (its output arrives as progress), not before the gateway has it.
  const abort = new AbortController();
  await assert.rejects(call(codes.cancelled, {}, { signal: abort.signal,
    onprogress: () => abort.abort("the test cancels") }));
  assert.equal((await call(codes.hostile)).isError, true);
  // The HTTP header's trace, for a client that cannot set _meta.
  const headerClient = await connectClient(gateway.url,
    { ...gateway.authHeaders, traceparent: `00-${headerTraceId}-${hex(8)}-01` }, "header-client");
  const viaHeader = await headerClient.callTool({ name: "run_python", arguments: { code: codes.ok } });
  assert.match(text(viaHeader), /recorded/);
  await headerClient.close();
  await client.close();
  await gateway.stop();  // writes what is queued

  const lines = auditLines();
  const runs = lines.filter((l) => l.kind === "run");
  const calls = lines.filter((l) => l.kind === "tool_call");
  assert.equal(runs.length, 6, JSON.stringify(runs));
  // ok: 2, toolError: 1, hostile: 1, the header's run: 2.
  assert.equal(calls.length, 6, JSON.stringify(calls));
  assert.equal(lines.length, 12, "nothing else, nothing forged");
  const outcomes = runs.map((r) => r.outcome).sort();
  assert.deepEqual(outcomes, ["cancelled", "error", "ok", "ok", "ok", "timeout"]);
  for (const l of lines) {
    assert.ok([traceId, headerTraceId].includes(l.trace_id), `trace of ${JSON.stringify(l)}`);
    assert.match(l.credential, /^token [0-9a-f]{12}$/);
    assert.match(l.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  }
  assert.equal(lines.filter((l) => l.trace_id === headerTraceId).length, 3);
  const raw = fs.readdirSync(dir).filter((f) => f.startsWith("audit.jsonl"))
    .map((f) => fs.readFileSync(path.join(dir, f), "utf8")).join("");
  assert.ok(!raw.includes(SECRET), "no argument, code or output in the audit log");
  assert.ok(!raw.includes("asyncio"), "no code in the audit log");
  assert.ok(!raw.includes("forged"));
  // Code by digest; runs are spans of the client's span; calls are spans of their run.
  const okRun = runs.find((r) => r.code_sha256 === createHash("sha256").update(codes.ok).digest("hex") &&
    r.trace_id === traceId);
  assert.ok(okRun, "the ok run's line names its code's sha256");
  assert.equal(okRun.parent_span_id, clientSpan);
  assert.equal(okRun.tool_calls, 2);
  assert.match(okRun.sandbox, /^s-/);
  const okCalls = calls.filter((c) => c.parent_span_id === okRun.span_id);
  assert.deepEqual(okCalls.map((c) => `${c.server}.${c.tool}:${c.outcome}`).sort(),
    ["everything.echo:ok", "recording.record:ok"]);
  assert.ok(calls.some((c) => c.tool === "gzip-file-as-resource" && c.outcome === "tool_error"));
  for (const c of calls) {
    assert.match(c.arguments_sha256, /^[0-9a-f]{64}$/);
    assert.equal(c.arguments, undefined, "arguments only with --audit_arguments");
  }
  // Rotation happened (4 KiB files) and lost nothing: every line above was counted.
  assert.ok(fs.existsSync(`${auditPath}.1`), "the log rotated");

  // The upstream got each call's span in the client's trace.
  const received = fs.readFileSync(upstreamLog, "utf8").split("\n").filter(Boolean).map(JSON.parse);
  assert.equal(received.length, 3);
  const first = received[0]._meta?.traceparent ?? "";
  assert.match(first, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  const recordCall = okCalls.find((c) => c.tool === "record");
  assert.equal(first.split("-")[2], recordCall.span_id, "the upstream's parent is the call's span");
  assert.match(received[2]._meta?.traceparent ?? "", new RegExp(`^00-${headerTraceId}-`));
  // sandboxd's log and the gateway's name the trace.
  assert.match(sandboxd.log, new RegExp(`execution \\d+: OK in \\d+ ms, 2 tool calls \\(trace ${traceId}\\)`));
  assert.match(gateway.log, new RegExp(`run_python s-[0-9a-f]+: ok in \\d+ ms, 2 tool calls \\(trace ${traceId}`));
});
