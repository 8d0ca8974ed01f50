"""`Task`, what a fine-tuning task gives the run (`elmo_hf.train.finetune_run`): the parts every task must have are
abstract methods, the optional hooks are methods with the default that every task without them needs.

A task module (`train/tasks/<task>.py`) defines `TASK`, its `FineTuningTask` row (names, defaults, data options: read
by the command table before torch is imported), and `PARTS`, an instance of its subclass of `Task`. A subclass that
lacks a part cannot be instantiated, so a task module that forgets one fails when it is imported, not halfway through
a run; a task with a label set that gives no `labels_of` fails when its class is defined.

Standard library only: `elmo_hf.train.tasks` imports this before any command has parsed its options.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar


class Task(ABC):
    """The parts of a fine-tuning task. `data_args` is the parsed dataclass of the row's `data_options`. Readers raise
    `FileFormatError` for a file not in their format: the run says it in one line naming the option and the file."""

    row: ClassVar[Any]  # the module's `TASK`, its `FineTuningTask` (not imported here: the package imports this)
    # Whether the examples carry labels from a set the head is built for (a classifier's classes, a tagger's tags):
    # the run then reads them (`labels_of`), gives a new head their ids and checks the validation file's. Multiple
    # choice and question answering have none: the answer is a position in the example itself.
    has_label_set: ClassVar[bool] = True
    predictions_file: ClassVar[str] = "predictions.txt"  # the name of the `--do_predict` file in --output_dir

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.has_label_set and cls.labels_of is Task.labels_of:
            raise TypeError(f"{cls.__name__}: a task with a label set (has_label_set) must define labels_of")

    # ------------------------------------------------------------------ what every task gives
    @abstractmethod
    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        """The examples of a training or validation file; a file that is not in the task's format is refused with
        `elmo_hf.tools.core.errors.FileFormatError` naming the line (any other exception is a bug, with its
        traceback)."""

    @abstractmethod
    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        """The words of one example, as the tokenizer will read them."""

    @abstractmethod
    def encode(self, examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
        """A `datasets.Dataset` (or any sequence `Trainer` takes) of the examples for the head: `input_ids`,
        `attention_mask`, `labels`. `label2id` is {} for a task without a label set."""

    @abstractmethod
    def collator(self, tokenizer) -> Callable:
        """The data collator of the encoded examples, with the tokenizer as its `tokenizer` attribute (`Trainer`
        saves it with the model and every checkpoint through the collator; predictions use it)."""

    @abstractmethod
    def metrics(self, config, data_args) -> tuple[Callable | None, Callable | None]:
        """`Trainer`'s `compute_metrics` and `preprocess_logits_for_metrics` (or None) for a head of `config`."""

    @abstractmethod
    def read_test_file(self, path: str, encoding: str, data_args) -> Any:
        """The sentences of `--test_file`, as `prediction_lines` takes them (a bad file: `FileFormatError`)."""

    @abstractmethod
    def prediction_lines(self, model, tokenizer, test, data_args, batch_size: int) -> tuple[list[str], int]:
        """The lines of the predictions file for `test`, and how many sentences they predict."""

    # ------------------------------------------------------------------ labels (tasks with a label set)
    def labels_of(self, example: dict) -> Sequence[str]:
        """The labels of one example (one for a sentence, one per word for a tagger); none without a label set."""
        return ()

    def sorted_labels(self, labels: Iterable[str]) -> list[str]:
        """The distinct labels of the data, in the order of their ids in a new head."""
        return sorted(set(labels))

    # ------------------------------------------------------------------ optional hooks
    def head_settings(self, examples: list[dict], data_args) -> dict:
        """Config fields that the training examples call for in a new head (sentence pairs: `pair_combination`;
        scores: `problem_type`); a saved config's own values win."""
        return {}

    def head_options(self, data_args) -> dict:
        """Config fields that the task's own options set (the tagger's --crf): they win over a saved config, as the
        shared head options do."""
        return {}

    def check_training_examples(self, config, examples: list[dict], data_args, tokenizer=None) -> None:
        """Refuses (`InputError`) training examples the loaded head cannot learn, before anything is written."""
        return None

    def splits_test_text(self, test) -> bool:
        """Whether the test file (as `prepare_test` left it) is cut into words by the word split (--word_split, or the
        tokenizer's): not where the file gives its words (CoNLL columns, semantic role labelling's columns)."""
        return True

    def evaluation_data_args(self, data_args):
        """The options the validation file is encoded with: the training file's, except where a task scores every
        gold unit of a sentence that training would cut (the taggers: `whole_sentences`)."""
        return data_args

    def prepare_test(self, model, tokenizer, test, data_args):
        """The test file as the loaded head predicts it; refuses one it cannot (pairs for a single-sentence head) or
        settles how it is read, before anything is trained or written."""
        return test

    def evaluation_metrics(self, config, data_args, examples: list[dict], dataset) -> tuple[Callable | None,
                                                                                        Callable | None]:
        """`metrics`, for a task whose scores need the examples behind the dataset's rows (question answering: a
        question's windows) in place of the rows alone."""
        return self.metrics(config, data_args)
