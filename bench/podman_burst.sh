#!/bin/bash
# The pieces of a cold sandboxd container start, timed one at a time with sandboxd's own
# `podman run` arguments (BuildRunArgv in services/sandboxd/sandboxd/podman_runtime.cc, default
# limits, rootful cgroup limits): wall until the runner's socket appears, and CPU.
#
#   bench/podman_burst.sh [N]    # as root, on cgroup v1 (cpuacct); N runs per step (5)
#
# Env: IMAGE (localhost/sandboxd-python:bookworm), RUNNER (build/services/sandboxd/
# sandbox_runner.pyz), SECCOMP (a sandboxd state dir's seccomp.json; empty: podman's default),
# CRUN (a crun binary to try; empty: skipped), SINGLES (0: only the bursts at the end).
#
# CPU is read from cgroup v1 cpuacct: this script's own cgroup (the podman CLI processes and
# the REST service, which it starts), plus libpod_parent/conmon (conmon and the runc it runs:
# shared with any other podman user, so noisy when others start containers), plus the
# container's own cgroup at the moment its runner listens (catatonit and the runner's start).
# Every container it makes is labelled io.sandboxd.role=burst-bench and removed at the end.
set -euo pipefail

N=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${IMAGE:-localhost/sandboxd-python:bookworm}
RUNNER=${RUNNER:-$ROOT/build/services/sandboxd/sandbox_runner.pyz}
SECCOMP=${SECCOMP:-}
CRUN=${CRUN:-}
WORK=$(mktemp -d /tmp/podman-burst.XXXXXX)
# sandboxd's RLIMIT_NPROC ceiling: min(kernel.pid_max, our hard limit) (HostNprocCeiling).
NPROC=$(cat /proc/sys/kernel/pid_max); h=$(ulimit -Hu)
[ "$h" != unlimited ] && [ "$h" -lt "$NPROC" ] && NPROC=$h
CG=/sys/fs/cgroup/cpuacct
ORIGIN=$CG$(awk -F: '$2 ~ /(^|,)cpuacct(,|$)/ {print $3}' /proc/self/cgroup)
MINE=$CG/podman-burst-$$
API=$WORK/api.sock
SERVICE_PID=

cleanup() {
  podman ps -aq --filter label=io.sandboxd.role=burst-bench --filter label=burst.run=$$ |
    xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true
  [ -n "$SERVICE_PID" ] && kill "$SERVICE_PID" 2>/dev/null || true
  echo $$ > "$ORIGIN/cgroup.procs" 2>/dev/null || true
  rmdir "$MINE" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$MINE"
echo $$ > "$MINE/cgroup.procs"
usage() { cat "$1/cpuacct.usage" 2>/dev/null || echo 0; }
host_cpu() { echo $(( $(usage "$MINE") + $(usage $CG/libpod_parent/conmon) )); }

# sandboxd's arguments after `run --detach --name NAME` (and global --runtime runc).
args() {  # NAME SOCKDIR
  local a=(--label io.sandboxd.role=burst-bench --label burst.run=$$
    --network none --read-only --read-only-tmpfs=false --cap-drop ALL
    --security-opt no-new-privileges --user 65534:65534 --init --pull never
    --log-driver none --hostname sandbox --http-proxy=false --ipc private
    --ulimit nofile=1024:1024 --ulimit core=0:0
    --tmpfs /tmp:rw,nosuid,nodev,mode=1777,size=67108864
    --tmpfs /workspace:rw,nosuid,nodev,mode=1777,size=268435456 --workdir /workspace
    --mount "type=bind,source=$RUNNER,target=/opt/sandboxd/sandbox_runner.pyz,ro=true"
    --mount "type=bind,source=$2,target=/run/sandboxd,nosuid,nodev,noexec")
  [ -n "$SECCOMP" ] && a+=(--security-opt "seccomp=$SECCOMP")
  a+=(--memory 536870912 --memory-swap 536870912 --pids-limit 128 --cpus 1.000
    --ulimit "nproc=$NPROC:$NPROC" --env HOME=/workspace
    "$IMAGE" python3 -I -u /opt/sandboxd/sandbox_runner.pyz
    --socket /run/sandboxd/runner.sock --own-pid-namespace)
  printf '%s\n' "${a[@]}"
}

now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
# Polls without forking (a timed read on a FIFO nobody writes), so the wait costs no CPU.
mkfifo "$WORK/tick"; exec 9<>"$WORK/tick"
wait_sock() {
  local i=0
  while [ ! -S "$1/runner.sock" ]; do
    read -r -t 0.002 -u 9 || true
    (( ++i < 10000 )) || { echo "runner did not listen in $1" >&2; return 1; }
  done
}

# One run of a step: prints "wall_ms cpu_ms [detail]". $1: step name, $2: run index.
one() {
  local step=$1 name=pb-$$-$1-$2 dir=$WORK/$1-$2 rt=(--runtime runc)
  mkdir -p "$dir"; chmod 777 "$dir"
  mapfile -t A < <(args "$name" "$dir")
  case $step in
    crun-*) rt=(--runtime "$CRUN");;
  esac
  local c0 t0 t1 t2 id detail=""
  case $step in
    start-created|remote-start-created|crun-start-created)
      # created ahead, outside the clock
      if [ "$step" = remote-start-created ]; then
        podman --remote --url "unix://$API" create --name "$name" "${A[@]}" >/dev/null
      else
        podman "${rt[@]}" create --name "$name" "${A[@]}" >/dev/null
      fi || return 1;;
  esac
  c0=$(host_cpu); t0=$(now)
  # (set -e does not reach here: `one` runs on the left of ||.)
  case $step in
    run|crun-run) podman "${rt[@]}" run --detach --name "$name" "${A[@]}" >/dev/null || return 1;;
    create-start)
      podman "${rt[@]}" create --name "$name" "${A[@]}" >/dev/null || return 1; t1=$(now)
      podman start "$name" >/dev/null || return 1; t2=$(now)
      detail="create $(ms $t0 $t1) + start $(ms $t1 $t2)";;
    start-created|crun-start-created) podman start "$name" >/dev/null || return 1;;
    remote-run)
      podman --remote --url "unix://$API" run --detach --name "$name" "${A[@]}" >/dev/null || return 1;;
    remote-start-created) podman --remote --url "unix://$API" start "$name" >/dev/null || return 1;;
  esac
  wait_sock "$dir"; t1=$(now)
  local c1; c1=$(host_cpu)
  id=$(podman inspect --format '{{.Id}}' "$name")
  local ctr; ctr=$(usage $CG/libpod_parent/libpod-$id)
  [ "$ctr" = 0 ] && { echo "no cpuacct cgroup for $name" >&2; return 1; }
  echo "$(ms $t0 $t1) $(( (c1 - c0 + ctr) / 1000000 )) $(( ctr / 1000000 )) $detail"
  podman rm -f -t 0 "$name" >/dev/null 2>&1
}

