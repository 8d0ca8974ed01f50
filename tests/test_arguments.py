"""The option parser of every command (`elmo_hf.tools.core.arguments`): one spec per field, read by the command line,
the options file (a single `.json` argument) and a dataclass made in Python alike, so that a converter (an encoding's
check, a duration's) or a field's choices hold wherever the value comes from."""

from __future__ import annotations

import argparse
import json

import pytest

from elmo_hf.tools.core.arguments import UsageError, option_specs, parse_options
from elmo_hf.tools.core.command_options import AnalyzeOptions, AppOptions, ConvertOptions
from elmo_hf.tools.core.export_options import ExportOptions
from elmo_hf.tools.embedding.embed_plan import EmbedOptions
from elmo_hf.train.demo_args import DemoArguments
from elmo_hf.train.finetune_arguments import (
    COMMON_TRAINING_OPTIONS,
    CommandArguments,
    command_dataclasses,
    short_help,
)
from elmo_hf.train.pretrain_args import PretrainArguments
from elmo_hf.train.tasks import TASKS
from elmo_hf.train.training_fields import imported_fields, source_fields

# Every command's options: one class, or the classes a fine-tuning command parses together.
COMMAND_CLASSES = [(cls,) for cls in (EmbedOptions, AnalyzeOptions, ConvertOptions, AppOptions, ExportOptions,
                                      PretrainArguments, DemoArguments)] + \
    [command_dataclasses(row) for row in TASKS.values()]


def _required(classes) -> dict:
    """A value for every field the classes require (a word; a list of one for a list field)."""
    return {spec.name: ["x"] if spec.many else "x" for cls in classes for spec in option_specs(cls) if spec.required}


def _argv(values: dict, classes) -> list[str]:
    specs = {spec.name: spec for cls in classes for spec in option_specs(cls)}
    positional = [values[name] for name, spec in specs.items() if spec.field.metadata.get("positional")]
    words = [word for name, value in values.items() if not specs[name].field.metadata.get("positional")
             for word in (f"--{name}", *(value if isinstance(value, list) else [value]))]
    return [*positional, *words]


def _both(classes, values: dict, tmp_path):
    """The dataclasses from `values` given on the command line, and given in an options file."""
    path = tmp_path / "options.json"
    path.write_text(json.dumps(values))
    fine_tuning = len(classes) > 1
    parsed = [parse_options(list(classes), source, known_only=fine_tuning) for source in (_argv(values, classes),
                                                                                         [str(path)])]
    return [made[0] if fine_tuning else made for made in parsed]


CHOICES = [(classes, spec.name) for classes in COMMAND_CLASSES for cls in classes for spec in option_specs(cls)
           if spec.choices is not None]


@pytest.mark.parametrize("classes, name", CHOICES, ids=[f"{c[-1].__name__}-{n}" for c, n in CHOICES])
def test_a_fields_choices_hold_on_the_command_line_and_in_an_options_file(classes, name, tmp_path):
    (spec,) = [spec for cls in classes for spec in option_specs(cls) if spec.name == name]
    for choice in spec.choices:
        on_the_line, in_the_file = _both(classes, {**_required(classes), name: choice}, tmp_path)
        assert on_the_line == in_the_file
    with pytest.raises(UsageError, match=f"^--{name}: invalid choice: 'bogus!'"):
        _both(classes, {**_required(classes), name: "bogus!"}, tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({**_required(classes), name: "bogus!"}))
    with pytest.raises(ValueError, match=f"bad.json: {name} must be one of .*got 'bogus!'"):
        parse_options(list(classes), [str(tmp_path / "bad.json")], known_only=len(classes) > 1)


@pytest.mark.parametrize("classes", [(PretrainArguments,), command_dataclasses(TASKS["token-classification"])],
                         ids=["elmo-pretrain", "elmo-finetune-ner"])
@pytest.mark.parametrize("name, given, kept, refused", [
    ("encoding", "GBK", "gbk", ("klingon", "unknown encoding 'klingon'")),
    ("encoding", "latin-1", "iso8859-1", ("utf-16", "encoding 'utf-16' is not read line by line")),
    ("max_train_time", "1h30m", "1h30m", ("ten", "must be a positive duration .*got 'ten'")),
])
def test_a_fields_converter_holds_wherever_its_value_comes_from(classes, name, given, kept, refused, tmp_path):
    """The same converter on the command line, in an options file and for a dataclass made in Python (its
    `__post_init__` calls `check_fields`): what it returns is kept, what it refuses is one line naming the option."""
    cls = next(cls for cls in classes if name in {spec.name for spec in option_specs(cls)})
    values = _required(classes)
    for made in (*_both(classes, {**values, name: given}, tmp_path), None):
        if made is None:  # in Python
            made = [cls(**{key: value for key, value in values.items() if key in cls.__dataclass_fields__},
                        **{name: given})]
        assert getattr(next(part for part in made if isinstance(part, cls)), name) == kept
    bad, says = refused
    with pytest.raises(UsageError, match=f"^--{name}: {says}"):
        parse_options(list(classes), _argv({**values, name: bad}, classes), known_only=len(classes) > 1)
    (tmp_path / "bad.json").write_text(json.dumps({**values, name: bad}))
    with pytest.raises(ValueError, match=f"bad.json: {name}: {says}"):
        parse_options(list(classes), [str(tmp_path / "bad.json")], known_only=len(classes) > 1)
    with pytest.raises(ValueError, match=f"^--{name}: {says}"):
        cls(**{key: value for key, value in values.items() if key in cls.__dataclass_fields__}, **{name: bad})


