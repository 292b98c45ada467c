"""The command line of sandboxd and mcp-gateway as people use it, and the flag tables of
docs/operating.md checked against it.

Runs the built binaries (SANDBOXD_BIN, GATEWAY_BIN); nothing is started: every command
here exits before serving. OPERATING_DOC (docs/operating.md) holds one flag table per
program: the one under "### mcp-gateway flags" and the one under "### sandboxd flags".
Every flag --help lists must have a row there with the same default, and every row must
name a flag, so a flag added, renamed or given another default cannot leave the docs
behind. The commands its sh blocks show (`sandboxd ...`, `mcp-gateway ...`) may only use
flags the program has.
"""
import os
import re
import shlex
import subprocess
import unittest

SANDBOXD = os.environ["SANDBOXD_BIN"]
GATEWAY = os.environ["GATEWAY_BIN"]
OPERATING_DOC = os.environ["OPERATING_DOC"]

# One flag known to each group of each program's --help.
GROUPS = {
    SANDBOXD: {
        "Listening and auth": "socket",
        "Sessions and limits": "pool_size",
        "Isolation and images": "image",
        "Observability": "metrics_listen",
        "TLS and several machines": "tls_cert_file",
    },
    GATEWAY: {
        "Listening and auth": "token_file",
        "Sessions and limits": "max_mcp_sessions",
        "Runs and sandboxes": "max_code_bytes",
        "Upstreams": "config",
        "Approvals": "approval_default",
        "Observability": "audit_log",
        "TLS and several machines": "sandboxd_tls_ca_file",
    },
}
DOC_SECTION = {SANDBOXD: "sandboxd flags", GATEWAY: "mcp-gateway flags"}


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def help_flags(text):
    """{name: default} of a --help text ("  --name=default" lines)."""
    return dict(re.findall(r"^  --(\w+)=(.*)\n      ", text, re.MULTILINE))


def doc_rows(section):
    """{name: documented default} of the flag table under the heading <section> of
    docs/operating.md (up to the next heading)."""
    with open(OPERATING_DOC, encoding="utf-8") as f:
        text = f.read()
    found = re.search(r"^#+ %s\n(.*?)(?=^#|\Z)" % re.escape(section), text, re.M | re.S)
    if not found:
        raise AssertionError("no heading '%s' in %s" % (section, OPERATING_DOC))
    body = found.group(1)
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not line.startswith("| ") or "`--" not in cells[0] or len(cells) < 3:
            continue
        names = re.findall(r"`--(\w+)`", cells[0])
        defaults = re.split(r", | / ", cells[1]) if len(names) > 1 else [cells[1]]
        if len(defaults) != len(names):
            defaults = [cells[1]] * len(names)
        for name, default in zip(names, defaults):
            rows[name] = default
    return rows


def doc_commands(path):
    """[(program, [--flags])] of every sandboxd or mcp-gateway command in the sh blocks of
    `path` (continued lines joined, comments dropped, VAR=value prefixes skipped)."""
    with open(path, encoding="utf-8") as f:
        blocks = re.findall(r"^```sh\n(.*?)^```", f.read(), re.M | re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|\|\||[;&|]", line.split(" # ")[0]):
                words = [w for w in shlex.split(part, comments=True) if not re.match(r"^\w+=", w)]
                if words and os.path.basename(words[0]) in ("sandboxd", "mcp-gateway"):
                    flags = [w[2:].split("=")[0] for w in words[1:] if w.startswith("--")]
                    commands.append((os.path.basename(words[0]), flags))
    return commands


SIZE = re.compile(r"^(\d[\d,]*)\s*(KiB|MiB|GiB)?$")
DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:h|m|s|ms|us|ns))+$")
UNITS = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def seconds(text):
    return sum(float(n) * UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|ns|m|s)", text))


def literal(text):
    """The value a documented default states, or None when it describes one in words."""
    if text in ("off", "on"):
        return text
    if SIZE.match(text) or DURATION.match(text) or text == "0":
        return text
    return None


