"""The training part shared by the fine-tuning commands: the head loaded quietly, a `Trainer` whose checkpoints are
never cut in half by Ctrl-C, training and evaluation with the metrics files, and the one line an interrupt ends with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
from pathlib import Path

from transformers import Trainer

from modeling_elmo.tools.interrupts import Interrupted

from .finetune_arguments import HEAD_DEFAULTS, ModelArguments
from .finetune_cli import InputError
from .finetune_data import load_model

logger = logging.getLogger(__name__)

HEAD_CLASSES = {"sequence-classification": "ElmoForSequenceClassification",
                "token-classification": "ElmoForTokenClassification"}
HEAD_TASKS = {"sequence-classification": "classification", "token-classification": "tagging"}


class _HeadLoadReport(logging.Filter):
    """Drops transformers' load report when all it says is that the new head's weights were initialised (the
    point of fine-tuning; for a new head, also those of another task's head that do not fit), and says that in one
    INFO line; any other report (a biLM weight missing, a mismatch in a saved head of this task) goes through."""

    def __init__(self, base_prefix: str, new_head: bool):
        super().__init__()
        self.base_prefix, self.new_head = base_prefix, new_head
        self.initialised: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "LOAD REPORT" not in message:
            return True
        rows = [[cell.strip() for cell in line.split("|")] for line in message.splitlines() if line.count("|") >= 2]
        keys = [(row[0], row[1]) for row in rows[1:] if len(row) >= 2 and row[1] and not set(row[0]) <= {"-"}]
        benign = {"MISSING", "MISMATCH"} if self.new_head else {"MISSING"}
        if not keys or any(status not in benign or key.startswith(self.base_prefix) for key, status in keys):
            return True
        self.initialised = [key for key, _ in keys]
        return False


def saved_head(model_args: ModelArguments, task: str) -> bool:
    """Whether `model_name_or_path` is a local folder that already holds a head of `task` (its config.json says so):
    then its own pooling or encoder is kept rather than the command's default for a new head."""
    config = Path(model_args.model_name_or_path, "config.json")
    if not config.is_file():
        return False
    try:
        architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError):
        return False  # the loader says what is wrong with it
    return HEAD_CLASSES[task] in architectures


def load_head(model_args: ModelArguments, task: str, label2id: dict[str, int] | None, head_option: str, head_value,
              verbose: bool):
    """The head of `task` for the labels of `label2id` (None: the saved ones) and its tokenizer. `head_value` (the
    pooling or encoder) when given, else the saved one for a fine-tuned folder, else `HEAD_DEFAULTS`. One INFO line
    when the head is new instead of transformers' table of initialised weights."""
    head = {} if label2id is None else {"id2label": {i: label for label, i in label2id.items()}, "label2id": label2id}
    fine_tuned = saved_head(model_args, task)
    if head_value is None and not fine_tuned:
        head_value = HEAD_DEFAULTS[HEAD_TASKS[task]]
    if head_value is not None:
        head[head_option] = head_value
    if not fine_tuned and not model_args.ignore_mismatched_sizes:
        # a folder with another task's head (a classifier given to the tagger): its head weights do not fit
        model_args = dataclasses.replace(model_args, ignore_mismatched_sizes=True)
    report = _HeadLoadReport("elmo.", new_head=not fine_tuned)
    reporter = logging.getLogger("transformers.modeling_utils")
    with contextlib.ExitStack() as stack:
        if not verbose:  # transformers says only errors; its load report is heard here, to be judged
            level = reporter.level
            reporter.setLevel(logging.WARNING)
            reporter.addFilter(report)
            stack.callback(reporter.setLevel, level)
            stack.callback(reporter.removeFilter, report)
        model, tokenizer = load_model(model_args, task, head)  # the command has seeded every generator
    if report.initialised:
        parts = sorted({key.split(".")[0] for key in report.initialised})
        logger.info("initialised the %s head (%d tensors of %s)", HEAD_TASKS[task],
                    len(report.initialised), ", ".join(parts))
    return model, tokenizer


