"""The fine-tuning commands' run, the same for every task: parsing with the task's defaults, the files read and
checked, the head loaded quietly, a `Trainer` whose checkpoints are never cut in half by Ctrl-C, training and
evaluation with the metrics files, predictions, and the one line an interrupt ends with.

What differs between tasks is in the task's module under `train/tasks/` (`TASK`: names, defaults, the head option, the
data options; and `PARTS`, its `elmo_hf.train.tasks.Task`); nothing here branches on a task's name. The command layer
parses the options (`elmo_hf.train.finetune_arguments.parse_finetune`) and calls `run(options, guard)`;
`run_task(task, argv)` does both, for callers in Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import shlex
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import Trainer, TrainingArguments, set_seed
from transformers.trainer_pt_utils import metrics_format  # runtimes as h:mm:ss, floats rounded

from elmo_hf.modeling_elmo import ElmoConfig
from elmo_hf.modeling_elmo.configuration_elmo import TASK_CLASSES
from elmo_hf.tokenization import check_word_split, save_with_fast_twin
from elmo_hf.tools.core.errors import InputError, writing
from elmo_hf.tools.core.interrupts import Interrupted
from elmo_hf.tools.core.output_folders import owned, run_lock
from elmo_hf.tools.core.output_paths import check_writable_folder
from elmo_hf.tools.core.text_files import check_decodes
from elmo_hf.tools.loading import ModelLoadError, load_elmo

from .finetune_arguments import (
    FineTuneOptions,
    ModelArguments,
    command_name,
    parse_finetune,
    training_defaults,
    training_parser,
)
from .loss_lines_callback import LossLinesCallback
from .relabel_head import relabel_head
from .tasks import TASKS, FineTuningTask, Task, module_name, task_parts
from .tasks.common_data import folded_label, limit, read_input_file
from .tasks.common_predict import read_test_file, write_predictions
from .time_budget import parse_duration

logger = logging.getLogger(__name__)


def run_task(task: str, argv: Sequence[str], guard=None) -> dict:
    """`run` on the command line `argv` of `task`'s command (a key of `TASKS`), in this process: what
    `elmo-finetune TASK ARGV` does, without the command's console and exit status; returns the metrics. The warnings
    filters the run sets are put back after it."""
    with warnings.catch_warnings():
        return run(parse_finetune(task, argv), guard)


def run(options: FineTuneOptions, guard=None) -> dict:
    """Fine-tune, evaluate and predict as the command of `options.task` does; returns the metrics. `guard`: the
    command's `InterruptGuard`, if any (checkpoints and files written whole)."""
    row = TASKS[options.task]
    training_args = training_arguments(row, options)
    with output_claimed(row, options, training_args):
        return fine_tune(row, options, training_args, guard)


def output_claimed(row: FineTuningTask, options: FineTuneOptions, training_args):
    """What the run may write (`elmo_hf.tools.core.output_folders`): a run that trains or evaluates owns `--output_dir`
    (another run's files refused, or removed with `--overwrite_output_dir`; its own checkpoints kept when it resumes
    from one); a run that only predicts writes its predictions file, an existing one refused unless
    `--overwrite_output_dir`. Either holds the folder's lock while it runs."""
    data_args, command_args = options.data, options.command
    overwrite = command_args.overwrite_output_dir
    if data_args.train_file or data_args.validation_file:
        reads = (options.model.model_name_or_path, options.model.tokenizer_name, data_args.train_file,
                 data_args.validation_file, data_args.test_file)
        return owned(Path(training_args.output_dir), command_name(row), overwrite,
                     resuming=training_args.resume_from_checkpoint is not None, reads=reads)
    path = Path(predictions_path(task_parts(row.name), command_args, training_args))
    if path.exists() and not overwrite:
        raise InputError(f"{path} exists (the predictions of another run): give another --output_dir or "
                         "--predictions_file, or --overwrite_output_dir to replace it")
    return run_lock(path.parent if command_args.predictions_file else Path(training_args.output_dir),
                    command_name(row))


def predictions_path(parts: Task, command_args, training_args) -> str:
    return command_args.predictions_file or os.path.join(training_args.output_dir, parts.predictions_file)


