"""The fine-tuning tasks (`elmo_hf.train.tasks.TASKS`): every task head of `ELMO_CLASSES` has its module under
`train/tasks/` with the parts every command runs (its `PARTS`, a `elmo_hf.train.tasks.Task`) and options that `--help`
reads without torch, and every module its head; and a task added as a row and a module alone (here a throwaway one,
registered with monkeypatch) trains, saves, predicts and loads end to end through `elmo-finetune TASK`."""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
import subprocess
import sys
import types
from dataclasses import dataclass, field
from types import MappingProxyType

import pytest
import torch
from conftest import REPO, run_cli

from elmo_hf import modeling_elmo
from elmo_hf.modeling_elmo import ElmoConfig
from elmo_hf.modeling_elmo.configuration_elmo import TASK_CLASSES, ElmoClass
from elmo_hf.tools.core.errors import FileFormatError
from elmo_hf.tools.hub.model_card import render_model_card
from elmo_hf.tools.loading import TASKS as LOADER_TASKS
from elmo_hf.tools.loading import load_elmo
from elmo_hf.train.finetune_arguments import DATA_FIELDS, short_help
from elmo_hf.train.tasks import TASKS, FineTuningTask, Task, module_name, task_module, task_parts
from elmo_hf.train.tasks.common_collators import ElmoDataCollatorForSequenceClassification
from elmo_hf.train.tasks.common_data import accuracy, split_text
from elmo_hf.train.tasks.common_predict import predict_labels

# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------


def assert_task(module) -> None:
    """The module's `PARTS` is its `Task`, of its row, and every method of `Task` it overrides takes as many arguments
    as the run gives it."""
    parts = module.PARTS
    assert isinstance(parts, Task) and type(parts).row is module.TASK, module.__name__
    for member, wanted in inspect.getmembers(Task, inspect.isfunction):
        if not member.startswith("_"):
            given = inspect.signature(getattr(parts, member)).parameters
            assert len(given) == len(inspect.signature(wanted).parameters) - 1, (module.__name__, member, given)


def test_a_task_must_give_every_part_and_a_task_with_labels_its_labels():
    """A subclass of `Task` without a part cannot be made (its module fails when imported); one with a label set
    (the default) and no `labels_of` is refused when it is defined; a task without one reads no labels."""
    class Partial(Task):
        row = None
        has_label_set = False

        def read_file(self, path, encoding, data_args):
            return []

    with pytest.raises(TypeError, match="abstract"):
        Partial()
    with pytest.raises(TypeError, match="must define labels_of"):
        type("Labelled", (Partial,), {"has_label_set": True})
    assert task_parts("multiple-choice").has_label_set is False
    assert task_parts("multiple-choice").labels_of({"context": "a", "endings": ["b", "c"], "label": 1}) == ()
    assert task_parts("question-answering").predictions_file == "predictions.json"
    assert task_parts("token-classification").labels_of({"tokens": ["EU"], "tags": ["B-ORG"]}) == ["B-ORG"]


def test_every_task_head_has_its_module_and_every_module_its_head():
    assert set(TASKS) == set(TASK_CLASSES), "a task head of ELMO_CLASSES without its module, or the other way"
    for name, row in TASKS.items():
        assert row.name == name
        head = TASK_CLASSES[name].path.rsplit(".", 1)[1]
        assert getattr(modeling_elmo, head).__name__ == head
        assert hasattr(ElmoConfig(), row.head_option), (name, row.head_option)
        ElmoConfig(**{row.head_option: row.head_default})  # a value the config accepts
    assert set(LOADER_TASKS) == {None, "model", "pre-training", *TASKS}


def test_the_modules_beside_the_tasks_are_no_tasks():
    """The readers, metrics, collators and predictions beside the task modules (`NOT_TASKS`) are modules of the folder
    and define no `TASK`: a stale name, or a task hidden among them, fails here."""
    import importlib
    import pkgutil

    from elmo_hf.train import tasks

    modules = {info.name for info in pkgutil.iter_modules(tasks.__path__)}
    assert tasks.NOT_TASKS <= modules
    assert {module.replace("_", "-") for module in modules - tasks.NOT_TASKS} == set(TASKS)
    for name in tasks.NOT_TASKS:
        assert not hasattr(importlib.import_module(f"{tasks.__name__}.{name}"), "TASK"), name


