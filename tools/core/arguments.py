"""Command lines from dataclasses: the one way this project declares and parses a command's options.

Every command's options are a dataclass, one field per option (`elmo_hf.tools.core.command_options` for the tools,
`elmo_hf.train.pretrain_args`, `elmo_hf.train.demo_args`, `elmo_hf.train.finetune_arguments` for training);
`options_parser` builds an `argparse` parser from it, with the spelling of `transformers.HfArgumentParser` (which the
fine-tuning commands use for transformers' own `TrainingArguments` only), so the two read alike:

* one `--field` per field (and `--field-with-dashes`), its type from the annotation, `list[...]` fields take one or
  more values;
* a `bool` field is a flag that also takes a value (`--disable_tqdm`, `--disable_tqdm false`), or, with
  `flag(...)`, a plain switch (`--overwrite`), which never swallows the word after it;
* `metadata`: "help", "choices", "aliases" (more option strings), "type" (a converter, e.g. an encoding's check),
  "positional" (an argument without dashes), "hidden" (left out of --help), "values" (switches that set the field:
  `{"--top": "top"}`), "metavar";
* a command line that is a single `.json` file gives the fields as a JSON object.

Each field's metadata is read once, into its `OptionSpec` (`option_specs`): the command line, the options file and a
dataclass made in Python (`check_fields`, from its `__post_init__`) apply the same converter and choices. A usage
error is one line (`UsageError`, an `InputError`), which the command frame writes with exit status 2.

Standard library only: a command's `--help` and a mistyped option answer before torch is imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import field

from .errors import InputError


def flag(help: str, **metadata) -> dataclasses.Field:
    """A switch that is off unless given (`--overwrite`): takes no value."""
    return field(default=False, metadata={"help": help, "switch": True, **metadata})


def positional(help: str, **metadata) -> dataclasses.Field:
    """An argument given without an option name (`elmo-embed INPUT OUTPUT`)."""
    return field(metadata={"help": help, "positional": True, **metadata})


def to_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false, yes/no, 1/0), got {value!r}")


def _plain_type(annotation):
    """`X | None` -> X."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One field's option, read once from the field's annotation and metadata: the command line (`add_to`), the
    options file (`from_json`) and a dataclass made in Python (`checked`, through `check_fields`) all read it, so a
    field's converter, choices and kind are applied alike wherever its value comes from."""

    field: dataclasses.Field
    kind: str  # "switch" (`flag`: takes no value), "bool" (takes one, or none for true), "value"
    item_type: type  # the annotation without None and list[...]: what a JSON value must be
    converter: typing.Callable[[str], object] | None  # metadata "type": a word of the command line to the value
    many: bool  # list[...]: one or more values
    choices: tuple | None

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def required(self) -> bool:
        return self.field.default is dataclasses.MISSING and self.field.default_factory is dataclasses.MISSING

    def default(self):
        """The default now (a `default_factory` may read the environment: `AppOptions`)."""
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return self.field.default

    def convert(self, word: str):
        """A word of the command line (or a string of the options file) as the field's value."""
        return self.converter(word) if self.converter else self.item_type(word)

    def add_to(self, target) -> None:
        """The field's arguments in `target`, an argparse parser or group: `--name` and `--name-with-dashes`, the
        aliases, and the switches that set a value (`--top` sets mode "top")."""
        meta, keywords = self.field.metadata, self._keywords()
        if meta.get("positional"):
            target.add_argument(self.name, **keywords)
            return
        names = [f"--{self.name}"] + ([f"--{self.name.replace('_', '-')}"] if "_" in self.name else [])
        target.add_argument(*names, *meta.get("aliases", ()), dest=self.name, **keywords)
        for switch, value in meta.get("values", {}).items():
            target.add_argument(switch, dest=self.name, action="store_const", const=value,
                                help=f"--{self.name} {value}")

    def _keywords(self) -> dict:
        meta = self.field.metadata
        options: dict = {"help": argparse.SUPPRESS if meta.get("hidden") else meta.get("help")}
        if self.choices is not None:
            options["choices"] = self.choices
        if "metavar" in meta:
            options["metavar"] = meta["metavar"]
        if self.kind == "switch":
            return {**options, "action": "store_true"}
        if self.many:
            options["nargs"] = "+"
        if self.kind == "bool":
            options.update(type=to_bool, nargs="?", const=True)
        else:
            options["type"] = self.converter or self.item_type  # argparse names it: "invalid int value: 'x'"
        if self.required:
            if not meta.get("positional"):
                options["required"] = True
            return options
        options["default"] = self.default()
        shown = options["help"] not in (None, argparse.SUPPRESS) and "default" not in options["help"]
        if shown and options["default"] not in (None, False):
            options["help"] = f"{options['help']} (default {options['default']})"
        return options

    def from_json(self, value, path: str):
        """An options file's value, held to the command line's rules: the choices, the type (the converter for a
        string) and booleans as `to_bool` reads them; a `ValueError` naming the file and the field otherwise."""
        if value is None:
            return None
        if self.many:
            if not isinstance(value, list):
                raise ValueError(f"{path}: {self.name} must be a list, got {value!r}")
            return [self._json_item(each, path) for each in value]
        return self._json_item(value, path)

    def _json_item(self, value, path: str):
        plain, word = self.item_type, isinstance(value, str)
        try:
            if self.kind in ("switch", "bool"):
                value = to_bool(value) if isinstance(value, (str, bool)) else _wrong_type(value)
            elif isinstance(value, str):
                value = self.convert(value)
            elif plain in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = plain(value) if plain is float or float(value).is_integer() else _wrong_type(value)
            elif isinstance(plain, type) and not isinstance(value, plain):
                _wrong_type(value)
            if _checks_values(self.converter) and not word:  # a word went through it above (`convert`)
                value = self.converter(value)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
            raise ValueError(f"{path}: {self.name}: {error}") from error
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{path}: {self.name} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        return value

    def checked(self, value):
        """A value given in Python (a dataclass made without a command line): a string through the converter, then
        the choices; a `ValueError` naming the option otherwise. A value the command line converted passes as it
        is (the converters return what they accept)."""
        if value is None:
            return None
        values = value if self.many and isinstance(value, list) else [value]
        try:
            if self.converter is not None:
                values = [self.converter(each) if isinstance(each, str) or _checks_values(self.converter) else each
                          for each in values]
        except (ValueError, argparse.ArgumentTypeError) as error:
            raise ValueError(f"--{self.name}: {error}") from error
        for each in values:
            if self.choices is not None and each not in self.choices:
                raise ValueError(f"--{self.name} must be one of {', '.join(map(str, self.choices))}, got {each!r}")
        return values if self.many and isinstance(value, list) else values[0]


