"""Command lines from dataclasses: the one way this project declares and parses a command's options.

Every command's options are a dataclass, one field per option (`elmo_hf.tools.core.command_options` for the tools,
`elmo_hf.train.pretrain_args`, `elmo_hf.train.demo_args`, `elmo_hf.train.finetune_arguments` for training); `options_parser` builds an
`argparse` parser from it, with the spelling of `transformers.HfArgumentParser` (which the fine-tuning commands use
for transformers' own `TrainingArguments` only), so the two read alike:

* one `--field` per field (and `--field-with-dashes`), its type from the annotation, `list[...]` fields take one or
  more values;
* a `bool` field is a flag that also takes a value (`--disable_tqdm`, `--disable_tqdm false`), or, with
  `flag(...)`, a plain switch (`--overwrite`), which never swallows the word after it;
* `metadata`: "help", "choices", "aliases" (more option strings), "type" (a converter, e.g. an encoding's check),
  "positional" (an argument without dashes), "hidden" (left out of --help), "values" (switches that set the field:
  `{"--top": "top"}`), "metavar";
* a command line that is a single `.json` file gives the fields as a JSON object.

Standard library only: a command's `--help` and a mistyped option answer before torch is imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import field


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


def _argument(item: dataclasses.Field, annotation) -> dict:
    """The `add_argument` keywords of one field."""
    meta = item.metadata
    options: dict = {"help": argparse.SUPPRESS if meta.get("hidden") else meta.get("help")}
    for key in ("choices", "metavar"):
        if key in meta:
            options[key] = meta[key]
    annotation = _plain_type(annotation)
    if typing.get_origin(annotation) is list:
        (annotation,) = typing.get_args(annotation)
        options["nargs"] = "+"
    if meta.get("switch"):
        options["action"] = "store_true"
        return options
    if annotation is bool:
        options.update(type=to_bool, nargs="?", const=True)
    else:
        options["type"] = meta.get("type", annotation)
    if _required(item):
        if not meta.get("positional"):
            options["required"] = True
    else:
        options["default"] = item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default
        shown = options["help"] not in (None, argparse.SUPPRESS) and "default" not in options["help"]
        if shown and options["default"] not in (None, False):
            options["help"] = f"{options['help']} (default {options['default']})"
    return options


def _required(item: dataclasses.Field) -> bool:
    return item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING


def add_options(parser: argparse.ArgumentParser, cls: type, title: str | None = None) -> None:
    """One argument per field of the dataclass `cls` (in an argument group `title`, if given)."""
    target = parser.add_argument_group(title) if title else parser
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        keywords = _argument(item, hints[item.name])
        if item.metadata.get("positional"):
            target.add_argument(item.name, **keywords)
            continue
        names = [f"--{item.name}"] + ([f"--{item.name.replace('_', '-')}"] if "_" in item.name else [])
        target.add_argument(*names, *item.metadata.get("aliases", ()), dest=item.name, **keywords)
        for switch, value in item.metadata.get("values", {}).items():  # --top sets mode="top"
            target.add_argument(switch, dest=item.name, action="store_const", const=value,
                                help=f"--{item.name} {value}")


def options_parser(classes: type | Sequence[type], **parser_options) -> argparse.ArgumentParser:
    """An `argparse` parser with one option per field of each dataclass of `classes` (grouped by class when there
    are several)."""
    classes = [classes] if isinstance(classes, type) else list(classes)
    parser = argparse.ArgumentParser(**parser_options)
    for cls in classes:
        add_options(parser, cls, title=cls.__name__ if len(classes) > 1 else None)
    return parser


def _from_namespace(classes: Iterable[type], values: dict) -> list:
    """The dataclasses of `classes` filled from `values` (a field of each class takes its value)."""
    made = []
    for cls in classes:
        names = {item.name for item in dataclasses.fields(cls) if item.init}
        made.append(cls(**{name: value for name, value in values.items() if name in names}))
    return made


def read_json_options(path: str, classes: Sequence[type], others_allowed: bool = False) -> tuple[list, dict]:
    """The dataclasses of `classes` from the JSON object in `path`, and the fields no class has (an error unless
    `others_allowed`: the fine-tuning commands hand those to `TrainingArguments`)."""
    with open(path, encoding="utf-8") as handle:
        values = json.load(handle)
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object of options, got {type(values).__name__}")
    fields = [item for cls in classes for item in dataclasses.fields(cls) if item.init]
    unknown = sorted(set(values) - {item.name for item in fields})
    missing = [item.name for item in fields if _required(item) and item.name not in values]
    problems = ([f"unknown fields {unknown}"] if unknown and not others_allowed else []) + \
        ([f"missing fields {missing}"] if missing else [])
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    hints = {name: hint for cls in classes for name, hint in typing.get_type_hints(cls).items()}
    checked = {item.name: _json_value(item, hints[item.name], values[item.name], path)
               for item in fields if item.name in values}
    return _from_namespace(classes, checked), {name: values[name] for name in unknown}


def _json_value(item: dataclasses.Field, annotation, value, path: str):
    """A JSON file's value for `item`, held to the command line's rules: its choices, its type (the field's own
    converter included) and booleans as `to_bool` reads them; a `ValueError` naming the field otherwise."""
    meta, plain = item.metadata, _plain_type(annotation)
    if value is None:
        return None
    if typing.get_origin(plain) is list:
        if not isinstance(value, list):
            raise ValueError(f"{path}: {item.name} must be a list, got {value!r}")
        (inner,) = typing.get_args(plain)
        return [_json_value(item, inner, each, path) for each in value]
    try:
        if meta.get("switch") or plain is bool:
            value = to_bool(value) if isinstance(value, (str, bool)) else _wrong_type(value)
        elif isinstance(value, str):
            value = meta.get("type", plain)(value)
        elif plain in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = plain(value) if plain is float or float(value).is_integer() else _wrong_type(value)
        elif isinstance(plain, type) and not isinstance(value, plain):
            _wrong_type(value)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
        raise ValueError(f"{path}: {item.name}: {error}") from None
    if "choices" in meta and value not in meta["choices"]:
        raise ValueError(f"{path}: {item.name} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}")
    return value


def _wrong_type(value):
    raise TypeError(f"a value of another type: {value!r}")


def parse_options(classes: type | Sequence[type], argv: Sequence[str], known_only: bool = False,
                  **parser_options):
    """The dataclass(es) of `classes` from the command line `argv`, or from the JSON object of the file when `argv` is
    one `.json` file. Usage errors exit 2 (argparse); a field's own check (`__post_init__`) raises its `ValueError`.
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
