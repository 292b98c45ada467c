"""The fingerprint of /workspace/out/ that each `done` frame carries (docs/runner-protocol.md,
"done"): a client that listed out/ after an execution with the same fingerprint need not
list it again (the gateway's walk of out/ is a ListFiles round trip per directory).

Every entry under out/, without following symlinks, sorted by path: its path, mode (type
and permissions), size and mtime in nanoseconds, hashed. Whatever a listing shows of a file
(type, size, mtime) changes the fingerprint. "-" when out/ is missing; None (no
fingerprint: the client lists) when out/ is not a directory, the tree is larger than
MAX_ENTRIES or deeper than MAX_DEPTH, or something cannot be read. The code may change the
runner itself, so the fingerprint is a hint about its own files, never a check.
"""

import os
import stat

MAX_ENTRIES = 2048      # entries fingerprinted; a larger out/ has no fingerprint
MAX_DEPTH = 16          # out/a/b/... nesting fingerprinted


def out_digest(workspace):
    """The fingerprint of `workspace`/out (hex), "-" or None: see the module."""
    root = os.path.join(workspace, "out")
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return "-"
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    # Here, not at the top: an idle session (or one that never makes out/) does not load
    # hashlib (2 ms, and OpenSSL's _hashlib).
    import hashlib
    digest = hashlib.blake2b(digest_size=16)
    seen = 0
    # Depth first, each directory's entries sorted by name: one order for one tree.
    stack = [(b"", root, 0)]
    try:
        while stack:
            prefix, path, depth = stack.pop()
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
            subdirs = []
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return None
                st = entry.stat(follow_symlinks=False)
                name = prefix + os.fsencode(entry.name)
                digest.update(b"%s\0%o\0%d\0%d\n" % (name, st.st_mode, st.st_size, st.st_mtime_ns))
                if stat.S_ISDIR(st.st_mode):
                    if depth + 1 >= MAX_DEPTH:
                        return None
                    subdirs.append((name + b"/", entry.path, depth + 1))
            stack.extend(reversed(subdirs))
    except (OSError, ValueError):
        return None
    return digest.hexdigest()
