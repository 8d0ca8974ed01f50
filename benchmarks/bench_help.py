"""How long each installed command takes to answer `--help`, against `python -c "import torch"`, interleaved.

    python benchmarks/bench_help.py --rounds 5

Every round runs `import torch` and each command once, in a shuffled order, as fresh processes; the table gives the
medians (and min-max) and each command's median as a multiple of torch's. The commands are the console scripts next
to this Python (`pip install -e .` puts them there).
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = ("elmo-embed", "elmo-analyze", "elmo-convert", "elmo-app", "elmo-pretrain",
            "elmo-finetune-classification", "elmo-finetune-ner", "elmo-demo")
TORCH = "import torch"


def _seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(rounds: int, seed: int = 0) -> dict[str, list[float]]:
    bin_dir = Path(sys.executable).parent
    runs = {TORCH: [sys.executable, "-c", "import torch"]}
    runs.update({name: [str(bin_dir / name), "--help"] for name in COMMANDS})
    missing = [name for name in COMMANDS if not (bin_dir / name).exists()]
    if missing:
        raise SystemExit(f"not installed next to {sys.executable}: {', '.join(missing)} (pip install -e .)")
    order, times = list(runs), {name: [] for name in runs}
    rng = random.Random(seed)
    _seconds(runs[TORCH])  # a first start fills the file cache; not counted
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            times[name].append(_seconds(runs[name]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times = measure(args.rounds)
    torch_median = statistics.median(times[TORCH])
    print("| command | median s | min-max s | x import torch |\n|---|---|---|---|")
    for name, values in times.items():
        label = f'`python -c "{TORCH}"`' if name == TORCH else f"`{name} --help`"
        print(f"| {label} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} | "
              f"{statistics.median(values) / torch_median:.2f} |")


if __name__ == "__main__":
    main()
