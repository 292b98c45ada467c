// Renders deploy/kubernetes's kustomizations with Debian's kubectl 1.20 (its embedded
// kustomize is the oldest the layout must work with) and reads what the pods run: the
// helpers of kubernetes_layout.test.mjs.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseAllDocuments } from "yaml";

export const SOURCE = path.resolve(import.meta.dirname, "../..");
export const LAYOUT = path.join(SOURCE, "deploy/kubernetes");
// The kustomizations an operator applies, by their directory under deploy/kubernetes; the
// base (what they share, without sandboxd's pods) is rendered and validated too.
export const KUSTOMIZATIONS = ["overlays/container", "overlays/secrets-from-files", "overlays/wasm"];
export const BASE = "base";
// The files overlays/secrets-from-files makes its Secrets from (never in the repository):
// the test writes a distinct value in each, so a value that reaches an env var is found.
export const SECRET_FILES = ["sandboxd.crt", "sandboxd.key", "client-ca.crt", "sandboxd_token", "gateway.crt",
  "gateway.key", "sandboxd-ca.crt", "handle_key", "token", "upstreams.json"];

export function required(name) {
  const value = process.env[name];
  assert.ok(value, `$${name} is not set (ctest sets it: tests/deploy/CMakeLists.txt)`);
  return value;
}

// kubectl's client version, e.g. "v1.20.2".
export function kubectlVersion(kubectl) {
  const out = execFileSync(kubectl, ["version", "--client", "-o", "json"], { encoding: "utf8" });
  return JSON.parse(out).clientVersion.gitVersion;
}

// A copy of deploy/kubernetes with the secrets-from-files overlay's files filled in.
export function layoutCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "k8s-layout-"));
  fs.cpSync(LAYOUT, dir, { recursive: true });
  const secrets = path.join(dir, "overlays/secrets-from-files/secrets");
  fs.mkdirSync(secrets, { recursive: true });
  for (const name of SECRET_FILES) fs.writeFileSync(path.join(secrets, name), `secret-value-of-${name}\n`);
  return dir;
}

// The objects `kubectl kustomize` renders from `dir`, or an assertion naming its error.
export function render(kubectl, root, kustomization) {
  let out;
  try {
    out = execFileSync(kubectl, ["kustomize", path.join(root, kustomization)],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    assert.fail(`kubectl kustomize deploy/kubernetes/${kustomization} failed: ${e.stderr || e.message}`);
  }
  const docs = parseAllDocuments(out);
  for (const d of docs) {
    assert.equal(d.errors.length, 0, `${kustomization}: unreadable YAML: ${d.errors.join("; ")}`);
  }
  const objects = docs.map((d) => d.toJS()).filter((o) => o !== null);
  for (const o of objects) {
    assert.ok(o.apiVersion && o.kind, `${kustomization}: an object without apiVersion or kind: ${JSON.stringify(o)}`);
  }
  return objects;
}

export const nameOf = (o) => `${o.kind}/${o.metadata?.name}`;
export const WORKLOADS = new Set(["Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod"]);

export function podSpecOf(o) {
  if (o.kind === "Pod") return o.spec;
  if (o.kind === "CronJob") return o.spec.jobTemplate.spec.template.spec;
  return o.spec?.template?.spec;
}
export function podLabelsOf(o) {
  if (o.kind === "Pod") return o.metadata.labels ?? {};
  if (o.kind === "CronJob") return o.spec.jobTemplate.spec.template.metadata?.labels ?? {};
  return o.spec.template.metadata?.labels ?? {};
}
// Every container of a pod spec, init containers too, with its kind.
export function containersOf(spec) {
  return [...(spec.initContainers ?? []).map((c) => ({ ...c, init: true })),
    ...(spec.containers ?? []).map((c) => ({ ...c, init: false }))];
}
export function matches(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
}

// The binary a container runs, by the basename of its command (or of the image's name).
export function daemonOf(container) {
  const program = path.basename(container.command?.[0] ?? "");
  return ["sandboxd", "mcp-gateway"].includes(program) ? program : undefined;
}
// A container's flags as [name, value] (value undefined for a bare --flag).
export function flagsOf(container) {
  return (container.args ?? []).filter((a) => a.startsWith("--")).map((a) => {
    const eq = a.indexOf("=");
    return eq < 0 ? [a.slice(2), undefined] : [a.slice(2, eq), a.slice(eq + 1)];
  });
}

// The flag names a binary's --help lists (lines "  --name=default").
export function helpFlags(binary) {
  const out = execFileSync(binary, ["--help"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const names = new Set([...out.matchAll(/^ {2}--([a-z0-9_]+)=/gm)].map((m) => m[1]));
  assert.ok(names.size > 20, `${binary} --help listed ${names.size} flags: ${out.slice(0, 300)}`);
  return names;
}

// The flag names of a function of tests/mcp-gateway/integration/harness.mjs that returns the
// multi-host test's TLS command line (tlsSandboxdArgs, tlsGatewayArgs).
export function harnessFlags(fn) {
  const harness = fs.readFileSync(path.join(SOURCE, "tests/mcp-gateway/integration/harness.mjs"), "utf8");
  const body = new RegExp(`export function ${fn}\\([^)]*\\) \\{([\\s\\S]*?)\\n\\}`).exec(harness);
  assert.ok(body, `harness.mjs has no function ${fn}`);
  const names = [...body[1].matchAll(/`--([a-z0-9_]+)=/g)].map((m) => m[1]);
  assert.ok(names.length >= 4, `${fn} names ${names.length} flags`);
  return names;
}

// Where a path a container reads is mounted from: its volume mount (the longest mountPath
// that holds it) and the pod's volume of that name.
export function mountOf(spec, container, file) {
  const mounts = (container.volumeMounts ?? [])
    .filter((m) => file === m.mountPath || file.startsWith(`${m.mountPath}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length);
  if (!mounts.length) return undefined;
  return { mount: mounts[0], volume: (spec.volumes ?? []).find((v) => v.name === mounts[0].name) };
}
