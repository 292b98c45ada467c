#!/usr/bin/env python3
"""Checks commit messages against the project's habit: a subject of at most 72 characters
that names the component (`sandboxd: ...`, `mcp-gateway, base: ...`), a blank line, then
a body (why, and which test fails without the change). Merge commits are exempt.

  scripts/check_commits.py                  every non-merge commit after BASELINE up to HEAD
  scripts/check_commits.py --baseline REV   the same after REV
  scripts/check_commits.py --message FILE   one message (the commit-msg hook, .githooks/)

BASELINE is main's HEAD when the check was introduced; older commits predate the habit.
A clone that lacks it (a shallow clone, or history rewritten) cannot be checked and fails
saying so: the range would otherwise be empty or unbounded. The test suite runs the range
check (ctest commit_messages), so CI (.ci/run) enforces it on new commits.
"""
import argparse
import re
import subprocess
import sys

BASELINE = "1595bed1b860f70b640e797d99ae0db558718631"
MAX_SUBJECT = 72
# "component: text" or "a, b: text"; a component is a path-like word (runner_js, base/,
# mcp-gateway, docs/gateway.md, .ci).
SUBJECT = re.compile(r"^[\w.][\w./+-]*(, [\w.][\w./+-]*)*: \S")


def message_problems(message):
    """What is wrong with one commit message (comment lines already removed)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    problems = []
    if len(subject) > MAX_SUBJECT:
        problems.append("subject is %d characters, at most %d" % (len(subject), MAX_SUBJECT))
    if not SUBJECT.match(subject):
        problems.append("subject does not start with the component it changes ('sandboxd: ...')")
    if len(lines) < 2 or lines[1].strip():
        problems.append("no blank line after the subject")
    if not any(line.strip() for line in lines[2:]):
        problems.append("no body (why, and which test fails without the change)")
    return problems


def strip_comments(text):
    """The message as git keeps it with the default cleanup: no comment lines, nothing
    after the scissors line of `commit --verbose`."""
    kept = []
    for line in text.split("\n"):
        if line.startswith("# ------------------------ >8 ------------------------"):
            break
        if not line.startswith("#"):
            kept.append(line)
    return "\n".join(kept).strip("\n") + "\n"


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True)


def check_range(baseline):
    """(whether the range could not be listed, the problems found)."""
    inside = git("rev-parse", "--is-inside-work-tree")
    if inside.stdout.strip() != "true":
        said = inside.stderr.strip().split("\n")[0]  # e.g. git's "dubious ownership"
        return True, ["not inside a git work tree%s: the commits after %s cannot be checked"
                      % (" (git: %s)" % said if said else "", baseline)]
    if git("cat-file", "-e", baseline + "^{commit}").returncode != 0:
        if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            return True, ["this is a shallow clone without the baseline commit %s, so the "
                          "commits after it cannot be listed; fetch the history "
                          "(git fetch --unshallow)" % baseline]
        return True, ["the baseline commit %s is not in this repository, so the commits "
                      "after it cannot be listed" % baseline]
    if git("merge-base", "--is-ancestor", baseline, "HEAD").returncode != 0:
        return True, ["HEAD does not descend from the baseline commit %s" % baseline]
    listed = git("rev-list", "--no-merges", "%s..HEAD" % baseline)
    if listed.returncode != 0:
        return True, ["git rev-list failed: %s" % listed.stderr.strip()]
    problems = []
    for commit in listed.stdout.split():
        message = git("log", "-1", "--format=%B", commit).stdout
        for problem in message_problems(message):  # as stored: git already cleaned it up
            problems.append("%s %r: %s" % (commit[:12], message.split("\n")[0][:60], problem))
    return False, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--message", help="check the commit message in this file")
    parser.add_argument("--baseline", default=BASELINE, help="check the commits after this one")
    args = parser.parse_args()
    setup_error = False
    if args.message:
        with open(args.message, encoding="utf-8") as f:
            problems = message_problems(strip_comments(f.read()))
    else:
        setup_error, problems = check_range(args.baseline)
    for problem in problems:
        print("check_commits: %s" % problem, file=sys.stderr)
    if problems and not setup_error:
        print("check_commits: the habit: a subject of at most 72 characters naming the "
              "component, a blank line, then the body", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
