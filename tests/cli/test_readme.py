"""README.md as an entry, not a reference: at most 200 lines, and its two commands are the
ones that set up and run the product and that CI runs (.ci/run)."""
import os
import re
import unittest

README = os.environ["README"]
CI_RUN = os.path.join(os.path.dirname(README), ".ci", "run")
MAX_LINES = 200


class ReadmeTest(unittest.TestCase):
    def setUp(self):
        with open(README, encoding="utf-8") as f:
            self.text = f.read()

    def test_the_readme_stays_an_entry(self):
        lines = self.text.count("\n")
        self.assertLessEqual(lines, MAX_LINES, "README.md has %d lines: the reference belongs "
                             "in docs/ (docs/operating.md, docs/api.md, docs/security.md)" % lines)

    def test_the_two_commands_are_the_ones_that_run(self):
        block = re.search(r"^## The two commands\n.*?^```sh\n(.*?)^```", self.text, re.M | re.S)
        self.assertIsNotNone(block, "README.md has no sh block under '## The two commands'")
        commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
        self.assertEqual(commands, ["scripts/run.sh", "scripts/test.sh"])
        for command in commands:
            self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(README), command)), command)
        with open(CI_RUN, encoding="utf-8") as f:
            ci = f.read()
        self.assertRegex(ci, r"(?m)^exec bash scripts/test\.sh\s*$",
                         ".ci/run must run README.md's test command")


if __name__ == "__main__":
    unittest.main()
