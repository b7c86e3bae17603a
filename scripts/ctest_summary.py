#!/usr/bin/env python3
"""Summarises ctest JUnit reports (ctest --output-junit FILE).

  ctest_summary.py NAME REPORT.xml        one line: 'NAME: N passed, N failed, N skipped';
                                          exit 1 if any test failed
  ctest_summary.py --failures REPORT.xml  each failed test with the seed lines it printed

The tests print the seed they ran with ('seed 123 (STREAMLEARN_..._SEED)'); a failure is
reported with those lines so that it can be run again with the same seed.

gtest_discover_tests marks a test skipped when its output holds '[  SKIPPED ]', whatever its
exit code; gtest prints that for every test of a suite whose SetUpTestSuite failed. A skipped
test whose output holds a failure is counted as failed here, so that a broken suite set-up is
never reported as skipped.
"""
import re
import sys
import xml.etree.ElementTree as ET

SEED = re.compile(r"seed", re.IGNORECASE)


def cases(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"ctest_summary: cannot read {path}: {e}", file=sys.stderr)
        return []
    return root.iter("testcase")


FAILED_OUTPUT = re.compile(r"FAILED TEST SUITE|^\S+:\d+: Failure$", re.MULTILINE)


def status(case):
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
        if FAILED_OUTPUT.search(case.findtext("system-out") or ""):
            return "failed"
        return "skipped"
    return "passed"


def main(argv):
    if len(argv) == 3 and argv[1] == "--failures":
        for case in cases(argv[2]):
            if status(case) != "failed":
                continue
            out = case.findtext("system-out") or ""
            seeds = sorted({line.strip() for line in out.splitlines() if SEED.search(line)})
            print(f"  FAILED {case.get('name')}"
                  + (f"  [{'; '.join(seeds)}]" if seeds else ""))
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in cases(argv[2]):
        counts[status(case)] += 1
    print(f"{argv[1]}: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
