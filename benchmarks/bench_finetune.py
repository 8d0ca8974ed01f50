"""Do the fine-tuning commands' defaults learn on small data sets? Accuracy and entity F1 by training-set size.

Two generated tasks from the demo's sense corpus (train/sense_corpus.py), where the label depends on the context of
an ambiguous word:

* classification: the sense of "bank", "bat", "plant" or "spring" in a sentence (8 labels);
* tagging: the same word tagged with its sense (`B-RIVER`, `B-FINANCE`, ...), every other word `O`.

Each run calls the command's `main` in this process with the given options (what the command line would do),
trains on the first N generated sentences and scores a held-out set of 400 (other seeds).

    OMP_NUM_THREADS=1 python benchmarks/bench_finetune.py --model outputs/demo/model --output_dir runs/bench_ft
    OMP_NUM_THREADS=1 python benchmarks/bench_finetune.py --model MODEL --sizes 200 --variants defaults old
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elmo_hf.train.sense_corpus import generate_probes  # noqa: E402

# name -> (classification options, tagging options); "defaults" gives none (the commands' own defaults)
VARIANTS = {
    "defaults": ([], []),
    "old": (["--classifier_pooling", "mean", "--learning_rate", "5e-5", "--num_train_epochs", "3",
             "--per_device_train_batch_size", "8", "--warmup_steps", "0"],
            ["--token_classifier_encoder", "none", "--learning_rate", "5e-5", "--num_train_epochs", "3",
             "--per_device_train_batch_size", "8", "--warmup_steps", "0", "--min_train_steps", "0"]),
    "mean-1e-2": (["--classifier_pooling", "mean"], ["--token_classifier_encoder", "none"]),
    "max-1e-2": (["--classifier_pooling", "max"], None),
    "lstm-1e-3": (["--learning_rate", "1e-3"], ["--learning_rate", "1e-3"]),
    "lstm-3ep": (["--num_train_epochs", "3"], ["--num_train_epochs", "3"]),
    "none-3e-2": (None, ["--token_classifier_encoder", "none", "--learning_rate", "3e-2"]),
    "none-20ep": (None, ["--token_classifier_encoder", "none", "--num_train_epochs", "20"]),
    "lstm-3e-3": (None, ["--learning_rate", "3e-3"]),
    "lstm-20ep": (None, ["--num_train_epochs", "20"]),
    "lstm-3e-2": (None, ["--learning_rate", "3e-2"]),
    "lstm-bs8-20ep": (None, ["--per_device_train_batch_size", "8", "--num_train_epochs", "20"]),
    "lstm-drop0.1": (["--representation_dropout", "0.1"], ["--representation_dropout", "0.1"]),
    # a fixed number of optimizer steps, whatever the size of the training set
    "steps500": (["--max_steps", "500"], ["--max_steps", "500"]),
    "steps1000": (["--max_steps", "1000"], ["--max_steps", "1000"]),
    "steps2000": (["--max_steps", "2000"], ["--max_steps", "2000"]),
    # the tagger's defaults before --min_train_steps: 20 epochs whatever the size
    "epochs-only": (None, ["--min_train_steps", "0"]),
}


def write_tasks(folder: Path, size: int) -> None:
    """train/dev files of both tasks: `size` training sentences, 400 held-out ones."""
    folder.mkdir(parents=True, exist_ok=True)
    per_sense = max(1, -(-size // 8))
    train = generate_probes(per_sense, seed=11)[:size]
    dev = generate_probes(50, seed=12)
    for name, rows in (("train", train), ("dev", dev)):
        lines = ["label\ttext"] + [f"{word}-{sense}\t{sentence}" for word, sense, sentence in rows]
        (folder / f"{name}.tsv").write_text("\n".join(lines) + "\n")
        blocks = []
        for word, sense, sentence in rows:
            tags = [f"B-{sense.upper()}" if token == word else "O" for token in sentence.split()]
            blocks.append("\n".join(f"{token} {tag}" for token, tag in zip(sentence.split(), tags)))
        (folder / f"{name}.conll").write_text("\n\n".join(blocks) + "\n")


def run(task: str, model: str, data: Path, out: Path, options: list[str], seed: int = 0) -> tuple[float, float,
                                                                                                  list[str]]:
    from elmo_hf.train.finetune_run import run_task

    suffix = "tsv" if task == "classification" else "conll"
    argv = ["--model_name_or_path", model, "--train_file", str(data / f"train.{suffix}"),
            "--validation_file", str(data / f"dev.{suffix}"), "--output_dir", str(out), "--use_cpu",
            "--save_strategy", "no", "--disable_tqdm", "true", "--seed", str(seed), "--word_split", "whitespace",
            *options]
    if task == "tagging":
        argv.remove("--word_split"), argv.remove("whitespace")
    start = time.perf_counter()
    results = run_task("sequence-classification" if task == "classification" else "token-classification", argv)
    score = results["eval_accuracy"] if task == "classification" else results["eval_f1"]
    return score, time.perf_counter() - start, argv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--output_dir", default="runs/bench_finetune")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 1000])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--tasks", nargs="+", default=["classification", "tagging"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="seeds of the head's initialisation and the data order (the tasks' sentences stay the "
                             "same)")
    args = parser.parse_args()
    root = Path(args.output_dir)
    for size in args.sizes:
        data = root / f"data-{size}"
        write_tasks(data, size)
        for variant, task, seed in itertools.product(args.variants, args.tasks, args.seeds):
            options = VARIANTS[variant][0 if task == "classification" else 1]
            if options is None:
                continue
            score, seconds, argv = run(task, args.model, data, root / f"{task}-{size}-{variant}-{seed}", options, seed)
            row = {"task": task, "size": size, "variant": variant, "seed": seed, "score": round(score, 3),
                   "seconds": round(seconds, 1), "options": options}
            print(json.dumps(row), flush=True)
            with open(root / "results.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