# Every count a command refuses when it is parsed (`at_least`): the least value it takes, per field.
COUNTS = [(classes, spec.name, spec.converter) for classes in COMMAND_CLASSES for cls in classes
          for spec in option_specs(cls) if spec.item_type is int and getattr(spec.converter, "checks_values", False)]


@pytest.mark.parametrize("classes, name, converter", COUNTS, ids=[f"{c[-1].__name__}-{n}" for c, n, _ in COUNTS])
def test_a_count_below_its_least_value_is_refused_as_the_options_are_parsed(classes, name, converter, tmp_path):
    """A whole number of `at_least(n)` (--max_seq_length, --predicate_column, --doc_stride ...) takes n on the
    command line and in an options file, and refuses n - 1 in both, and a fraction in the file, in one line naming
    the option: SRL's --predicate_column 0 was refused as a --train_file error, --max_seq_length after the model had
    loaded."""
    least = next(n for n in range(-1, 10) if _accepts(converter, n))
    values = _required(classes)
    on_the_line, in_the_file = _both(classes, {**values, name: str(least)}, tmp_path)
    assert on_the_line == in_the_file
    assert any(getattr(part, name, None) == least for part in on_the_line)
    with pytest.raises(UsageError, match=f"^--{name}: must be .*, got {least - 1}$"):
        parse_options(list(classes), _argv({**values, name: str(least - 1)}, classes), known_only=len(classes) > 1)
    for bad, says in ((least - 1, f"must be .*, got {least - 1}"), (least + 0.5, "a value of another type: ")):
        (tmp_path / "bad.json").write_text(json.dumps({**values, name: bad}))
        with pytest.raises(ValueError, match=f"bad.json: {name}: .*{says}"):
            parse_options(list(classes), [str(tmp_path / "bad.json")], known_only=len(classes) > 1)


def _accepts(converter, value) -> bool:
    try:
        converter(value)
    except argparse.ArgumentTypeError:
        return False
    return True


def test_every_count_of_the_fine_tuning_data_options_has_its_least_value():
    """The counts of every task's data options are checked when parsed: a new task's dataclass cannot forget one."""
    counts = {name for _, name, _ in COUNTS}
    for row in TASKS.values():
        for spec in option_specs(row.data_options):
            if spec.item_type is int:
                assert spec.name in counts, f"{row.name}: --{spec.name} has no least value (at_least)"


def test_max_train_time_is_one_field_in_every_training_command():
    """`--max_train_time` is declared once (`time_budget.max_train_time_option`): the same converter in
    `elmo-pretrain` and the fine-tuning commands."""
    specs = [spec for cls in (PretrainArguments, CommandArguments) for spec in option_specs(cls)
             if spec.name == "max_train_time"]
    assert len(specs) == 2 and specs[0].converter is specs[1].converter is not None



def test_the_short_help_reads_transformers_own_fields_without_importing_it():
    """`--help` reads `TrainingArguments`' help and defaults from the installed transformers' source (it must answer
    before transformers is imported); `--help_all` from the class. The two readings agree on every common option,
    and on the help of every field the source declares with a literal help."""
    imported = imported_fields()
    read = source_fields(imported)
    assert set(COMMON_TRAINING_OPTIONS) <= set(read) and set(read) == set(imported)
    for name in COMMON_TRAINING_OPTIONS:
        assert read[name].help and read[name] == imported[name], name
    differ = [name for name, field in read.items() if field.help is not None and field.help != imported[name].help]
    assert not differ and sum(field.help is not None for field in read.values()) > 0.9 * len(imported)
    shown = " ".join(short_help(TASKS["token-classification"]).split())
    assert f"--learning_rate LEARNING_RATE {imported['learning_rate'].help} (default 0.01)" in shown
    assert f"--save_steps SAVE_STEPS {imported['save_steps'].help} (default {imported['save_steps'].default})" in shown


@pytest.mark.parametrize("argv, expected", [
    # the default recipe: the best measured on a CPU (results_quality.md: P2/P3, S2/S3)
    ([], ("adamw", 3e-3, "sampled", 1024, 32)),
    (["--recipe", "bilm-tf"], ("adagrad", 0.2, "sampled", 8192, 128)),  # the original training's
    (["--recipe", "bilm-tf", "--optimizer", "adamw"], ("adamw", 3e-3, "sampled", 8192, 128)),  # a rate follows
    (["--optimizer", "adagrad", "--softmax", "full"], ("adagrad", 0.2, "full", 1024, 32)),
    (["--recipe", "bilm-tf", "--softmax", "full", "--learning_rate", "0.1", "--per_device_batch_size", "8",
      "--num_sampled", "64"], ("adagrad", 0.1, "full", 64, 8)),  # an option given explicitly wins over its recipe
])
def test_pretraining_recipes_fill_only_the_options_left_unset(argv, expected, tmp_path):
    base = ["--train_file", "corpus.txt", "--output_dir", str(tmp_path / "out")]
    args = parse_options(PretrainArguments, [*base, *argv])
    assert (args.optimizer, args.learning_rate, args.softmax, args.num_sampled, args.per_device_batch_size) == expected
    with pytest.raises(UsageError, match="--recipe"):
        parse_options(PretrainArguments, [*base, "--recipe", "bilm"])
    with pytest.raises(ValueError, match="^--num_sampled must be positive, got 0$"):  # was a traceback from the config
        parse_options(PretrainArguments, [*base, "--num_sampled", "0"])
