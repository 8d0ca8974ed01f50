"""float32 GFLOP/s of MKL's `torch.mm` against oneDNN's multiply (`matmul_elmo.mm_nt`/`mm_tn`, unpacked operands)
at the shapes of a training step, on the CPU: the measurement behind `matmul_elmo.training_onednn`.

    python benchmarks/bench_matmul.py --threads 2

Shapes (rows M, inner K, columns N) of the `small` preset and the demo model at 32 x 20 tokens, PTB's 10,002 words:
the forward multiply, the input's gradient and the weight's gradient of the highways, the LSTM's input multiply, and
the full softmax. Each figure is the median of 9 timings of 3 calls after a warm-up; the two implementations of one
shape are timed back to back, so compare them within a row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from elmo_hf.modeling_elmo.matmul_elmo import mm_nt, mm_tn, use_onednn  # noqa: E402

# name: (M, K, N) of `x (M, K) @ weight (N, K).T`; the backward multiplies follow from them
SHAPES = {
    "small: highway (2048 filters, 480 distinct tokens)": (480, 2048, 2048),
    "small: LSTM input multiply (640 rows, 128 -> 4096)": (640, 128, 4096),
    "small: full softmax (640 rows, 128 -> 10,002)": (640, 128, 10002),
    "demo: LSTM input multiply (640 rows, 64 -> 1024)": (640, 64, 1024),
    "demo: full softmax (640 rows, 64 -> 10,002)": (640, 64, 10002),
}


def gflops(fn, flops: float, repeats: int = 9, inner: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return flops / statistics.median(times) / 1e9


def measure(m: int, k: int, n: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    x, weight = torch.randn(m, k, generator=generator), torch.randn(n, k, generator=generator)
    grad = torch.randn(m, n, generator=generator)
    flops = 2.0 * m * k * n
    products = {
        "forward x @ W.T": (lambda: torch.mm(x, weight.t()), lambda: mm_nt(x, weight)),
        "input gradient g @ W": (lambda: torch.mm(grad, weight), lambda: mm_nt(grad, weight.t())),
        "weight gradient g.T @ x": (lambda: torch.mm(grad.t(), x), lambda: mm_tn(grad, x)),
    }
    return {name: {"torch.mm": round(gflops(mkl, flops), 1), "oneDNN": round(gflops(onednn, flops), 1)}
            for name, (mkl, onednn) in products.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not use_onednn(torch.device("cpu"), torch.float32):
        sys.exit("this torch build has no oneDNN multiply")
    results = {name: measure(*shape) for name, shape in SHAPES.items()}
    results["threads"], results["load_average"] = args.threads, os.getloadavg()[0]
    results["torch"] = torch.__version__
    print(json.dumps(results, indent=1))  # a benchmark's report: printed for the person running it


if __name__ == "__main__":
    main()
