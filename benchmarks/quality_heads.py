"""The paper's layer ablation at small scale, and task scores before and after domain adaptation.

Task heads on a frozen biLM, trained by the fine-tuning commands on fixed subsets (the first N training examples)
and scored on the full SST-2 dev set (accuracy), CoNLL-2003 valid set (entity F1) and, for question answering,
extractive questions asked of CoNLL-2003's sentences (SQuAD's F1; `qa-from-conll` writes them: no SQuAD-format set
ships with the shared data) and, for multiple choice, which of four endings follows half a Penn Treebank sentence
or which of four SST-2 reviews is the positive one (accuracy; `mc-from-ptb`, `mc-from-sst2`) and, for coreference,
the generated set of `train/coref_corpus.py` (the CoNLL F1 and its three metrics; `coref-set` writes it with the
set's two baselines), several seeds each:

* `char`: the character layer only (layer 0, a fixed mix `[1, -9e10, -9e10]`);
* `top`: the top biLSTM layer only (`--scalar_mix top`);
* `mix`: the learned scalar mix of all layers (the default head);
* a randomly initialised biLM of the same configuration (`random-bilm` writes one) under any of these.

    python benchmarks/quality_heads.py random-bilm --like RUNS/p3/ours --out RUNS/random-bilm
    python benchmarks/quality_heads.py run --out RUNS/heads --bilm ptb=RUNS/p3/ours --bilm random=RUNS/random-bilm \\
        --variants char,top,mix --seeds 0 1 2
    python benchmarks/quality_heads.py table RUNS/heads        # mean, spread and each seed, per biLM and variant
    python benchmarks/quality_heads.py domain-text --task sst2 --out RUNS/sst2-text   # train/held-out sentences
    python benchmarks/quality_heads.py run --out RUNS/defaults --bilm ptb=RUNS/p3/ours --variants mix --tasks sst2 \
        --setting default= --setting lr3e-3="--learning_rate 3e-3"     # one head's options against another's
    python benchmarks/quality_heads.py qa-from-conll --out RUNS/qa-data   # train.jsonl, dev.jsonl (SQuAD's records)
    python benchmarks/quality_heads.py run --out RUNS/qa --bilm ptb=RUNS/p3/ours --variants mix --tasks qa \\
        --qa_data RUNS/qa-data --setting default= --setting lr1e-2="--learning_rate 1e-2"
    python benchmarks/quality_heads.py mc-from-ptb --out RUNS/mc-data     # which ending follows (SWAG's rows)
    python benchmarks/quality_heads.py mc-from-sst2 --out RUNS/mc-sst2    # which of four reviews is positive
    python benchmarks/quality_heads.py coref-set --out RUNS/coref-data    # + baselines.json, the two baselines
    python benchmarks/quality_heads.py run --out RUNS/coref --bilm ptb=RUNS/p3/ours --tasks coref \
        --coref_data RUNS/coref-data --variants char,top,mix

`--setting NAME=OPTIONS` (repeatable) runs every job once per setting with those options added; the table names a
setting after its biLM (`ptb+lr3e-3`) and, where the runs evaluated every epoch, gives the dev score by epoch.

Each run is `python -m elmo_hf.cli finetune-classification`, `finetune-ner`, `finetune-qa`, `finetune
multiple-choice` or `finetune coreference` in its own process, pinned to one core with one thread; `--parallel 2`
runs two at a time (one a core). A run whose `eval_results.json` exists is not run again, so an interrupted benchmark
goes on where it stopped. Options after `--` go to every run.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"

VARIANTS = {
    # integers: argparse reads "-9e10" as an option, not a number
    "char": ["--scalar_mix", "fixed", "--scalar_mix_parameters", "1", "-9000000000", "-9000000000"],
    "top": ["--scalar_mix", "top"],
    "mix": ["--scalar_mix", "learned"],
}
TASKS = {
    "sst2": {"command": "finetune-classification", "metric": "eval_accuracy",
             "files": ["--train_file", "sst2/train.tsv", "--validation_file", "sst2/dev.tsv",
                       "--word_split", "whitespace"]},
    "conll": {"command": "finetune-ner", "metric": "eval_f1",
              "files": ["--train_file", "conll2003/train.txt", "--validation_file", "conll2003/valid.txt"]},
    # written by `qa-from-conll` into --qa_data (no SQuAD-format set ships with ../shared)
    "qa": {"command": "finetune-qa", "metric": "eval_f1",
           "files": ["--train_file", "train.jsonl", "--validation_file", "dev.jsonl"]},
    # written by `mc-from-ptb` or `mc-from-sst2` into --mc_data
    "mc": {"command": "finetune multiple-choice", "metric": "eval_accuracy",
           "files": ["--train_file", "train.jsonl", "--validation_file", "dev.jsonl"]},
    # written by `coref-set` into --coref_data
    "coref": {"command": "finetune coreference", "metric": "eval_conll_f1",
              "files": ["--train_file", "train.jsonl", "--validation_file", "dev.jsonl"]},
}
METRIC_NAMES = {"sst2": "SST-2 dev accuracy", "conll": "CoNLL-2003 valid entity F1",
                "qa": "CoNLL-2003 questions, valid F1", "mc": "multiple choice, valid accuracy",
                "coref": "generated coreference, valid CoNLL F1"}
# The generated coreference set's metrics beside the CoNLL F1 (their mean), as the task reports them
COREF_METRICS = {"muc_f1": "MUC F1", "bcub_f1": "B-cubed F1", "ceafe_f1": "CEAF-e F1", "conll_f1": "CoNLL F1"}
# The files the tasks with a generated set read from their --TASK_data folder, and the command that writes them
GENERATED = {"qa": "qa-from-conll", "mc": "mc-from-ptb` or `mc-from-sst2", "coref": "coref-set"}
# NER as reading comprehension (after Li et al. 2020, "A Unified MRC Framework for Named Entity Recognition"): a
# question per entity type that a sentence names exactly once, so every question has one right span
QUESTIONS = {"PER": "Which person is named ?", "LOC": "Which place is named ?",
             "ORG": "Which organisation is named ?", "MISC": "Which nationality , event or other name is named ?"}


def job_options(task: str, data: Path, train_samples: int, seed: int, variant: str, bilm: str, out: Path,
                extra: list[str], task_extra: list[str]) -> list[str]:
    files = [str(data / value) if value.endswith((".tsv", ".txt", ".jsonl")) else value
             for value in TASKS[task]["files"]]
    return [*files, "--model_name_or_path", bilm, "--output_dir", str(out), "--max_train_samples", str(train_samples),
            "--seed", str(seed), *VARIANTS[variant], "--use_cpu", "--save_strategy", "no", "--report_to", "none",
            "--overwrite_output_dir",  # a run that did not finish is run again from the start
            "--disable_tqdm", "true", "--per_device_eval_batch_size", "64", *extra, *task_extra]


def run_job(command: list[str], out: Path, core: int | None) -> dict:
    """One run, its output in `out` (a run's folder must hold its own files only) and its log beside it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    started = time.time()
    log_file = out.with_name(out.name + ".log")
    with open(log_file, "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        pin = [] if core is None else ["taskset", "-c", str(core)]
        code = subprocess.call([*pin, *command], cwd=REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({code}); see {log_file}")
    return {"wall_seconds": time.time() - started}


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bilms = dict(spec.split("=", 1) for spec in args.bilm)
    settings = dict(spec.split("=", 1) for spec in args.setting) if args.setting else {"": ""}
    jobs = []
    for (name, path), (setting, setting_options), variant, task, seed in itertools.product(
            bilms.items(), settings.items(), args.variants.split(","), args.tasks.split(","), args.seeds):
        label = f"{name}+{setting}" if setting else name
        folder = out / f"{task}-{label}-{variant}-seed{seed}"
        if (folder / "eval_results.json").exists():
            continue
        # each task's --TASK_train and --TASK_options; the generated sets' folder is --qa_data / --mc_data
        samples, task_extra = getattr(args, f"{task}_train"), getattr(args, f"{task}_options")
        data = Path(getattr(args, f"{task}_data", None) or args.data)
        options = job_options(task, data, samples, seed, variant, path, folder, args.extra,
                              [*task_extra.split(), *setting_options.split()])
        jobs.append(([sys.executable, "-m", "elmo_hf.cli", *TASKS[task]["command"].split(), *options], folder))
    print(f"{len(jobs)} runs to do", file=sys.stderr)
    free = list(range(args.parallel)) if args.cores is None else list(args.cores) or [None] * args.parallel

    def one(job):
        command, folder = job
        core = free.pop()
        try:
            timing = run_job(command, folder, core)
        finally:
            free.append(core)
        (folder / "timing.json").write_text(json.dumps(timing))
        print(f"done {folder.name} in {timing['wall_seconds']:.0f} s", file=sys.stderr)

    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(one, jobs))


def collect(out: Path) -> dict:
    """{(task, biLM, variant): [(seed, score, wall seconds)]} of the runs in `out`."""
    found: dict = {}
    for folder in sorted(out.iterdir()):
        if not (folder / "eval_results.json").exists():
            continue
        task, rest = folder.name.split("-", 1)
        bilm, variant, seed = rest.rsplit("-", 2)
        results = json.loads((folder / "eval_results.json").read_text())
        timing = json.loads((folder / "timing.json").read_text()) if (folder / "timing.json").exists() else {}
        found.setdefault((task, bilm, variant), []).append(
            (int(seed.removeprefix("seed")), results[TASKS[task]["metric"]], timing.get("wall_seconds"),
             epoch_scores(folder.with_name(folder.name + ".log"), TASKS[task]["metric"])))
    return found


def epoch_scores(log: Path, metric: str) -> list[float]:
    """The dev scores a run logged at the end of each epoch (`--eval_strategy epoch`; Trainer logs its metrics as a
    dict a line), in order; [] when it evaluated only at the end."""
    scores = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if line.startswith("{") and f"'{metric}'" in line:
            scores.append(float(ast.literal_eval(line)[metric]))  # transformers 5 logs the values as strings
    return scores[:-1] if len(scores) > 1 else []  # the last is the final evaluation again


def table(args: argparse.Namespace) -> None:
    found = collect(Path(args.out))
    print("| task (metric) | biLM | layers | mean | spread (min - max) | seeds | minutes per run |")
    print("|---|---|---|---|---|---|---|")
    curves = {}
    for (task, bilm, variant), rows in sorted(found.items()):
        scores = [score for _, score, *_ in sorted(rows)]
        minutes = [w / 60 for _, _, w, _ in rows if w]
        by_epoch = [epochs for *_, epochs in rows if epochs]
        if by_epoch and len({len(epochs) for epochs in by_epoch}) == 1:
            curves[(task, bilm, variant)] = [statistics.mean(values) for values in zip(*by_epoch)]
        metric = METRIC_NAMES[task]
        spread = f"{min(scores):.3f} - {max(scores):.3f}" if len(scores) > 1 else "-"
        print(f"| {metric} | {bilm} | {variant} | {statistics.mean(scores):.3f} | {spread} | "
              f"{', '.join(f'{s:.3f}' for s in scores)} | "
              f"{statistics.mean(minutes) if minutes else float('nan'):.1f} |")
    if curves:
        epochs = max(len(curve) for curve in curves.values())
        print("\nThe dev score at the end of each epoch, mean of the seeds:\n")
        print("| task | biLM | layers | " + " | ".join(str(epoch + 1) for epoch in range(epochs)) + " |")
        print("|---|---|---|" + "---|" * epochs)
        for (task, bilm, variant), curve in curves.items():
            print(f"| {task} | {bilm} | {variant} | " + " | ".join(f"{value:.3f}" for value in curve) + " |")
    if any(task == "coref" for task, *_ in found):
        coref_table(Path(args.out), args.coref_data)


def coref_table(out: Path, data: str | None) -> None:
    """The coreference runs' three metrics beside their mean, the CoNLL F1 (mean of the seeds), and with the set's
    folder (`coref-set`) its two baselines on the same validation documents: the CoNLL F1 alone can hide a head that
    links well (MUC) but splits or merges whole entities (CEAF-e)."""
    runs: dict = {}
    for folder in sorted(out.iterdir()):
        if folder.name.startswith("coref-") and (folder / "eval_results.json").exists():
            label = folder.name.removeprefix("coref-").rsplit("-", 1)[0]
            runs.setdefault(label, []).append(json.loads((folder / "eval_results.json").read_text()))
    rows = {label.replace("-", " / ", 1): [statistics.mean(r[f"eval_{key}"] for r in results) for key in COREF_METRICS]
            for label, results in runs.items()}
    if data and (Path(data) / "baselines.json").exists():
        for name, scores in json.loads((Path(data) / "baselines.json").read_text())["baselines"].items():
            rows[f"baseline: {name}"] = [scores[key] for key in COREF_METRICS]
    print("\nCoreference, the mean of the seeds:\n")
    print("| biLM / layers | " + " | ".join(COREF_METRICS.values()) + " |")
    print("|---|" + "---|" * len(COREF_METRICS))
    for label, values in rows.items():
        print(f"| {label} | " + " | ".join(f"{value:.3f}" for value in values) + " |")


def random_bilm(args: argparse.Namespace) -> None:
    """A biLM of the configuration of `--like`, randomly initialised as the model initialises itself, with its
    tokenizer: the `no pretraining` control."""
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from elmo_hf.modeling_elmo import ElmoModel

    torch.manual_seed(args.seed)
    ElmoModel(AutoConfig.from_pretrained(args.like)).save_pretrained(args.out)
    AutoTokenizer.from_pretrained(args.like).save_pretrained(args.out)
    print(f"wrote {args.out}", file=sys.stderr)


def conll_questions(sentences: list[dict], prefix: str) -> list[dict]:
    """SQuAD-style records (id, question, context, answers) from `read_conll_file`'s sentences: a sentence is the
    passage; one question per entity type it names exactly once (its entities read by the NER scorer's rules)."""
    from elmo_hf.train.tasks.common_data import get_entities

    records = []
    for number, sentence in enumerate(sentences):
        words = sentence["tokens"]
        spans = [(kind, first, last + 1) for kind, first, last in get_entities(sentence["tags"])]
        starts = [0]
        for word in words:
            starts.append(starts[-1] + len(word) + 1)
        for kind, question in QUESTIONS.items():
            found = [(first, end) for name, first, end in spans if name == kind]
            if len(found) != 1:
                continue
            first, end = found[0]
            records.append({"id": f"{prefix}{number}-{kind}", "question": question, "context": " ".join(words),
                            "answers": {"text": [" ".join(words[first:end])], "answer_start": [starts[first]]}})
    return records


def qa_from_conll(args: argparse.Namespace) -> None:
    """Extractive questions on CoNLL-2003's real sentences (`QUESTIONS`): train.jsonl and dev.jsonl in `--out`, JSON
    lines as `datasets`' SQuAD has them, for `run --tasks qa --qa_data OUT`."""
    from elmo_hf.train.tasks.common_data import read_conll_file

    data = Path(args.data) / "conll2003"
    for name, source in (("train", "train.txt"), ("dev", "valid.txt")):
        write_jsonl(Path(args.out) / f"{name}.jsonl", conll_questions(read_conll_file(data / source), f"{name}-"),
                    "questions")


def ptb_endings(path: Path, rows: int, seed: int) -> list[dict]:
    """SWAG-style rows from a PTB file's sentences of 8 to 30 words: the first half is the context, the endings are
    its own second half and three other sentences' second halves of the same length (so that length tells nothing),
    the right one at a random place."""
    import random

    chooser = random.Random(seed)
    sentences = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if 8 <= len(line.split()) <= 30]
    chooser.shuffle(sentences)
    halves: dict[int, list[list[str]]] = {}
    for words in sentences:
        halves.setdefault(len(words) - len(words) // 2, []).append(words[len(words) // 2:])
    records = []
    for words in sentences[:rows]:
        ending = words[len(words) // 2:]
        others = [other for other in chooser.sample(halves[len(ending)], 4) if other != ending][:3]
        if len(others) < 3:
            continue
        label = chooser.randrange(4)
        endings = [" ".join(other) for other in others]
        endings.insert(label, " ".join(ending))
        records.append({"context": " ".join(words[:len(words) // 2]), "endings": endings, "label": label})
    return records


def sst2_choices(path: Path, rows: int, seed: int) -> list[dict]:
    """Rows asking which of four SST-2 sentences is the positive review: one positive and three negative ones, the
    right one at a random place, the same context for every row. A head that reads a sentence's sentiment from its
    pooled vectors can learn it (chance 0.25), unlike `ptb_endings` on a small biLM."""
    import random

    from elmo_hf.train.tasks.common_data import read_classification_file

    chooser = random.Random(seed)
    reviews: dict[str, list[str]] = {"0": [], "1": []}
    for example in read_classification_file(path):
        reviews[example["label"]].append(example["text"])
    positives = list(reviews["1"])
    chooser.shuffle(positives)
    records = []
    for positive in positives[:rows]:
        endings = chooser.sample(reviews["0"], 3)
        label = chooser.randrange(4)
        endings.insert(label, positive)
        records.append({"context": "the positive review :", "endings": endings, "label": label})
    return records


# The generated multiple-choice sets: the rows' maker, the shared data's folder, the training and dev files.
MC_SETS = {"mc-from-ptb": (ptb_endings, "ptb", "ptb.train.txt", "ptb.valid.txt"),
           "mc-from-sst2": (sst2_choices, "sst2", "train.tsv", "dev.tsv")}


def multiple_choice_rows(args: argparse.Namespace) -> None:
    """A multiple-choice set of `MC_SETS` (`ptb_endings`: which ending follows; `sst2_choices`: which review is
    positive): train.jsonl and dev.jsonl in `--out`, for `run --tasks mc --mc_data OUT`."""
    make, folder, train, dev = MC_SETS[args.command]
    for name, source, rows in (("train", train, args.train_rows), ("dev", dev, args.dev_rows)):
        write_jsonl(Path(args.out) / f"{name}.jsonl", make(Path(args.data) / folder / source, rows, seed=0), "rows")


def coref_set(args: argparse.Namespace) -> None:
    """The generated coreference set (`train/coref_corpus.py`, the one its test runs the command on): train.jsonl
    and dev.jsonl in `--out`, drawn with seeds `--seed` and `--seed` + 1, for `run --tasks coref --coref_data OUT`;
    and baselines.json, the scores of the set's two baselines on dev.jsonl (every gold mention alone; each pronoun
    linked to the nearest earlier mention of its number), the floor a head must clear."""
    from elmo_hf.train.coref_corpus import corpus, nearest_baseline, singleton_baseline
    from elmo_hf.train.tasks.coreference_metrics import coref_scores

    train, dev = corpus(args.train_rows, seed=args.seed), corpus(args.dev_rows, seed=args.seed + 1)
    write_jsonl(Path(args.out) / "train.jsonl", train, "documents")
    write_jsonl(Path(args.out) / "dev.jsonl", dev, "documents")
    gold = [doc["clusters"] for doc in dev]
    baselines = {name: coref_scores(gold, [baseline(doc) for doc in dev])
                 for name, baseline in (("singletons", singleton_baseline), ("nearest", nearest_baseline))}
    # the set is small by construction (16 names, a few templates): say how much of dev a head has seen word for word
    seen = {json.dumps(doc["sentences"]) for doc in train}
    repeated = sum(json.dumps(doc["sentences"]) in seen for doc in dev)
    (Path(args.out) / "baselines.json").write_text(json.dumps(
        {"train_documents": len(train), "dev_documents": len(dev), "dev_documents_in_train": repeated,
         "seed": args.seed, "baselines": baselines}, indent=2))
    for name, scores in baselines.items():
        print(f"{name}: " + ", ".join(f"{label} {scores[key]:.3f}" for key, label in COREF_METRICS.items()),
              file=sys.stderr)
    print(f"{repeated} of {len(dev)} dev documents are also in train, word for word", file=sys.stderr)


def write_jsonl(path: Path, records: list[dict], what: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        file.writelines(json.dumps(record) + "\n" for record in records)
    print(f"wrote {path} ({len(records)} {what})", file=sys.stderr)


def domain_text(args: argparse.Namespace) -> None:
    """A task's sentences as a corpus, one a line, words split as its task reads them: `train.txt` (the training
    examples, deduplicated, for continuing a biLM) and `heldout.txt` (the dev/valid sentences, for perplexity)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = Path(args.data)
    from elmo_hf.train.tasks.common_data import read_classification_file, read_conll_file

    if args.task == "sst2":
        def read(path):
            return [example["text"] for example in read_classification_file(path)]
        train, heldout = read(data / "sst2" / "train.tsv"), read(data / "sst2" / "dev.tsv")
    else:
        def read(path):
            return [" ".join(sentence["tokens"]) for sentence in read_conll_file(path)]
        train, heldout = read(data / "conll2003" / "train.txt"), read(data / "conll2003" / "valid.txt")
    train = list(dict.fromkeys(train))
    (out / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    (out / "heldout.txt").write_text("\n".join(heldout) + "\n", encoding="utf-8")
    words = sum(len(s.split()) for s in train)
    print(f"wrote {out}/train.txt ({len(train)} sentences, {words} words) and heldout.txt ({len(heldout)})",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    runner = commands.add_parser("run", help="train and score the heads")
    runner.add_argument("--out", required=True, help="a folder for the runs (outside the repository)")
    runner.add_argument("--bilm", action="append", required=True, help="NAME=FOLDER, repeatable")
    runner.add_argument("--variants", default="char,top,mix", help=f"comma-separated of {sorted(VARIANTS)}")
    runner.add_argument("--tasks", default="sst2,conll")
    runner.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    runner.add_argument("--setting", action="append", help="NAME=OPTIONS, repeatable: the runs again with these "
                                                            "options (NAME= for the defaults)")
    runner.add_argument("--sst2_train", type=int, default=5000, help="the first N SST-2 training rows")
    runner.add_argument("--conll_train", type=int, default=2000, help="the first N CoNLL-2003 training sentences")
    runner.add_argument("--sst2_options", default="", help="more options for the SST-2 runs only")
    runner.add_argument("--conll_options", default="", help="more options for the CoNLL runs only")
    runner.add_argument("--qa_train", type=int, default=2000, help="the first N questions of --qa_data's train.jsonl")
    runner.add_argument("--qa_data", help="the folder `qa-from-conll` wrote")
    runner.add_argument("--qa_options", default="", help="more options for the question-answering runs only")
    runner.add_argument("--mc_train", type=int, default=2000, help="the first N rows of --mc_data's train.jsonl")
    runner.add_argument("--mc_data", help="the folder `mc-from-ptb` or `mc-from-sst2` wrote")
    runner.add_argument("--mc_options", default="", help="more options for the multiple-choice runs only")
    runner.add_argument("--coref_train", type=int, default=300,
                        help="the first N documents of --coref_data's train.jsonl")
    runner.add_argument("--coref_data", help="the folder `coref-set` wrote")
    runner.add_argument("--coref_options", default="", help="more options for the coreference runs only")
    runner.add_argument("--parallel", type=int, default=2, help="runs at a time, one core each")
    runner.add_argument("--cores", type=int, nargs="*", help="the cores to pin runs to (default 0 .. parallel - 1; "
                                                             "none given with the option: not pinned)")
    runner.add_argument("--data", default=str(DATA))
    runner.add_argument("extra", nargs=argparse.REMAINDER, help="after --: options for every run")
    tabler = commands.add_parser("table", help="the markdown table of a run folder")
    tabler.add_argument("out")
    tabler.add_argument("--coref_data", help="the folder `coref-set` wrote: its baselines beside the coreference runs")
    maker = commands.add_parser("random-bilm", help="a random biLM of another's configuration")
    maker.add_argument("--like", required=True)
    maker.add_argument("--out", required=True)
    maker.add_argument("--seed", type=int, default=0)
    texter = commands.add_parser("domain-text", help="a task's sentences as a corpus for --init_from")
    texter.add_argument("--task", choices=sorted(TASKS), required=True)
    texter.add_argument("--out", required=True)
    texter.add_argument("--data", default=str(DATA))
    questioner = commands.add_parser("qa-from-conll", help="extractive questions on CoNLL-2003's sentences")
    questioner.add_argument("--out", required=True)
    questioner.add_argument("--data", default=str(DATA))
    for name, text in (("mc-from-ptb", "multiple-choice rows (which ending follows) on PTB's sentences"),
                       ("mc-from-sst2", "multiple-choice rows (which review is positive) on SST-2's sentences")):
        chooser = commands.add_parser(name, help=text)
        chooser.add_argument("--out", required=True)
        chooser.add_argument("--train_rows", type=int, default=5000)
        chooser.add_argument("--dev_rows", type=int, default=1000)
        chooser.add_argument("--data", default=str(DATA))
    corefs = commands.add_parser("coref-set", help="the generated coreference set and its baselines' scores")
    corefs.add_argument("--out", required=True)
    corefs.add_argument("--train_rows", type=int, default=300)
    corefs.add_argument("--dev_rows", type=int, default=500)
    corefs.add_argument("--seed", type=int, default=0, help="the training documents' seed (dev: seed + 1)")
    args = parser.parse_args(argv)
    if args.command == "run":
        args.extra = [a for a in args.extra if a != "--"]
        for task in args.tasks.split(","):
            if task not in TASKS:
                parser.error(f"--tasks: unknown task {task!r}, one of {', '.join(TASKS)}")
            if task in GENERATED and not getattr(args, f"{task}_data"):
                parser.error(f"--tasks {task} needs --{task}_data, the folder `{GENERATED[task]}` wrote")
    if args.command in ("qa-from-conll", *MC_SETS) and not Path(args.data).is_dir():
        parser.error(f"--data: no folder {args.data} (the shared data: conll2003/, ptb/, sst2/)")
    sys.path.insert(0, str(REPO))
    {"run": run, "table": table, "random-bilm": random_bilm, "domain-text": domain_text,
     "qa-from-conll": qa_from_conll, **dict.fromkeys(MC_SETS, multiple_choice_rows),
     "coref-set": coref_set}[args.command](args)


if __name__ == "__main__":
    main()
