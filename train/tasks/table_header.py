"""Whether the first line of a TSV/CSV task file names its columns, and which columns hold text: what the refusals of
`common_data.read_classification_file` tell the user to give, so that following them reads every row and every
text column.

A file without a header line whose first line does not look like data (a label `pos` and a short text) used to be
told "name it with --label_column", and `--label_column pos` then took the first example for the header: one example
fewer, without a word. A label that is also a value of its own column further down gives such a file away. A file
with two text columns under names the readers do not know (`query`/`title`) was told "name it with --text_column",
which trains on one of them: the hint names the pair option too. Standard library only (the task modules import
this at their top, and `--help` reads them).
"""

from __future__ import annotations

from collections.abc import Sequence

_SCAN_ROWS = 1000  # rows looked at for a header name among the values: a label recurs in far fewer


def header_values_below(rows: Sequence[dict], columns: Sequence, lines: Sequence[int]) -> dict[str, int]:
    """The column names that are also a value of their own column in a row below, each with the first such line."""
    found: dict[str, int] = {}
    for row, line in zip(rows[:_SCAN_ROWS], lines):
        for name in columns:
            if isinstance(name, str) and name not in found and name.strip() and _value(row, name) == name.strip():
                found[name] = line
    return found


def _value(row: dict, name: str) -> str | None:
    value = row.get(name)
    return None if value is None else str(value).strip()


def suggested_column_names(columns: Sequence, label: str | None = None, text: str | None = None,
                           pair: str | None = None) -> str:
    """A --column_names value for a file whose first line is data: the chosen columns named as the readers know
    them (label, text, text_pair), the others column2, column3 ... by their place."""
    names = {label: "label", text: "text", pair: "text_pair"}
    return ",".join(names.get(column) or f"column{i}" for i, column in enumerate(columns, start=1)
                    if column is not None)


def headerless_message(columns: Sequence, found: dict[str, int], suggestion: str, named: str = "") -> str:
    """The refusal of a file whose first line is an example: which value recurs where, and the --column_names to
    give. `named`: the option that named a column by a value of that line (its rerun would drop the line)."""
    name, line = next(iter(found.items()))
    shown = ", ".join(repr(c) for c in list(columns)[:4] if c is not None)
    drop = f"{named} would take it for the header and leave that example out; " if named else ""
    instead = f" in place of {named}" if named else ""
    return (f"the first line ({shown}) is an example, not column names: its {name!r} is also a value of that column "
            f"at line {line}; {drop}name the columns in order with --column_names{instead} (e.g. --column_names "
            f"{suggestion})")


def text_like_columns(rows: Sequence[dict], columns: Sequence, exclude: Sequence = ()) -> list[str]:
    """The columns that hold texts: mostly not numbers, and mostly different from row to row (not a label's few
    values)."""
    sample = rows[:_SCAN_ROWS]
    found = []
    for name in columns:
        if not isinstance(name, str) or name in exclude:
            continue
        values = [v for v in (_value(row, name) for row in sample) if v]
        if not values:
            continue
        words = sum(not is_number(v) for v in values)
        if words > len(values) / 2 and (len(set(values)) > len(values) / 2 or len(values) < 3):
            found.append(name)
    return found


def is_number(text: str) -> bool:
    """Whether a field reads as a number (a label, an id, a score)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def pair_hint(texts: Sequence[str]) -> str:
    """What to give for two (or more) text columns: both for a pair, or one for single sentences."""
    first, second = texts[0], texts[1]
    return (f"; {len(texts)} columns hold text ({', '.join(map(repr, texts))}): for sentence pairs give both, "
            f"--text_column {first} --text_pair_column {second}; for single sentences, --text_column {first}")
