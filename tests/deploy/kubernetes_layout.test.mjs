// deploy/kubernetes, offline: each kustomization renders with Debian's kubectl 1.20 and every
// object it makes validates against the Kubernetes API schemas (npm's kubernetes-models);
// the NetworkPolicy lets only the gateways reach sandboxd's port; no Secret reaches an env
// var, and the files the daemons read as secrets are mounted the way docs/scaling.md says;
// the wasm overlay runs nothing privileged and no host path; every flag passed is one the
// built binary lists in --help, and the TLS flags are the multi-host test's.
// Runs on Node 22 (tests/node22: kubernetes-models needs it), with tests/deploy's modules.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import {
  BASE, KUSTOMIZATIONS, WORKLOADS, containersOf, daemonOf, flagsOf, harnessFlags, helpFlags, kubectlVersion, layoutCopy,
  matches, mountOf, nameOf, podLabelsOf, podSpecOf, render, required,
} from "./layout.mjs";

const SANDBOXD_PORT = 50051;
// The flags whose files the daemons read as secrets (base/secret_file.cc, tcp_auth.cc):
// regular files of their own uid with no group or other bits, opened without following a
// link (docs/scaling.md, "Secrets").
const SECRET_FILE_FLAGS = {
  sandboxd: ["tcp_token_file", "tls_key_file"],
  "mcp-gateway": ["token_file", "handle_key_file", "sandboxd_token_file", "sandboxd_tls_key_file"],
};

