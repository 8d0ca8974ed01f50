"""`elmo-embed` memory against corpus size: the peak resident memory (VmHWM) of the real command on corpora of
growing size, `--all` (every layer of every token: the most a run could keep per line).

Usage:
    python benchmarks/bench_embed_memory.py                          # 5,000 and 25,000 lines, window 1,000
    python benchmarks/bench_embed_memory.py --lines 5000 25000 100000 --window 1000 --model FOLDER

Each corpus size runs `python -m elmo_hf.cli embed CORPUS OUT --all --window W --threads 1 --quiet` in a fresh
interpreter that prints its own VmHWM from /proc/self/status at the end (ru_maxrss would survive exec and start at
the parent's peak), so Linux only. The corpus is generated (random words from a 3,005-word vocabulary, 0-15 words a
line, seed 3: the lines `tests/test_embed.py` generates); the model is the `tiny` preset with seed 0 (the tests'
model) unless --model names a folder.

The command streams: it reads `--window` lines, embeds and writes them as a chunk file, and reads on. So the peak
should not grow with the corpus: `--all` holds 3 x 32 float32 values a token for the tiny model, about 75 MB for
25,000 lines, and keeping them would show. The script prints each size's peak and the ratio of the largest to the
smallest; it exits 1 when that ratio is above --max_ratio (1.08, the bound the timed test used to check), so that
it can serve as a check too. Figures: results_embed_memory.md.

`tests/test_embed.py::test_command_streams_in_windows` checks the property this measures, cheaply and without
measuring: the command has read no line beyond the window it embeds, and each window is on disk as a complete chunk
before the next is read.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# VmHWM is this process's own peak RSS (ru_maxrss survives exec, so it would start at the parent's peak).
PEAK_RSS = """
import runpy, sys
sys.argv = ["elmo_hf.cli", "embed", *sys.argv[1:]]
try:
    runpy.run_module("elmo_hf.cli", run_name="__main__")
except SystemExit as exit:
    assert not exit.code, exit.code
with open("/proc/self/status") as status:
    print("PEAK_RSS_KB", next(line for line in status if line.startswith("VmHWM:")).split()[1])
"""


def generated_lines(count: int, seed: int = 3, max_words: int = 15) -> list[str]:
    """The lines of tests/test_embed.py's `generated_lines`."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(3000)] + ["the", ",", ".", "of", "and"]
    return [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, max_words))) for _ in range(count)]


def tiny_model(folder: Path) -> Path:
    """The tests' tiny model (the `tiny` preset, seed 0) with its tokenizer."""
    import torch
    from transformers.utils import logging as hf_logging

    from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    hf_logging.disable_progress_bar()
    torch.manual_seed(0)
    ElmoModel(ElmoConfig.from_preset("tiny")).eval().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def peak_rss_mb(corpus: Path, out: Path, model: Path, window: int) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one run of the command."""
    args = [corpus, out, "--model", model, "--all", "--window", str(window), "--threads", "1", "--quiet"]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", PEAK_RSS, *map(str, args)], cwd=REPO, capture_output=True,
                            text=True, timeout=3600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"elmo-embed failed on {corpus}:\n{result.stderr[-3000:]}")
    return int(result.stdout.split("PEAK_RSS_KB")[-1]) / 1024, seconds


def main() -> int:
    if not sys.platform.startswith("linux"):
        raise SystemExit("reads VmHWM from /proc/self/status: Linux only")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[5_000, 25_000], help="corpus sizes")
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--model", type=Path, help="a model folder (default: the tests' tiny model)")
    parser.add_argument("--max_ratio", type=float, default=1.08,
                        help="exit 1 when the largest corpus's peak is above this times the smallest's")
    args = parser.parse_args()
    sizes = sorted(args.lines)
    with tempfile.TemporaryDirectory(prefix="bench-embed-memory-") as tmp:
        tmp = Path(tmp)
        model = args.model or tiny_model(tmp / "tiny")
        lines = generated_lines(sizes[-1])
        peaks = {}
        print(f"{'lines':>8} {'tokens':>9} {'peak RSS (MB)':>14} {'wall (s)':>9}")
        for count in sizes:
            corpus = tmp / f"in{count}.txt"
            corpus.write_text("".join(line + "\n" for line in lines[:count]), encoding="utf-8")
            tokens = sum(len(line.split()) for line in lines[:count])
            peaks[count], seconds = peak_rss_mb(corpus, tmp / f"out{count}.hdf5", model, args.window)
            print(f"{count:>8,} {tokens:>9,} {peaks[count]:>14.1f} {seconds:>9.1f}", flush=True)
            (tmp / f"out{count}.hdf5").unlink()
    ratio = peaks[sizes[-1]] / peaks[sizes[0]]
    print(f"peak of {sizes[-1]:,} lines / peak of {sizes[0]:,} lines: {ratio:.3f} (bound {args.max_ratio})")
    print(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if ratio <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