def at_least(minimum: int) -> typing.Callable[[object], int]:
    """A field's converter (metadata "type") for a whole number of `minimum` or more. Unlike a converter of words, it
    also holds the numbers of an options file and of a dataclass made in Python (`checks_values`), so a count that
    cannot be (`--max_seq_length 0`, `--predicate_column 0`) is refused before anything is imported or read."""

    def whole_number(value) -> int:
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"invalid int value: {value!r}") from None
        elif isinstance(value, bool) or not isinstance(value, int):
            raise argparse.ArgumentTypeError(f"must be a whole number, got {value!r}")
        if value < minimum:  # worded as the checks made later say it (`--batch_size must be a positive integer`)
            wanted = "a positive integer" if minimum == 1 else f"{minimum} or more"
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {value}")
        return value

    whole_number.checks_values = True
    return whole_number


def _checks_values(converter) -> bool:
    """Whether `converter` is also run on values that are not words (`at_least`'s)."""
    return getattr(converter, "checks_values", False)


def _wrong_type(value):
    raise TypeError(f"a value of another type: {value!r}")


@functools.cache
def option_specs(cls: type) -> tuple[OptionSpec, ...]:
    """The `OptionSpec` of each field of the dataclass `cls` that `__init__` takes, read once per class."""
    hints = typing.get_type_hints(cls)
    specs = []
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        plain, meta = _plain_type(hints[item.name]), item.metadata
        many = typing.get_origin(plain) is list
        if many:
            (plain,) = typing.get_args(plain)
        kind = "switch" if meta.get("switch") else "bool" if plain is bool else "value"
        choices = tuple(meta["choices"]) if "choices" in meta else None
        specs.append(OptionSpec(item, kind, plain, meta.get("type"), many, choices))
    return tuple(specs)


