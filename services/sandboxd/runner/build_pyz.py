#!/usr/bin/env python3
"""Builds sandbox_runner.pyz, the one file sandboxd bind-mounts into every container, from
the package folder sandbox_runner/ (stdlib only):

    build_pyz.py services/sandboxd/runner/sandbox_runner OUT/sandbox_runner.pyz

The archive holds sandbox_runner/*.py and, at its root, a copy of the package's
__main__.py, so that `python3 -I -u sandbox_runner.pyz --socket PATH` runs the runner: the
interpreter puts the archive itself first on sys.path (also under -I) and imports the
package from it. Sources only, no bytecode: the container's Python compiles them in memory.

Deterministic: entries sorted, stored uncompressed, with fixed timestamps and modes, so the
same sources always give the same bytes. A syntax error fails the build.
"""

import importlib.util
import marshal
import os
import sys
import zipfile
from pathlib import Path

FIXED_TIME = (1980, 1, 1, 0, 0, 0)      # the earliest time a zip entry can hold
FILE_MODE = 0o100644                    # regular file, rw-r--r--


def sources(package_dir):
    """(name in the archive, bytes) of every .py file of the package, sorted by name."""
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    entries = [(f"{package_dir.name}/{p.relative_to(package_dir).as_posix()}", p.read_bytes())
               for p in files]
    main = dict(entries).get(f"{package_dir.name}/__main__.py")
    if main is None:
        raise SystemExit(f"build_pyz: {package_dir} has no __main__.py")
    return sorted(entries + [("__main__.py", main)])


def bytecode(name, data):
    """The checked hash-based .pyc (PEP 552) of module source `data`, compiled under the
    name zipimport would give it; deterministic for the same source and Python."""
    code = compile(data, name, "exec", dont_inherit=True)   # a SyntaxError fails the build
    flags = 0b11                                            # hash-based, checked
    return (importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") +
            importlib.util.source_hash(data) + marshal.dumps(code))


def with_bytecode(entries):
    """`entries` and a .pyc for each module of the package (not the root __main__.py,
    which runs as a script)."""
    out = list(entries)
    for name, data in entries:
        if "/" in name:
            out.append((name[:-3] + ".pyc", bytecode(name, data)))
    return sorted(out)


def write_archive(entries, out_file):
    """Write the archive next to out_file, then rename it into place (never half-written)."""
    tmp = out_file.with_name(out_file.name + ".tmp")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
            for name, data in entries:
                info = zipfile.ZipInfo(name, FIXED_TIME)
                info.create_system = 3                        # unix, so the mode counts
                info.external_attr = FILE_MODE << 16
                info.compress_type = zipfile.ZIP_STORED
                archive.writestr(info, data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out_file)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv):
    if len(argv) != 3:
        raise SystemExit(f"usage: {argv[0]} PACKAGE_DIR OUT_FILE")
    package_dir, out_file = Path(argv[1]), Path(argv[2])
    entries = with_bytecode(sources(package_dir))        # the root __main__.py is a copy
    out_file.parent.mkdir(parents=True, exist_ok=True)
    write_archive(entries, out_file)


if __name__ == "__main__":
    main(sys.argv)
