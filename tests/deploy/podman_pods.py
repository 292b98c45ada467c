#!/usr/bin/env python3
"""Runs one overlay of deploy/kubernetes as podman containers, the way a kubelet would run
its pods as far as the pods' own settings go, and drives a run through it. Hand-run (it
needs the images of scripts/build-daemon-images.sh, root, and about a minute); not CI.

  tests/deploy/podman_pods.py container|wasm

What is taken from the rendered manifests (kubectl kustomize, $KUBECTL or Debian's 1.20):
each Deployment's and DaemonSet's init containers, then its containers, with their command
and args, runAsUser/runAsGroup, readOnlyRootFilesystem, privileged, capabilities drop ALL,
allowPrivilegeEscalation false, and their volumes: emptyDir (a 0777 directory), hostPath (a
directory of the work directory, not the machine's), Secret (files that are links into
..data/, with items and defaultMode), ConfigMap, and subPath. What is not: the pod network,
Services and DNS (one podman network; --sandboxd=dns:/// is replaced by the sandboxd
container's address), the NetworkPolicy, probes, resources, the runtime's seccomp profile
(podman's default stands for RuntimeDefault), nofile and nproc limits (set low: runc here
may not raise them). Secrets: a throwaway CA, certificates naming
sandboxd.codemode.svc.cluster.local, tokens and a handle key, made here.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
KUBECTL = os.environ.get("KUBECTL") or next(
    (k for k in ["/opt/debian-kubernetes-client/usr/bin/kubectl", "/usr/bin/kubectl"] if os.path.exists(k)))
SANDBOXD_NAME = "sandboxd.codemode.svc.cluster.local"
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def openssl_cert(d, name, subject, ext, ca=True):
    """A P-256 key and a certificate signed by d/ca (self-signed when `ca` is the name)."""
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr", "-subj", f"/CN={subject}")
    ext_file = f"{d}/{name}.ext"
    with open(ext_file, "w") as f:
        f.write(ext)
    signer = ["-signkey", f"{d}/{name}.key"] if name == "ca" else ["-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
                                                                     "-CAcreateserial"]
    sh("openssl", "x509", "-req", "-in", f"{d}/{name}.csr", *signer, "-out", f"{d}/{name}.crt", "-days", "2",
       "-extfile", ext_file)


def make_secrets(d):
    """The five Secrets the base names, as {secret name: {key: bytes}}."""
    openssl_cert(d, "ca", "test-ca", "basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign\n")
    openssl_cert(d, "server", "sandboxd", f"subjectAltName=DNS:{SANDBOXD_NAME}\nextendedKeyUsage=serverAuth\n")
    openssl_cert(d, "client", "mcp-gateway", "extendedKeyUsage=clientAuth\n")
    read = lambda name: open(f"{d}/{name}", "rb").read()
    token = os.urandom(24).hex().encode()
    return {
        "sandboxd-tls": {"tls.crt": read("server.crt"), "tls.key": read("server.key"), "ca.crt": read("ca.crt")},
        "sandboxd-token": {"token": token},
        "mcp-gateway-tls": {"tls.crt": read("client.crt"), "tls.key": read("client.key"), "ca.crt": read("ca.crt")},
        "mcp-gateway-secrets": {"handle_key": os.urandom(32).hex().encode(), "token": os.urandom(20).hex().encode(),
                                "sandboxd_token": token},
        "mcp-gateway-upstreams": {},
    }


class Pods:
    def __init__(self, objects, secrets, work):
        self.objects, self.secrets, self.work = objects, secrets, work
        self.containers = []
        self.sandboxd_address = None

    def volume(self, pod, vol):
        """The host directory standing for `vol` of `pod`, made on first use."""
        d = os.path.join(self.work, pod, vol["name"])
        if os.path.exists(d):
            return d
        os.makedirs(d)
        if "emptyDir" in vol:
            os.chmod(d, 0o777)
        elif "hostPath" in vol:
            os.chmod(d, 0o755)
        elif "secret" in vol:
            self.fill_secret(d, vol["secret"])
        elif "configMap" in vol:
            cm = next(o for o in self.objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == vol["configMap"]["name"])
            for key, value in cm["data"].items():
                with open(os.path.join(d, key), "w") as f:
                    f.write(value)
        else:
            raise SystemExit(f"podman_pods: volume {vol} is not emulated")
        return d

    def fill_secret(self, d, spec):
        """A Secret volume as the kubelet makes it: root's files in ..data/, links to them."""
        data = self.secrets[spec["secretName"]]
        items = spec.get("items") or [{"key": k, "path": k} for k in sorted(data)]
        os.makedirs(os.path.join(d, "..data"))
        for item in items:
            target = os.path.join(d, "..data", item["path"])
            with open(target, "wb") as f:
                f.write(data[item["key"]])
            os.chmod(target, item.get("mode", spec.get("defaultMode", 0o644)))
            os.symlink(os.path.join("..data", item["path"]), os.path.join(d, item["path"]))

    def security_flags(self, spec, c):
        sc = {**(spec.get("securityContext") or {}), **(c.get("securityContext") or {})}
        flags = []
        if "runAsUser" in sc:
            flags += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
        if sc.get("readOnlyRootFilesystem"):
            flags += ["--read-only", "--read-only-tmpfs=false"]
        if sc.get("privileged"):
            flags += ["--privileged"]
        if "ALL" in (sc.get("capabilities") or {}).get("drop", []):
            flags += ["--cap-drop=all"]
        if sc.get("allowPrivilegeEscalation") is False:
            flags += ["--security-opt", "no-new-privileges"]
        return flags

    def mount_flags(self, pod, spec, c):
        flags = []
        for m in c.get("volumeMounts", []):
            source = self.volume(pod, next(v for v in spec["volumes"] if v["name"] == m["name"]))
            if m.get("subPath"):
                source = os.path.join(source, m["subPath"])
                if not os.path.lexists(source):  # the kubelet makes it with the volume's mode
                    os.makedirs(source)
                    os.chmod(source, os.stat(os.path.dirname(source)).st_mode & 0o7777)
            flags += ["-v", f"{os.path.realpath(source)}:{m['mountPath']}:{'ro' if m.get('readOnly') else 'rw'}"]
        return flags

    def run(self, pod, spec, c, init):
        name = f"k8s-{pod}-{c['name']}-{os.getpid()}"
        args = [f"--sandboxd={self.sandboxd_address}" if a.startswith("--sandboxd=dns:///") else a
                for a in c.get("args", [])]
        image = c["image"] if ":" in c["image"].rsplit("/", 1)[-1] else c["image"] + ":latest"
        cmd = ["podman", "run", "--name", name, "--network", "podman", *ULIMITS, *(["--rm"] if init else ["-d"]),
               *self.security_flags(spec, c), *self.mount_flags(pod, spec, c),
               "--entrypoint", c["command"][0], image, *c["command"][1:], *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"podman_pods: {pod}/{c['name']} failed ({r.returncode}): {r.stderr}{r.stdout}")
        if not init:
            self.containers.append(name)
        return name

    def start(self):
        """sandboxd's pod first (the gateway needs its address), each init container first."""
        workloads = [o for o in self.objects if o["kind"] in ("Deployment", "DaemonSet")]
        names = {}
        for o in sorted(workloads, key=lambda o: o["metadata"]["name"] != "sandboxd"):
            pod, spec = o["metadata"]["name"], o["spec"]["template"]["spec"]
            for c in spec.get("initContainers", []):
                self.run(pod, spec, c, init=True)
            names[pod] = self.run(pod, spec, spec["containers"][0], init=False)
            if pod == "sandboxd":
                ip = sh("podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", names[pod]).stdout.strip()
                self.sandboxd_address = f"{ip}:50051"
        return names

    def stop(self):
        for name in self.containers:
            sh("podman", "rm", "-f", "-t", "0", name, check=False)