def fine_tune(row: FineTuningTask, options: FineTuneOptions, training_args, guard=None) -> dict:
    """The run in its output folder: read, load, train, evaluate, predict."""
    parts = task_parts(options.task)
    model_args, head_args, data_args, command_args = options.model, options.head, options.data, options.command
    train_examples, eval_examples, test = read_inputs(row, parts, model_args, data_args, training_args,
                                                      command_args)
    # a new head's labels are the training file's: one only the validation file has would never be learned. A task
    # without a label set trains with none ({}: a new head as the config makes it, a saved one as it is)
    labels = parts.sorted_labels(label for example in train_examples for label in parts.labels_of(example)) \
        if train_examples and parts.has_label_set else None
    label2id = {label: i for i, label in enumerate(labels)} if labels else {} if train_examples else None
    model, tokenizer = load_head(model_args, row, label2id, getattr(head_args, row.head_option), command_args.verbose,
                                 parts.head_settings(train_examples, data_args) if train_examples else None,
                                 parts.head_options(data_args))
    if train_examples:
        # what the loaded head can learn (a CRF's scheme, its words), before anything is written
        parts.check_training_examples(model.config, train_examples, data_args, tokenizer=tokenizer)
        warn_if_unseen(train_examples, parts, tokenizer, data_args, model.config)
    if test is not None:  # what the loaded head can predict, before anything is written
        test = parts.prepare_test(model, tokenizer, test, data_args)
        if not train_examples and parts.splits_test_text(test):
            warn_of_another_split(tokenizer, data_args)
    if train_examples or eval_examples:  # after the model: a bad one is one line
        logging.getLogger(parts_logger_name(row)).info(
            "%d training and %d validation %s%s", len(train_examples), len(eval_examples), row.examples,
            f", {row.labels} {labels}" if labels else "")
    before_training(model, tokenizer, row, data_args, training_args)
    label2id = model.config.label2id
    check_known_labels(eval_examples, parts, label2id, row.labels, data_args, bool(train_examples))
    with training_args.main_process_first(desc="tokenizing"):
        train_dataset = parts.encode(train_examples, tokenizer, label2id, data_args) if train_examples else None
        eval_dataset = parts.encode(eval_examples, tokenizer, label2id, parts.evaluation_data_args(data_args)) \
            if eval_examples else None

    # a task whose scores need the examples behind the dataset's rows (question answering's windows) has its own
    compute_metrics, preprocess_logits = (
        parts.evaluation_metrics(model.config, data_args, eval_examples, eval_dataset) if eval_dataset is not None
        else parts.metrics(model.config, data_args))
    trainer = GuardedTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=parts.collator(tokenizer),
        compute_metrics=compute_metrics,
        preprocess_logits_for_metrics=preprocess_logits,
        callbacks=[LossLinesCallback(), *time_budget(command_args)],
        guard=guard,
    )
    results = train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, guard,
                                 min_train_steps=getattr(data_args, "min_train_steps", 0),
                                 example_counts=(len(train_examples), len(eval_examples)))
    if test is not None:
        predict_after(trainer, parts, test, data_args, command_args, training_args, row.examples)
    return results


# ---------------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------------
def training_arguments(row: FineTuningTask, options: FineTuneOptions) -> TrainingArguments:
    """transformers' `TrainingArguments` from what `parse_finetune` left (the words of the command line, or the JSON
    file's fields), with the task's defaults (`row.training_defaults`) where the user gave none, and `--output_dir`;
    every option of ours checked too. A mistyped option, or a value transformers refuses: `InputError`, one line."""
    parser = training_parser(row)
    # No accelerator: pinned memory has nothing to speed up, and torch warns about it on every data loader.
    defaults = {**training_defaults(row), "dataloader_pin_memory": torch.cuda.is_available()}
    if options.command.output_dir is not None:
        defaults["output_dir"] = options.command.output_dir
    parser.set_defaults(**defaults)
    try:
        if isinstance(options.training, dict):  # the other fields of a JSON options file
            (training_args,) = parser.parse_dict({**defaults, **options.training})
        else:
            training_args, unknown = parser.parse_args_into_dataclasses(list(options.training),
                                                                        return_remaining_strings=True)
            if unknown:
                raise InputError(f"unrecognized arguments: {' '.join(unknown)} ({command_name(row)} --help lists the "
                                 "options)")
    except ValueError as error:  # a dataclass's own check (TrainingArguments' __post_init__): its first line
        raise InputError(str(error).strip().splitlines()[0]) from error
    if not options.verbose:  # torch's warning on every data loader of a machine without an accelerator
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
    parsed = (options.model, options.head, options.data, options.command, training_args)
    _check_training_numbers(training_args, parsed)
    check_writable_folder(Path(training_args.output_dir), "--output_dir")
    _log_processes(training_args, logging.getLogger(parts_logger_name(row)))
    return training_args


