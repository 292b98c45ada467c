#!/usr/bin/env bash
# scripts/install-user-service.sh against the build's outputs: installs into an empty home
# (--files-only: no podman image, no systemd) and checks that
#   - every file of BUILD_DIR/user-service-files.txt arrived, identical, with its mode;
#   - every runner sandboxd looks up next to its binary (DefaultRunner("NAME", ...) in
#     services/sandboxd/main.cc) is one of them, in ~/.local/share/sandboxd/, so a runner
#     added to sandboxd but not to the list fails here instead of in the user's service
#     (where sandboxd would fall back to the build tree's copy, or have none);
#   - both unit files are installed.
# Run as root, it installs as nobody (the script refuses root).
#
#   install_files_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir="$1"; build_dir="$2"
manifest="$build_dir/user-service-files.txt"
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -s "$manifest" ]] || fail "the build wrote no $manifest"

home="$(mktemp -d /tmp/install-user-service-test.XXXXXX)"
trap 'rm -rf "$home"' EXIT
as_user=()
if [[ $(id -u) -eq 0 ]]; then
  chown 65534:65534 "$home"
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
"${as_user[@]}" env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin BUILD_DIR="$build_dir" \
  bash "$source_dir/scripts/install-user-service.sh" --files-only || fail "install-user-service.sh --files-only failed"

count=0
while read -r mode source dest; do
  [[ -f "$home/$dest" ]] || fail "$source (in $manifest) was not installed as ~/$dest"
  cmp -s "$build_dir/$source" "$home/$dest" || fail "~/$dest differs from the build's $source"
  [[ "$(stat -c %a "$home/$dest")" == "$mode" ]] || fail "~/$dest has mode $(stat -c %a "$home/$dest"), not $mode"
  count=$((count + 1))
done <"$manifest"

runners="$(grep -oE 'DefaultRunner\("[^"]+"' "$source_dir/services/sandboxd/main.cc" | cut -d'"' -f2)"
[[ -n "$runners" ]] || fail "found no DefaultRunner(\"...\") in services/sandboxd/main.cc"
for runner in $runners; do
  grep -qE " \.local/share/sandboxd/$runner\$" "$manifest" ||
    fail "sandboxd looks for $runner next to its binary, but $manifest does not install it in ~/.local/share/sandboxd/"
done
for unit in sandboxd.service mcp-gateway.service; do
  cmp -s "$source_dir/deploy/systemd/$unit" "$home/.config/systemd/user/$unit" || fail "$unit was not installed"
done
echo "install-user-service.sh installed all $count build outputs ($(echo $runners)) and both units"
