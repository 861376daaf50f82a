"""The tests a CI run did not run: read the junit XML of each pytest run CI made and print
every test that was skipped in every run that saw it, grouped by reason.

    .venv/bin/python scripts/ci_skips.py REPORT.xml [REPORT.xml ...]

A test skipped by one run and run by another (the llama.cpp tests: skipped by make test,
run by make test-servers) is not a skip of CI's. Exit 0 whatever it finds: it reports, the
runs themselves decide CI's status; a report that cannot be read is one line, exit 2.
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def outcomes(report: Path) -> dict[str, str | None]:
    """Each test's id in REPORT -> its skip reason, or None where it ran."""
    seen: dict[str, str | None] = {}
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as error:
        raise ValueError(f"{report}: not a junit report it can read ({error})") from None
    for case in root.iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        skipped = case.find("skipped")
        seen[test] = None if skipped is None else (skipped.get("message") or "no reason given")
    return seen


def ci_skips(reports: list[Path]) -> dict[str, list[str]]:
    """reason -> the tests no run ran."""
    reason_of: dict[str, str] = {}
    ran: set[str] = set()
    for report in reports:
        for test, reason in outcomes(report).items():
            if reason is None:
                ran.add(test)
            else:
                reason_of.setdefault(test, reason)
    by_reason: dict[str, list[str]] = defaultdict(list)
    for test, reason in sorted(reason_of.items()):
        if test not in ran:
            by_reason[reason].append(test)
    return dict(by_reason)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: ci_skips.py REPORT.xml [REPORT.xml ...]", file=sys.stderr)
        return 2
    reports = [Path(a) for a in argv]
    try:
        skips = ci_skips(reports)
    except ValueError as error:
        print(f"ci_skips.py: {error}", file=sys.stderr)
        return 2
    total = sum(len(tests) for tests in skips.values())
    print(f"tests CI did not run: {total}" + ("" if total else " (none skipped)"))
    for reason, tests in sorted(skips.items(), key=lambda item: (-len(item[1]), item[0])):
        print(f"  {len(tests):3d}  {reason}")
        for test in tests:
            print(f"         {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