report() {  # step description
  local step=$1 walls=() cpus=() ctrs=() line
  for i in $(seq 1 "$N"); do
    line=$(one "$step" "$i") || { echo "| $2 | failed | | |"; return; }
    read -r w c k rest <<<"$line"
    walls+=("$w"); cpus+=("$c"); ctrs+=("$k")
    [ -n "$rest" ] && echo "    $step #$i: $w ms ($rest)" >&2
  done
  med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  echo "| $2 | $(med "${walls[@]}") ms | $(med "${cpus[@]}") ms | $(med "${ctrs[@]}") ms | $(echo ${walls[*]}) |"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); runs per step: $N; image $IMAGE"
echo
echo "| step (until the runner listens) | wall p50 | CPU p50 | of it in the container | walls (ms) |"
echo "|---|---|---|---|---|"
singles() {
report run "podman run -d (today: one CLI process)"
report create-start "podman create, then podman start"
report start-created "podman start of a container created ahead"
podman system service --time=0 "unix://$API" &
SERVICE_PID=$!
while [ ! -S "$API" ]; do sleep 0.05; done
report remote-run "podman --remote run -d (REST service)"
report remote-start-created "podman --remote start of one created ahead (REST service)"
c0=$(host_cpu); t0=$(now)
for i in $(seq 1 "$N"); do
  curl -sf --unix-socket "$API" http://d/v4.0.0/libpod/_ping >/dev/null
done
echo "| REST round trip (curl _ping, no container) | $(( $(ms $t0 $(now)) / N )) ms | $(( ($(host_cpu) - c0) / 1000000 / N )) ms | 0 | |"
kill "$SERVICE_PID"; wait "$SERVICE_PID" 2>/dev/null || true; SERVICE_PID=
if [ -n "$CRUN" ]; then
  report crun-run "podman --runtime crun run -d"
  report crun-start-created "podman start of a crun container created ahead"
fi
}
[ "${SINGLES:-1}" = 1 ] && singles
# K at once (4 creators): wall until all K runners listen, CPU of all K.
burst() {  # mode(run|start-created) K description
  local mode=$1 k=$2 names=() dirs=() c0 t0 t1 c1 ctr=0 i
  for i in $(seq 1 "$k"); do
    names+=("pb-$$-burst-$mode-$i"); dirs+=("$WORK/burst-$mode-$i")
    mkdir -p "${dirs[-1]}"; chmod 777 "${dirs[-1]}"
    mapfile -t A < <(args x "${dirs[-1]}")
    if [ "$mode" = start-created ]; then
      podman --runtime runc create --name "${names[-1]}" "${A[@]}" >/dev/null
    fi
  done
  c0=$(host_cpu); t0=$(now)
  for i in $(seq 0 $((k - 1))); do
    mapfile -t A < <(args x "${dirs[$i]}")
    if [ "$mode" = run ]; then
      podman --runtime runc run --detach --name "${names[$i]}" "${A[@]}" >/dev/null &
    else
      podman start "${names[$i]}" >/dev/null &
    fi
  done
  wait
  for d in "${dirs[@]}"; do wait_sock "$d"; done
  t1=$(now); c1=$(host_cpu)
  for n in "${names[@]}"; do
    ctr=$(( ctr + $(usage $CG/libpod_parent/libpod-$(podman inspect --format '{{.Id}}' "$n")) ))
  done
  echo "| $3 | $(ms $t0 $t1) ms | $(( (c1 - c0 + ctr) / 1000000 )) ms | $(( ctr / 1000000 )) ms | all $k |"
  podman rm -f -t 0 "${names[@]}" >/dev/null 2>&1
}
burst run 4 "4 x podman run -d at once"
burst start-created 4 "4 x podman start at once (created ahead)"
burst run 8 "8 x podman run -d at once"
burst start-created 8 "8 x podman start at once (created ahead)"
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
