"""`elmo-pretrain` and `elmo-finetune sequence-classification` on the Accelerate of one environment
(tests/test_compat.py starts it in the accelerate 1.3 environment of tests/compat/, the oldest the `train` extra
allows, and in the pinned stack).

    python tests/compat/training_checks.py OUT --repo REPO

With the project's packages imported from REPO, as where it is installed, this writes a small corpus and a labelled
file into OUT and runs the two commands through their own frame (`elmo_hf.cli.run`, what the console scripts call) on
one thread: pretraining drives `accelerate.Accelerator` itself (6 steps), fine-tuning drives it through transformers'
`Trainer` (2 epochs and an evaluation). A command that fails ends the script with status 1. The last line printed is
JSON: the accelerate version, each pretraining step's loss and the fine-tuning's training loss and evaluation
metrics, for the calling test to compare across stacks. Standard library and the project's dependencies only.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from checkout import import_project_from

PRETRAIN = ["--preset", "tiny", "--per_device_batch_size", "4", "--unroll_steps", "8", "--disable_tqdm",
            "--logging_steps", "1", "--report_to", "none", "--shuffle_buffer", "50", "--max_steps", "6",
            "--softmax", "sampled", "--num_sampled", "8", "--dropout", "0.2"]
FINETUNE = ["--model_name_or_path", "tiny", "--use_cpu", "--report_to", "none", "--save_strategy", "no",
            "--disable_tqdm", "true", "--per_device_train_batch_size", "8", "--learning_rate", "2e-2",
            "--word_embedding_dim", "16", "--word_embedding_buckets", "512", "--representation_dropout", "0.1",
            "--num_train_epochs", "2", "--seed", "3"]


def write_files(out: Path) -> tuple[Path, Path]:
    """A corpus of sentences from a small grammar, and a two-class file whose label is in its words."""
    rng = random.Random(0)
    corpus, labelled = out / "corpus.txt", out / "labelled.tsv"
    nouns, verbs = ["cat", "dog", "fish", "bird"], ["sat", "slept", "ran", "swam"]
    corpus.write_text("".join(f"the {rng.choice(nouns)} {rng.choice(verbs)} on the mat .\n" for _ in range(200)),
                      encoding="utf-8")
    rows = ["label\ttext"]
    for _ in range(48):
        good = rng.random() < 0.5
        rows.append(f"{int(good)}\tthe {rng.choice(nouns)} was {'great' if good else 'awful'} today")
    labelled.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return corpus, labelled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repo", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import_project_from(args.repo)
    import accelerate
    import torch

    from elmo_hf.cli import run

    torch.set_num_threads(1)
    corpus, labelled = write_files(args.out)
    pretrained, classifier = args.out / "pretrained", args.out / "classifier"
    results = {"accelerate": accelerate.__version__}
    if run("elmo-pretrain", ["--train_file", str(corpus), "--output_dir", str(pretrained), *PRETRAIN]) != 0:
        raise SystemExit("elmo-pretrain failed (its lines are above)")
    log = (pretrained / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    results["pretrain_losses"] = [json.loads(line)["loss"] for line in log]
    if run("elmo-finetune", ["sequence-classification", "--train_file", str(labelled), "--validation_file",
                             str(labelled), "--output_dir", str(classifier), *FINETUNE]) != 0:
        raise SystemExit("elmo-finetune sequence-classification failed (its lines are above)")
    results["finetune_train"] = json.loads((classifier / "train_results.json").read_text(encoding="utf-8"))
    results["finetune_eval"] = json.loads((classifier / "eval_results.json").read_text(encoding="utf-8"))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
