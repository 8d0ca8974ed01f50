"""How a sequence-classification head reads sentence pairs: as one sequence (a head built without `pair_combination`,
as transformers' GLUE recipe builds it) or each sentence on its own, combined as `[u; v; |u - v|; u * v]`
(`pair_combination="concat_diff_product"`). Accuracy on a held-out generated NLI set, mean of seeds.

The set: a premise "SUBJECT VERB ." and a hypothesis "SUBJECT' VERB' ."; entailment when both are the premise's,
neutral when the subject is another, contradiction when the verb is another (the three equally often), so the label
is a comparison of the two sentences' words. Each head trains with `Trainer` on the biLM given (frozen, as by
default), with the same steps, batch and learning rate, and the layers normalised before the mix
(`scalar_mix_layer_norm`: a random biLM's vectors are small).

    OMP_NUM_THREADS=1 python benchmarks/bench_pairs.py --model outputs/demo/model
    OMP_NUM_THREADS=1 python benchmarks/bench_pairs.py --model tiny --seeds 0 1 2   # a random tiny biLM
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SUBJECTS = ["a man", "a woman", "two dogs", "the child", "a cat", "the old farmer", "three girls", "my brother",
            "the teacher", "a small bird", "the doctor", "two boys"]
VERBS = ["sleeps", "runs", "sings", "eats", "reads", "dances", "waits", "laughs", "swims", "cooks", "works", "plays"]


def nli_rows(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        subject, verb = rng.choice(SUBJECTS), rng.choice(VERBS)
        label = rng.randrange(3)  # 0 entailment, 1 neutral, 2 contradiction
        other = rng.choice([s for s in SUBJECTS if s != subject]) if label == 1 else subject
        said = rng.choice([v for v in VERBS if v != verb]) if label == 2 else verb
        rows.append({"premise": f"{subject} {verb} .", "hypothesis": f"{other} {said} .",
                     "label": label})
    return rows


# name -> (pair_combination, classifier_pooling)
VARIANTS = {
    "one-sequence-mean": (None, "mean"),  # transformers' GLUE recipe: from_pretrained(folder, num_labels=3)
    "one-sequence-lstm": (None, "lstm"),  # the same with a biLSTM pooler (the fine-tuning command's default)
    "pair-mean": ("concat_diff_product", "mean"),
}


def accuracy(model_path: str, pair_combination: str | None, pooling: str, seed: int, train: list[dict],
             test: list[dict], steps: int) -> float:
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import (
        AutoModelForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from elmo_hf.tokenization import ElmoTokenizer

    torch.manual_seed(seed)
    tokenizer = ElmoTokenizer.from_pretrained(model_path)
    overrides = {"scalar_mix_layer_norm": True, "classifier_pooling": pooling}
    if pair_combination is not None:
        overrides["pair_combination"] = pair_combination
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=3, **overrides)

    def encode(rows):
        return Dataset.from_list(rows).map(lambda b: tokenizer(b["premise"], b["hypothesis"]), batched=True,
                                           remove_columns=["premise", "hypothesis"])

    with tempfile.TemporaryDirectory() as scratch:
        args = TrainingArguments(scratch, max_steps=steps, per_device_train_batch_size=32, learning_rate=1e-2,
                                 use_cpu=True, report_to="none", save_strategy="no", seed=seed,
                                 disable_tqdm=True, logging_strategy="no")
        trainer = Trainer(model=model, args=args, train_dataset=encode(train),
                          data_collator=DataCollatorWithPadding(tokenizer))
        trainer.train()
        output = trainer.predict(encode(test))
    return float((np.argmax(output.predictions, -1) == output.label_ids).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="an ELMo folder, or 'tiny' for a random tiny biLM")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train_size", type=int, default=2000)
    parser.add_argument("--test_size", type=int, default=600)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=sorted(VARIANTS))
    args = parser.parse_args()
    import torch

    from elmo_hf import modeling_elmo  # noqa: F401
    from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        model_path = args.model
        if model_path == "tiny":
            torch.manual_seed(0)
            model_path = str(Path(scratch) / "tiny")
            ElmoModel(ElmoConfig.from_preset("tiny")).save_pretrained(model_path)
            ElmoTokenizer().save_pretrained(model_path)
        train, test = nli_rows(args.train_size, 1000), nli_rows(args.test_size, 2000)
        results = {}
        for name in args.variants:
            combination, pooling = VARIANTS[name]
            started = time.perf_counter()
            scores = [accuracy(model_path, combination, pooling, seed, train, test, args.steps) for seed in args.seeds]
            results[name] = {"accuracy": round(statistics.mean(scores), 3), "per_seed": [round(s, 3) for s in scores],
                             "seconds": round(time.perf_counter() - started, 1)}
            print(name, json.dumps(results[name]), flush=True)
    print(json.dumps({"model": args.model, "steps": args.steps, "train": args.train_size, "test": args.test_size,
                      "results": results}))


if __name__ == "__main__":
    main()
