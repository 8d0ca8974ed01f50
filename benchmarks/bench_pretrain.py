"""Pretraining benchmarks on CPU: training tokens/s at the `small` preset, and PTB perplexity after a fixed budget.

    python -m benchmarks.bench_pretrain speed      # tokens/s of train.pretrain, preset small, 2 threads
    python -m benchmarks.bench_pretrain compare    # the same, distinct-token character CNN against every token
    python -m benchmarks.bench_pretrain ptb        # validation perplexity on Penn Treebank after --steps steps

Both run the real command (`python -m train.pretrain`) in a subprocess and read what it wrote
(`train_log.jsonl`, `train_results.json`, `eval_results.json`). Results go to `benchmarks/results_pretrain.md`
by hand, with the command and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PTB = REPO.parent / "shared" / "data" / "ptb"


def run_pretrain(args: list[str], threads: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "train.pretrain", *args], cwd=REPO, env=env, check=True)


def machine() -> str:
    model = ""
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model or platform.processor()}, {os.cpu_count()} cores, {platform.python_version()}"


def speed(steps: int, threads: int, batch: int, softmax: str, implementation: str = "auto",
          logging_steps: int = 5) -> dict:
    """Tokens/s of train.pretrain at the `small` preset. `implementation` is the config's `lstm_implementation`:
    in training, "reference" runs the character CNN on every token and "auto" on each distinct token once."""
    train = PTB / "ptb.train.txt"
    if not train.exists():
        sys.exit(f"{train} is absent")
    from modeling_elmo import ElmoConfig

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        ElmoConfig.from_preset("small", lstm_implementation=implementation).to_json_file(config)
        out = Path(tmp) / "out"
        run_pretrain(["--train_file", str(train), "--output_dir", str(out), "--config_file", str(config),
                      "--max_steps", str(steps), "--per_device_batch_size", str(batch), "--unroll_steps", "20",
                      "--softmax", softmax, "--logging_steps", str(logging_steps), "--report_to", "none",
                      "--disable_tqdm"], threads)
        log = [json.loads(line) for line in open(out / "train_log.jsonl")]
    rates = [r["tokens_per_second"] for r in log[1:]]  # the first window includes start-up
    return {"preset": "small", "lstm_implementation": implementation, "threads": threads,
            "batch": f"{batch} x 20 tokens", "softmax": softmax, "steps": steps,
            "median_tokens_per_second": round(statistics.median(rates), 1), "min": round(min(rates), 1),
            "max": round(max(rates), 1), "load_average": round(os.getloadavg()[0], 1), "machine": machine()}


def compare(steps: int, threads: int, batch: int, softmax: str, rounds: int) -> dict:
    """auto (distinct tokens once) against reference (every token), alternating, in one run: the ratio of medians."""
    runs = {"auto": [], "reference": []}
    for _ in range(rounds):
        for implementation in runs:
            result = speed(steps, threads, batch, softmax, implementation, logging_steps=2)
            runs[implementation].append(result["median_tokens_per_second"])
    medians = {k: statistics.median(v) for k, v in runs.items()}
    return {"runs_tokens_per_second": runs, "median": medians,
            "speed-up": round(medians["auto"] / medians["reference"], 2), "steps_per_run": steps,
            "batch": f"{batch} x 20 tokens", "softmax": softmax, "threads": threads, "machine": machine()}


def ptb(steps: int, threads: int, output_dir: str, extra: list[str]) -> dict:
    train, valid = PTB / "ptb.train.txt", PTB / "ptb.valid.txt"
    if not train.exists():
        sys.exit(f"{train} is absent")
    run_pretrain(["--train_file", str(train), "--validation_file", str(valid), "--output_dir", output_dir,
                  "--overwrite_output_dir", "--max_steps", str(steps), "--report_to", "none", "--disable_tqdm",
                  "--logging_steps", "50", *extra], threads)
    results = json.loads((Path(output_dir) / "eval_results.json").read_text())
    summary = json.loads((Path(output_dir) / "train_results.json").read_text())
    return {**results, **summary, "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["speed", "compare", "ptb"])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of `compare`")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--softmax", default="full")
    parser.add_argument("--output_dir", default="outputs/ptb-elmo")
    parser.add_argument("extra", nargs="*", help="more train.pretrain arguments for `ptb` (after --)")
    args = parser.parse_args()
    if args.what == "speed":
        result = speed(args.steps or 30, args.threads, args.batch, args.softmax)
    elif args.what == "compare":
        result = compare(args.steps or 8, args.threads, args.batch, args.softmax, args.rounds)
    else:
        result = ptb(args.steps or 2000, args.threads, args.output_dir, args.extra)
    print(json.dumps(result, indent=2))  # a benchmark's report: printed for the person running it


if __name__ == "__main__":
    main()
