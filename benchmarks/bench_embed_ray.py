"""`elmo-embed --engine ray` against the default engine: tokens/s with 1 and 2 Ray workers, Ray's start-up and its
cost per window, and the memory one worker needs at each published size.

Usage:
    python benchmarks/bench_embed_ray.py                    # 1,500 lines, window 250, the `small` preset, 3 repeats
    python benchmarks/bench_embed_ray.py --lines 3000 --repeats 1 --model FOLDER
    python benchmarks/bench_embed_ray.py --memory_only      # the memory table only

Speed: the real command, `python -m elmo_hf.cli embed CORPUS OUT --model M --top --window W --threads 1
--token_cache_size 0 --quiet`, run by the default engine (one process) and by `--engine ray --num_workers 1` and
`2` (each actor on one thread), each case `--repeats` times in turn; the figures are medians. The corpus is the
project's own sense corpus (`elmo_hf.train.sense_corpus.generate_corpus`, seed 0). The default engine's time is its log
line's (after the model is loaded: the windows and the merge); a Ray run's is the time its windows took once Ray and
its actors were ready, which the driver logs beside the start-up time. The cost Ray adds per window (its unit of
work: one call to an actor per window) is measured two ways: (1 worker's time - the default engine's) / windows,
which the load's noise can swamp, and directly, as the median time of 50 calls that send a window of the corpus to
an actor that does nothing with it.

Memory: for each preset of a published size (small, medium, original; random weights), a fresh interpreter loads
the model and embeds one batch of the corpus at the command's defaults (128 sentences, 4096 padded tokens), then
prints its peak resident memory (VmHWM, Linux): what one worker (or the one process) holds.

Figures: results_embed_ray.md. The load (`uptime`) is printed before and after each case: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WROTE = re.compile(r"wrote .*?: (\d+) lines embedded in this run \(\d+ empty\), (\d+) tokens, ([\d.]+) s")
RAY = re.compile(r"(\d+) window\(s\) embedded by (\d+) Ray actor\(s\) in ([\d.]+) s, after ([\d.]+) s starting")

ONE_BATCH = """
import sys, torch
torch.set_num_threads(1)
from elmo_hf.tools.loading import load_elmo
from elmo_hf.tools.embedding.embed import Embedder
from elmo_hf.tokenization import split_words
model, tokenizer = load_elmo(sys.argv[1], device=torch.device("cpu"))
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
batch, width = [], 0
for words in sorted((split_words(line) for line in lines), key=len):  # the command's batch: <= 128 rows, 4096 tokens
    if len(batch) == 128 or (len(batch) + 1) * (len(words) + 2) > 4096:
        break
    batch.append(words)
Embedder(model, tokenizer, "top", torch.device("cpu"), torch.float32)(batch)
with open("/proc/self/status") as status:
    print("PEAK_RSS_KB", next(line for line in status if line.startswith("VmHWM:")).split()[1])
