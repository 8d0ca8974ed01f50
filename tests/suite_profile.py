"""Where the suite's time goes: worker-seconds per test file, from the JUnit XML report pytest writes.

    make test PYTEST_ARGS="--junitxml=/tmp/suite.xml"
    python tests/suite_profile.py /tmp/suite.xml            # the files, longest first, and the total

A file's figure is the sum of its tests' durations as pytest records them (set-up and teardown of their fixtures
included), so with two workers the wall time is about half the total. A module-scoped fixture is charged to the
first test that uses it.
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ElementTree


def seconds_per_file(report: str) -> dict[str, float]:
    totals: dict[str, float] = collections.defaultdict(float)
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")
        name = next((part for part in module if part.startswith("test_")), module[-1] if module else "?")
        totals[f"{name}.py"] += float(case.get("time") or 0.0)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="the --junitxml file of a pytest run")
    parser.add_argument("--top", type=int, default=20, help="how many files to list (default 20)")
    args = parser.parse_args()
    totals = seconds_per_file(args.report)
    for name, seconds in list(totals.items())[: args.top]:
        print(f"{seconds:8.0f}  {name}")
    print(f"{sum(totals.values()):8.0f}  worker-seconds in {len(totals)} files")


if __name__ == "__main__":
    main()
