#!/usr/bin/env python3
"""Measures the shape of the tree against the targets of docs/architecture.md: no source
file over 600 lines and no function over 80 lines, tests and benchmarks included.

    scripts/shape.py            the longest files and functions, and every violation
    scripts/shape.py --check    exit 1 when a target is missed (a ctest unit test runs this)

Functions are measured from their first to their last line: C++ with universal-ctags
(TEST bodies included), Python with its own ast module, JavaScript with acorn.
"""

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
SOURCE_SUFFIXES = {".cc", ".h", ".py", ".mjs", ".js", ".sh", ".proto"}


def source_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    return [p for p in out.splitlines()
            if Path(p).suffix in SOURCE_SUFFIXES and "/corpus/" not in p]


def run_tool(args):
    """The stdout of a measuring tool; a missing or failing tool ends the run with why."""
    try:
        return subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit(f"shape: {args[0]} is missing: run scripts/setup.sh")
    except subprocess.CalledProcessError as e:
        sys.exit(f"shape: {args[0]} failed ({e.returncode}): {e.stderr.strip()[:2000]}")


def cpp_functions(files):
    if not files:
        return []
    out = run_tool(["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f",
                    "-f", "-", *files])
    functions = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and "end" in tag:
            functions.append((tag["path"], tag["name"], tag["line"], tag["end"]))
    return functions


def python_functions(files):
    functions = []
    for path in files:
        tree = ast.parse((ROOT / path).read_text(), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((path, node.name, node.lineno, node.end_lineno))
    return functions


def js_functions(files):
    if not files:
        return []
    out = run_tool(["node", str(ROOT / "scripts" / "shape_js.mjs"), *files])
    return [(f["path"], f["name"], f["line"], f["end"]) for f in map(json.loads, out.splitlines())]


def measure():
    files = source_files()
    by_suffix = lambda *s: [p for p in files if Path(p).suffix in s]
    file_lines = sorted(((sum(1 for _ in open(ROOT / p, "rb")), p) for p in files), reverse=True)
    functions = (cpp_functions(by_suffix(".cc", ".h")) + python_functions(by_suffix(".py")) +
                 js_functions(by_suffix(".mjs", ".js")))
    function_lines = sorted(((end - line + 1, f"{path}:{line}", name)
                             for path, name, line, end in functions), reverse=True)
    return file_lines, function_lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--top", type=int, default=10, help="how many of each to list")
    args = parser.parse_args()
    file_lines, function_lines = measure()
    long_files = [f for f in file_lines if f[0] > MAX_FILE_LINES]
    long_functions = [f for f in function_lines if f[0] > MAX_FUNCTION_LINES]
    if not args.check:
        print(f"{len(file_lines)} source files, {len(function_lines)} functions\n")
        print("longest files:")
        for n, p in file_lines[:args.top]:
            print(f"  {n:5d}  {p}")
        print("\nlongest functions:")
        for n, where, name in function_lines[:args.top]:
            print(f"  {n:5d}  {name}  ({where})")
        print()
    for n, p in long_files:
        print(f"file over {MAX_FILE_LINES} lines: {p} ({n})")
    for n, where, name in long_functions:
        print(f"function over {MAX_FUNCTION_LINES} lines: {name} at {where} ({n})")
    if not long_files and not long_functions:
        print(f"shape: every file within {MAX_FILE_LINES} lines, "
              f"every function within {MAX_FUNCTION_LINES}")
    return 1 if args.check and (long_files or long_functions) else 0


if __name__ == "__main__":
    sys.exit(main())