def parts_logger_name(row: FineTuningTask) -> str:
    """The logger of the task's command lines ("elmo_hf.train.tasks.token_classification")."""
    return module_name(row.name)


def _check_training_numbers(training_args, parsed) -> None:
    """The counts and rates Trainer takes as they come: one line for a value it would fail on, or that would train
    nothing, before anything is written."""
    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
        if getattr(training_args, name) < 1:
            raise InputError(f"--{name} must be a positive integer, got {getattr(training_args, name)}")
    training = any(getattr(arguments, "train_file", None) for arguments in parsed)
    if training and not training_args.learning_rate > 0:
        raise InputError(f"--learning_rate must be positive, got {training_args.learning_rate}")
    if training and training_args.max_steps <= 0 and not training_args.num_train_epochs > 0:
        raise InputError(f"--num_train_epochs {training_args.num_train_epochs:g} with no --max_steps trains nothing: "
                         "give a positive number of epochs or steps")


def _log_processes(training_args, command_logger: logging.Logger) -> None:
    """Several processes: every process says its rank and the world size."""
    if training_args.world_size > 1:
        command_logger.warning("Process rank %d of world size %d (device %s)",
                               training_args.process_index, training_args.world_size, training_args.device)
    else:
        command_logger.debug("one process, device %s", training_args.device)


# ---------------------------------------------------------------------------------------------------------------
# The head
# ---------------------------------------------------------------------------------------------------------------
def saved_config(model_args: ModelArguments) -> dict:
    """The config.json of `model_name_or_path` when it is a local folder; {} otherwise (a preset, a Hub id, or a
    file the loader then names)."""
    config = Path(model_args.model_name_or_path, "config.json")
    if not config.is_file():
        return {}
    try:
        saved = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # the loader says what is wrong with it
    return saved if isinstance(saved, dict) else {}


def saved_head(model_args: ModelArguments, row: FineTuningTask) -> bool:
    """Whether `model_name_or_path` is a local folder that already holds a head of the task (its config.json says
    so): then its own pooling or encoder is kept rather than the command's default for a new head."""
    return head_class_name(row) in (saved_config(model_args).get("architectures") or [])


def head_class_name(row: FineTuningTask) -> str:
    """The head's class, from its row of `ELMO_CLASSES`: "ElmoForTokenClassification"."""
    return TASK_CLASSES[row.name].path.rsplit(".", 1)[1]


def head_labels(model_args: ModelArguments, row: FineTuningTask, label2id: dict[str, int]) -> tuple[dict | None, bool]:
    """`(labels, by_name)`: the labels to load a saved head of the task with, and whether it is then relabelled to
    the data's by name (`relabel_head`). The head keeps its own labels and ids when the data's are among them
    (None, False); a head saved without label names (transformers' LABEL_0, ...) becomes a new one for the data's
    (label2id, False); any other head goes on from its saved labels, moved to the data's by name (None, True):
    never by position, which renamed the rows of a head of as many labels."""
    saved = saved_config(model_args).get("label2id") or {}
    saved = sorted(saved, key=lambda label: saved[label])  # in id order
    if set(label2id) <= set(saved):
        logger.info("continuing the saved %s head: the data's %s are among its %s", row.name, row.labels, saved)
        return None, False
    if all(re.fullmatch(r"LABEL_\d+", str(label)) for label in saved):
        return label2id, False  # a head saved without label names: nothing of the user's is dropped
    return None, True


def check_same_problem(model_args: ModelArguments, row: FineTuningTask, settings: dict | None) -> None:
    """A saved head continued on other labels must solve the data's kind of problem: a regression head (scores)
    given classes, or a classifier given scores, would train one loss on the other's targets."""
    saved = saved_config(model_args)
    regression = [config.get("problem_type") == "regression" for config in (saved, settings or {})]
    if regression[0] != regression[1]:
        kinds = ["scores (a regression)", f"classes ({row.labels})"]
        raise InputError(f"--model_name_or_path {model_args.model_name_or_path} holds a {row.name} head of "
                         f"{kinds[not regression[0]]}, and the training file has {kinds[not regression[1]]}: "
                         "fine-tune the biLM folder it was made from")


# Options that change what a trained head computes: without --train_file they would be set on the saved head,
# re-initialising or dropping its trained weights, or pooling other vectors than it was trained on.
HEAD_SHAPE_OPTIONS = ("scalar_mix", "scalar_mix_parameters", "scalar_mix_layer_norm", "keep_sentence_boundaries",
                      "word_embedding_dim", "word_embedding_buckets", "head_hidden_size")


