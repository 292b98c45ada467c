"""The fingerprint of out/ in each `done` frame (docs/runner-protocol.md, "done";
sandbox_runner/out_digest.py): the same for the same tree, another whenever a listing
would show something else, none where it cannot stand for the whole tree."""

import os
import tempfile
import unittest

from harness import RunnerTestCase, import_runner_module

out_digest_module = import_runner_module("out_digest")
out_digest = out_digest_module.out_digest


class OutDigestTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="out-digest-")
        self.ws = self.tmp.name
        self.out = os.path.join(self.ws, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, data, mtime_ns=None):
        path = os.path.join(self.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(data)
        if mtime_ns is not None:
            os.utime(path, ns=(mtime_ns, mtime_ns))

    def test_missing_out_is_a_dash(self):
        self.assertEqual(out_digest(self.ws), "-")

    def test_the_same_tree_has_the_same_fingerprint(self):
        os.mkdir(self.out)
        empty = out_digest(self.ws)
        self.assertEqual(len(empty), 32)
        self.write("d/a.txt", "x", mtime_ns=10**18)
        first = out_digest(self.ws)
        self.assertNotEqual(first, empty)
        self.assertEqual(out_digest(self.ws), first)

    def test_what_a_listing_shows_changes_it(self):
        self.write("d/a.txt", "x", mtime_ns=10**18)
        base = out_digest(self.ws)
        self.write("d/a.txt", "y", mtime_ns=10**18 + 1)   # same size, another mtime
        self.assertNotEqual(out_digest(self.ws), base)
        mtime = out_digest(self.ws)
        self.write("d/a.txt", "yy", mtime_ns=10**18 + 1)  # another size, same mtime
        self.assertNotEqual(out_digest(self.ws), mtime)
        size = out_digest(self.ws)
        self.write("d/e/b.txt", "", mtime_ns=1)           # a new file deeper down
        deeper = out_digest(self.ws)
        self.assertNotEqual(deeper, size)
        os.remove(os.path.join(self.out, "d/e/b.txt"))
        self.assertNotEqual(out_digest(self.ws), deeper)
        os.symlink("/etc/passwd", os.path.join(self.out, "link"))
        self.assertNotIn(out_digest(self.ws), (deeper, size))

    def test_symlinks_are_not_followed(self):
        os.mkdir(self.out)
        elsewhere = os.path.join(self.ws, "elsewhere")
        os.mkdir(elsewhere)
        os.symlink(elsewhere, os.path.join(self.out, "link"))
        before = out_digest(self.ws)
        with open(os.path.join(elsewhere, "f"), "w") as f:
            f.write("x")
        self.assertEqual(out_digest(self.ws), before)

    def test_out_that_is_not_a_directory_has_none(self):
        with open(self.out, "w") as f:
            f.write("x")
        self.assertIsNone(out_digest(self.ws))
        os.remove(self.out)
        os.symlink(self.ws, self.out)
        self.assertIsNone(out_digest(self.ws))

    def test_a_tree_past_the_bounds_has_none(self):
        os.mkdir(self.out)
        for i in range(out_digest_module.MAX_ENTRIES):
            open(os.path.join(self.out, f"f{i}"), "w").close()
        self.assertIsNotNone(out_digest(self.ws))
        open(os.path.join(self.out, "one-more"), "w").close()
        self.assertIsNone(out_digest(self.ws))

    def test_a_tree_past_the_depth_has_none(self):
        deep = os.path.join(self.out, *["d"] * (out_digest_module.MAX_DEPTH - 1))
        os.makedirs(deep)
        self.assertIsNotNone(out_digest(self.ws))
        os.mkdir(os.path.join(deep, "d"))
        self.assertIsNone(out_digest(self.ws))


class DoneFrameTest(RunnerTestCase):
    def test_done_carries_the_fingerprint_of_out(self):
        res = self.client.exec("x = 1")
        self.assertOk(res)
        self.assertEqual(res.done["out_digest"], "-")
        res = self.client.exec(f"import os\nos.mkdir({self.workspace!r} + '/out')\n"
                               f"open({self.workspace!r} + '/out/a.txt', 'w').write('x')")
        self.assertOk(res)
        written = res.done["out_digest"]
        self.assertEqual(written, out_digest(self.workspace))
        res = self.client.exec("y = 2")
        self.assertEqual(res.done["out_digest"], written)


if __name__ == "__main__":
    unittest.main()
