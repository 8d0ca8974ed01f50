"""The fine-tuning tasks, a module each: what drives a task head's command, its `--help` and its data.

    from elmo_hf.train.tasks import TASKS, task_module
    row = TASKS["token-classification"]         # the task's FineTuningTask: words, defaults, its data options
    parts = task_parts("token-classification")  # its `Task` (train/tasks/token_classification.py): readers, metrics

A task is a head of `elmo_hf.modeling_elmo.configuration_elmo.ELMO_CLASSES` (its row names the task) and a module here
named after it ("multiple-choice" -> `multiple_choice.py`) that defines `TASK`, a `FineTuningTask`, and `PARTS`, an
instance of its subclass of `Task` (train/tasks/base.py: the parts every task gives, the optional hooks with their
defaults). Nothing else lists the tasks: `TASKS` is read from this folder, the command `elmo-finetune TASK` takes any of
them, and tests/test_tasks.py checks that every head has its module and every module its head.

Each module imports only the standard library and the light readers at its top (its heavy parts import torch,
datasets and the model inside the functions that need them), so that a command's `--help` reads the task's options
in the time Python takes to start.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType

from .base import Task

# The least --max_seq_length any task runs with: <S>, one word, </S> (what a task's data also needs, such as a sentence
# pair's two pairs of marks or a question's words, is checked where its examples are read).
MIN_SEQ_LENGTH = 3

# Modules of this folder that are no task: the base class, what every task shares (`common_*`: readers and metrics,
# collators, predictions) and what one task reads with (SQuAD's files and scores, a tagger's test files).
NOT_TASKS = frozenset({"base", "common_data", "common_collators", "common_predict", "coreference_data",
                       "coreference_metrics", "squad_data", "squad_metrics", "table_header", "tagging_inputs"})

@dataclass(frozen=True)
class FineTuningTask:
    """One fine-tuning task: its command's words, options and defaults (its head is the row of `ELMO_CLASSES` that
    names `name`)."""

    name: str  # the task as transformers names it, and `load_elmo(task=...)` takes it: "sequence-classification"
    data_options: type  # the dataclass of its data options (--train_file, ...), standard library only
    labels: str  # what its labels are called in messages: "labels", "tags"
    examples: str  # what its examples are called: "examples", "sentences"
    head_option: str  # the config field that shapes a new head, also an option: "classifier_pooling"
    head_default: str  # its value for a new head (a fine-tuned folder keeps its own)
    head_help: str  # the values of `head_option`, for --help: "mean, max, lstm or attention"
    # `TrainingArguments` defaults of the command where transformers' own (made for a fine-tuned transformer) leave
    # a head on a frozen biLM almost untrained: benchmarks/bench_finetune.md
    training_defaults: Mapping[str, float | int] = field(hash=False)
    description: str  # the first paragraph of --help
    epochs_note: str = ""  # appended to --num_train_epochs' help
    command: str | None = None  # a console script of its own, besides `elmo-finetune TASK`: "elmo-finetune-ner"
    # Config fields (model options: "word_embedding_dim") a new head of a training run gets where the user gave none;
    # a fine-tuned folder keeps its own
    new_head_defaults: Mapping[str, float | int] = field(default_factory=lambda: MappingProxyType({}), hash=False)


def module_name(task: str) -> str:
    """The module of `task`: "multiple-choice" -> "elmo_hf.train.tasks.multiple_choice"."""
    return f"{__name__}.{task.replace('-', '_')}"


def task_module(task: str) -> ModuleType:
    return importlib.import_module(module_name(task))


def task_parts(task: str) -> Task:
    """The `Task` of `task` (its module's `PARTS`), what the fine-tuning run calls."""
    parts = task_module(task).PARTS
    if not isinstance(parts, Task):
        raise TypeError(f"{module_name(task)}.PARTS is a {type(parts).__name__}, not a Task")
    return parts


class _Tasks(Mapping):
    """task name -> its `FineTuningTask`, from the modules of this folder (read once, in name order)."""

    _rows: dict[str, FineTuningTask] | None = None

    def _table(self) -> dict[str, FineTuningTask]:
        if self._rows is None:
            rows = {}
            for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
                if info.name in NOT_TASKS:
                    continue
                row = importlib.import_module(f"{__name__}.{info.name}").TASK
                rows[row.name] = row
            self._rows = rows
        return self._rows

    def __getitem__(self, task: str) -> FineTuningTask:
        return self._table()[task]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


TASKS: Mapping[str, FineTuningTask] = _Tasks()