def check_predict_only_options(model_args: ModelArguments, head_option: str, head_value,
                               options: dict | None = None) -> None:
    """Without --train_file, the saved head predicts as it was trained: an option of `HEAD_SHAPE_OPTIONS` (or the
    pooling / encoder, or a config field of the task's own `options`) other than the saved value is refused in one
    line."""
    saved, defaults = saved_config(model_args), ElmoConfig()
    given = {name: getattr(model_args, name) for name in HEAD_SHAPE_OPTIONS if getattr(model_args, name) is not None}
    if head_value is not None:
        given[head_option] = head_value
    given.update(options or {})
    changed = [f"--{name} {value} (trained: {saved.get(name, getattr(defaults, name, None))})"
               for name, value in given.items() if value != saved.get(name, getattr(defaults, name, None))]
    if model_args.ignore_mismatched_sizes:
        changed.append("--ignore_mismatched_sizes true (it re-initialises an output layer that does not fit, which "
                       "would then predict at random)")
    if changed:
        raise InputError(f"{', '.join(changed)}: without --train_file the fine-tuned head of "
                         f"{model_args.model_name_or_path} predicts as it was trained; leave the option out, or "
                         "fine-tune with it (--train_file)")


def load_head(model_args: ModelArguments, row: FineTuningTask, label2id: dict[str, int] | None, head_value,
              verbose: bool, settings: dict | None = None, options: dict | None = None):
    """The head of the task for the labels of `label2id` (None: predicting with the saved ones; {}: training a task
    without a label set) and its tokenizer.
    `head_value` (of `row.head_option`: the pooling or encoder) when given, else the saved one for a fine-tuned
    folder, else `row.head_default`. A fine-tuned folder keeps its head when the data's labels are among its own
    (`head_labels`). `settings`: config fields the training data calls for (the task's `head_settings`), where the
    saved config has none. `options`: config fields of the task's own options (the task's `head_options`), which
    win over the saved config. One INFO line when the head is new instead of transformers' table of initialised
    weights."""
    fine_tuned = saved_head(model_args, row)
    if label2id is None:
        check_predict_only_options(model_args, row.head_option, head_value, options)
    data_labels, by_name = label2id, False
    if label2id is not None and fine_tuned:  # a task without a label set ({}) trains a saved head further as it is
        label2id, by_name = head_labels(model_args, row, label2id) if label2id else (None, False)
    if by_name:
        check_same_problem(model_args, row, settings)
    new_head = not fine_tuned or label2id is not None
    head = {} if not label2id else {"id2label": {i: label for label, i in label2id.items()}, "label2id": label2id}
    if head_value is None and not fine_tuned:
        head_value = row.head_default
    if head_value is not None:
        head[row.head_option] = head_value
    if label2id is not None and not fine_tuned:  # training a new head: the task's own defaults, where none was given
        head.update({key: value for key, value in row.new_head_defaults.items()
                     if getattr(model_args, key, None) is None})
    saved = saved_config(model_args)
    head.update({key: value for key, value in (settings or {}).items() if saved.get(key) is None})
    head.update(options or {})
    if new_head and not model_args.ignore_mismatched_sizes:
        # a folder with another task's head (a classifier given to the tagger), or other labels: they do not fit
        model_args = dataclasses.replace(model_args, ignore_mismatched_sizes=True)
    with _load_report_held(verbose) as held:
        # the command has seeded every generator
        model, tokenizer, info = load_model(model_args, row.name, head, output_loading_info=True)
    if by_name:
        relabel_head(model, data_labels, row.labels)
    weights = _new_head_weights(info, new_head, f"{model.base_model_prefix}.")
    if weights is None:
        held.release()  # a biLM weight missing, a saved head of this task that does not fit: transformers' report
    elif weights[0]:
        initialised, unused = weights
        logger.info("initialised the %s head (%d tensors of %s)%s", row.name, len(initialised),
                    ", ".join(sorted({key.split(".")[0] for key in initialised})),
                    f"; the saved {', '.join(sorted({key.split('.')[0] for key in unused}))} weights of another "
                    "head are not used" if unused else "")
    return model, tokenizer


