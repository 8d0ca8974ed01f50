"""elmo-finetune-qa on a real SQuAD-format file: how many windows its passages make, how long fine-tuning and
predict-only take, and the exact match / F1 the head reaches on the file it was trained on (a check that it can fit
real passages, not a measure of generalisation: the sample files are a few questions).

    python benchmarks/bench_qa.py --squad_file sample.json --model tiny [--epochs 20] [--max_seq_length 128]

The SQuAD-format sample found offline: tests/fixtures/samples/SQUAD/sample.json of the adapter-hub/adapters
repository (the same file as transformers' tests/fixtures/tests_samples/SQUAD/sample.json): 14 SQuAD 2.0 questions,
6 of them unanswerable, in `datasets`' layout (flat records under "data"). No pinned package ships one.
Results: benchmarks/results_qa.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "elmo-finetune-qa"), *args], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad_file", required=True)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--doc_stride", type=int, default=32)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        out, predicted = Path(root, "model"), Path(root, "predicted")
        common = ["--use_cpu", "--report_to", "none", "--disable_tqdm", "true", "--max_seq_length",
                  str(options.max_seq_length), "--doc_stride", str(options.doc_stride)]
        train_s = run(["--model_name_or_path", options.model, "--train_file", options.squad_file, "--validation_file",
                       options.squad_file, "--output_dir", str(out), "--num_train_epochs", str(options.epochs),
                       "--save_strategy", "no", "--word_embedding_dim", "32", "--per_device_train_batch_size", "8",
                       *common])
        predict_s = run(["--model_name_or_path", str(out), "--do_predict", "--test_file", options.squad_file,
                         "--output_dir", str(predicted), *common])
        metrics = json.loads((out / "all_results.json").read_text())
        answers = json.loads((predicted / "predictions.json").read_text())
    print(f"| {Path(options.squad_file).name} | {options.model} | {len(answers)} | {metrics['train_samples']} | "
          f"{options.epochs} | {train_s:.1f} | {predict_s:.1f} | {metrics['eval_exact_match']:.1f} | "
          f"{metrics['eval_f1']:.1f} |")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
