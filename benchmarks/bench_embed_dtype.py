"""`elmo-embed --dtype`: tokens/s of float32 against bfloat16 at the original size, in one run, and how far the
bfloat16 vectors are from the float32 ones on real text.

Usage:
    python benchmarks/bench_embed_dtype.py                     # 200 PTB validation lines, 5 rounds, 2 threads
    python benchmarks/bench_embed_dtype.py --lines 400 --rounds 7 --model FOLDER

Variants, each run on the same length-bucketed batches as `elmo-embed` makes (<= 128 sentences / 4,096 tokens,
`--all`: every layer), without the token cache (so that every round does the whole work):
    float32                the default;
    bfloat16 autocast      what `elmo-embed --dtype bfloat16` does: `torch.autocast("cpu", dtype=torch.bfloat16)`
                           around the float32 model (matrix multiplies in bfloat16, the LSTM cell state in float32);
    bfloat16 weights       the model itself in bfloat16: `ElmoModel.from_pretrained(..., dtype=torch.bfloat16)`.
Rounds are interleaved (float32, autocast, weights, float32, ...), so that load on a shared machine hits every
variant alike; tokens/s are medians over the rounds (`<S>`/`</S>` count as tokens), with the min-max range.

Deviation: each bfloat16 variant's vectors against float32's, on every token of the text and every layer
(layer 0 and the biLSTM layers): max and mean absolute difference, and the cosine similarity per vector
(min and median), also for the top layer alone.

The model is the original size with random weights in the published layout (built once by `bench_speed.py`'s
`original_model_dir` into `--work_dir`, or `--model FOLDER`). The text is PTB validation
(../shared/data/ptb/ptb.valid.txt); without it the script says so and stops: random words would not tell how far
real sentences move.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
PTB = REPO.parent / "shared" / "data" / "ptb" / "ptb.valid.txt"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

logger = logging.getLogger("bench_embed_dtype")


def ptb_lines(count: int) -> list[list[str]]:
    lines = [line.split() for line in PTB.read_text().splitlines()]
    return [words for words in lines if words][:count]


def load_variants(model_dir: Path) -> dict:
    """name -> (model, compute dtype for `Embedder`)."""
    from elmo_hf.modeling_elmo import ElmoModel

    exact = ElmoModel.from_pretrained(model_dir).eval()
    low = ElmoModel.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    assert next(low.parameters()).dtype == torch.bfloat16
    return {
        "float32": (exact, torch.float32),
        "bfloat16 autocast (elmo-embed --dtype bfloat16)": (exact, torch.bfloat16),
        "bfloat16 weights (from_pretrained(dtype=torch.bfloat16))": (low, torch.float32),
    }


def embed_all(embedder, batches: list[list[list[str]]]) -> list[np.ndarray]:
    return [array for batch in batches for array in embedder(batch)]


def deviation(exact: list[np.ndarray], other: list[np.ndarray]) -> dict:
    """Over every vector (every token of every layer): abs differences and cosines; the same for the top layer."""

    def stats(a: np.ndarray, b: np.ndarray) -> dict:
        a, b = a.astype(np.float64), b.astype(np.float64)
        cosine = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
        return {"max_abs": float(np.abs(a - b).max()), "mean_abs": float(np.abs(a - b).mean()),
                "cosine_min": float(cosine.min()), "cosine_median": float(np.median(cosine)),
                "mean_abs_value_float32": float(np.abs(a).mean()), "vectors": len(a)}

    width = exact[0].shape[-1]
    every = stats(np.concatenate([x.reshape(-1, width) for x in exact]),
                  np.concatenate([y.reshape(-1, width) for y in other]))
    top = stats(np.concatenate([x[-1] for x in exact]), np.concatenate([y[-1] for y in other]))
    return {"all layers": every, "top layer": top}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="an original-size model folder")
    parser.add_argument("--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-bench")
    parser.add_argument("--lines", type=int, default=200, help="PTB validation lines (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not PTB.exists():
        print(f"SKIPPED: {PTB} is absent; the deviation on real text cannot be measured without it")
        return 0
    torch.set_num_threads(args.threads)
    from bench_speed import machine, original_model_dir

    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.embedding.embed import Embedder, Piece, _batches

    model_dir = args.model or original_model_dir(args.work_dir)
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    variants = load_variants(model_dir)
    text = ptb_lines(args.lines)
    pieces = [Piece(i, 0, words) for i, words in enumerate(text)]
    batches = [[p.words for p in batch] for batch in _batches(pieces, 128, 4096)]
    tokens = sum(len(words) + 2 for words in text)
    results = {"machine": machine(), "load_before": os.getloadavg(), "lines": len(text), "tokens": tokens,
               "batches": len(batches), "rounds": args.rounds, "model": str(model_dir),
               "onednn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()), "variants": {}}
    embedders = {name: Embedder(model, tokenizer, "all", torch.device("cpu"), dtype)
                 for name, (model, dtype) in variants.items()}
    outputs, seconds = {}, {name: [] for name in embedders}
    for name, embedder in embedders.items():  # warm-up (oneDNN packs its weights), and the vectors compared
        outputs[name] = embed_all(embedder, batches)
    for round_no in range(args.rounds):
        for name, embedder in embedders.items():
            start = time.perf_counter()
            embed_all(embedder, batches)
            seconds[name].append(time.perf_counter() - start)
        logger.info("round %d: %s", round_no + 1, {n: f"{tokens / s[-1]:.0f} tok/s" for n, s in seconds.items()})
    exact = outputs["float32"]
    baseline = statistics.median(seconds["float32"])
    for name in embedders:
        rates = [tokens / s for s in seconds[name]]
        entry = {"tokens_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                 "speed_vs_float32": baseline / statistics.median(seconds[name])}
        if name != "float32":
            entry["deviation"] = deviation(exact, outputs[name])
        results["variants"][name] = entry
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