def load_model(model_args: ModelArguments, task: str, head_overrides: dict, seed: int | None = None,
               output_loading_info: bool = False):
    """`(model, tokenizer)`: the head of `task` (a key of `TASKS`: "sequence-classification",
    "token-classification", ...) on the biLM of `model_name_or_path` (a folder, a Hub id, or a preset: a random biLM),
    by `elmo_hf.tools.loading.load_elmo`; `head_overrides` (labels, pooling, ...) win over the options and the saved
    config. `seed`: of a preset's random weights (None: the generators as `set_seed` left them). `output_loading_info`:
    `(model, tokenizer, info)`, with `load_elmo`'s loading info."""
    try:
        return load_elmo(
            model_args.model_name_or_path,
            task,
            seed=seed,
            config_overrides={**model_args.config_overrides(), **head_overrides},
            trust_remote_code=model_args.trust_remote_code,
            tokenizer_name=model_args.tokenizer_name,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            output_loading_info=output_loading_info,
        )
    except ModelLoadError as error:
        raise InputError(f"--model_name_or_path: {error}") from error



class _HeldLoadReport(logging.Filter):
    """Holds back transformers' load report (the table it logs when weights were initialised or left out) while a
    head loads; `release()` lets it through."""

    def __init__(self, reporter: logging.Logger):
        super().__init__()
        self.reporter, self.records = reporter, []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName == "log_state_dict_report" or "LOAD REPORT" in record.getMessage():
            self.records.append(record)
            return False
        return True

    def release(self) -> None:
        for record in self.records:
            self.reporter.handle(record)
        self.records = []


@contextlib.contextmanager
def _load_report_held(verbose: bool):
    """Within the block, transformers' load report is held (`_HeldLoadReport`), to be judged from the loading
    info; with `verbose` it is shown as transformers logs it."""
    reporter = logging.getLogger("transformers.modeling_utils")
    held = _HeldLoadReport(reporter)
    if verbose:
        yield held
        return
    level = reporter.level
    reporter.setLevel(logging.WARNING)  # transformers says only errors: its report (a warning) is made, then held
    reporter.addFilter(held)
    try:
        yield held
    finally:
        reporter.removeFilter(held)
        reporter.setLevel(level)


def _new_head_weights(info: dict | None, new_head: bool, base_prefix: str) -> tuple[list[str], list[str]] | None:
    """From `from_pretrained`'s loading info: the head's weights that were initialised, and (for a new head) those
    of another task's head in the folder that the model does not use; None when the loading info tells of more
    than the point of fine-tuning: a biLM weight (`base_prefix`) missing, unused or of another shape, or a saved
    head of this task that does not fit (a weight of another shape, or one this head does not have)."""
    if info is None:  # a preset: nothing was loaded
        return [], []
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(key for key, *_ in info.get("mismatched_keys") or ())
    unused = sorted(info.get("unexpected_keys") or ())
    if any(key.startswith(base_prefix) for key in (*missing, *mismatched, *unused)):
        return None
    if not new_head and (mismatched or unused):
        return None
    return sorted({*missing, *mismatched}), unused


# Below this share of the training words known to the biLM's pretraining vocabulary, a head on a small biLM rarely
# learns from the mixed vectors alone (benchmarks/bench_finetune.md: the demo model on unseen sentiment words).
UNSEEN_WORDS_WARNING = 0.5


def warn_if_unseen(examples: list[dict], parts: Task, tokenizer, data_args, config) -> None:
    """One warning when most words of the training data are not in the word vocabulary the biLM was pretrained with
    (where the folder has one): ELMo reads them by their characters, but a small biLM may not tell them apart, and a
    trainable word embedding (`--word_embedding_dim`) then helps."""
    vocabulary = set(getattr(tokenizer, "word_vocab", None) or ())
    if not vocabulary or getattr(config, "word_embedding_dim", 0):
        return
    words = [word for example in examples for word in parts.words_of(example, tokenizer, data_args)]
    known = sum(word in vocabulary for word in words) / max(len(words), 1)
    if words and known < UNSEEN_WORDS_WARNING:
        logger.warning("%.0f%% of the training words are not in the biLM's pretraining vocabulary (%d words): it reads "
                       "them by their characters, which a small biLM may not tell apart; --word_embedding_dim 32 adds "
                       "a trainable word embedding for them", 100 * (1 - known), len(vocabulary))


def before_training(model, tokenizer, row: FineTuningTask, data_args, training_args) -> None:
    """What a training run settles between loading and the `Trainer`: float32 kernels for a biLM saved for int8
    inference, the `--word_split` saved with the tokenizer, and a `--resume_from_checkpoint` that fits the model."""
    if not data_args.train_file:
        return
    if getattr(model.config, "lstm_implementation", None) == "int8":
        # int8 multiplies are inference only (no gradients, no GPU): read at every call, so switched here
        model.config.lstm_implementation = "auto"
        logger.info("%s was saved for int8 inference: training in float32 (lstm_implementation auto, saved so; "
                    "quantize_int8() the fine-tuned model again for int8 inference)", model.name_or_path)
    if data_args.word_split is not None and getattr(tokenizer, "word_split", None) not in (None, data_args.word_split):
        logger.info("the tokenizer is saved with --word_split %s (was %s): predicting from the fine-tuned folder "
                    "splits text the same way", data_args.word_split, tokenizer.word_split)
        tokenizer.word_split = data_args.word_split
    check_resume(training_args.resume_from_checkpoint, model, row.name)