class GuardedTrainer(Trainer):
    """A `Trainer` whose checkpoints are written whole: SIGINT/SIGTERM during a save waits for its end.
    The tokenizer is saved with every checkpoint through the collator (`processing_class` stays None, so Trainer
    does not copy the tokenizer's character ids into the config as token ids)."""

    def __init__(self, *args, guard=None, **kwargs):
        arguments = kwargs.get("args")
        # Trainer creates the output folder: whether it was there before tells an interrupt what it may remove
        self.output_existed = arguments is None or os.path.exists(arguments.output_dir)
        super().__init__(*args, **kwargs)
        self.guard = guard

    def _save_checkpoint(self, model, trial):
        with self.guard.deferred() if self.guard is not None else contextlib.nullcontext():
            return super()._save_checkpoint(model, trial)


def raise_epochs_to_min_steps(trainer, training_args, min_steps: int) -> None:
    """`--min_train_steps`: when the epochs give fewer optimizer steps than `min_steps` (a small training set), train
    more whole epochs, as few as reach it; said in one line. Unchanged with --max_steps or `min_steps` 0."""
    import math

    if min_steps <= 0 or training_args.max_steps > 0:
        return
    batches = len(trainer.get_train_dataloader())  # per process
    per_epoch = max(1, math.ceil(batches / training_args.gradient_accumulation_steps))
    planned = math.ceil(training_args.num_train_epochs * per_epoch)
    if planned >= min_steps:
        return
    epochs = math.ceil(min_steps / per_epoch)
    logger.info("%g epochs of %d steps would train %d steps, fewer than --min_train_steps %d: training %d epochs "
                "(%d steps)", training_args.num_train_epochs, per_epoch, planned, min_steps, epochs, epochs * per_epoch)
    training_args.num_train_epochs = float(epochs)


def train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, guard, min_train_steps: int = 0) -> dict:
    """Train (when there is a training set), save the model, config and tokenizer, evaluate, write the metrics
    files, and say where everything went. `min_train_steps`: see `raise_epochs_to_min_steps`. An interrupt ends
    with `Interrupted.report`: what was kept, how to resume, and nothing half-written."""
    results = {}
    if train_dataset is not None:
        raise_epochs_to_min_steps(trainer, training_args, min_train_steps)
    output_dir = os.path.abspath(training_args.output_dir)
    existed = getattr(trainer, "output_existed", True)
    stage = "training"
    try:
        if train_dataset is not None:
            train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
            metrics = {**train_result.metrics, "train_samples": len(train_dataset),
                       "world_size": training_args.world_size}
            stage = "saving"
            with guard.deferred() if guard is not None else contextlib.nullcontext():
                trainer.save_model()  # model, config and tokenizer
                trainer.log_metrics("train", metrics)
                trainer.save_metrics("train", metrics)
                trainer.save_state()
            results.update(metrics)
        if eval_dataset is not None:
            stage = "evaluating"
            metrics = trainer.evaluate()
            metrics["eval_samples"] = len(eval_dataset)
            trainer.log_metrics("eval", metrics)
            trainer.save_metrics("eval", metrics)
            results.update(metrics)
    except Interrupted as interrupted:
        interrupted.report = interrupt_report(interrupted, stage, trainer, output_dir, existed)
        raise
    if trainer.is_world_process_zero() and results:
        files = ", ".join(f"{kind}_results.json" for kind, data in (("train", train_dataset), ("eval", eval_dataset))
                          if data is not None)
        what = "the model, the tokenizer and " if train_dataset is not None else ""
        logger.info("Wrote %smetrics (%s, all_results.json) to %s", what, files, output_dir)
    return results