def same_default(flag_default, doc):
    """Whether the documented default `doc` says `flag_default` (as --help shows it)."""
    doc = re.sub(r"\s*\(.*\)$", "", doc.replace("`", "")).strip()
    if flag_default == '""':  # computed at start, or none: the doc says which, in words
        return literal(doc) in (None, "off")
    if flag_default in ("false", "true"):
        return doc == {"false": "off", "true": "on"}[flag_default]
    if flag_default.isdigit():
        m = SIZE.match(doc)
        if not m:
            return False
        scale = {None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]
        return int(m.group(1).replace(",", "")) * scale == int(flag_default)
    if DURATION.match(flag_default) or flag_default == "0":
        return bool(DURATION.match(doc) or doc == "0") and seconds(doc) == seconds(flag_default)
    return doc == flag_default


class HelpTest(unittest.TestCase):
    def test_help_lists_each_group_and_no_abseil_flag(self):
        for binary, groups in GROUPS.items():
            for arg in ("--help", "-h"):
                with self.subTest(binary=binary, arg=arg):
                    result = run(binary, arg)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertEqual(result.stderr, "")  # every flag in a group
                    for group, flag in groups.items():
                        self.assertRegex(result.stdout, r"\n%s:\n(  .*\n)*  --%s=" % (group, flag))
                    self.assertNotIn("Not in a group", result.stdout)
                    for abseil in ("flagfile", "fromenv", "tryfromenv", "undefok"):
                        self.assertNotIn("--%s=" % abseil, result.stdout)
                    self.assertIn("--log_level=info\n", result.stdout)

    def test_sandboxd_says_it_runs_python_and_javascript(self):
        result = run(SANDBOXD, "--help")
        self.assertTrue(result.stdout.startswith(
            "sandboxd: Python and JavaScript sessions in hardened Podman containers"))

    def test_help_word_filters(self):
        result = run(SANDBOXD, "--help=tls_key")
        self.assertEqual(result.returncode, 0)
        self.assertEqual(set(help_flags(result.stdout)), {"tls_key_file", "tls_cert_file", "listen_tcp"})
        result = run(GATEWAY, "--help=approval_timeout")
        shown = help_flags(result.stdout)
        self.assertIn("approval_timeout", shown)
        self.assertLess(len(shown), 4)  # and those whose text names it
        for entry in result.stdout.split("\n\nApprovals:\n")[1].split("\n  --"):
            self.assertIn("approval_timeout", entry.replace("\n      ", " "))
        self.assertIn("\nApprovals:\n", result.stdout)
        self.assertNotIn("\nUpstreams:\n", result.stdout)

    def test_abseil_flags_keep_working(self):
        result = run(SANDBOXD, "--helpfull")
        self.assertIn("--flagfile", result.stdout)
        result = run(SANDBOXD, "--undefok=gone", "--gone=1", "--help")
        self.assertEqual(result.returncode, 0)


class VersionTest(unittest.TestCase):
    def test_version_says_version_revision_and_build_type(self):
        for binary, name in ((SANDBOXD, "sandboxd"), (GATEWAY, "mcp-gateway")):
            with self.subTest(binary=binary):
                result = run(binary, "--version")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertRegex(result.stdout,
                                 r"^%s \d+\.\d+\.\d+ \(git ([0-9a-f]{4,}(-dirty)?|unknown), \w+ build\)\n$" % name)
                self.assertNotIn("NDEBUG", result.stdout)

    def test_the_revision_is_the_one_the_binary_was_built_from(self):
        # The build stamps the revision each time it runs, not when it was configured: a
        # binary rebuilt after a commit names that commit.
        root = os.path.dirname(os.path.dirname(os.path.abspath(OPERATING_DOC)))
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True)
        want = head.stdout.strip() if head.returncode == 0 else "unknown"
        for binary in (SANDBOXD, GATEWAY):
            with self.subTest(binary=binary):
                said = re.search(r"\(git ([^,]*?)(-dirty)?,", run(binary, "--version").stdout)
                self.assertIsNotNone(said)
                self.assertEqual(said.group(1), want, "built from another revision than %s's HEAD" % root)


