"""Time and peak memory of the weight converter at the published ELMo sizes (random weights, real layout).

Usage:
    python -m benchmarks.bench_convert                                # small, medium, original
    python -m benchmarks.bench_convert --sizes small --work_dir /tmp/elmo-bench

For each size, `tests/original_layout.py` writes options.json + weights.hdf5 (kept in
`--work_dir` and reused), then the converter runs in a fresh process that first imports everything it
needs (torch, transformers, h5py, safetensors, the project) and reads its peak RSS (VmHWM in
/proc/self/status; Linux only) before and after `main()`. "growth" is the difference: the memory the
conversion itself needs, compared with the weight file size. "import-only RSS" is a separate process that
only imports the same modules, for reference.
Then the converted folder is loaded with `AutoModel.from_pretrained(..., trust_remote_code=True)` here and
run on one short batch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tests" / "original_layout.py"  # random weights in the original layout, any preset size
SIZES = ("small", "medium", "original")

logger = logging.getLogger("bench_convert")

_IMPORTS = """
import json, sys, time
import h5py, safetensors.torch, torch, transformers
from elmo_hf import tokenization
from elmo_hf.cli import run
from elmo_hf.tools.conversion import convert_allennlp_elmo  # noqa: F401  (imported before the peak is read)
def peak_kib():
    # VmHWM: this process's own peak RSS. ru_maxrss would also do on Linux, except that it is kept across
    # exec and so starts at the parent's peak (pytest's, the benchmark's).
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
"""

_PROBE = (
    _IMPORTS
    + """
before = peak_kib()
start = time.perf_counter()
code = run("elmo-convert", sys.argv[1:])
seconds = time.perf_counter() - start
after = peak_kib()
print(json.dumps({"rc": code, "before_kib": before, "after_kib": after, "seconds": seconds}))
"""
)

_BASELINE = (
    _IMPORTS
    + """
print(json.dumps({"kib": peak_kib()}))
"""
)


def _python(code: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"subprocess failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench(size: str, work_dir: Path) -> dict:
    original = work_dir / size
    if not (original / "weights.hdf5").exists():
        logger.info("writing random %s weights to %s", size, original)
        subprocess.run(
            [sys.executable, str(TOOL), str(original), "--size", size], check=True, capture_output=True
        )
    out = work_dir / f"{size}-converted"
    probe = _python(
        _PROBE,
        "--options_file",
        str(original / "options.json"),
        "--weight_file",
        str(original / "weights.hdf5"),
        "--output_dir",
        str(out),
        "--overwrite",
    )
    file_mib = (original / "weights.hdf5").stat().st_size / 2**20
    growth_mib = (probe["after_kib"] - probe["before_kib"]) / 1024

    from transformers import AutoModel

    from elmo_hf.tokenization import ElmoTokenizer

    start = time.perf_counter()
    model = AutoModel.from_pretrained(out, trust_remote_code=True).eval()
    load_seconds = time.perf_counter() - start
    batch = ElmoTokenizer()(
        [["A", "short", "batch", "."], ["Two", "sentences"]],
        is_split_into_words=True,
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    if not torch.isfinite(hidden).all():
        raise SystemExit(f"{size}: the converted model gives non-finite outputs")
    return {
        "size": size,
        "parameters": sum(p.numel() for p in model.parameters()),
        "file_mib": file_mib,
        "seconds": probe["seconds"],
        "peak_mib": probe["after_kib"] / 1024,
        "growth_mib": growth_mib,
        "ratio": growth_mib / file_mib,
        "load_seconds": load_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES))
    parser.add_argument(
        "--work_dir", type=Path, default=None, help="where the random weights are kept (reused)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not TOOL.exists():
        raise SystemExit(f"{TOOL} is missing")
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="elmo-bench-convert-"))
    work_dir.mkdir(parents=True, exist_ok=True)

    baseline = _python(_BASELINE)["kib"] / 1024
    rows = [bench(size, work_dir) for size in args.sizes]
    logger.info(
        "machine: %s, %d CPUs, Python %s, torch %s",
        platform.processor() or platform.machine(),
        os.cpu_count(),
        platform.python_version(),
        torch.__version__,
    )
    logger.info("import-only RSS of the converter's modules: %.0f MiB", baseline)
    logger.info("")
    logger.info(
        "| size | parameters | weight file | conversion | peak RSS | growth | growth / file | load (from_pretrained) |"
    )
    logger.info("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        logger.info(
            "| %s | %s | %.0f MiB | %.2f s | %.0f MiB | %.0f MiB | %.2f | %.2f s |",
            r["size"],
            f"{r['parameters']:,}",
            r["file_mib"],
            r["seconds"],
            r["peak_mib"],
            r["growth_mib"],
            r["ratio"],
            r["load_seconds"],
        )


if __name__ == "__main__":
    main()