describe("deploy/kubernetes", () => {
  const rendered = {};  // kustomization -> its objects
  let root;
  before(() => {
    const kubectl = required("KUBECTL");
    const version = kubectlVersion(kubectl);
    assert.match(version, /^v1\.20\./,
      `${kubectl} is kubectl ${version}; the layout is checked with Debian bookworm's kubernetes-client (1.20), ` +
      "whose kustomize is the oldest it supports (scripts/setup.sh installs it)");
    root = layoutCopy();
    for (const k of [BASE, ...KUSTOMIZATIONS]) rendered[k] = render(kubectl, root, k);
  });
  after(() => root && fs.rmSync(root, { recursive: true, force: true }));

  const workloads = (k) => rendered[k].filter((o) => WORKLOADS.has(o.kind));
  const pods = (k) => workloads(k).map((w) => ({ w, spec: podSpecOf(w), labels: podLabelsOf(w) }));
  const daemonPods = (k, daemon) => pods(k).filter((p) => p.spec.containers.some((c) => daemonOf(c) === daemon));

  test("every kustomization renders the objects of both daemons", () => {
    for (const k of KUSTOMIZATIONS) {
      const kinds = rendered[k].map(nameOf);
      for (const want of ["Service/sandboxd", "Service/mcp-gateway", "Deployment/mcp-gateway", "NetworkPolicy/sandboxd-from-gateways"]) {
        assert.ok(kinds.includes(want), `${k} renders no ${want}: ${kinds.join(", ")}`);
      }
      assert.equal(daemonPods(k, "sandboxd").length, 1, `${k}: one workload runs sandboxd`);
    }
    assert.ok(rendered["overlays/container"].some((o) => nameOf(o) === "DaemonSet/sandboxd"), "the container tier runs a DaemonSet");
    assert.ok(rendered["overlays/wasm"].some((o) => nameOf(o) === "Deployment/sandboxd"), "wasm runs a Deployment");
    const secrets = rendered["overlays/secrets-from-files"].filter((o) => o.kind === "Secret").length;
    assert.equal(secrets, 5, "secrets-from-files makes the five Secrets the base names");
  });

  test("every object validates against the Kubernetes API schemas (kubernetes-models)", async () => {
    const failures = [];
    for (const k of [BASE, ...KUSTOMIZATIONS]) {
      for (const o of rendered[k]) {
        let models;
        try {
          models = await import(`kubernetes-models/${o.apiVersion}`);
        } catch {
          failures.push(`${k}: ${nameOf(o)}: no schema for apiVersion ${o.apiVersion}`);
          continue;
        }
        const Model = models[o.kind];
        if (!Model) { failures.push(`${k}: ${nameOf(o)}: no kind ${o.kind} in ${o.apiVersion}`); continue; }
        try {
          new Model(o).validate();
        } catch (e) {
          failures.push(`${k}: ${nameOf(o)}: ${e.message}`);
        }
      }
    }
    assert.deepEqual(failures, [], `objects the API server would refuse:\n${failures.join("\n")}`);
  });

  test("the NetworkPolicy selects sandboxd and lets only gateway pods reach its port", () => {
    for (const k of KUSTOMIZATIONS) {
      const [sandboxd] = daemonPods(k, "sandboxd");
      const gateways = daemonPods(k, "mcp-gateway");
      const policies = rendered[k].filter((o) => o.kind === "NetworkPolicy"
        && matches(o.spec.podSelector.matchLabels, sandboxd.labels));
      assert.equal(policies.length, 1, `${k}: one NetworkPolicy selects sandboxd's pods (${JSON.stringify(sandboxd.labels)})`);
      const { spec } = policies[0];
      assert.ok(Object.keys(spec.podSelector.matchLabels ?? {}).length > 0, `${k}: the policy selects by labels`);
      assert.deepEqual(spec.podSelector.matchExpressions ?? [], [], `${k}: no match expressions`);
      assert.ok((spec.policyTypes ?? []).includes("Ingress"), `${k}: the policy governs ingress`);
      assert.ok(spec.ingress?.length > 0, `${k}: an ingress rule for the gateways`);
      for (const rule of spec.ingress) {
        assert.ok(rule.from?.length > 0, `${k}: a rule without 'from' admits every peer`);
        for (const peer of rule.from) {
          assert.deepEqual(Object.keys(peer), ["podSelector"], `${k}: a peer that is not a pod selector: ${JSON.stringify(peer)}`);
          const sel = peer.podSelector.matchLabels ?? {};
          assert.ok(Object.keys(sel).length > 0, `${k}: a peer selecting every pod`);
          assert.ok(gateways.length > 0 && gateways.every((g) => matches(sel, g.labels)), `${k}: the peer selects the gateways`);
          const others = pods(k).filter((p) => !gateways.some((g) => g.w === p.w) && matches(sel, p.labels));
          assert.deepEqual(others.map((p) => nameOf(p.w)), [], `${k}: the peer selects pods besides the gateways`);
        }
        assert.deepEqual(rule.ports, [{ protocol: "TCP", port: SANDBOXD_PORT }], `${k}: the rule opens sandboxd's port only`);
      }
      const container = sandboxd.spec.containers.find((c) => daemonOf(c) === "sandboxd");
      const listen = flagsOf(container).find(([n]) => n === "listen_tcp")?.[1];
      assert.equal(listen, `0.0.0.0:${SANDBOXD_PORT}`, `${k}: sandboxd listens on the port the policy opens`);
    }
  });

  test("the gateways reach sandboxd by the headless Service's name", () => {
    for (const k of KUSTOMIZATIONS) {
      const [sandboxd] = daemonPods(k, "sandboxd");
      const service = rendered[k].find((o) => nameOf(o) === "Service/sandboxd");
      assert.equal(service.spec.clusterIP, "None", `${k}: sandboxd's Service is headless`);
      assert.ok(matches(service.spec.selector, sandboxd.labels), `${k}: the Service selects sandboxd's pods`);
      assert.deepEqual(service.spec.ports.map((p) => p.port), [SANDBOXD_PORT]);
      const ns = service.metadata.namespace;
      for (const g of daemonPods(k, "mcp-gateway")) {
        const flags = Object.fromEntries(flagsOf(g.spec.containers.find((c) => daemonOf(c) === "mcp-gateway")));
        assert.equal(flags.sandboxd, `dns:///sandboxd.${ns}.svc.cluster.local:${SANDBOXD_PORT}`, `${k}: --sandboxd`);
        assert.equal(flags.sandboxd_tls_server_name, `sandboxd.${ns}.svc.cluster.local`, `${k}: the name sandboxd's certificate holds`);
      }
    }
  });

  test("no Secret reaches an environment variable", () => {
    const secretValues = rendered["overlays/secrets-from-files"].filter((o) => o.kind === "Secret")
      .flatMap((s) => Object.values(s.data ?? {}).map((v) => Buffer.from(v, "base64").toString().trim()));
    assert.ok(secretValues.length >= 10, "the generated Secrets hold the test's values");
    for (const k of KUSTOMIZATIONS) {
      for (const { w, spec } of pods(k)) {
        for (const c of containersOf(spec)) {
          const where = `${k}: ${nameOf(w)} container ${c.name}`;
          for (const e of c.env ?? []) {
            assert.equal(e.valueFrom?.secretKeyRef, undefined, `${where}: env ${e.name} comes from a Secret`);
            assert.ok(!secretValues.some((v) => (e.value ?? "").includes(v)), `${where}: env ${e.name} holds a Secret's value`);
          }
          for (const e of c.envFrom ?? []) assert.equal(e.secretRef, undefined, `${where}: envFrom a Secret`);
          for (const a of [...(c.command ?? []), ...(c.args ?? [])]) {
            assert.ok(!secretValues.some((v) => a.includes(v)), `${where}: a command line holds a Secret's value`);
          }
        }
      }
    }
  });

  test("the daemons' secret files are mounted as docs/scaling.md says, read-only", () => {
    for (const k of KUSTOMIZATIONS) {
      for (const { w, spec } of pods(k)) {
        for (const c of containersOf(spec)) {
          const where = `${k}: ${nameOf(w)} container ${c.name}`;
          for (const m of c.volumeMounts ?? []) {
            const v = spec.volumes.find((x) => x.name === m.name);
            if (v?.secret) assert.equal(m.readOnly, true, `${where}: Secret volume ${m.name} mounted writable`);
          }
          const daemon = daemonOf(c);
          if (!daemon) continue;
          const uid = c.securityContext?.runAsUser ?? spec.securityContext?.runAsUser;
          const root = !uid && !(c.securityContext?.runAsNonRoot ?? spec.securityContext?.runAsNonRoot);
          for (const [flag, file] of flagsOf(c).filter(([n]) => SECRET_FILE_FLAGS[daemon].includes(n))) {
            const found = mountOf(spec, c, file);
            assert.ok(found?.volume, `${where}: --${flag}=${file} is on no volume`);
            const { mount, volume } = found;
            assert.equal(mount.readOnly, true, `${where}: --${flag}'s mount is writable`);
            if (volume.secret) {
              // A Secret's own files are root's links: only a root daemon reading one by
              // subPath (a bind of the file itself), 0400, passes the checks.
              assert.ok(root, `${where}: --${flag} reads a Secret volume as a non-root uid, whose files are root's`);
              assert.equal(mount.subPath, file.split("/").pop(), `${where}: --${flag} must be mounted by subPath`);
              assert.equal(volume.secret.defaultMode, 0o400, `${where}: --${flag}'s Secret must be mode 0400`);
            } else {
              assert.ok(volume.emptyDir, `${where}: --${flag} is on ${JSON.stringify(volume)}, not a Secret or a copy`);
              assert.ok(mount.subPath, `${where}: --${flag}'s copy must be mounted by subPath (an emptyDir is 0777)`);
              assert.ok(spec.initContainers?.some((i) => (i.volumeMounts ?? []).some((im) => im.name === volume.name)),
                `${where}: no init container fills ${volume.name} with --${flag}'s copy`);
            }
          }
        }
      }
    }
  });

  test("the wasm overlay runs nothing privileged and no host path", () => {
    const k = "overlays/wasm";
    assert.ok(!rendered[k].some((o) => o.kind === "DaemonSet"), "wasm: the privileged DaemonSet is gone");
    const [sandboxd] = daemonPods(k, "sandboxd");
    const container = sandboxd.spec.containers.find((c) => daemonOf(c) === "sandboxd");
    assert.ok(flagsOf(container).some(([n, v]) => n === "isolation" && v === "wasm"), "wasm: sandboxd runs --isolation=wasm");
    for (const { w, spec } of pods(k)) {
      const where = `${k}: ${nameOf(w)}`;
      for (const field of ["hostNetwork", "hostPID", "hostIPC"]) assert.ok(!spec[field], `${where}: ${field}`);
      for (const v of spec.volumes ?? []) assert.equal(v.hostPath, undefined, `${where}: hostPath volume ${v.name}`);
      assert.equal(spec.securityContext?.runAsNonRoot, true, `${where}: runAsNonRoot`);
      assert.ok(spec.securityContext?.runAsUser > 0, `${where}: runs as a uid of its own`);
      assert.equal(spec.securityContext?.seccompProfile?.type, "RuntimeDefault", `${where}: seccomp RuntimeDefault`);
      for (const c of containersOf(spec)) {
        const sc = c.securityContext ?? {};
        assert.ok(!sc.privileged, `${where} container ${c.name} is privileged`);
        assert.equal(sc.allowPrivilegeEscalation, false, `${where} container ${c.name}: allowPrivilegeEscalation`);
        assert.equal(sc.readOnlyRootFilesystem, true, `${where} container ${c.name}: readOnlyRootFilesystem`);
        assert.deepEqual(sc.capabilities?.drop, ["ALL"], `${where} container ${c.name}: drops every capability`);
        assert.deepEqual(sc.capabilities?.add ?? [], [], `${where} container ${c.name}: adds capabilities`);
        assert.ok(sc.runAsUser === undefined || sc.runAsUser > 0, `${where} container ${c.name} runs as root`);
      }
    }
  });

  test("every flag passed is one the built binary knows; the TLS flags are the multi-host test's", () => {
    const known = { sandboxd: helpFlags(required("SANDBOXD_BIN")), "mcp-gateway": helpFlags(required("GATEWAY_BIN")) };
    const multihost = { sandboxd: harnessFlags("tlsSandboxdArgs"), "mcp-gateway": [...harnessFlags("tlsGatewayArgs"), "sandboxd"] };
    for (const k of KUSTOMIZATIONS) {
      for (const daemon of ["sandboxd", "mcp-gateway"]) {
        const pod = daemonPods(k, daemon);
        assert.ok(pod.length > 0, `${k}: nothing runs ${daemon}`);
        for (const { w, spec } of pod) {
          for (const c of spec.containers.filter((x) => daemonOf(x) === daemon)) {
            const flags = flagsOf(c).map(([n]) => n);
            const unknown = flags.filter((n) => !known[daemon].has(n));
            assert.deepEqual(unknown, [], `${k}: ${nameOf(w)} passes flags ${daemon} --help does not list`);
            const missing = multihost[daemon].filter((n) => !flags.includes(n));
            assert.deepEqual(missing, [], `${k}: ${nameOf(w)} lacks flags the multi-host test gives ${daemon}`);
            const stray = (c.args ?? []).filter((a) => !a.startsWith("--"));
            assert.deepEqual(stray, [], `${k}: ${nameOf(w)}: arguments that are not --flag=value`);
          }
        }
      }
    }
  });
});