def warn_of_another_split(tokenizer, data_args) -> None:
    """A predict-only run with a --word_split other than the one the fine-tuned head's tokenizer saved: the head
    learned the units of its own split, and tags or classifies others (jieba's words for a tagger of characters).
    Said in a warning, not refused: a user may mean it."""
    given, saved = getattr(data_args, "word_split", None), getattr(tokenizer, "word_split", None)
    if given is None or saved is None or given == saved:
        return
    logger.warning("--word_split %s: the fine-tuned head was trained on the words of its tokenizer's split %s, and "
                   "now reads the units of another split, which it may never have seen; leave --word_split out to "
                   "split as it was trained", given, saved)


def check_resume(checkpoint: str | None, model, task: str) -> None:
    """`--resume_from_checkpoint`: a checkpoint folder (trainer_state.json and the model's weights) of a run of
    `task` (a key of `TASKS`) with this run's labels and weight shapes; one line otherwise, before anything is
    written."""
    if checkpoint is None:
        return
    option = f"--resume_from_checkpoint {checkpoint}"
    folder = Path(checkpoint)
    if not folder.is_dir():
        raise InputError(f"{option}: no such folder (a checkpoint is OUTPUT_DIR/checkpoint-N)")
    weights = [folder / name for name in ("model.safetensors", "pytorch_model.bin") if (folder / name).is_file()]
    if not (folder / "trainer_state.json").is_file() or not weights:
        raise InputError(f"{option}: not a checkpoint (it needs trainer_state.json and model.safetensors; a checkpoint "
                         "is OUTPUT_DIR/checkpoint-N)")
    what = TASKS[task].labels
    try:
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("label2id")
    except (OSError, ValueError, AttributeError):
        saved = None  # no readable config: the weights tell
    ours = dict(model.config.label2id)
    if isinstance(saved, dict) and saved != ours:
        raise InputError(f"{option}: a checkpoint of a run with the {what} {sorted(saved, key=saved.get)}, not this "
                         f"run's {sorted(ours, key=ours.get)}: resume with the command and files that wrote it")
    if weights[0].suffix == ".safetensors":
        unfit = _unfit_weight(weights[0], model)
        if unfit:
            raise InputError(f"{option}: its weights do not fit this run's model ({unfit}): a run with other head "
                             "options? resume with the command that wrote it")


def _unfit_weight(path: Path, model) -> str | None:
    """The first weight of the checkpoint at `path` that the model lacks, or has not, or has in another shape,
    said in a few words; None when every one fits (a checkpoint holds exactly the model's state dict)."""
    shapes = {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
    with safe_open(path, framework="pt") as stored:
        saved = {name: list(stored.get_slice(name).get_shape()) for name in stored.keys()}
    for name in sorted(shapes.keys() | saved.keys()):
        if name not in saved:
            return f"{name} is not in it"
        if name not in shapes:
            return f"{name} is not in this model"
        if saved[name] != shapes[name]:
            return f"{name}: {saved[name]} there, {shapes[name]} here"
    return None


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


def time_budget(command_args) -> list:
    """`--max_train_time`: the callback that ends training when the time is spent (none without the option)."""
    if command_args.max_train_time is None:
        return []
    from .time_budget_callback import TimeBudgetCallback

    return [TimeBudgetCallback(parse_duration(command_args.max_train_time))]


def raise_epochs_to_min_steps(trainer, training_args, min_steps: int) -> None:
    """`--min_train_steps`: when the epochs give fewer optimizer steps than `min_steps` (a small training set), train
    more whole epochs, as few as reach it; said in one line. Unchanged with --max_steps or `min_steps` 0."""
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


def train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, guard, min_train_steps: int = 0,
                       example_counts: tuple[int, int] | None = None) -> dict:
    """Train (when there is a training set), save the model, config and tokenizer, evaluate, write the metrics
    files, and say where everything went. `min_train_steps`: see `raise_epochs_to_min_steps`. `example_counts`: the
    training and validation examples, the `*_samples` of the metrics (a question read in several windows is one
    sample; its windows, the dataset's rows, are `*_windows` then). An interrupt ends with `Interrupted.report`:
    what was kept, how to resume, and nothing half-written."""
    def samples(split: str, dataset, count: int | None) -> dict:
        if count is None or count == len(dataset):
            return {f"{split}_samples": len(dataset)}
        return {f"{split}_samples": count, f"{split}_windows": len(dataset)}

    counts = example_counts or (None, None)
    results = {}
    if train_dataset is not None:
        raise_epochs_to_min_steps(trainer, training_args, min_train_steps)
    output_dir = os.path.abspath(training_args.output_dir)
    existed = getattr(trainer, "output_existed", True)
    stage = "training"
    try:
        if train_dataset is not None:
            train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
            metrics = {**train_result.metrics, **samples("train", train_dataset, counts[0]),
                       "world_size": training_args.world_size}
            stage = "saving"
            with guard.deferred() if guard is not None else contextlib.nullcontext(), \
                    writing(output_dir, "--output_dir"):
                trainer.save_model()  # model, config and tokenizer
                save_with_fast_twin(trainer.data_collator.tokenizer, output_dir)  # example scripts ask for a fast one
                log_metrics(trainer, "train", metrics)
                trainer.save_metrics("train", metrics)
                trainer.save_state()
            results.update(metrics)
        if eval_dataset is not None:
            stage = "evaluating"
            metrics = trainer.evaluate()
            metrics.update(samples("eval", eval_dataset, counts[1]))
            log_metrics(trainer, "eval", metrics)
            with writing(output_dir, "--output_dir"):
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


