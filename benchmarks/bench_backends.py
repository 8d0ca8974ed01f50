"""Every backend and dtype of `elmo-embed` at the original size, in one run: tokens/s, share of the matmul peak,
cosine to float32, and whether a sentence's vectors depend on its batch.

Usage:
    python benchmarks/bench_backends.py                               # original size, built once in --work_dir
    python benchmarks/bench_backends.py --model FOLDER --lines 64 --rounds 3 --threads 2 --json out.json

Paths: torch float32 / bfloat16 (autocast) / int8 (`quantize_int8`), ONNX Runtime float32 / int8 (its dynamic
quantization of the graph), OpenVINO float32 / bfloat16 / int8 (ONNX Runtime's int8 graph compiled by OpenVINO); a path
this machine cannot run is listed with the reason. The graphs are exported once (`onnx_export.cached_export`, into
$ELMO_HF_CACHE) before anything is timed.

Text: held-out lines, short to long: PTB validation's first `--lines` non-empty lines where ../shared/data is there,
else generated wikitext-like lines (`backend_choice.sample_sentences`). They are cut into batches as `elmo-embed` cuts
them (sorted by length, <= 128 sentences and <= 4096 padded tokens), and each path embeds all of them once per round;
rounds are interleaved (every path in turn; each path's runner is built for its turn and released after it, untimed,
with a warm-up call on the first batch), and the figures are medians over `--rounds`.
torch runs without the token cache here (the runtimes have none), so every path does the whole work.

Ratios: GFLOP/s (204.3 MFLOP per token at the original size, `bench_speed.flops_per_token`; `<S>`/`</S>` count) over the
GFLOP/s of a 2048 x 2048 float32 `torch.mm` measured right before and after each timed round, in the same process.
Cosines: per vector (every token of every layer) to torch float32's vector of the same batch: min and median.
Batch dependence: the largest difference between the first sentence embedded alone and the same sentence in its batch.
The auto choice (`--backend auto --dtype auto`, `backend_choice.measure` on its own sample) is measured and reported
beside the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_speed import PTB, Peak, flops_per_token, original_model_dir  # noqa: E402

from elmo_hf.tools.core.backend_registry import backend_row  # noqa: E402
from elmo_hf.tools.embedding.embed import Piece, _batches  # noqa: E402
from elmo_hf.tools.export import backend_choice  # noqa: E402
from elmo_hf.tools.export.backends import unavailable_reason  # noqa: E402
from elmo_hf.tools.loading import load_elmo  # noqa: E402

PATHS = [("torch", "float32"), ("torch", "bfloat16"), ("torch", "int8"), ("onnxruntime", "float32"),
         ("onnxruntime", "int8"), ("openvino", "float32"), ("openvino", "bfloat16"), ("openvino", "int8")]


def lines(count: int) -> tuple[list[list[str]], str]:
    if PTB.exists():
        text = [line.split() for line in PTB.read_text().splitlines() if line.strip()][:count]
        return text, f"PTB validation, first {count} non-empty lines"
    return backend_choice.sample_sentences(count, seed=1), f"{count} generated wikitext-like lines"


def cpu_flags() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    info = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = info.get("Flags", "").split()
    wanted = [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4")) or f in ("vnni",)]
    return f"{info.get('Model name', '?').strip()}, {info.get('CPU(s)', '?').strip()} CPUs; flags: {' '.join(wanted)}"


def torch_reason(dtype: str) -> str | None:
    if dtype == "int8":
        from elmo_hf.modeling_elmo.quantization_elmo import int8_unavailable_reason

        return int8_unavailable_reason()
    return None


def encode(tokenizer, batches):
    encoded = []
    for batch in batches:
        out = tokenizer([p.words for p in batch], is_split_into_words=True, padding=True, return_tensors="np")
        encoded.append((out["input_ids"].astype(np.int64), out["attention_mask"].astype(np.int64)))
    return encoded


def cosines(outputs, reference, encoded) -> tuple[float, float]:
    values = []
    for got, expected, (_, mask) in zip(outputs, reference, encoded):
        keep = mask.astype(bool)
        a = got.transpose(0, 2, 1, 3)[keep].reshape(-1, got.shape[-1]).astype(np.float64)
        b = expected.transpose(0, 2, 1, 3)[keep].reshape(-1, got.shape[-1]).astype(np.float64)
        values.append((a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)))
    values = np.concatenate(values)
    return float(values.min()), float(np.median(values))


def batch_dependence(run, encoded) -> float:
    """max |sentence alone - the same sentence in its batch| for row 0 of the largest batch."""
    ids, mask = max(encoded, key=lambda e: e[0].shape[0])
    length = int(mask[0].sum())
    alone = run(ids[:1, :length], mask[:1, :length])
    together = run(ids, mask)[:1, :, :length]
    return float(np.abs(alone - together).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="an original-size folder (default: built in --work_dir)")
    parser.add_argument("--work_dir", default="/tmp/elmo-bench", help="where the original-size model is built once")
    parser.add_argument("--lines", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="threads of every path (default: torch's)")
    parser.add_argument("--paths", default=None, help="comma-separated backend:dtype (default: all)")
    parser.add_argument("--no_auto", action="store_true", help="leave out the measurement auto makes")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    folder = Path(args.model) if args.model else original_model_dir(Path(args.work_dir))
    model, tokenizer = load_elmo(folder)
    flops = flops_per_token(model.config)
    text, source = lines(args.lines)
    batches = list(_batches([Piece(i, 0, words) for i, words in enumerate(text) if words], 128, 4096))
    encoded = encode(tokenizer, batches)
    tokens = int(sum(mask.sum() for _, mask in encoded))
    start_load = os.getloadavg()
    wanted = [tuple(p.split(":")) for p in args.paths.split(",")] if args.paths else PATHS
    paths, skipped = [], {}
    for backend, dtype in wanted:
        reason = torch_reason(dtype) if backend == "torch" else unavailable_reason(backend, dtype)
        if reason is not None:
            skipped[f"{backend} {dtype}"] = reason
        else:
            paths.append((backend, dtype))
    for backend, dtype in paths:  # every graph exported (and quantized) once, before anything is timed
        if backend != "torch":
            backend_choice.path_runner(backend, dtype, model, folder, threads)
            gc.collect()
    peak = Peak(torch.device("cpu"))
    reference = [backend_choice.path_runner("torch", "float32", model, folder, threads)(*e)  # also torch's warm-up
                 for e in encoded]
    samples: dict = {path: [] for path in paths}
    table: dict = {}
    for round_number in range(args.rounds):
        for path in paths:
            # Built for each round and released after it (untimed): at this size each runtime holds its own copies of
            # the weights, and all of them at once would not fit beside other work. A warm-up call on the first batch.
            run = backend_choice.path_runner(*path, model, folder, threads)
            run(*encoded[0])
            before = peak.mm()
            begin = time.perf_counter()
            outputs = [run(*e) for e in encoded]
            seconds = time.perf_counter() - begin
            mean_peak = (before + peak.mm()) / 2
            samples[path].append((tokens / seconds, tokens * flops / seconds / 1e9 / mean_peak, mean_peak))
            if round_number == 0:
                cos_min, cos_median = cosines(outputs, reference, encoded)
                table[path] = {"backend": path[0], "dtype": path[1], "cosine_min": cos_min,
                               "cosine_median": cos_median, "batch_dependence": batch_dependence(run, encoded)}
            del run, outputs
            gc.collect()
            print(f"round {round_number + 1}: {path[0]} {path[1]} {tokens / seconds:.0f} tokens/s", flush=True)
    for path, values in samples.items():
        table[path].update({"tokens_per_s": statistics.median(v[0] for v in values),
                            "tokens_per_s_range": (min(v[0] for v in values), max(v[0] for v in values)),
                            "share_of_peak": statistics.median(v[1] for v in values),
                            "peak_gflops": statistics.median(v[2] for v in values)})
    table = list(table.values())
    base = next(row["tokens_per_s"] for row in table if (row["backend"], row["dtype"]) == ("torch", "float32"))
    auto = None
    if not args.no_auto:
        del reference
        gc.collect()
        fresh, _ = load_elmo(folder)  # as elmo-embed measures: on the model as loaded, not on the table's (whose
        automatic = [path for path in paths if path[1] in backend_row(path[0]).automatic_dtypes]  # what auto measures
        # (torch float32 ran 3.4x slower)
        measured = backend_choice.measure(automatic, fresh, tokenizer, folder, threads)
        chosen, alternative = backend_choice.best(measured)
        auto = {"chosen": chosen.name, "alternative": alternative.name if alternative else None,
                "measured": [vars(m) for m in measured]}
    result = {"cpu": cpu_flags(), "threads": threads, "text": source, "tokens": tokens, "batches": len(batches),
              "load_before": start_load, "load_after": os.getloadavg(), "torch": torch.__version__,
              "rows": table, "skipped": skipped, "auto": auto, "date": time.strftime("%Y-%m-%d %H:%M")}
    print(f"\n{result['cpu']}\n{threads} threads; {source}: {tokens} tokens in {len(batches)} batches; "
          f"load {start_load[0]:.2f} -> {result['load_after'][0]:.2f}\n")
    print("| backend | dtype | tokens/s (range) | vs torch float32 | share of torch.mm peak | cosine min / median | "
          "batch dependence |")
    print("|---|---|---|---|---|---|---|")
    for row in table:
        low, high = row["tokens_per_s_range"]
        print(f"| {row['backend']} | {row['dtype']} | {row['tokens_per_s']:.0f} ({low:.0f}-{high:.0f}) | "
              f"{row['tokens_per_s'] / base:.2f}x | {row['share_of_peak']:.0%} (peak {row['peak_gflops']:.0f}) | "
              f"{row['cosine_min']:.6f} / {row['cosine_median']:.6f} | {row['batch_dependence']:.2g} |")
    for name, reason in skipped.items():
        print(f"| {name} | not run: {reason} |")
    if auto:
        print(f"\nauto (its own sample, measured after the table): {auto['chosen']}; alternative {auto['alternative']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
