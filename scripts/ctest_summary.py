#!/usr/bin/env python3
"""Summarises ctest JUnit reports (ctest --output-junit FILE).

  ctest_summary.py NAME REPORT.xml        one line: 'NAME: N passed, N failed, N skipped'
  ctest_summary.py --failures REPORT.xml  each failed test with the seed lines it printed

The tests print the seed they ran with ('seed 123 (STREAMLEARN_..._SEED)'); a failure is
reported with those lines so that it can be run again with the same seed.
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


def status(case):
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