def log_metrics(trainer, split: str, metrics: dict) -> None:
    """`Trainer.log_metrics` prints a table to stdout; the commands say the same in one INFO line (main process)."""
    if trainer.is_world_process_zero():
        logger.info("%s metrics: %s", split, ", ".join(f"{key} {value}"
                                                       for key, value in sorted(metrics_format(metrics).items())))


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
                f"--resume_from_checkpoint {shlex.quote(str(last))}")  # pasted into a shell as it is
    if not existed and os.path.isdir(output_dir):
        shutil.rmtree(output_dir, ignore_errors=True)  # logs only: this run created it
    return (f"{head}{where}, before the first checkpoint: nothing was written to {output_dir} (--save_steps N "
            "saves checkpoints every N steps, to resume from)")


def check_split_option(word_split: str | None) -> None:
    """`--word_split`: a registered split, or a function of the user's named `module:function` (imported here, as
    the other commands do); one line otherwise."""
    if word_split is not None:
        try:
            check_word_split(word_split, "--word_split", allow_import=True)
        except ValueError as error:
            raise InputError(str(error)) from error


def check_mode(data_args, training_args, model_args, row: FineTuningTask) -> bool:
    """Whether this run predicts; refuses (one line) a run with nothing to do, or one that predicts or evaluates
    without training from a folder that holds no fine-tuned head of the task."""
    if training_args.do_predict and not data_args.test_file:
        raise InputError("--do_predict needs --test_file FILE (the sentences to label)")
    if not data_args.train_file:
        if not (data_args.test_file or data_args.validation_file):
            raise InputError("give --train_file FILE to fine-tune, or --do_predict --test_file FILE (and/or "
                             "--validation_file FILE) with an already fine-tuned --model_name_or_path folder")
        if not saved_head(model_args, row):
            raise InputError(f"--model_name_or_path {model_args.model_name_or_path} holds no fine-tuned "
                             f"{head_class_name(row)}: without --train_file there is nothing to predict with; "
                             "fine-tune it first")
    return bool(data_args.test_file)


def read_inputs(row: FineTuningTask, parts: Task, model_args, data_args, training_args, command_args):
    """What every fine-tuning command does before loading a model: the seed set, `--word_split` and the mode
    checked, then the training and validation files (`parts.read_file`) and the test file (`parts.read_test_file`)
    read, in that order, each checked before anything is written. Returns (train, validation, test); test is None
    unless the run predicts."""
    set_seed(training_args.seed)
    check_split_option(data_args.word_split)
    predicting = check_mode(data_args, training_args, model_args, row)
    encodings = file_encodings(command_args, data_args, predicting)

    def read(path: str | None, kind: str, count: int | None) -> list[dict]:
        if not path:
            return []
        encoding, option = encodings[kind]
        try:
            return limit(read_input_file(lambda p, e: parts.read_file(p, e, data_args), path, f"{kind}_file",
                                         encoding, option), count)
        except InputError as error:
            if not one_encoding_reads_all(error, kind, encodings, data_args, command_args):
                raise
            # the same refusal, whose hint names --encoding: one rerun reads every file of the run
            read_input_file(lambda p, e: parts.read_file(p, e, data_args), path, f"{kind}_file", encoding,
                            "--encoding")
            raise

    train = read(data_args.train_file, "train", data_args.max_train_samples)
    evaluation = read(data_args.validation_file, "validation", data_args.max_eval_samples)
    test = read_test_file(parts, data_args, *encodings["test"]) if predicting else None
    return train, evaluation, test


