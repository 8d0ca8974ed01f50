"""Command lines from dataclasses, as `transformers.HfArgumentParser` reads them, without importing transformers.

`--help` of a command has to answer before torch and transformers are imported (seconds on a laptop), so the
commands whose arguments are plain dataclasses (`train.pretrain`, `train.demo`) build their parser here and import
the heavy libraries only once the arguments are parsed. The same spelling as HfArgumentParser: one `--field` per
field (and `--field-with-dashes`), its type from the annotation, `list[...]` fields take one or more values, a
`bool` field is a flag that also takes a value (`--disable_tqdm`, `--disable_tqdm false`), `metadata["help"]` and
`metadata["choices"]`, and a command line that is a single `.json` file gives the fields as a JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing


def _to_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false, yes/no, 1/0), got {value!r}")


def _argument(field: dataclasses.Field, annotation) -> dict:
    """The `add_argument` keywords of one field."""
    options: dict = {"help": field.metadata.get("help")}
    if "choices" in field.metadata:
        options["choices"] = field.metadata["choices"]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))  # X | None -> X
    if typing.get_origin(annotation) is list:
        (annotation,) = typing.get_args(annotation)
        options["nargs"] = "+"
    if annotation is bool:
        options.update(type=_to_bool, nargs="?", const=True)
    else:
        options["type"] = annotation
    if _required(field):
        options["required"] = True
    else:
        has_factory = field.default_factory is not dataclasses.MISSING
        options["default"] = field.default_factory() if has_factory else field.default
        if options["default"] not in (None, False) and "default" not in (options["help"] or ""):
            options["help"] = f"{options['help'] or ''} (default {options['default']})".strip()
    return options


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def dataclass_parser(cls: type, **parser_options) -> argparse.ArgumentParser:
    """An `argparse` parser with one option per field of the dataclass `cls`."""
    parser = argparse.ArgumentParser(**parser_options)
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        names = [f"--{field.name}"] + ([f"--{field.name.replace('_', '-')}"] if "_" in field.name else [])
        parser.add_argument(*names, dest=field.name, **_argument(field, hints[field.name]))
    return parser


def parse_dataclass(cls: type, argv: list[str], **parser_options):
    """`cls` from the command line `argv`, or from the JSON object of the file when `argv` is one `.json` file.
    Usage errors exit 2 (argparse); a field's own check (`__post_init__`) raises its `ValueError`."""
    if len(argv) == 1 and argv[0].endswith(".json"):
        with open(argv[0], encoding="utf-8") as handle:
            values = json.load(handle)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        unknown = sorted(set(values) - {f.name for f in fields})
        missing = [f.name for f in fields if _required(f) and f.name not in values]
        if unknown or missing:
            raise ValueError(f"{argv[0]}: " + "; ".join(
                ([f"unknown fields {unknown}"] if unknown else []) + ([f"missing fields {missing}"] if missing else [])))
        return cls(**values)
    return cls(**vars(dataclass_parser(cls, **parser_options).parse_args(argv)))
