"""scripts/check_commits.py and the commit-msg hook, against throwaway repositories.

Each test makes its own git repository in a temporary directory (no global or system git
configuration) and runs the script as CI and the hook do: a bad message must fail, naming
what is wrong; merge commits pass; a clone without the baseline fails and says why.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check_commits.py")
HOOK = os.path.join(ROOT, ".githooks", "commit-msg")
ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
           GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
           GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
GOOD = "base: a subject that names its component\n\nThe body says why.\n"


def sh(cwd, *args, check=True):
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError("%s failed: %s" % (args, result.stderr))
    return result


class Repo:
    def __init__(self, path):
        self.path = path
        sh(path, "git", "init", "-q", "-b", "main")

    def commit(self, message, name=None):
        name = name or "f%d" % len(os.listdir(self.path))
        with open(os.path.join(self.path, name), "w") as f:
            f.write(message)
        sh(self.path, "git", "add", name)
        sh(self.path, "git", "commit", "-q", "--no-verify", "-m", message)
        return sh(self.path, "git", "rev-parse", "HEAD").stdout.strip()

    def check(self, *args):
        return sh(self.path, sys.executable, SCRIPT, *args, check=False)


class CheckCommitsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def message(self, text):
        path = os.path.join(self.tmp, "msg")
        with open(path, "w") as f:
            f.write(text)
        return sh(self.tmp, sys.executable, SCRIPT, "--message", path, check=False)

    def test_a_good_message_passes(self):
        result = self.message(GOOD + "# a comment line git drops\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.message("sandboxd, base: two components\n\nWhy.\n").returncode, 0)

    def test_each_bad_message_fails_saying_why(self):
        for text, said in (
                ("base: " + "x" * 70 + "\n\nWhy.\n", "subject is 76 characters, at most 72"),
                ("a subject without its component\n\nWhy.\n", "does not start with the component"),
                ("base: no blank line\nWhy.\n", "no blank line after the subject"),
                ("base: no body\n", "no body"),
                ("base: only comments below\n\n# Why.\n", "no body")):
            with self.subTest(text=text):
                result = self.message(text)
                self.assertEqual(result.returncode, 1)
                self.assertIn(said, result.stderr)

    def test_the_range_after_the_baseline_fails_on_a_bad_commit_not_on_merges(self):
        repo = Repo(self.tmp)
        base = repo.commit("history before the habit")
        repo.commit(GOOD)
        sh(self.tmp, "git", "checkout", "-q", "-b", "side")
        repo.commit(GOOD, name="side")
        sh(self.tmp, "git", "checkout", "-q", "main")
        repo.commit(GOOD, name="main")
        sh(self.tmp, "git", "merge", "-q", "--no-ff", "--no-edit", "side")  # "Merge branch 'side'"
        self.assertEqual(repo.check("--baseline", base).returncode, 0, repo.check("--baseline", base).stderr)
        bad = repo.commit("fixed the thing")
        result = repo.check("--baseline", base)
        self.assertEqual(result.returncode, 1)
        self.assertIn(bad[:12], result.stderr)
        self.assertIn("does not start with the component", result.stderr)
        self.assertNotIn("Merge", result.stderr)

    def test_a_shallow_clone_without_the_baseline_fails_saying_so(self):
        os.mkdir(os.path.join(self.tmp, "origin"))
        origin = Repo(os.path.join(self.tmp, "origin"))
        base = origin.commit("history before the habit")
        origin.commit(GOOD)
        sh(self.tmp, "git", "clone", "-q", "--depth", "1", "file://" + origin.path, "clone")
        result = sh(os.path.join(self.tmp, "clone"), sys.executable, SCRIPT, "--baseline", base, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("shallow clone without the baseline commit", result.stderr)

    def test_outside_a_work_tree_it_fails_saying_so(self):
        result = sh(self.tmp, sys.executable, SCRIPT, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("not inside a git work tree", result.stderr)

    def test_the_hook_refuses_a_bad_commit_and_lets_merges_through(self):
        repo = Repo(self.tmp)
        os.makedirs(os.path.join(self.tmp, "scripts"))
        shutil.copy(SCRIPT, os.path.join(self.tmp, "scripts"))
        shutil.copytree(os.path.dirname(HOOK), os.path.join(self.tmp, ".githooks"))
        sh(self.tmp, "git", "config", "core.hooksPath", ".githooks")
        repo.commit(GOOD)
        with open(os.path.join(self.tmp, "x"), "w") as f:
            f.write("x")
        sh(self.tmp, "git", "add", "x")
        refused = sh(self.tmp, "git", "commit", "-q", "-m", "fixed the thing", check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("does not start with the component", refused.stderr)
        self.assertEqual(sh(self.tmp, "git", "commit", "-q", "-m", GOOD, check=False).returncode, 0)
        sh(self.tmp, "git", "checkout", "-q", "-b", "side", "HEAD~1")
        repo.commit(GOOD, name="side")
        merged = sh(self.tmp, "git", "merge", "-q", "--no-ff", "--no-edit", "main", check=False)
        self.assertEqual(merged.returncode, 0, merged.stderr)


if __name__ == "__main__":
    unittest.main()
