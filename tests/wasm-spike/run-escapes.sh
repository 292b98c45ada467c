#!/bin/sh
# Experiment 4's matrix: 04-escapes.js under each layer alone and together; prints a
# markdown table (check x configuration). Needs the built sandboxd-wasm-jail (WASM_JAIL, default
# build/services/sandboxd/sandboxd-wasm-jail), bwrap,
# a snapshot from 01-snapshot.js make, and python3 on the host for the live listeners.
#   ./run-escapes.sh SNAPSHOT_DIR [NODE_MAJOR]      (default node 26)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SNAP=${1:?usage: run-escapes.sh SNAPSHOT_DIR [NODE_MAJOR]}
MAJOR=${2:-26}
NODE=$HERE/node_modules/node$MAJOR/bin/node
JAIL=${WASM_JAIL:-$HERE/../../build/services/sandboxd/sandboxd-wasm-jail}
PORT=47123
SOCK=/tmp/wasm-spike-host.sock
WS=$(mktemp -d /tmp/wasm-ws.XXXXXX)
OUT=$(mktemp -d /tmp/wasm-escapes.XXXXXX)
chmod 777 "$WS"
python3 "$HERE/listener.py" $PORT $SOCK &
LISTENER=$!
trap 'kill $LISTENER; rm -rf "$WS"' EXIT
sleep 0.5

PERM="--openssl-config=$HERE/openssl.cnf --permission --allow-fs-read=$HERE --allow-fs-read=$SNAP --disallow-code-generation-from-strings"
RO="--read $HERE --read $SNAP --read /usr/lib --read /usr/lib64 --read /etc/ld.so.cache --write $WS"
BWRAP="bwrap --unshare-all --die-with-parent --new-session --clearenv --ro-bind $HERE $HERE
  --ro-bind $SNAP $SNAP --ro-bind /usr/lib /usr/lib --ro-bind /usr/lib64 /usr/lib64
  --symlink usr/lib /lib --symlink usr/lib64 /lib64 --ro-bind /etc/ld.so.cache /etc/ld.so.cache
  --bind $WS /workspace --proc /proc --dev /dev --chdir $HERE"
ARGS="$HERE/04-escapes.js $SNAP/pyodide.snap $PORT $SOCK"

run() {  # name, command...
  name=$1; shift
  rm -f /tmp/wasm-spike-escape
  timeout 120 "$@" >"$OUT/$name.jsonl" 2>"$OUT/$name.err" || true
  # fs_write_tmp may succeed inside bwrap's private root; what counts is the host's /tmp.
  if [ -e /tmp/wasm-spike-escape ]; then outcome=ESCAPED; else outcome=blocked; fi
  echo "{\"check\":\"fs_write_reaches_host_tmp\",\"outcome\":\"$outcome\",\"detail\":\"\"}" >>"$OUT/$name.jsonl"
  rm -f /tmp/wasm-spike-escape
}
run none env -i $NODE $ARGS
run L1-permission env -i $NODE $PERM $ARGS
run L2-seccomp env -i $JAIL --seccomp -- $NODE $ARGS
run L3-landlock env -i $JAIL --landlock $RO -- $NODE --openssl-config=$HERE/openssl.cnf $ARGS
run L4-bwrap $BWRAP $NODE $ARGS
run L1-L3 env -i $JAIL --rlimit-data 2147483648 --rlimit-nofile 256 --seccomp --landlock $RO -- $NODE $PERM $ARGS
run L1-L4 $BWRAP $JAIL --rlimit-data 2147483648 --rlimit-nofile 256 --seccomp --landlock --read $HERE --read $SNAP --read /usr/lib --read /usr/lib64 --read /etc/ld.so.cache --write /workspace -- $NODE $PERM $ARGS
echo "node $($NODE --version), results in $OUT"
"$NODE" -e '
const fs = require("fs"); const dir = process.argv[1];
const names = ["none", "L1-permission", "L2-seccomp", "L3-landlock", "L4-bwrap", "L1-L3", "L1-L4"];
const rows = new Map();
for (const n of names) {
  const lines = fs.readFileSync(`${dir}/${n}.jsonl`, "utf8").split("\n").filter(Boolean);
  if (!lines.length) console.log(`${n}: no output: ${fs.readFileSync(`${dir}/${n}.err`, "utf8").slice(0, 300)}`);
  for (const l of lines) { const r = JSON.parse(l); if (!rows.has(r.check)) rows.set(r.check, {}); rows.get(r.check)[n] = r.outcome === "ESCAPED" ? "**ESCAPED**" : "blocked"; }
}
console.log(`| check | ${names.join(" | ")} |`); console.log(`|---|${names.map(() => "---").join("|")}|`);
for (const [c, r] of rows) console.log(`| ${c} | ${names.map((n) => r[n] || "(no result)").join(" | ")} |`);
' "$OUT"
