"""Where the suite's time goes: worker-seconds per test file, from the JUnit XML report pytest writes.

    make test PYTEST_ARGS="--junitxml=/tmp/suite.xml"
    python tests/suite_profile.py /tmp/suite.xml            # the files, longest first, and the total

A file's figure is the sum of its tests' durations as pytest records them (set-up and teardown of their fixtures
included), so with two workers the wall time is about half the total. A module-scoped fixture is charged to the
first test that uses it. With `--cpu` the figures are CPU seconds instead (the test's process and the commands and
interpreters it waited for, tests/conftest.py): on two cores the suite takes about half their sum, and unlike wall
times they do not grow with the load of the other workers.
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ElementTree


def case_seconds(case: ElementTree.Element, cpu: bool) -> float:
    if not cpu:
        return float(case.get("time") or 0.0)
    recorded = case.find("properties/property[@name='cpu_seconds']")
    return float(recorded.get("value")) if recorded is not None else 0.0


def seconds_per_file(report: str, cpu: bool = False) -> dict[str, float]:
    totals: dict[str, float] = collections.defaultdict(float)
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")
        name = next((part for part in module if part.startswith("test_")), module[-1] if module else "?")
        totals[f"{name}.py"] += case_seconds(case, cpu)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def seconds_per_test(report: str, cpu: bool = False) -> dict[str, float]:
    totals = {f"{case.get('classname')}::{case.get('name')}": case_seconds(case, cpu)
              for case in ElementTree.parse(report).iter("testcase")}
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="the --junitxml file of a pytest run")
    parser.add_argument("--top", type=int, default=20, help="how many files to list (default 20)")
    parser.add_argument("--cpu", action="store_true", help="CPU seconds instead of worker (wall) seconds")
    parser.add_argument("--tests", action="store_true", help="list tests, not files")
    args = parser.parse_args()
    totals = seconds_per_test(args.report, args.cpu) if args.tests else seconds_per_file(args.report, args.cpu)
    for name, seconds in list(totals.items())[: args.top]:
        print(f"{seconds:8.1f}  {name}")
    what = "CPU seconds" if args.cpu else "worker-seconds"
    print(f"{sum(totals.values()):8.0f}  {what} in {len(totals)} {'tests' if args.tests else 'files'}")


if __name__ == "__main__":
    main()
