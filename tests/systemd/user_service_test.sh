#!/usr/bin/env bash
# The systemd user service under a real systemd: boots Debian with systemd as PID 1 in a
# privileged podman container (tests/systemd/build-rootfs.sh's image, built once), makes a
# user with subuids and linger, runs scripts/install-user-service.sh as that user, enables
# both units, then checks
#   - at each of several starts of the user manager (restarts of user@UID.service, as at
#     boot with linger or a login) both units come up, with no ordering cycle in the journal;
#   - run_python and run_javascript over HTTP with the bearer token (tools/list offers both);
#   - a variable survives `systemctl --user restart sandboxd`, and that restart's log says
#     the session was detached and re-attached, not lost;
#   - the state lies in ~/.local/state/{sandboxd,mcp-gateway}, rootless storage is overlay;
#   - the token is nowhere in the journal.
# The source and build trees are mounted at other paths than on the host, so the installed
# daemon cannot fall back to the build tree's runners.
#
#   user_service_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir="$(cd "$1" && pwd)"; build_dir="$(cd "$2" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="sandboxd-systemd-test-$$"
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $(date +%T) $*" >&2; }
wait_for() {  # DESCRIPTION COMMAND...: until COMMAND succeeds, at most 120 s
  local what="$1"; shift
  for _ in $(seq 240); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  fail "$what"
}
[[ $(id -u) -eq 0 ]] || fail "run as root: it boots a privileged container"
rootfs_tar=/var/cache/sandboxd/rootfs.tar
[[ -r "$rootfs_tar" ]] || fail "no $rootfs_tar: run scripts/setup.sh as root first"

step "the image (built once: a few minutes)"
image="$("$here/build-rootfs.sh")" || fail "could not build the test image"

# The users' homes on the host's file system: rootless overlay cannot stack on the
# container's own overlay root.
homes="$(mktemp -d /var/tmp/sandboxd-systemd-test.XXXXXX)"
cleanup() {
  podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  rm -rf "$homes"
}
trap cleanup EXIT

# cgroup v1: --systemd=always over-mounts the systemd cgroup tree and nested runc fails; so
# systemd runs as an ordinary command with what --systemd would set up. runc may only
# lower these rlimits here (no CAP_SYS_RESOURCE), so they are given at their hard limits.
run_flags=(--privileged --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)")
nproc_max="$(cat /proc/sys/kernel/pid_max)"
[[ "$(ulimit -Hu)" != unlimited && "$(ulimit -Hu)" -lt "$nproc_max" ]] && nproc_max="$(ulimit -Hu)"
run_flags+=(--ulimit "nproc=$nproc_max:$nproc_max")
if [[ "$(stat -fc %T /sys/fs/cgroup)" == cgroup2fs ]]; then
  run_flags+=(--systemd=always)
else
  run_flags+=(--systemd=false -e container=podman --tmpfs /run --tmpfs /tmp --stop-signal=SIGRTMIN+3)
fi
step "booting systemd in $name"
podman run -d --name "$name" "${run_flags[@]}" \
  -v "$source_dir:/src:ro" -v "$build_dir:/build:ro" -v "$rootfs_tar:$rootfs_tar:ro" -v "$homes:/home" \
  "$image" /sbin/init >/dev/null || fail "the container did not start"
in_box() { podman exec "$name" "$@"; }
wait_for "systemd did not start in the container" in_box test -S /run/systemd/private
state="$(in_box timeout 120 systemctl is-system-running --wait || true)"
[[ "$state" == running || "$state" == degraded ]] || fail "systemd did not come up: $state"

missing="$(in_box bash -c 'ldd /build/services/sandboxd/sandboxd /build/services/mcp-gateway/mcp-gateway | grep "not found" || true')"
[[ -z "$missing" ]] || fail "the test image lacks libraries the binaries need (add their packages to tests/systemd/build-rootfs.sh): $missing"

step "a user with subuids and linger"
in_box useradd -m -s /bin/bash alice
in_box usermod --add-subuids 100000-165535 --add-subgids 100000-165535 alice
uid="$(in_box id -u alice)"
in_box loginctl enable-linger alice
as_alice() {
  in_box runuser -u alice -- env HOME=/home/alice XDG_RUNTIME_DIR="/run/user/$uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" PATH=/usr/local/bin:/usr/bin:/bin "$@"
}
wait_for "user@$uid.service did not start" in_box systemctl is-active "user@$uid.service"

step "install-user-service.sh as alice"
as_alice bash -c 'cd && BUILD_DIR=/build /src/scripts/install-user-service.sh' || fail "install-user-service.sh failed"
as_alice systemctl --user enable sandboxd mcp-gateway 2>/dev/null || fail "enable failed"
[[ "$(as_alice podman info --format '{{.Store.GraphDriverName}}')" == overlay ]] ||
  fail "alice's rootless podman storage is not overlay"

both_active() { as_alice systemctl --user is-active sandboxd.service mcp-gateway.service; }
for start in 1 2 3; do
  step "start $start of the user manager"
  in_box systemctl restart "user@$uid.service"
  wait_for "after start $start of the user manager, sandboxd and mcp-gateway are not both active: $(both_active || true)" both_active
done
cycles="$(in_box journalctl --no-pager -q | grep -i "ordering cycle" || true)"
[[ -z "$cycles" ]] || fail "ordering cycle in the journal: $cycles"

step "run_python and run_javascript over HTTP"
token_file=/home/alice/.local/state/mcp-gateway/token
wait_for "no token file at $token_file" as_alice test -s "$token_file"
mcp() { as_alice python3 /src/tests/systemd/mcp_call.py http://127.0.0.1:8931/mcp "$token_file" /home/alice/mcp-session "$@"; }
wait_for "the gateway does not answer on 127.0.0.1:8931" mcp tools
tools="$(mcp tools)"
[[ " $tools " == *" run_python "* && " $tools " == *" run_javascript "* ]] || fail "tools/list: $tools"
out="$(mcp call run_python 'x = 41; print("py", x + 1)')" || fail "run_python: $out"
[[ "$out" == *"py 42"* ]] || fail "run_python printed: $out"
out="$(mcp call run_javascript 'console.log("js", [1, 2, 3].map(n => n * 2).join(","))')" || fail "run_javascript: $out"
[[ "$out" == *"js 2,4,6"* ]] || fail "run_javascript printed: $out"

step "variables across systemctl --user restart sandboxd"
as_alice systemctl --user restart sandboxd
wait_for "sandboxd is not active after its restart" as_alice systemctl --user is-active sandboxd.service
out="$(mcp call run_python 'print("kept", x + 1)')" || fail "run_python after the restart: $out"
[[ "$out" == *"kept 42"* ]] || fail "after the restart: $out"
journal="$(in_box journalctl --no-pager -q _UID="$uid")"
grep -q "re-attached session" <<<"$journal" || fail "the restart's log does not say the session was re-attached"
lost="$(grep -E "session [^ ]+ lost" <<<"$journal" || true)"
[[ -z "$lost" ]] || fail "a clean restart logged sessions as lost: $lost"

step "state directories and the journal"
in_box test -d /home/alice/.local/state/sandboxd || fail "no ~/.local/state/sandboxd"
! in_box test -e /home/alice/.config/sandboxd || fail "sandboxd made ~/.config/sandboxd"
token="$(as_alice cat "$token_file")"
[[ ${#token} -ge 16 ]] || fail "the token is too short to look for"
! grep -qF "$token" <<<"$(in_box journalctl --no-pager -q)" || fail "the token is in the journal"
step "passed"