def wait_for(what, fn, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.5)
    raise SystemExit(f"podman_pods: timed out waiting for {what}")


def mcp(url, token, body, session=None):
    """One Streamable HTTP request; the JSON-RPC answer (from JSON or the SSE event) and the session id."""
    headers = {"Host": "mcp-gateway.codemode.svc", "Authorization": f"Bearer {token}",
               "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        text = resp.read().decode()
        sid = resp.headers.get("Mcp-Session-Id")
    data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    return (json.loads(data[-1]) if data else json.loads(text) if text.strip() else None), sid


def drive(url, token):
    """initialize, then runs that keep a variable; returns what was printed."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "podman_pods", "version": "1"}}
    _, sid = mcp(url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    mcp(url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    out = []
    for i, (tool, code) in enumerate([("run_python", "import os\nx = 6 * 7\nprint(x, os.getuid())"),
                                      ("run_python", "print(x + 1)"),
                                      ("run_javascript", "console.log(40 + 2)")]):
        t0 = time.time()
        answer, _ = mcp(url, token, {"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call",
                                     "params": {"name": tool, "arguments": {"code": code}}}, sid)
        result = answer["result"]
        if result.get("isError"):
            raise SystemExit(f"podman_pods: {tool} failed: {json.dumps(result)[:600]}")
        out.append(f"{tool} {code.splitlines()[-1]!r}: {result['structuredContent']['stdout'].strip()!r} "
                   f"({(time.time() - t0) * 1000:.0f} ms)")
    return out


def main():
    overlay = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
    rendered = sh(KUBECTL, "kustomize", os.path.join(SOURCE, "deploy/kubernetes/overlays", overlay)).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    work = tempfile.mkdtemp(prefix="podman-pods-", dir="/var/tmp")
    pods = Pods(objects, make_secrets(work), work)
    try:
        names = pods.start()
        logs = lambda n: sh("podman", "logs", n, check=False).stderr
        wait_for("sandboxd to serve", lambda: "health SERVING" in logs(names["sandboxd"]))
        gateway_ip = sh("podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", names["mcp-gateway"]).stdout.strip()
        wait_for("the gateway", lambda: "serving MCP" in logs(names["mcp-gateway"]), 30)
        token = pods.secrets["mcp-gateway-secrets"]["token"].decode()
        for line in drive(f"http://{gateway_ip}:8931/mcp", token):
            print(line)
        print("sandboxd:", next(l for l in logs(names["sandboxd"]).splitlines() if "container runtime" in l))
    finally:
        pods.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
