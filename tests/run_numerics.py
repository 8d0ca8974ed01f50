"""`make test-numerics`: the numerics tests again, on two threads and on older CPUs' kernels.

The suite runs each test on one thread (`make test`'s two workers) and on this CPU's own kernels; a bound that holds
only there would fail for a user with more threads or another CPU. The tests marked `numerics` (parity with the
original implementations, fast paths against the reference, batch invariance, bfloat16 and int8 deviations) run here
once per level, each in a fresh interpreter on two threads: this CPU's own kernels, then each older x86 level torch
can be capped to (`tests/cpu_levels.py`: AVX2 on an AVX-512 machine, and a CPU without AVX2). Every comparison
through `tolerances.assert_close` is recorded, and the closest calls are printed: how much room each bound has left.

    python tests/run_numerics.py [pytest options]           # `make test-numerics`: every level
    python tests/run_numerics.py --older [pytest options]   # the older levels only (`make test`)

`--older` leaves this CPU's own level out: the suite runs every test on this CPU's kernels already, so what a user's
CPU takes that this one does not is the older levels (AVX2 and no AVX2 on an AVX-512 machine, no AVX2 on an AVX2 one;
this CPU's own where torch knows none older, as on ARM). Each level costs a pytest run of its own (50-70 s on the
2-core test machine).

The tests marked `own_kernels` (ONNX Runtime's graphs against torch) run on this CPU's level only: the caps below
reach torch's libraries, not the runtime, so on an older level they would compare the same runtime numbers with a
torch whose older kernels the other numerics tests check already, at the cost of exporting every graph again (86 of
the nearest level's 187 CPU-seconds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpu_levels import BELOW_HERE, HERE, LEVELS

TESTS = Path(__file__).resolve().parent
THREADS = "2"
CLOSEST = 5


def run_level(name: str, caps: dict[str, str], margins: Path, pytest_args: list[str]) -> int:
    env = {**os.environ, **caps, "OMP_NUM_THREADS": THREADS, "MKL_NUM_THREADS": THREADS,
           "ELMO_TEST_MARGINS": str(margins)}
    env.pop("PYTEST_XDIST_WORKER", None)
    start = time.monotonic()
    print(f"numerics tests on {THREADS} threads, CPU kernels: {name}", flush=True)
    marks = "numerics and not own_kernels" if caps else "numerics"  # a capped level: the runtimes are not capped
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", marks, "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-p", "no:randomly", *pytest_args], cwd=TESTS.parent, env=env)
    print(f"  {name}: exit {done.returncode} in {time.monotonic() - start:.0f} s", flush=True)
    return done.returncode


def closest_calls(margins: dict[str, Path]) -> list[dict]:
    """The comparisons with the least room left, over every level."""
    entries = []
    for level, path in margins.items():
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        entries += [{**json.loads(line), "level": level} for line in lines]
    for entry in entries:
        entry["ratio"] = entry["difference"] / entry["limit"] if entry["limit"] else 0.0
    return sorted(entries, key=lambda entry: entry["ratio"], reverse=True)[:CLOSEST]


def main(pytest_args: list[str]) -> int:
    levels = {f"{HERE} (this CPU's)": {}, **{level: LEVELS[level] for level in BELOW_HERE}}
    if "--older" in pytest_args:
        pytest_args = [arg for arg in pytest_args if arg != "--older"]
        levels = dict(list(levels.items())[1:]) or levels  # none older: this CPU's own
    status = 0
    with tempfile.TemporaryDirectory() as folder:
        margins = {name: Path(folder) / f"margins-{i}.jsonl" for i, name in enumerate(levels)}
        for name, caps in levels.items():
            status = run_level(name, caps, margins[name], pytest_args) or status
        closest = closest_calls(margins)
    if closest:
        print("closest calls (difference / bound):")
        for entry in closest:
            what = f" [{entry['what']}]" if entry["what"] else ""
            print(f"  {entry['ratio']:.2f}  {entry['bound']}: {entry['difference']:.3g} / {entry['limit']:.3g}  "
                  f"{entry['level']}  {entry['test']}{what}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