def interrupt_report(interrupted: Interrupted, stage: str, trainer, output_dir: str, existed: bool) -> str:
    """The one line an interrupted run ends with. Before any checkpoint, a folder this run created is removed."""
    head = f"interrupted by {interrupted.name}"
    if stage != "training":
        return (f"{head} while {stage}: the fine-tuned model in {output_dir} is complete"
                + ("" if stage == "evaluating" else " up to its metrics files") + "; nothing else was written")
    state = trainer.state
    where = f" at step {state.global_step} of {state.max_steps}" if state.max_steps else ""
    checkpoints = sorted(Path(output_dir).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    if checkpoints:
        last = checkpoints[-1]
        return (f"{head}{where}: kept the checkpoints in {output_dir}; resume with the same command and "
                f"--resume_from_checkpoint {last}")
    if not existed and os.path.isdir(output_dir):
        shutil.rmtree(output_dir, ignore_errors=True)  # logs only: this run created it
    return (f"{head}{where}, before the first checkpoint: nothing was written to {output_dir} (--save_steps N "
            "saves checkpoints every N steps, to resume from)")


def check_split_option(word_split: str | None) -> None:
    """`--word_split`: a registered split, or a function of the user's named `module:function` (imported here, as
    the other commands do); one line otherwise."""
    from tokenization import check_word_split

    if word_split is not None:
        try:
            check_word_split(word_split, "--word_split", allow_import=True)
        except ValueError as error:
            raise InputError(str(error)) from None


def check_mode(data_args, training_args, model_args, task: str) -> bool:
    """Whether this run predicts; refuses (one line) a run with nothing to do, or one that predicts or evaluates
    without training from a folder that holds no fine-tuned head of `task`."""
    if training_args.do_predict and not data_args.test_file:
        raise InputError("--do_predict needs --test_file FILE (the sentences to label)")
    if not data_args.train_file:
        if not (data_args.test_file or data_args.validation_file):
            raise InputError("give --train_file FILE to fine-tune, or --do_predict --test_file FILE (and/or "
                             "--validation_file FILE) with an already fine-tuned --model_name_or_path folder")
        if not saved_head(model_args, task):
            raise InputError(f"--model_name_or_path {model_args.model_name_or_path} holds no fine-tuned "
                             f"{HEAD_CLASSES[task]}: without --train_file there is nothing to predict with; "
                             "fine-tune it first")
    return bool(data_args.test_file)


def read_inputs(task: str, read_train_and_eval, model_args, data_args, training_args, command_args):
    """What both fine-tuning commands do before loading a model: the seed set, `--word_split` and the mode checked,
    then the training and validation files (`read_train_and_eval(data_args, encoding)`) and the test file read, in
    that order, each checked before anything is written. Returns (train, validation, test); test is None unless
    the run predicts."""
    from transformers import set_seed

    from .predict import read_test_file

    set_seed(training_args.seed)
    check_split_option(data_args.word_split)
    predicting = check_mode(data_args, training_args, model_args, task)
    train, evaluation = read_train_and_eval(data_args, command_args.encoding)
    test = read_test_file(task, data_args, command_args.encoding) if predicting else None
    return train, evaluation, test


def check_known_labels(found, label2id: dict, what: str, validation_file: str) -> None:
    """The labels (`what`: "labels", "tags") of the validation file must be among the model's: one line otherwise."""
    unknown = sorted(set(found) - set(label2id))
    if unknown:
        raise InputError(f"--validation_file {validation_file}: {what} {unknown} are not among the model's "
                         f"{sorted(label2id)}")


def predict_after(trainer, task: str, test, data_args, command_args, training_args, guard) -> None:
    """`--do_predict`: write the predictions of the test file (main process only); an interrupt says that the
    model, if trained, is complete and that no predictions were written."""
    from .predict import write_predictions

    if not trainer.is_world_process_zero():
        return
    path = command_args.predictions_file or os.path.join(training_args.output_dir, "predictions.txt")
    model = trainer.accelerator.unwrap_model(trainer.model)
    try:
        write_predictions(model, trainer.data_collator.tokenizer, task, test, data_args.word_split,
                          training_args.per_device_eval_batch_size, path)
    except Interrupted as interrupted:
        kept = f"the fine-tuned model in {os.path.abspath(training_args.output_dir)} is complete; " \
            if data_args.train_file else ""
        interrupted.report = f"interrupted by {interrupted.name} while predicting: {kept}no predictions were written"
        raise