class BadFlagTest(unittest.TestCase):
    def test_a_typo_exits_2_with_the_closest_flag(self):
        for binary, typo, meant in ((SANDBOXD, "--pool-size=3", "pool_size"),
                                    (GATEWAY, "--max_mcp_sesions=3", "max_mcp_sessions")):
            with self.subTest(binary=binary):
                result = run(binary, typo)
                self.assertEqual(result.returncode, 2)
                name = typo[2:].split("=")[0]
                self.assertIn("unknown flag --%s; did you mean --%s?" % (name, meant), result.stderr)

    def test_a_bad_value_or_a_stray_argument_exits_2(self):
        for args, said in ((["--pool_size=many"], "bad value for --pool_size"),
                           (["pool_size=3"], "unexpected argument 'pool_size=3'")):
            result = run(SANDBOXD, *args)
            self.assertEqual(result.returncode, 2)
            self.assertIn(said, result.stderr)

    def test_an_unknown_log_level_is_refused_not_silence(self):
        # spdlog reads a name it does not know as `off`: the start's own refusal would go unsaid.
        for binary, more in ((SANDBOXD, ["--socket=/tmp/x\x1b"]), (GATEWAY, [])):
            with self.subTest(binary=binary):
                result = run(binary, "--log_level=INFO", *more)
                self.assertEqual(result.returncode, 2)
                self.assertIn("--log_level INFO is none of trace, debug, info, warn, error", result.stderr)

    def test_a_stream_buffer_smaller_than_a_runs_output_twice_is_refused(self):
        result = run(SANDBOXD, "--max_output_bytes=1048576", "--max_display_bytes=0",
                     "--max_stream_buffer_bytes=65536")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--max_stream_buffer_bytes must be at least twice --max_output_bytes plus "
                      "--max_display_bytes (2097152 with these)", result.stderr)
        # 2 * 2^63 is 0 in 64 bits: the least value must not wrap around.
        result = run(SANDBOXD, "--max_output_bytes=9223372036854775808", "--max_display_bytes=0",
                     "--max_stream_buffer_bytes=1")
        self.assertEqual(result.returncode, 2)
        self.assertIn("(18446744073709551616 with these)", result.stderr)


class OperatingDocTest(unittest.TestCase):
    def test_doc_tables_list_every_flag_with_its_default(self):
        for binary, section in DOC_SECTION.items():
            flags = help_flags(run(binary, "--help").stdout)
            rows = doc_rows(section)
            with self.subTest(binary=binary):
                self.assertGreater(len(flags), 10)
                self.assertEqual(sorted(set(flags) - set(rows)), [],
                                 "flags missing from docs/operating.md's table under %s" % section)
                self.assertEqual(sorted(set(rows) - set(flags)), [],
                                 "docs/operating.md rows under %s that name no flag" % section)
                wrong = ["--%s: --help %s, docs %r" % (name, flags[name], rows[name])
                         for name in sorted(flags) if not same_default(flags[name], rows[name])]
                self.assertEqual(wrong, [], "docs/operating.md defaults that differ from --help")

    def test_doc_commands_use_only_flags_the_programs_have(self):
        known = {"sandboxd": help_flags(run(SANDBOXD, "--help").stdout),
                 "mcp-gateway": help_flags(run(GATEWAY, "--help").stdout)}
        commands = doc_commands(OPERATING_DOC)
        self.assertGreater(len(commands), 5)
        unknown = ["%s --%s" % (program, flag) for program, flags in commands
                   for flag in flags if flag not in known[program]]
        self.assertEqual(unknown, [], "docs/operating.md commands with flags the program lacks")


if __name__ == "__main__":
    unittest.main()
