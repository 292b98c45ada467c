#!/usr/bin/env python3
"""Fails when ctest counted a test as skipped that did not opt out.

CMake's GoogleTest module makes ctest treat any test printing "[  SKIPPED ]" as skipped,
and ctest only adds to that pattern, never replaces it. gtest prints it for GTEST_SKIP and
for every test of a suite whose SetUpTestSuite failed, so without this check a broken
set-up would pass CI as "not run". A test may only skip when it printed the opt-out line
of tests/common/opt_out.h.

    check_skips.py build/ctest-junit.xml      (ctest --output-junit)
"""
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
bad = []
for case in root.iter("testcase"):
    if case.find("skipped") is None:
        continue
    if "[ OPTED-OUT ]" not in (case.findtext("system-out") or ""):
        bad.append(case.get("name"))
if bad:
    print("FAILED: these tests were skipped without an opt-out (see their output):", file=sys.stderr)
    for name in bad:
        print("  " + name, file=sys.stderr)
    sys.exit(1)
