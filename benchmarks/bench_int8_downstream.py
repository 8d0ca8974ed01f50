"""Do int8 vectors change what a fine-tuned head predicts? float32 against `quantize_int8()` on held-out sets.

Issue 24's last int8 goal: the predictions of a fine-tuned classifier and tagger agree on at least 99% of the
examples whether the biLM runs in float32 or int8. For each task this script fine-tunes a head with the command's
defaults (`elmo-finetune-classification` / `elmo-finetune-ner`, called in this process as `bench_finetune.py`
does), reloads the saved folder, predicts the held-out set with the model as saved (float32), then calls
`model.quantize_int8()` on the whole model (biLM + head; the head's own layers stay float32) and predicts again.

Tasks:

* sense-cls / sense-tag: the generated sense tasks of `bench_finetune.py` (the sense of "bank", "bat", ... from its
  context), `--sense_train` training sentences, 400 held out;
* sst2: SST-2, the first `--sst2_train` training sentences, the dev set (872);
* conll: CoNLL-2003, the first `--conll_train` training sentences, the validation set (3,250);

SST-2 and CoNLL come from ../shared/data and are skipped (one line) when it is absent.

The biLM is `--bilm` (any model folder), or by default one pretrained here with `elmo-pretrain --preset tiny` on a
generated sense corpus (`train/sense_corpus.py`) for `--pretrain_steps` steps.

    python benchmarks/bench_int8_downstream.py --json int8_downstream.json
    python benchmarks/bench_int8_downstream.py --bilm outputs/demo/model --tasks sense-cls sense-tag

Reported per task: agreement (classification: the fraction of sentences with the same label; tagging: the fraction
of words with the same tag, and of sentences with every tag the same) and each variant's accuracy / entity F1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

logger = logging.getLogger("bench_int8_downstream")

TASKS = ("sense-cls", "sense-tag", "sst2", "conll")


def pretrain_tiny(folder: Path, steps: int, seed: int) -> Path:
    """`elmo-pretrain --preset tiny` on a generated sense corpus; returns the model folder."""
    from elmo_hf.cli import run
    from elmo_hf.train.sense_corpus import generate_corpus

    model_dir = folder / "model"
    if (model_dir / "model.safetensors").exists():
        logger.info("reusing the biLM in %s", model_dir)
        return model_dir
    corpus = folder / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / "train.txt").write_text("\n".join(generate_corpus(20_000, seed=seed)) + "\n")
    (corpus / "valid.txt").write_text("\n".join(generate_corpus(500, seed=seed + 1000)) + "\n")
    argv = ["--preset", "tiny", "--train_file", str(corpus / "train.txt"), "--validation_file",
            str(corpus / "valid.txt"), "--output_dir", str(model_dir), "--max_steps", str(steps),
            "--optimizer", "adamw", "--learning_rate", "3e-3", "--lr_scheduler_type", "linear", "--warmup_steps", "20",
            "--per_device_batch_size", "64", "--logging_steps", "100", "--report_to", "none", "--use_cpu",
            "--disable_tqdm", "--overwrite_output_dir", "--seed", str(seed)]
    logger.info("elmo-pretrain %s", " ".join(argv))
    if run("elmo-pretrain", argv) != 0:
        raise SystemExit("pretraining failed (see the log above)")
    return model_dir


def task_data(task: str, root: Path, sense_train: int) -> tuple[str, Path] | None:
    """(kind, folder with train.SUFFIX and dev.SUFFIX) for `task`, or None when its data is absent."""
    from bench_finetune import write_tasks

    if task.startswith("sense"):
        folder = root / f"sense-data-{sense_train}"
        write_tasks(folder, sense_train)
        return ("classification" if task == "sense-cls" else "tagging"), folder
    source = {"sst2": (DATA / "sst2", "train.tsv", "dev.tsv", "tsv"),
              "conll": (DATA / "conll2003", "train.txt", "valid.txt", "conll")}[task]
    where, train, dev, suffix = source
    if not (where / train).exists() or not (where / dev).exists():
        logger.info("%s: skipped, %s not found", task, where)
        return None
    folder = root / f"{task}-data"  # the names bench_finetune.run expects, linked to the shared files
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in ((f"train.{suffix}", where / train), (f"dev.{suffix}", where / dev)):
        link = folder / name
        if not link.exists():
            link.symlink_to(target.resolve())
    return ("classification" if task == "sst2" else "tagging"), folder


def predict(kind: str, model, tokenizer, data: Path, batch_size: int) -> tuple[list, list, float]:
    """(predicted labels or tag lists, gold ones, seconds) on the held-out file of `data`."""
    from elmo_hf.train.tasks.common_data import read_classification_file, read_tagging_file
    from elmo_hf.train.tasks.common_predict import predict_labels, predict_tags

    start = time.perf_counter()
    if kind == "classification":
        rows = read_classification_file(data / "dev.tsv")
        ids = predict_labels(model, tokenizer, [row["text"].split() for row in rows], batch_size)
        labels = [model.config.id2label[i] for i in ids]
        return labels, [row["label"] for row in rows], time.perf_counter() - start
    rows = read_tagging_file(data / "dev.conll")
    ids = predict_tags(model, tokenizer, [row["tokens"] for row in rows], batch_size)
    # a word cut off by the tokenizer's length limit has no prediction: "O", as conlleval would score it
    tags = [["O" if i is None else model.config.id2label[i] for i in row] for row in ids]
    return tags, [row["tags"] for row in rows], time.perf_counter() - start


def compare(kind: str, folder: Path, data: Path, batch_size: int) -> dict:
    """Predictions of the saved head in float32, then after `quantize_int8()`, and how far they agree."""
    from elmo_hf.modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.train.tasks.common_data import accuracy, entity_scores

    model_class = ElmoForSequenceClassification if kind == "classification" else ElmoForTokenClassification
    model = model_class.from_pretrained(folder).eval()
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    result = {}
    predictions = {}
    for variant in ("float32", "int8"):
        if variant == "int8":
            model.quantize_int8()
        predicted, gold, seconds = predict(kind, model, tokenizer, data, batch_size)
        predictions[variant] = predicted
        if kind == "classification":
            score = {"accuracy": accuracy(predicted, gold)}
        else:
            score = {"f1": entity_scores(gold, predicted)["f1"]}
        result[variant] = {**score, "seconds": round(seconds, 2)}
    a, b = predictions["float32"], predictions["int8"]
    if kind == "classification":
        result["examples"] = len(a)
        result["agreement"] = sum(x == y for x, y in zip(a, b)) / len(a)
    else:
        words = sum(len(row) for row in a)
        result["examples"] = len(a)
        result["words"] = words
        result["agreement_words"] = sum(x == y for ra, rb in zip(a, b) for x, y in zip(ra, rb)) / words
        result["agreement"] = sum(ra == rb for ra, rb in zip(a, b)) / len(a)  # sentences with every tag the same
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bilm", default=None, help="biLM folder (default: pretrain a tiny one in WORK_DIR/bilm)")
    parser.add_argument("--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-int8-downstream")
    parser.add_argument("--pretrain_steps", type=int, default=400)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--sense_train", type=int, default=1000, help="training sentences of the sense tasks")
    parser.add_argument("--sst2_train", type=int, default=2000, help="training sentences of SST-2")
    parser.add_argument("--conll_train", type=int, default=500,
                        help="training sentences of CoNLL-2003 (the tagger's 20 default epochs: 1,250 steps)")
    parser.add_argument("--batch_size", type=int, default=32, help="prediction batch size")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    torch.set_num_threads(args.threads)
    from bench_finetune import run

    args.work_dir.mkdir(parents=True, exist_ok=True)
    bilm = args.bilm or str(pretrain_tiny(args.work_dir / "bilm", args.pretrain_steps, args.seed))
    results = {"bilm": bilm, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M"),
               "load_average_start": os.getloadavg(), "tasks": {}}
    for task in args.tasks:
        found = task_data(task, args.work_dir, args.sense_train)
        if found is None:
            continue
        kind, data = found
        size = {"sst2": args.sst2_train, "conll": args.conll_train}.get(task)
        options = [] if size is None else ["--max_train_samples", str(size)]
        out = args.work_dir / f"head-{task}"
        score, seconds, command = run(kind, bilm, data, out, options)
        row = {"kind": kind, "finetune_argv": command, "finetune_seconds": round(seconds, 1),
               "finetune_eval_score": score, **compare(kind, out, data, args.batch_size)}
        results["tasks"][task] = row
        logger.info("%s: %s", task, json.dumps({k: v for k, v in row.items() if k != "finetune_argv"}))
    results["load_average_end"] = os.getloadavg()
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