def check_fields(options) -> None:
    """Holds a dataclass made in Python to its fields' converters and choices (`OptionSpec.checked`), as the command
    line and the options file are: a `__post_init__` calls it. A `ValueError` in one line."""
    for spec in option_specs(type(options)):  # object's setattr: a frozen dataclass's __post_init__ calls it too
        object.__setattr__(options, spec.name, spec.checked(getattr(options, spec.name)))


def add_options(parser: argparse.ArgumentParser, cls: type, title: str | None = None) -> None:
    """One argument per field of the dataclass `cls` (in an argument group `title`, if given)."""
    target = parser.add_argument_group(title) if title else parser
    for spec in option_specs(cls):
        spec.add_to(target)


class UsageError(InputError):
    """A command line the options parser refuses (an unknown option, a value a field's converter or choices refuse):
    bad input, one line, which the command frame writes with exit status 2."""


class OptionsParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are a `UsageError` in one line rather than the usage and `SystemExit(2)`
    (argparse's own `--help` still exits 0)."""

    def error(self, message: str):
        # "argument --max_steps/--max-steps: invalid int value" -> "--max_steps: invalid int value", as the options
        # file and a field's own check name it
        message = re.sub(r"^argument (--\w+)(/-[-\w]+)*: ", r"\1: ", message)
        if message.startswith("unrecognized arguments"):
            message = f"{message} ({self.prog} --help lists the options)"
        raise UsageError(message)


def options_parser(classes: type | Sequence[type], **parser_options) -> argparse.ArgumentParser:
    """An `argparse` parser with one option per field of each dataclass of `classes` (grouped by class when there
    are several)."""
    classes = [classes] if isinstance(classes, type) else list(classes)
    parser = OptionsParser(**parser_options)
    if parser.add_help:  # the fine-tuning commands' --help_all lists transformers' options; here there are no others
        parser.add_argument("--help_all", "--help-all", action="help", help=argparse.SUPPRESS)
    for cls in classes:
        add_options(parser, cls, title=cls.__name__ if len(classes) > 1 else None)
    return parser


def _from_namespace(classes: Iterable[type], values: dict) -> list:
    """The dataclasses of `classes` filled from `values` (a field of each class takes its value)."""
    made = []
    for cls in classes:
        names = {spec.name for spec in option_specs(cls)}
        made.append(cls(**{name: value for name, value in values.items() if name in names}))
    return made


def read_json_options(path: str, classes: Sequence[type], others_allowed: bool = False) -> tuple[list, dict]:
    """The dataclasses of `classes` from the JSON object in `path`, and the fields no class has (an error unless
    `others_allowed`: the fine-tuning commands hand those to `TrainingArguments`)."""
    with open(path, encoding="utf-8") as handle:
        values = json.load(handle)
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object of options, got {type(values).__name__}")
    specs = [spec for cls in classes for spec in option_specs(cls)]
    unknown = sorted(set(values) - {spec.name for spec in specs})
    missing = [spec.name for spec in specs if spec.required and spec.name not in values]
    problems = ([f"unknown fields {unknown}"] if unknown and not others_allowed else []) + \
        ([f"missing fields {missing}"] if missing else [])
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    checked = {spec.name: spec.from_json(values[spec.name], path) for spec in specs if spec.name in values}
    return _from_namespace(classes, checked), {name: values[name] for name in unknown}


def parse_options(classes: type | Sequence[type], argv: Sequence[str], known_only: bool = False,
                  **parser_options):
    """The dataclass(es) of `classes` from the command line `argv`, or from the JSON object of the file when `argv` is
    one `.json` file. A usage error is a `UsageError` (an `InputError`) in one line, as a field's own check
    (`__post_init__`) raises its `ValueError`; `--help` exits 0 (argparse).
    With `known_only`, returns `(dataclasses, the arguments no class has)` instead of refusing those: the words of the
    command line it did not read, or the JSON file's other fields as a dict."""
    single = isinstance(classes, type)
    classes = [classes] if single else list(classes)
    argv = list(argv)
    if len(argv) == 1 and argv[0].endswith(".json"):
        made, rest = read_json_options(argv[0], classes, others_allowed=known_only)
    else:
        parser = options_parser(classes, **parser_options)
        namespace, rest = parser.parse_known_args(argv) if known_only else (parser.parse_args(argv), [])
        made = _from_namespace(classes, vars(namespace))
    result = made[0] if single else made
    return (result, rest) if known_only else result
