"""transformers' `TrainingArguments` fields, their help and default, for the fine-tuning commands' help texts.

`--help_all` imports transformers and reads `dataclasses.fields(TrainingArguments)`. `--help` answers before torch
or transformers is imported (tests/test_commands.py), so it reads the same fields from the source of the installed
transformers (`transformers/training_args.py`, with `ast`, 0.1 s): the help and default a user sees are
transformers' own, never a copy that ages with its releases. tests/test_arguments.py holds the two readings
equal. Standard library only.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple


class TrainingField(NamedTuple):
    """A `TrainingArguments` field as a help text shows it: its help (None where it cannot be read) and default
    (None where it has none, or is computed)."""

    name: str
    help: str | None
    default: object


def imported_fields() -> dict[str, TrainingField]:
    """Every field `TrainingArguments.__init__` takes, from the class itself. Imports transformers (seconds)."""
    from transformers import TrainingArguments

    return {item.name: TrainingField(item.name, item.metadata.get("help"), _default(item))
            for item in dataclasses.fields(TrainingArguments) if item.init}


def _default(item: dataclasses.Field):
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return None if item.default is dataclasses.MISSING else item.default


def source_fields(names: Iterable[str]) -> dict[str, TrainingField]:
    """The fields `names` as the installed transformers' source declares them, without importing it: each
    `name: type = field(default=..., metadata={"help": ...})` of `class TrainingArguments`. A field not found, or a
    help or default that is not a literal, reads as None; no transformers at all, as no fields."""
    spec = importlib.util.find_spec("transformers")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "training_args.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return {}
    wanted, found = set(names), {}
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "TrainingArguments"):
            continue
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in wanted:
                found[node.target.id] = _declared(node.target.id, node.value)
    return found


def _declared(name: str, value: ast.expr | None) -> TrainingField:
    """`field(default=..., metadata={"help": ...})` (or a plain default) read as literals."""
    if not (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "field"):
        return TrainingField(name, None, _literal(value))
    keywords = {keyword.arg: keyword.value for keyword in value.keywords}
    metadata = keywords.get("metadata")
    help_text = None
    if isinstance(metadata, ast.Dict):
        for key, item in zip(metadata.keys, metadata.values):
            if isinstance(key, ast.Constant) and key.value == "help":
                help_text = _literal(item)
    return TrainingField(name, help_text if isinstance(help_text, str) else None, _literal(keywords.get("default")))


def _literal(node: ast.expr | None):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
