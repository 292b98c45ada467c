"""The runner as one artifact: sandbox_runner.pyz is exactly what build_pyz.py makes of
the package's sources (the same bytes every time), it runs under `python3 -I`, and code
of every module of the package counts as the runner's (hidden from tracebacks, never
interrupted)."""

import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

from harness import PACKAGE_DIR, RUNNER, RUNNER_SOURCE_DIR, import_runner_module

BUILD_PYZ = RUNNER_SOURCE_DIR / "build_pyz.py"


def build(package_dir, out_file):
    return subprocess.run([sys.executable, "-I", str(BUILD_PYZ), str(package_dir),
                           str(out_file)], capture_output=True, text=True)


class BuildTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="runner-pyz-"))
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_build_is_deterministic_and_is_the_artifact_under_test(self):
        for name in ("a.pyz", "b.pyz"):
            done = build(PACKAGE_DIR, self.tmp / name)
            self.assertEqual(done.returncode, 0, done.stderr)
        first = (self.tmp / "a.pyz").read_bytes()
        self.assertEqual(first, (self.tmp / "b.pyz").read_bytes())
        self.assertEqual(first, RUNNER.read_bytes(),
                         f"{RUNNER} is not built from these sources: rebuild it")

    def test_archive_layout(self):
        with zipfile.ZipFile(RUNNER) as archive:
            names = archive.namelist()
            self.assertEqual(names, sorted(names))
            modules = [f"sandbox_runner/{p.name}" for p in PACKAGE_DIR.glob("*.py")]
            bytecode = [name + "c" for name in modules]
            self.assertEqual(names, sorted(["__main__.py"] + modules + bytecode))
            self.assertEqual(archive.read("__main__.py"),
                             archive.read("sandbox_runner/__main__.py"))
            for info in archive.infolist():
                self.assertEqual(info.date_time, (1980, 1, 1, 0, 0, 0))
                self.assertEqual(info.compress_type, zipfile.ZIP_STORED)
                self.assertEqual(info.external_attr >> 16, 0o100644)

    def test_a_syntax_error_fails_the_build(self):
        package = self.tmp / "sandbox_runner"
        shutil.copytree(PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
        (package / "broken.py").write_text("def f(:\n")
        done = build(package, self.tmp / "out.pyz")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("SyntaxError", done.stderr)
        self.assertEqual(sorted(p.name for p in self.tmp.iterdir()), ["sandbox_runner"])


class BytecodeTest(unittest.TestCase):
    """The archive's modules load from their bytecode, named after their sources."""

    def run_code(self, code):
        done = subprocess.run([sys.executable, "-I", "-c", code, str(RUNNER)],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout.splitlines()

    def test_the_package_loads_without_compiling(self):
        compiled, path, code_path = self.run_code(
            "import builtins, sys\ncompiled = []\nreal = builtins.compile\n"
            "builtins.compile = lambda *a, **k: compiled.append(a[1]) or real(*a, **k)\n"
            "sys.path.insert(0, sys.argv[1])\nimport sandbox_runner.executor as e\n"
            "print(compiled)\nprint(e.__file__)\nprint(e.Executor.run.__code__.co_filename)")
        self.assertEqual(compiled, "[]")
        self.assertEqual(path, f"{RUNNER}/sandbox_runner/executor.py")
        self.assertEqual(code_path, path)

    def test_stale_bytecode_is_ignored(self):
        archive_copy = Path(tempfile.mkdtemp(prefix="runner-pyz-")) / "sandbox_runner.pyz"
        self.addCleanup(shutil.rmtree, archive_copy.parent)
        with zipfile.ZipFile(RUNNER) as src, zipfile.ZipFile(archive_copy, "w") as dst:
            for info in src.infolist():
                data = src.read(info)
                if info.filename == "sandbox_runner/common.py":
                    data += b"\nFRESH = True\n"    # its .pyc no longer matches
                dst.writestr(info, data)
        done = subprocess.run([sys.executable, "-I", "-c",
                               "import sys; sys.path.insert(0, sys.argv[1]); "
                               "import sandbox_runner.common as c; print(c.FRESH)",
                               str(archive_copy)], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "True")


class RunnerCodeTest(unittest.TestCase):
    def test_every_module_of_the_sources_is_runner_code(self):
        common = import_runner_module("common")
        for path in PACKAGE_DIR.glob("*.py"):
            self.assertTrue(common.is_runner_file(str(path)), path)
        for other in ("<cell-1>", str(BUILD_PYZ), zipfile.__file__):
            self.assertFalse(common.is_runner_file(other), other)

    def test_every_module_in_the_archive_is_runner_code(self):
        code = ("import sys\nsys.path.insert(0, sys.argv[1])\n"
                "import pkgutil, sandbox_runner, sandbox_runner.common as c\n"
                "names = [m.name for m in pkgutil.iter_modules(sandbox_runner.__path__)]\n"
                "files = [sandbox_runner.__file__] + [__import__('sandbox_runner.' + n,"
                " fromlist=['_']).__file__ for n in names if n != '__main__']\n"
                "print(c.RUNNER_DIR)\n"
                "print(len(files), all(c.is_runner_file(f) for f in files))")
        done = subprocess.run([sys.executable, "-I", "-c", code, str(RUNNER)],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        runner_dir, checked = done.stdout.splitlines()
        self.assertEqual(runner_dir, f"{RUNNER}/sandbox_runner/")
        self.assertEqual(checked, f"{len(list(PACKAGE_DIR.glob('*.py'))) - 1} True")


if __name__ == "__main__":
    unittest.main()