print("PARAMETERS", sum(p.numel() for p in model.parameters()))
"""


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def embed(corpus: Path, out: Path, model: str, window: int, workers: int | None) -> dict:
    """One run of the command: its tokens and the seconds its windows took (and Ray's start-up)."""
    command = [sys.executable, "-m", "elmo_hf.cli", "embed", str(corpus), str(out), "--model", model, "--top",
               "--window", str(window), "--threads", "1", "--token_cache_size", "0", "--quiet", "--overwrite"]
    if workers:
        command += ["--engine", "ray", "--num_workers", str(workers)]
    before = load()
    result = subprocess.run(command, cwd=REPO, env=env(), capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    lines, tokens, elapsed = WROTE.search(result.stderr).groups()
    figures = {"tokens": int(tokens), "seconds": float(elapsed), "startup": 0.0, "load": f"{before}-{load()}"}
    if workers:
        _, _, seconds, startup = RAY.search(result.stderr).groups()
        figures.update(seconds=float(seconds), startup=float(startup))
    return figures


def speed(args, folder: Path, corpus: Path) -> None:
    windows = -(-args.lines // args.window)
    cases = {"default engine (1 process)": None, "ray, 1 worker": 1, "ray, 2 workers": 2}
    runs: dict[str, list[dict]] = {name: [] for name in cases}
    for repeat in range(args.repeats):
        for name, workers in cases.items():
            figures = embed(corpus, folder / "out.hdf5", args.model, args.window, workers)
            runs[name].append(figures)
            print(f"  repeat {repeat + 1} {name}: {figures}", flush=True)
    print(f"\n{args.lines} lines, {runs[next(iter(cases))][0]['tokens']} tokens, {windows} windows of {args.window}, "
          f"--model {args.model}, {args.repeats} repeat(s), medians:\n")
    print("| engine | seconds (windows) | tokens/s | tokens/s per worker | start-up s | load (1 min, before-after) |")
    print("|---|---|---|---|---|---|")
    medians = {}
    for name, workers in cases.items():
        seconds = statistics.median(run["seconds"] for run in runs[name])
        startup = statistics.median(run["startup"] for run in runs[name])
        tokens = runs[name][0]["tokens"]
        medians[name] = seconds
        loads = ", ".join(run["load"] for run in runs[name])
        print(f"| {name} | {seconds:.1f} | {tokens / seconds:.0f} | {tokens / seconds / (workers or 1):.0f} | "
              f"{startup:.1f} | {loads} |")
    one, two, default = medians["ray, 1 worker"], medians["ray, 2 workers"], medians["default engine (1 process)"]
    print(f"\n2 workers / 1 worker speed-up: {one / two:.2f}; Ray 1 worker / default engine time: {one / default:.3f}; "
          f"difference per window: {(one - default) / windows * 1000:.0f} ms")
    trip = ray_round_trip(folder, corpus, args.window)
    print(f"a window's call to an actor, without embedding (median of 50): {trip:.1f} ms, load {load()}")


ROUND_TRIP = """
import statistics, sys, time
import ray
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
window = [(i, line) for i, line in enumerate(lines[: int(sys.argv[2])])]

@ray.remote(num_cpus=1)
class Echo:
    def embed(self, window, items):  # what an actor's call costs besides the embedding: the window sent, a result back
        return len(items)

echo = Echo.remote()
ray.get(echo.embed.remote(0, window))
times = []
for _ in range(50):
    start = time.perf_counter()
    ray.get(echo.embed.remote(0, window))
    times.append(time.perf_counter() - start)
print("ROUND_TRIP_MS", statistics.median(times) * 1000)
"""


def ray_round_trip(folder: Path, corpus: Path, window: int) -> float:
    """Milliseconds one window's call to an actor costs besides its embedding (median of 50)."""
    script = folder / "round_trip.py"
    script.write_text(ROUND_TRIP)
    result = subprocess.run([sys.executable, str(script), str(corpus), str(window)], cwd=REPO, env=env(),
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return float(re.search(r"ROUND_TRIP_MS ([\d.]+)", result.stdout).group(1))


def memory(args, folder: Path, corpus: Path) -> None:
    script = folder / "one_batch.py"
    script.write_text(ONE_BATCH)
    print("\n| preset | parameters | peak RSS after loading + one batch (128 sentences) | load |")
    print("|---|---|---|---|")
    for size in args.sizes:
        result = subprocess.run([sys.executable, str(script), size, str(corpus)], cwd=REPO, env=env(),
                                capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"{size}: {result.stderr[-2000:]}")
        peak = int(re.search(r"PEAK_RSS_KB (\d+)", result.stdout).group(1))
        parameters = int(re.search(r"PARAMETERS (\d+)", result.stdout).group(1))
        print(f"| {size} | {parameters / 1e6:.1f} M | {peak / 1024:.0f} MB | {load()} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1500)
    parser.add_argument("--window", type=int, default=250)
    parser.add_argument("--model", default="small", help="a preset (random weights) or a model folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", default=["small", "medium", "original"])
    parser.add_argument("--memory_only", action="store_true")
    args = parser.parse_args()

    from elmo_hf.train.sense_corpus import generate_corpus

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = folder / "corpus.txt"
        corpus.write_text("".join(line + "\n" for line in generate_corpus(args.lines, seed=0)), encoding="utf-8")
        print(f"machine: {os.cpu_count()} CPUs; load at start {load()}", flush=True)
        if not args.memory_only:
            speed(args, folder, corpus)
        memory(args, folder, corpus)


if __name__ == "__main__":
    main()
