#!/usr/bin/env bash
# Builds the Python packages of the wasm tier's sessions (docs/wasm-tier.md, "Python
# packages"): requests and pip for Pyodide, pure Python, from Debian's archive.
#
#   scripts/wasm-python-packages.sh [OUT]     default OUT: deploy/wasm/python-packages
#
# OUT/dist-packages holds the packages (compiled for Pyodide's Python, whose .pyc sandboxd's
# sessions cannot write) and OUT/certs/ca-certificates.crt the wasm tier's Node's root
# certificates, the bundle Debian's requests and pip name. Sessions see both read-only, at
# /usr/lib/python3/dist-packages and /etc/ssl/certs. Run by scripts/setup.sh after the wasm
# runtime's npm ci; safe to re-run (nothing is done while OUT/.recipe matches this script
# and the runtime's lock). apt checks every package against Debian's archive keys.
#
# Runs build one at a time (a lock file in OUT that only its owner can open), in a private
# directory inside OUT, and swap each part in with one atomic exchange: a concurrent run, a
# run killed at any point, or another user writing beside OUT never leaves sessions without
# their packages or with files someone else could change. OUT must be ours and writable by
# no one else, and so must every directory on the way to it (sandboxd's rule for
# --wasm_python_packages): a symbolic link or another user's directory there is refused
# before anything is read or written, so OUT can never be made to name someone else's.
set -euo pipefail
umask 022
script="$(realpath "${BASH_SOURCE[0]}")"
repo="$(dirname "$(dirname "$script")")"
out="${1:-$repo/deploy/wasm/python-packages}"
[[ "$out" == /* ]] || out="$(pwd -P)/$out"
cd "$repo"
node=deploy/wasm/node_modules/node/bin/node
pyodide=deploy/wasm/node_modules/pyodide
log() { echo "wasm-python-packages: $*" >&2; }

# Prints OUT without "." parts, repeated or trailing slashes; fails saying why when a part of
# it that exists is a symbolic link, not a directory, or another user's than root's and
# ours, or lies in a directory others may write that is not sticky (/tmp is).
checked_path() {
  python3 -I - "$1" <<'PY'
import os, stat, sys
given = sys.argv[1]
parts = [p for p in given.split("/") if p not in ("", ".")]
def refuse(why):
    sys.exit(f"wasm-python-packages: FAILED: {given}: {why}")
if any(ord(c) < 0x20 or ord(c) == 0x7f for c in given):
    given = ascii(given)
    refuse("holds a control character (the shell would drop a trailing line break)")
if ".." in parts:
    refuse('a ".." part')
me, path = os.geteuid(), "/"
for name in parts:
    try:
        above = os.lstat(path)
        path = os.path.join(path, name)
        st = os.lstat(path)
    except FileNotFoundError:
        break                                   # this run makes the rest
    except OSError as e:
        refuse(f"{path} cannot be read: {e.strerror}")
    if stat.S_ISLNK(st.st_mode):
        refuse(f"{path} is a symbolic link (name the directory it points to)")
    if not stat.S_ISDIR(st.st_mode):
        refuse(f"{path} is not a directory")
    if st.st_uid not in (0, me):
        refuse(f"{path} belongs to another user (uid {st.st_uid})")
    if above.st_mode & 0o022 and not above.st_mode & stat.S_ISVTX:
        refuse(f"{os.path.dirname(path)} is writable by others")
print("/" + "/".join(parts))
PY
}
# OUT itself: ours, and writable by no one else.
ours() {
  [[ -d "$out" && ! -L "$out" && -O "$out" ]] && ! find "$out" -maxdepth 0 -perm /022 | grep -q . ||
    { log "FAILED: $out must be a directory of $(id -un)'s that no one else may write"; exit 1; }
}

out="$(checked_path "$out")"
[[ ! -e "$out" && ! -L "$out" ]] || ours

# requests from bookworm: its urllib3 1.26 talks through Python's sockets, which reach the
# egress relay. bookworm's pip (23.0) does not run on Pyodide's Python 3.14
# (pkgutil.ImpImporter is gone), trixie's does.
packages=(python3-requests/bookworm python3-urllib3/bookworm python3-idna/bookworm
          python3-certifi/bookworm python3-charset-normalizer/bookworm python3-chardet/bookworm
          python3-six/bookworm python3-pip/trixie)

recipe="$(cat "$script" deploy/wasm/package-lock.json | sha256sum | cut -c1-16)"
built() {
  [[ -f "$out/.recipe" && "$(cat "$out/.recipe")" == "$recipe" && -d "$out/dist-packages" &&
     -f "$out/certs/ca-certificates.crt" ]]
}
if built; then exit 0; fi
[[ -x "$node" && -f "$pyodide/pyodide.js" ]] || { log "FAILED: $node or $pyodide is missing (npm ci in deploy/wasm)"; exit 1; }

mkdir -p "$out"
out="$(checked_path "$out")"           # what mkdir made, or found made meanwhile
ours
(umask 077 && : >> "$out/.lock")
exec 9>>"$out/.lock"
if ! flock -n 9; then
  log "waiting for another build of $out"
  flock 9
fi
if built; then exit 0; fi              # a concurrent run built it meanwhile
rm -rf "$out"/.build.*                # what a killed run left
log "building $out (requests and pip for Pyodide, from Debian)"

build="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$build"' EXIT
# Into the directory running sessions already see, never a new one in its place: a
# session's Landlock rule and bubblewrap mount hold that directory itself, and would keep
# the old one, emptied, for the session's life. Each part is exchanged with the old one in
# one rename (renameat2's RENAME_EXCHANGE), so it is never missing; .recipe, which
# sandboxd's start looks for, comes last. Tried on two empty directories before anything
# is downloaded: a filesystem without the exchange fails at once, saying so.
exchange() {
  python3 -I -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, os.fsencode(sys.argv[1]), -100, os.fsencode(sys.argv[2]), 2) != 0:
    raise SystemExit(f"renameat2 {sys.argv[1]} {sys.argv[2]}: {os.strerror(ctypes.get_errno())}")
' "$1" "$2" || { log "FAILED: cannot exchange $2 in one rename (renameat2 RENAME_EXCHANGE, the error above): $3"; exit 1; }
}
mkdir "$build/a" "$build/b"
exchange "$build/a" "$build/b" "$out must be on a filesystem that has it (ext4, xfs, btrfs, tmpfs and overlayfs do); the packages there are as they were"
work="$build/work"
new="$build/new"
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/debs" "$work/root"
cat > "$work/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
EOF
apt_options=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work" -o "Dir::Cache::archives=$work/archives"
             -o Dir::State::status=/dev/null -o APT::Architecture=amd64 -o Acquire::Languages=none
             -o APT::Sandbox::User="$(id -un)" -o Debug::NoLocking=1)
apt-get "${apt_options[@]}" -qq update >/dev/null || { log "FAILED: apt-get update of bookworm and trixie"; exit 1; }
(cd "$work/debs" && apt-get "${apt_options[@]}" -qq download "${packages[@]}" >/dev/null) ||
  { log "FAILED: apt-get download ${packages[*]}"; exit 1; }
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/root"; done

mkdir -p "$new/certs"
cp -a "$work/root/usr/lib/python3/dist-packages" "$new/dist-packages"
find "$new/dist-packages" -name __pycache__ -prune -exec rm -rf {} +
if find "$new/dist-packages" -name '*.so' | grep -q .; then
  log "FAILED: compiled extensions in $new/dist-packages (Pyodide loads pure Python only)"
  exit 1
fi
"$node" -e 'process.stdout.write(require("tls").rootCertificates.join("\n") + "\n")' > "$new/certs/ca-certificates.crt"

# .pyc files for Pyodide's Python, compiled by Pyodide itself (halves an import of requests).
"$node" -e '
const [pyodide, dir] = process.argv.slice(1);
require(`${pyodide}/pyodide.js`).loadPyodide({ indexURL: `${pyodide}/` }).then((py) => {
  py.FS.mkdirTree("/packages");
  py.FS.mount(py.FS.filesystems.NODEFS, { root: dir }, "/packages");
  const ok = py.runPython("import compileall\ncompileall.compile_dir(\"/packages\", quiet=1, workers=1)");
  if (!ok) throw new Error("compileall failed");
}).catch((e) => { console.error(e); process.exit(1); });' "$(realpath "$pyodide")" "$(realpath "$new/dist-packages")" ||
  { log "FAILED: compiling $new/dist-packages with Pyodide"; exit 1; }
echo "$recipe" > "$new/.recipe"
# Readable by every session uid, writable by no one else (sandboxd refuses it otherwise).
chmod -R a+rX,go-w "$new"
if find "$new" ! -user "$(id -u)" -o -perm /022 | grep -q .; then
  log "FAILED: $new holds files of another user's or that others may write"
  exit 1
fi
# Into the directory running sessions already see (exchange(), above).
replaced=()
for part in dist-packages certs; do
  if [[ -e "$out/$part" ]]; then
    exchange "$new/$part" "$out/$part" "replaced already in $out: ${replaced[*]:-nothing}; the rest is as it was"
  else
    mv "$new/$part" "$out/$part"
  fi
  replaced+=("$part")
done
mv "$new/.recipe" "$out/.recipe"
log "built $out"
find "$out" -maxdepth 0 -perm -005 | grep -q . ||
  log "warning: sessions that run as other users cannot read $out (mode $(stat -c %a "$out")): chmod a+rx it"