def one_encoding_reads_all(error: InputError, kind: str, encodings: dict, data_args, command_args) -> bool:
    """Whether the refusal of the `kind` file, read in the run's shared encoding (no --{kind}_encoding), names the
    one encoding that also reads every other file of the run that the shared one reads: then its hint names
    `--encoding`, not --{kind}_encoding (the validation file of the same GBK set was refused on the next run)."""
    cause = error.__cause__
    suggested = getattr(cause, "suggested", None)
    if suggested is None or encodings[kind][1] == "--encoding" or \
            getattr(command_args, f"{kind}_encoding", None) is not None:
        return False
    others = [getattr(data_args, f"{other}_file", None) for other in encodings
              if other != kind and getattr(command_args, f"{other}_encoding", None) is None]
    for path in filter(None, others):
        try:
            check_decodes(path, suggested)
        except (InputError, OSError):
            return False
    return True


def file_encodings(command_args, data_args, predicting: bool) -> dict[str, tuple[str, str]]:
    """For "train", "validation" and "test": the encoding its file is read in (`--train_encoding`, ..., else
    `--encoding`) and the option that a hint for it names: `--encoding` where the run reads one file, the file's
    own option where it reads several (a hint to the one would misread the others)."""
    files = [kind for kind in ("train", "validation", "test") if getattr(data_args, f"{kind}_file", None)
             and (kind != "test" or predicting)]
    encodings = {}
    for kind in ("train", "validation", "test"):
        own = getattr(command_args, f"{kind}_encoding", None)
        option = f"--{kind}_encoding" if own is not None or len(files) > 1 else "--encoding"
        encodings[kind] = (own or command_args.encoding, option)
    return encodings


def check_known_labels(examples: list, parts: Task, label2id: dict, what: str, data_args,
                       training: bool) -> None:
    """The labels (`what`: "labels", "tags") of the validation file must be among the model's, which a new head
    takes from the training file (`training`): one line otherwise, naming the first example with another one."""
    for example in examples:
        unknown = [label for label in parts.labels_of(example) if label not in label2id]
        if not unknown:
            continue
        where = example.where() if hasattr(example, "where") else f"example {examples.index(example) + 1}"
        others = sorted({label for e in examples for label in parts.labels_of(e)} - set(label2id) - {unknown[0]})
        found = f"the {what[:-1]} {unknown[0]!r}" + (f" (and {len(others)} more: {others[:5]})" if others else "")
        alike = [label for label in label2id if folded_label(label) == folded_label(unknown[0])]
        if alike:
            found += f" (the head's {alike[0]!r} differs from it only in case or spaces: write them alike)"
        if training:
            raise InputError(f"--validation_file {data_args.validation_file}: {where} has {found}, which no example "
                             f"of --train_file {data_args.train_file} has (the head's {what}: {sorted(label2id)}): a "
                             f"head cannot learn a {what[:-1]} it has no example of; give training examples of it, or "
                             "leave such examples out of the validation file")
        raise InputError(f"--validation_file {data_args.validation_file}: {where} has {found}, which is not among "
                         f"the model's {sorted(label2id)}")


def predict_after(trainer, parts: Task, test, data_args, command_args, training_args,
                  examples: str = "sentences") -> None:
    """`--do_predict`: write the predictions of the test file (main process only); an interrupt says that the
    model, if trained, is complete and that no predictions were written."""
    if not trainer.is_world_process_zero():
        return
    path = predictions_path(parts, command_args, training_args)
    model = trainer.accelerator.unwrap_model(trainer.model)
    try:
        with writing(path):
            write_predictions(model, trainer.data_collator.tokenizer, parts, test, data_args,
                              training_args.per_device_eval_batch_size, path, examples)
    except Interrupted as interrupted:
        kept = f"the fine-tuned model in {os.path.abspath(training_args.output_dir)} is complete; " \
            if data_args.train_file else ""
        interrupted.report = f"interrupted by {interrupted.name} while predicting: {kept}no predictions were written"
        raise