@pytest.mark.parametrize("name", list(TASKS))
def test_every_task_module_defines_its_task(name):
    row = TASKS[name]
    module = task_module(name)
    assert module.__name__ == module_name(name) and module.TASK is row and task_parts(name) is module.PARTS
    assert_task(module)
    assert dataclasses.is_dataclass(row.data_options)
    assert set(DATA_FIELDS) <= {item.name for item in dataclasses.fields(row.data_options)}, name


@pytest.mark.slow
def test_the_tasks_and_every_commands_help_import_no_torch():
    """elmo_hf.train.tasks and the task modules import nothing heavy at their top; each task's --help (its data options
    included) comes before torch."""
    code = ("import sys\nfrom elmo_hf.train.tasks import TASKS\nassert 'torch' not in sys.modules\n"
            "from elmo_hf.cli import run\n"
            "for name in TASKS:\n    assert run('elmo-finetune', [name, '--help']) == 0\n"
            "print('loaded:', sorted({'torch', 'transformers', 'datasets', 'elmo_hf.modeling_elmo', 'numpy'} & "
            "set(sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "loaded: []"
    for row in TASKS.values():
        assert f"usage: {row.command or 'elmo-finetune ' + row.name} " in result.stdout
        assert f"--{row.head_option}" in result.stdout


# --------------------------------------------------------------------------------------------------
# A throwaway task: a row and its own module, nothing else
# --------------------------------------------------------------------------------------------------

TOY = "toy-flag"
TOY_MODULE = module_name(TOY)


@dataclass
class ToyDataArguments:
    """The toy task's data options: what every command reads (`DATA_FIELDS`), and its own `--separator`."""

    train_file: str | None = field(default=None, metadata={"help": "LABEL|sentence lines."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format."})
    test_file: str | None = field(default=None, metadata={"help": "Sentences, one a line."})
    word_split: str | None = field(default=None, metadata={"help": "A split of tokenization.WORD_SPLITTERS."})
    max_train_samples: int | None = field(default=None, metadata={"help": "The first N lines."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "The first N lines."})
    separator: str = field(default="|", metadata={"help": "Between the label and the sentence."})


def _read_file(path: str, encoding: str, data_args) -> list[dict]:
    examples = []
    with open(path, encoding=encoding) as f:
        for number, line in enumerate(f, start=1):
            label, separator, text = line.strip().partition(data_args.separator)
            if not separator:
                raise FileFormatError(f"{path}:{number}: no {data_args.separator!r} between a label and a sentence")
            examples.append({"text": text, "label": label})
    return examples


def _encode(examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
    """A plain list of encoded examples (`Trainer` takes any sequence): `datasets` is the built-in tasks' choice."""
    return [{"input_ids": tokenizer(split_text(e["text"], tokenizer, data_args.word_split),
                                    is_split_into_words=True)["input_ids"], "labels": label2id[e["label"]]}
            for e in examples]


def _metrics(config, data_args):
    def compute_metrics(eval_prediction) -> dict[str, float]:
        predicted = eval_prediction.predictions.argmax(-1).tolist()
        return {"accuracy": accuracy(predicted, eval_prediction.label_ids.tolist())}

    return compute_metrics, None


def _read_test_file(path: str, encoding: str, data_args) -> list[str]:
    with open(path, encoding=encoding) as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines:
        raise FileFormatError(f"{path}: no sentences")
    return lines


def _prediction_lines(model, tokenizer, test: list[str], data_args, batch_size: int) -> tuple[list[str], int]:
    words = [split_text(text, tokenizer, data_args.word_split) for text in test]
    return [model.config.id2label[i] for i in predict_labels(model, tokenizer, words, batch_size)], len(test)


TOY_ROW = FineTuningTask(
    name=TOY,
    data_options=ToyDataArguments,
    labels="flags",
    examples="lines",
    head_option="classifier_pooling",
    head_default="mean",
    head_help="mean or max",
    training_defaults=MappingProxyType({"learning_rate": 5e-2, "num_train_epochs": 3.0,
                                        "per_device_train_batch_size": 4, "warmup_steps": 0.0}),
    epochs_note=" (a toy)",
    description="Flag sentences that name a bank (a throwaway task of tests/test_tasks.py).",
)
# Its row of ELMO_CLASSES: an existing head, for another task.
TOY_HEAD = ElmoClass("AutoModelForSequenceClassification", "modeling_elmo_heads.ElmoForSequenceClassification", TOY,
                     "toy flags")


class ToyFlag(Task):
    """The toy task's parts: a label per line."""

    row = TOY_ROW

    def read_file(self, path, encoding, data_args):
        return _read_file(path, encoding, data_args)

    def labels_of(self, example):
        return (example["label"],)

    def words_of(self, example, tokenizer, data_args):
        return split_text(example["text"], tokenizer, None)

    def encode(self, examples, tokenizer, label2id, data_args):
        return _encode(examples, tokenizer, label2id, data_args)

    def collator(self, tokenizer):
        return ElmoDataCollatorForSequenceClassification(tokenizer)

    def metrics(self, config, data_args):
        return _metrics(config, data_args)

    def read_test_file(self, path, encoding, data_args):
        return _read_test_file(path, encoding, data_args)

    def prediction_lines(self, model, tokenizer, test, data_args, batch_size):
        return _prediction_lines(model, tokenizer, test, data_args, batch_size)


def toy_module() -> types.ModuleType:
    module = types.ModuleType(TOY_MODULE, "The toy task: a flag per sentence.")
    module.TASK = TOY_ROW
    module.PARTS = ToyFlag()
    return module


@pytest.fixture
def toy_task(monkeypatch):
    """The toy task's row of `ELMO_CLASSES` and its module, for this test only."""
    monkeypatch.setitem(sys.modules, TOY_MODULE, toy_module())
    monkeypatch.setitem(TASK_CLASSES, TOY, TOY_HEAD)
    monkeypatch.setitem(TASKS._table(), TOY, TOY_ROW)
    yield TOY_ROW
    monkeypatch.undo()
    assert TOY not in TASKS and TOY not in LOADER_TASKS and TOY_MODULE not in sys.modules


def write_toy_files(folder, count: int = 24) -> tuple:
    rng = random.Random(0)
    words = ["the", "river", "money", "we", "sat", "rates", "rose", "a", "walk"]
    lines = []
    for i in range(count):
        sentence = [rng.choice(words) for _ in range(4)]
        if i % 2:
            sentence.insert(rng.randrange(5), "bank")
        lines.append(f"{'yes' if i % 2 else 'no'}|{' '.join(sentence)}")
    (folder / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "test.txt").write_text("the bank rose\n\nwe sat by the river\na walk\n", encoding="utf-8")
    return folder / "train.txt", folder / "test.txt"


def test_a_task_added_as_a_row_and_a_module_trains_saves_and_predicts(toy_task, tiny_model_dir, tmp_path):
    """`elmo-finetune toy-flag`, in-process: --help from its row and its own options; a run on generated lines writes
    the model (with the row's default pooling), the metrics and the predictions; the fine-tuned folder predicts
    alone, loads with `load_elmo(task=...)` and gets the row's text in its model card."""
    assert_task(sys.modules[TOY_MODULE])
    result = run_cli("elmo-finetune", [TOY, "--help"])
    assert result.returncode == 0
    shown = result.stdout
    assert shown == short_help(toy_task)
    for text in ("usage: elmo-finetune toy-flag ", "--separator", "ToyFlagHeadArguments",
                 "mean or max (default: mean for a "
                 "new head", "training epochs to perform. (default 3 (a toy))", "for the optimizer. (default 0.05)"):
        assert text in " ".join(shown.split()), text

    train, test = write_toy_files(tmp_path)
    out = tmp_path / "out"
    options = ["--use_cpu", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--seed", "0"]
    result = run_cli("elmo-finetune", [TOY, "--model", tiny_model_dir, "--train_file", train, "--validation_file",
                                       train, "--test_file", test, "--output_dir", out, *options])
    assert result.returncode == 0, result.stderr
    said = result.stderr
    assert f"INFO {TOY_MODULE}: 24 training and 24 validation lines, flags ['no', 'yes']" in said
    assert ("INFO elmo_hf.train.finetune_run: initialised the toy-flag head "
            "(4 tensors of classifier, scalar_mixes)") in said
    assert "LOAD REPORT" not in said and "WARNING" not in said, said
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["ElmoForSequenceClassification"] and config["classifier_pooling"] == "mean"
    assert config["id2label"] == {"0": "no", "1": "yes"}
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 18  # 3 epochs (the row's default) of 24 lines in batches of 4
    assert "eval_accuracy" in json.loads((out / "eval_results.json").read_text())
    predicted = (out / "predictions.txt").read_text().splitlines()
    assert len(predicted) == 3 and set(predicted) <= {"no", "yes"}

    # predicting alone from the fine-tuned folder, and loading it by the task's name
    assert run_cli("elmo-finetune", [TOY, "--model", out, "--test_file", test, "--output_dir", tmp_path / "again",
                                     "--use_cpu"]).returncode == 0
    assert (tmp_path / "again" / "predictions.txt").read_text().splitlines() == predicted
    model, tokenizer = load_elmo(out, TOY)
    assert type(model).__name__ == "ElmoForSequenceClassification"
    with torch.no_grad():
        expected = [model.config.id2label[int(model(**tokenizer([line], return_tensors="pt")).logits.argmax())]
                    for line in ("the bank rose", "we sat by the river", "a walk")]
    assert predicted == expected
    card = render_model_card(model.config, model_id="someone/toy")
    assert "`AutoModelForSequenceClassification` for toy flags" in card


def test_a_task_added_as_a_row_and_a_module_refuses_bad_input_in_one_line(toy_task, tiny_model_dir, tmp_path):
    """The task's own reader says what is wrong; the frame makes it one line, exit status 2, nothing written."""
    (tmp_path / "train.txt").write_text("yes|a bank\nno sentence without a label\n", encoding="utf-8")
    out = tmp_path / "out"
    result = run_cli("elmo-finetune", [TOY, "--model", tiny_model_dir, "--train_file", tmp_path / "train.txt",
                                       "--output_dir", out])
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR") or " ERROR " in line]
    assert len(errors) == 1 and "--train_file" in errors[0] and "train.txt:2: no '|' between" in errors[0], errors
    assert not out.exists()


def test_the_row_is_what_the_loader_and_the_card_read(toy_task):
    """A task head is a task name of `load_elmo` while its row is in `ELMO_CLASSES` (read at each use)."""
    assert LOADER_TASKS[TOY] == "AutoModelForSequenceClassification" and TOY in LOADER_TASKS
    model, _ = load_elmo("tiny", TOY, config_overrides={"num_labels": 2})
    assert type(model).__name__ == "ElmoForSequenceClassification"


def test_the_fine_tuning_page_lists_every_task():
    """docs/finetuning.md's table of tasks ("## The tasks") has a row for each task, naming its head, its Auto class
    and its command: a new task without its line there fails here."""
    text = (REPO / "docs" / "finetuning.md").read_text(encoding="utf-8")
    page = text.split("\n## The tasks\n", 1)[1].split("\n## ", 1)[0].splitlines()
    for name, row in TASKS.items():
        lines = [line for line in page if line.startswith(f"| `{name}` |")]
        assert len(lines) == 1, f"docs/finetuning.md has no row for {name}"
        head = TASK_CLASSES[name]
        assert head.path.rsplit(".", 1)[1] in lines[0], lines[0]
        assert (f"`{head.auto_class}`" if head.auto_class else "none (`load_elmo`)") in lines[0], lines[0]
        assert f"`{row.command or 'elmo-finetune ' + name}`" in lines[0], lines[0]
