"""Shared pieces of the fine-tuning tasks (`train/tasks/`): their files and metrics, with the standard library (and
numpy, in the metrics that use it) only: a task's module imports them at its top, and a command's --help reads
that module.

* Readers of the task files: SST-2 style TSV (`label<TAB>sentence`, a header line, CRLF or LF), CSV and JSON lines
  with `text`/`label` columns for classification, and a second sentence for pairs (`text_pair`, or GLUE's
  `sentence1`/`sentence2`, `premise`/`hypothesis`, `question`/`sentence`, `question1`/`question2`); CoNLL columns
  (`word POS chunk NER`, a blank line between sentences, `-DOCSTART-` skipped) and JSON lines with `tokens`/`tags` for
  tagging.
* Metrics: accuracy, Pearson and Spearman correlations (STS-B), and entity-level precision/recall/F1 of IOB1/IOB2/IOBES
  tag sequences, scored as conlleval and seqeval (default mode) do, plus seqeval's strict IOB2 mode. No dependency on
  seqeval.
* Readers of the files to predict (`--test_file`): sentences (one a line, or a text column) and words (CoNLL
  columns, the word first; JSON lines with `tokens`; or sentences one a line, cut by the word split).
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from elmo_hf.tools.core.errors import FileFormatError, InputError
from elmo_hf.tools.core.text_files import check_decodes

from .table_header import (
    header_values_below,
    headerless_message,
    is_number,
    pair_hint,
    suggested_column_names,
    text_like_columns,
)

logger = logging.getLogger(__name__)

TEXT_COLUMNS = ("text", "sentence", "content", "review")
# The columns of a pair's two sentences, as transformers' tokenizers and GLUE's files name them (RTE, MRPC, STS-B,
# WNLI: sentence1/sentence2; MNLI, SNLI, ANLI: premise/hypothesis; QNLI: question/sentence; QQP: question1/question2;
# CLUE-style files and BERT's InputExample: text_a/text_b)
PAIR_COLUMNS = (("text", "text_pair"), ("sentence1", "sentence2"), ("premise", "hypothesis"),
                ("question", "sentence"), ("question1", "question2"), ("text_a", "text_b"))
LABEL_COLUMNS = ("label", "gold_label", "score")  # MNLI's TSV: gold_label; STS-B's: score
TOKEN_COLUMNS = ("tokens", "words")
TAG_COLUMNS = ("tags", "ner_tags", "labels", "label")


# ---------------------------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------------------------
def read_input_file(reader, path: str, option: str, encoding: str = "utf-8",
                    encoding_option: str = "--encoding") -> list[dict]:
    """`reader(path, encoding)`, with whatever is wrong with the file (absent, not text in `encoding`, not in the
    format) raised as an `InputError` that names the option and the file (and the line and byte that do not
    decode, with the encoding to give `encoding_option`)."""
    if os.path.isdir(path):
        raise InputError(f"--{option} {path} is a folder, not a file")
    if not os.path.isfile(path):
        raise InputError(f"--{option} {path}: no such file")
    try:
        check_decodes(path, encoding, encoding_option)
        return reader(path, _text_encoding(encoding))
    except (InputError, csv.Error) as error:  # the readers' own refusals; anything else is a bug, with its traceback
        message = str(error)
        message = message if message.startswith(str(path)) else f"{path}: {message}"
        raise InputError(f"--{option} {message}") from error


def _text_encoding(encoding: str) -> str:
    """UTF-8 files may start with a byte-order mark (Windows editors write one): it is not part of the header."""
    return "utf-8-sig" if encoding.replace("_", "-").lower() in ("utf-8", "utf8") else encoding


def _file_format(path: str | os.PathLike) -> str:
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".json", ".jsonl"):
        return "json"
    if suffixes and suffixes[-1] == ".csv":
        return "csv"
    return "tsv"


def _read_json_lines(path: str | os.PathLike, encoding: str = "utf-8", with_lines: bool = False):
    """The records of a file of JSON lines (blank lines skipped) or of a JSON array; `with_lines`: and each
    record's line (None in an array)."""
    with open(path, encoding=encoding) as f:
        text = f.read()
    if text.strip().startswith("["):  # a JSON array of records also works
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            raise FileFormatError(f"{path}: not a JSON array of records ({error})") from error
        lines = [None] * len(rows) if isinstance(rows, list) else []
    else:
        rows, lines = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise FileFormatError(f"{path}:{number}: not a JSON object ({error})") from error
                lines.append(number)
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise FileFormatError(f"{path}: record {number} is not a JSON object: {row!r:.100}")
    return (rows, lines) if with_lines else rows


def _pick(columns: Iterable[str], wanted: str | None, candidates: Sequence[str], what: str, path) -> str:
    columns = list(columns)
    if wanted is not None:
        if wanted not in columns:
            raise FileFormatError(f"{path}: no {what} column {wanted!r}; columns are {columns}")
        return wanted
    for name in candidates:
        if name in columns:
            return name
    raise FileFormatError(f"{path}: cannot tell the {what} column among {columns}; name it with --{what}_column")


def _pair_columns(columns: list, text_column: str | None, pair_column: str | None, path) -> tuple[str, str] | None:
    """The columns of a pair's first and second sentences, or None for a file of single sentences: `pair_column`
    (and `text_column`, or the first column `PAIR_COLUMNS` pairs it with), else the first of `PAIR_COLUMNS` found."""
    if pair_column is None:
        found = [(a, b) for a, b in PAIR_COLUMNS if a in columns and b in columns and text_column in (None, a)]
        return found[0] if found else None
    _pick(columns, pair_column, (), "text_pair", path)  # refuses a column that is not there
    first = text_column or next((a for a, b in PAIR_COLUMNS if b == pair_column and a in columns), None) or \
        next((c for c in TEXT_COLUMNS if c in columns and c != pair_column), None)  # "text" beside any second one
    if first is None:
        raise FileFormatError(f"{path}: cannot tell the first sentence's column among {columns}; name it with "
                              "--text_column")
    return _pick(columns, first, (), "text", path), pair_column


class Example(dict):
    """One example of a task file (a dict, equal to a plain one), with where it is: `path`, its file, `line`, its
    first line there (None in a JSON array), and `number`, its place among the file's examples (from 1)."""

    path: str = ""
    line: int | None = None
    number: int = 0

    def where(self) -> str:
        return f"line {self.line}" if self.line is not None else f"example {self.number}"


def example_at(values: dict, path, line: int | None, number: int) -> Example:
    example = Example(values)
    example.path, example.line, example.number = str(path), line, number
    return example


# --max_seq_length for the sentences a tagger is scored on and predicts: the biLM has no length limit of its own,
# and a validation sentence cut at the training length was scored on its first words only (eval_f1 over 3 of its 6
# entities) while --do_predict tagged it whole.
WHOLE_SENTENCE = 1 << 30


def whole_sentences(data_args):
    """A copy of `data_args` with sentences read whole (`WHOLE_SENTENCE`), for a tagger's validation and test
    sentences."""
    import copy

    whole = copy.copy(data_args)
    whole.max_seq_length = WHOLE_SENTENCE
    return whole


def warn_if_cut(examples: Sequence, lengths: Sequence[int], room: int,
                how: str = "each is cut to its first {room} words") -> None:
    """One warning when some examples have more words than `room`, what `--max_seq_length` leaves: how many, the
    longest (its file and line), and `how` each is cut (`{room}` filled in)."""
    cut = [(length, -i) for i, length in enumerate(lengths) if length > room]
    if not cut:
        return
    length, index = max(cut)
    example = examples[-index]
    where = f"{example.path} {example.where()}" if isinstance(example, Example) and example.path else \
        f"example {1 - index}"
    logger.warning("%d of %d examples have more words than --max_seq_length leaves room for (%d): %s (the longest, "
                   "%s, has %d words); a larger --max_seq_length reads them whole", len(cut), len(examples), room,
                   how.format(room=room), where, length)


def _read_table(path, kind: str, encoding: str, column_names: Sequence[str] | None) -> tuple[list, list, list]:
    """The rows of a TSV or CSV file as dicts, its column names, and each row's line: the names from its header line,
    or `column_names` for a file without one (then its first line is data)."""
    with open(path, encoding=encoding, newline="") as f:
        options = {} if kind == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}  # SST-2 has quote characters
        reader = csv.DictReader(f, fieldnames=list(column_names) if column_names else None, **options)
        rows, lines = [], []
        for row in reader:
            rows.append(row)
            lines.append(reader.line_num)  # the row's last line: one line a row in TSV
        columns = list(reader.fieldnames or [])
    if column_names:
        first = next(iter(rows), {})
        if set(column_names) & {str(value).strip() for value in first.values() if value is not None}:
            raise FileFormatError(f"--column_names names the columns of a file without a header line, but its first "
                                  f"line is a header "
                                  f"({', '.join(repr(v) for v in list(first.values())[:4] if v is not None)}): "
                                  "leave "
                                  "--column_names out, or the header line")
        for row, line in zip(rows, lines):  # csv puts extra fields under None, and None for missing ones
            extra = row.get(None) or []
            present = sum(value is not None for key, value in row.items() if key is not None)
            if extra or present < len(column_names):
                raise FileFormatError(f"line {line} has {present + len(extra)} columns, --column_names names "
                                      f"{len(column_names)}")
    if not column_names and looks_like_data(columns):
        raise FileFormatError(f"the first line ({', '.join(repr(c) for c in columns[:4])}"
                              f"{', ...' if len(columns) > 4 else ''}) looks like data, not a header of column names: "
                              "give the columns' names in order with --column_names (e.g. "
                              "label,question1,question2,id), or add a header line")
    if not column_names:  # csv puts a row's fields beyond the header's under None: they would be lost
        for row, line in zip(rows, lines):
            extra = row.get(None) or []
            if any(str(field).strip() for field in extra):
                how = ("write the tab inside a text as a space" if kind != "csv" else
                       "put a text that holds a comma in double quotes")
                raise FileFormatError(f"line {line} has {len(columns) + len(extra)} "
                                      f"{'comma' if kind == 'csv' else 'tab'}-separated fields, the header line names "
                                      f"{len(columns)} ({', '.join(map(repr, columns))}): the fields beyond would be "
                                      f"dropped ({', '.join(map(repr, extra))[:100]}); {how}, or name the extra column "
                                      "in the header line")
    return rows, columns, lines


def looks_like_data(columns: Sequence) -> bool:
    """Whether a TSV/CSV file's first line is an example rather than a header: some field is a number (a label, an
    id), or most fields are several words (sentences)."""
    fields = [str(c).strip() for c in columns if c is not None]
    return any(is_number(c) for c in fields) or sum(len(c.split()) > 1 for c in fields) > len(fields) / 2


def column_list(column_names: str | Sequence[str] | None) -> list[str] | None:
    """`--column_names`: "label,text" (or a list) -> ["label", "text"]; None when not given."""
    if column_names is None:
        return None
    names = column_names.split(",") if isinstance(column_names, str) else list(column_names)
    names = [name.strip() for name in names]
    if not all(names) or len(set(names)) != len(names):
        raise FileFormatError(f"--column_names {column_names!r}: give each column a name, once, separated by commas")
    return names


def read_classification_file(
    path: str | os.PathLike, text_column: str | None = None, label_column: str | None = None,
    encoding: str = "utf-8", pair_column: str | None = None, column_names: str | Sequence[str] | None = None,
) -> list[Example]:
    """Read sentences (or pairs) and labels: `[{"text": str, "label": str}, ...]` (labels as strings), with
    `"text_pair"` for pairs; each an `Example` that knows its line.

    TSV (any suffix but .csv/.json/.jsonl) has a header line naming the columns (SST-2: `label<TAB>sentence`);
    fields are not quoted. CSV follows the csv module's dialect. JSON lines hold one object per line. A TSV or CSV
    file without a header line (its first line looks like data: `looks_like_data`) needs `column_names`, the names
    of its columns in order (Quora's "label,question1,question2,id").
    Pairs: `pair_column` (with `text_column`), or two columns of `PAIR_COLUMNS` (`text`/`text_pair`, GLUE's
    `sentence1`/`sentence2`, ...). Otherwise the text column is `text_column` or the first of `text`, `sentence`,
    `content`, `review`, or the only column besides the label; the label column is `label_column` or the first of
    `label`, `gold_label`, `score`. An empty label, text or second sentence is refused, naming its line.
    """
    kind = _file_format(path)
    if kind == "json":
        rows, lines = _read_json_lines(path, encoding, with_lines=True)
        columns = list(rows[0]) if rows else []
    else:
        rows, columns, lines = _read_table(path, kind, encoding, column_list(column_names))
    columns = [c.strip() if isinstance(c, str) else c for c in columns]
    if not rows:
        raise FileFormatError(f"{path}: no examples")
    table = kind != "json" and not column_names  # a header line, which may be an example (table_header)
    found = header_values_below(rows, columns, lines) if table else {}
    try:
        label_name = _pick(columns, label_column, LABEL_COLUMNS, "label", path)
        others = [c for c in columns if c != label_name]
        pair = _pair_columns(columns, text_column, pair_column, path)
        text_name = pair[0] if pair else _pick(columns, text_column,
                                               (*TEXT_COLUMNS, *(others if len(others) == 1 else [])), "text", path)
    except ValueError as error:
        _refuse_columns_not_told(error, rows, columns, found, table, label_column, path)
    if found.keys() & {label_name, text_name, *(pair[1:] if pair else ())}:
        named = next((f"--{option} {value}" for option, value in (("label_column", label_column), ("text_column",
                      text_column), ("text_pair_column", pair_column)) if value in found), "")
        raise FileFormatError(f"{path}: " + headerless_message(columns, found, suggested_column_names(
            columns, label_name, text_name, pair[1] if pair else None), named))
    if table and not pair:
        _warn_of_unread_text(rows, columns, label_name, text_name, path)
    names = {"text": text_name, "label": label_name, **({"text_pair": pair[1]} if pair else {})}
    examples = []
    for number, (row, line) in enumerate(zip(rows, lines), start=1):
        row = {k.strip() if isinstance(k, str) else k: v for k, v in row.items()}
        values = {key: row.get(name) for key, name in names.items()}
        example = example_at({key: None if value is None else str(value).strip() for key, value in values.items()},
                             path, line, number)
        if any(value is None for value in values.values()):
            raise FileFormatError(f"{path}: {example.where()} lacks one of the columns {list(names.values())}: "
                                  f"{row!r:.200}")
        empty = next((key for key in names if not example[key]), None)
        if empty is not None:
            what = {"label": "label", "text": "text", "text_pair": "second sentence"}[empty]
            why = " (an empty label would train a class named '')" if empty == "label" else ""
            raise FileFormatError(f"{path}: {example.where()}: the {what} (column {names[empty]!r}) is empty; every "
                                  f"example needs one{why}")
        examples.append(example)
    return examples


def _refuse_columns_not_told(error: ValueError, rows, columns, found: dict, table: bool, label_column, path):
    """The refusal of a file whose label or text column cannot be told, with the hint that reads it whole: for a
    first line that is an example, --column_names only (a column named by that line's value would drop it); for
    several text columns, the pair option beside --text_column."""
    if not table:
        raise error
    if found:  # the first line is an example: the column it names recurs below as a value
        label = label_column if label_column in columns else next(iter(found))
        texts = text_like_columns(rows, columns, exclude=(label,))
        suggestion = suggested_column_names(columns, label, *(texts[:2] or [None]))
        raise FileFormatError(f"{path}: " + headerless_message(columns, found, suggestion)) from None
    texts = text_like_columns(rows, columns, exclude=(label_column,))
    hint = pair_hint(texts) if len(texts) >= 2 and "the text column" in str(error) else ""
    raise FileFormatError(f"{error}{hint} (or, for a file without a header line, name all its columns in order with "
                          "--column_names)") from None


def _warn_of_unread_text(rows, columns, label_name: str, text_name: str, path) -> None:
    """A warning when single sentences are read from a file with another text column: a pair read as its first
    sentences only is rarely meant."""
    unread = [c for c in text_like_columns(rows, columns, exclude=(label_name, text_name))
              if c not in ("id", "idx", "index")]
    if unread:
        logger.warning("%s: the column %r holds text too, and is not read: the head classifies %r alone; for "
                       "sentence pairs give --text_pair_column %s", path, unread[0], text_name, unread[0])


def read_conll_file(path: str | os.PathLike, tag_column: int = -1, encoding: str = "utf-8") -> list[dict]:
    """Read CoNLL columns: `[{"tokens": [...], "tags": [...]}, ...]`.

    One token per line (`word POS chunk NER` in CoNLL-2003: the word is the first column, the tag the last, or
    `tag_column`), a blank line between sentences, `-DOCSTART-` lines skipped.
    """
    sentences, tokens, tags, start = [], [], [], 0
    columns, first = None, 0  # every token line has the same columns: a file of sentences (a TSV) is refused
    with open(path, encoding=encoding) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if tokens:
                    sentences.append(example_at({"tokens": tokens, "tags": tags}, path, start, len(sentences) + 1))
                    tokens, tags = [], []
                continue
            start = start if tokens else number
            check_word_not_space(line, f"{path}:{number}")
            if len(fields) < 2:
                raise FileFormatError(f"{path}:{number}: expected a word and a tag, got {line.rstrip()!r}")
            _check_token_line(line, path, number)
            if columns is None:
                columns, first = len(fields), number
            elif len(fields) != columns:
                raise FileFormatError(
                    f"{path}:{number}: {len(fields)} columns where line {first} has {columns}; not CoNLL columns "
                    f"(one token per line: the word first, the tag last; a blank line between sentences)"
                )
            tokens.append(fields[0])
            tags.append(fields[tag_column])
    if tokens:
        sentences.append(example_at({"tokens": tokens, "tags": tags}, path, start, len(sentences) + 1))
    if not sentences:
        raise FileFormatError(f"{path}: no sentences")
    if tag_column == -1 and columns and columns > 2:
        _check_tag_column(path, encoding, columns, {tag for sentence in sentences for tag in sentence["tags"]})
    return sentences


def _is_tag(tag: str) -> bool:
    """An entity tag of IOB/BIOES: O, or a prefix B/I/E/S/L/U and a type (B-PER, I_LOC), in either case."""
    return tag in ("O", "o") or (len(tag) > 2 and tag[0] in "BIESLUbieslu" and tag[1] in "-_")


def _check_tag_column(path, encoding: str, columns: int, last: set[str]) -> None:
    """The tag is the last column (CoNLL-2003's `word POS chunk NER`): where no value of the last column is an entity
    tag but another column holds only tags (a file of `word NER POS`), it is refused rather than trained on codes."""
    if any(_is_tag(tag) for tag in last):
        return
    with open(path, encoding=encoding) as f:
        rows = [line.split() for line in f if line.split() and not line.startswith("-DOCSTART-")]
    for column in range(1, columns - 1):
        values = {row[column] for row in rows}
        if all(_is_tag(value) for value in values) and values & {"O", "o"}:
            raise FileFormatError(f"{path}: the tags are the last column, but no value of it is an entity tag "
                                  f"({sorted(last)[:5]}) while column {column + 1} holds them ({sorted(values)[:5]}): "
                                  "put the tags last (word ... tag)")


def _check_token_line(line: str, path, number: int) -> None:
    """A CoNLL field is one token, a tag or a code: a tab-separated field with spaces in it (the sentence of a TSV
    such as `1<TAB>good movie .`) means the file holds sentences, not one token per line."""
    spaced = next((field for field in line.rstrip("\r\n").split("\t") if " " in field.strip()), None)
    if "\t" in line and spaced is not None:
        raise FileFormatError(f"{path}:{number}: the field {spaced.strip()!r:.60} has spaces: not CoNLL columns (one "
                              f"token per line: the word first, the tag last; a blank line between sentences)")


def read_tagging_file(path: str | os.PathLike, encoding: str = "utf-8") -> list[dict]:
    """CoNLL columns, or JSON lines with `tokens` (or `words`) and `tags` (or `ner_tags`, `labels`) as lists."""
    if _file_format(path) != "json":
        return read_conll_file(path, encoding=encoding)
    rows, lines = _read_json_lines(path, encoding, with_lines=True)
    if not rows:
        raise FileFormatError(f"{path}: no examples")
    token_name = _pick(rows[0], None, TOKEN_COLUMNS, "tokens", path)
    tag_name = _pick(rows[0], None, TAG_COLUMNS, "tags", path)
    sentences = []
    for number, (row, line) in enumerate(zip(rows, lines), start=1):
        tokens, tags = row[token_name], row[tag_name]
        if not isinstance(tokens, list) or not isinstance(tags, list):
            raise FileFormatError(f"{path}: {'line ' + str(line) if line else 'example ' + str(number)}: "
                                  f"{token_name!r} and {tag_name!r} must be lists")
        if any(isinstance(tag, (int, float)) and not isinstance(tag, bool) for tag in tags):
            raise FileFormatError(f"{path}: {'line ' + str(line) if line else 'example ' + str(number)}: the tags are "
                                  f"numbers ({tags[:5]}), ids of tag names the file does not give (datasets' "
                                  "ner_tags): write the names (O, B-PER, ...), as features['ner_tags'].feature.names "
                                  "has them")
        sentence = example_at({"tokens": [str(t) for t in tokens], "tags": [str(t).strip() for t in tags]}, path,
                              line, number)
        if len(tokens) != len(tags):
            raise FileFormatError(f"{path}: example {number} has {len(tokens)} tokens but {len(tags)} tags")
        if "" in sentence["tags"]:
            word = sentence["tokens"][sentence["tags"].index("")]
            raise FileFormatError(f"{path}: {sentence.where()}: the tag of {word!r} is empty; every word needs one")
        sentences.append(sentence)
    return sentences


STRUCTURED_SUFFIXES = (".tsv", ".csv", ".json", ".jsonl")


def read_texts_file(path: str | os.PathLike, text_column: str | None = None, encoding: str = "utf-8",
                    pair_column: str | None = None,
                    column_names: str | Sequence[str] | None = None) -> list[str] | list[tuple[str, str]]:
    """The sentences to classify: one a line (a blank line stays, as ""), or with a .tsv/.csv/.json/.jsonl suffix
    the text column of the training formats (a label column is not needed; `column_names` for a TSV or CSV file
    without a header line); pairs (the columns of `read_classification_file`) as `(first, second)`."""
    if Path(path).suffix.lower() not in STRUCTURED_SUFFIXES:
        with open(path, encoding=encoding, newline="") as f:
            texts = [line.rstrip("\r\n").strip() for line in f]
        if not any(texts):  # an empty file, or blank lines only: nothing to predict is a mistake, not a result
            raise FileFormatError(f"{path}: no sentences")
        return texts
    kind = _file_format(path)
    if kind == "json":
        rows = _read_json_lines(path, encoding)
    else:
        rows = _read_table(path, kind, encoding, column_list(column_names))[0]
    if not rows:
        raise FileFormatError(f"{path}: no sentences")
    columns = [c.strip() if isinstance(c, str) else c for c in rows[0]]
    others = [c for c in columns if c not in ("label", "index", "idx", "id")]
    rows = [{k.strip() if isinstance(k, str) else k: v for k, v in row.items()} for row in rows]
    pair = _pair_columns(columns, text_column, pair_column, path)
    if pair:
        pairs = [(str(row.get(pair[0]) or "").strip(), str(row.get(pair[1]) or "").strip()) for row in rows]
        if not any(all(texts) for texts in pairs):
            raise FileFormatError(f"{path}: no pairs (no line has both a {pair[0]!r} and a {pair[1]!r})")
        return pairs
    name = _pick(columns, text_column, (*TEXT_COLUMNS, *(others if len(others) == 1 else [])), "text", path)
    texts = [str(row.get(name) or "").strip() for row in rows]
    if not any(texts):
        raise FileFormatError(f"{path}: no sentences (the {name!r} column is empty)")
    return texts


def read_words_file(path: str | os.PathLike, encoding: str = "utf-8") -> tuple[str, list]:
    """The sentences to tag, as `(kind, items)`: "json" with the token lists of JSON lines; "conll" with the lines
    of a file of CoNLL columns (the word first, tags not needed; `looks_like_conll`); "lines" with the lines of a
    file of sentences, one a line (cut into words later)."""
    if Path(path).suffix.lower() in (".json", ".jsonl"):
        rows = _read_json_lines(path, encoding)
        if not rows:
            raise FileFormatError(f"{path}: no sentences")
        name = _pick(rows[0], None, TOKEN_COLUMNS, "tokens", path)
        sentences = [[str(t) for t in row.get(name) or []] for row in rows]
        if not any(sentences):
            raise FileFormatError(f"{path}: no sentences (every {name!r} list is empty)")
        return "json", sentences
    with open(path, encoding=encoding, newline="") as f:
        lines = [line.rstrip("\r\n") for line in f]
    if not any(line.strip() and not line.startswith("-DOCSTART-") for line in lines):
        raise FileFormatError(f"{path}: no sentences")
    return ("conll" if looks_like_conll(lines) else "lines"), lines


def column_fields(line: str) -> list[str]:
    """The columns of a CoNLL line, split at spaces and tabs only: str.split() also splits at U+3000, the full-width
    space, which is the word of some lines of the MSRA files (`\u3000 O`): one such line read as a single column
    made the file's columns look uneven, and a file of `字 TAG` lines was read as sentences."""
    return re.split(r"[ \t]+", line.strip(" \t\r\n"))


def check_word_not_space(line: str, where: str) -> None:
    """A CoNLL line whose word is a space character other than ASCII's (`\u3000 O` in the MSRA files) has no word to
    tag: refused naming the line, in training and test files alike."""
    word = column_fields(line)[0]
    if word and not word.strip():
        names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '')}".rstrip() for c in dict.fromkeys(word))
        raise FileFormatError(f"{where}: the word is a space ({names}), not a word: delete such lines first")


def looks_like_conll(lines: list[str]) -> bool:
    """CoNLL columns (CoNLL-2003's files are .txt too): a `-DOCSTART-` line, or blank lines between sentences and
    the same number of columns on every other line. Sentences one a line have neither."""
    counts = {len(column_fields(line)) for line in lines if line.strip()}
    if any(line.startswith("-DOCSTART-") for line in lines):
        return True
    return len(counts) == 1 and any(not line.strip() for line in lines[:-1])


def folded_label(label) -> str:
    """A label as its spellings that differ only in case or spaces have it alike ("Very  Positive" -> "very
    positive"): what the warnings and refusals about such labels compare."""
    return " ".join(str(label).split()).casefold()


def label_list(labels: Iterable[str]) -> list[str]:
    """Sorted distinct labels: numerically when they all are integers (SST-2's "0", "1"), else as strings."""
    distinct = set(labels)
    try:
        return sorted(distinct, key=int)
    except ValueError:
        return sorted(distinct)


def tag_list(tags: Iterable[str]) -> list[str]:
    """Distinct tags, "O" first, then by entity type and prefix (B- before I-)."""
    distinct = set(tags)
    rest = sorted(distinct - {"O"}, key=lambda t: (t[2:], t[:2]) if t[1:2] == "-" else (t, ""))
    return (["O"] if "O" in distinct else []) + rest


# ---------------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------------
def accuracy(predictions: Sequence[int], references: Sequence[int]) -> float:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if not references:
        return 0.0
    return sum(int(p == r) for p, r in zip(predictions, references)) / len(references)


def pearson(predictions: Sequence[float], references: Sequence[float]) -> float:
    """Pearson's correlation (NaN when either side is constant, as scipy gives it)."""
    import numpy as np

    x, y = np.asarray(predictions, dtype=np.float64), np.asarray(references, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    scale = math.sqrt(float((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / scale) if scale > 0 else math.nan


def ranks(values: Sequence[float]):
    """1-based ranks, ties sharing their average rank (scipy's `rankdata`)."""
    import numpy as np

    _, inverse, counts = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts - 1) / 2)[inverse]


def spearman(predictions: Sequence[float], references: Sequence[float]) -> float:
    """Spearman's rank correlation: scipy's where it is installed, else Pearson's of the ranks (the same number)."""
    if len(set(predictions)) < 2 or len(set(references)) < 2:
        return math.nan  # as scipy, without its warning
    try:
        from scipy.stats import spearmanr
    except ImportError:
        return pearson(ranks(predictions), ranks(references))
    return float(spearmanr(predictions, references).statistic)


def _split_tag(tag: str) -> tuple[str, str]:
    """"B-PER" -> ("B", "PER"); "O" -> ("O", ""); a tag without prefix, e.g. "PER", counts as "I-PER". The prefix
    and O are read in either case ("b-per", "o"): a lowercase "o" read as an entity type would count entities that
    are not there."""
    if tag in ("O", "o", ""):
        return "O", ""
    if len(tag) > 1 and tag[1] in "-_" and tag[0] in "BIESLUbieslu":
        prefix = {"L": "E", "U": "S"}.get(tag[0].upper(), tag[0].upper())
        return prefix, tag[2:]
    return "I", tag


def get_entities(tags: Sequence[str], strict: bool = False) -> list[tuple[str, int, int]]:
    """The chunks of one tag sequence as `(type, start, end)` with `end` inclusive.

    Default: conlleval's rules (seqeval's default mode), which read IOB1, IOB2 and IOBES alike: a chunk starts at
    B-/S-, at I-/E- after O or after a chunk of another type, and at I-/E- after E-/S-; it ends before O, before
    a B-/S-, or before a tag of another type.
    `strict=True`: seqeval's strict IOB2 mode: a chunk is exactly B-X followed by I-X...; an I-X that does not
    continue a B-X/I-X chunk of type X belongs to no chunk.
    """
    entities = []
    if strict:
        start, kind = None, None
        for i, tag in enumerate([*tags, "O"]):
            prefix, label = _split_tag(tag)
            if start is not None and not (prefix == "I" and label == kind):
                entities.append((kind, start, i - 1))
                start, kind = None, None
            if prefix == "B":
                start, kind = i, label
        return entities

    prev_prefix, prev_label, start = "O", "", None
    for i, tag in enumerate([*tags, "O"]):
        prefix, label = _split_tag(tag)
        ends = prev_prefix in ("E", "S") or (prev_prefix != "O" and (prefix in ("B", "S", "O") or label != prev_label))
        if start is not None and ends:
            entities.append((prev_label, start, i - 1))
            start = None
        begins = prefix in ("B", "S") or (prefix in ("I", "E")
                                          and (prev_prefix in ("O", "E", "S") or label != prev_label))
        if begins:
            start = i
        prev_prefix, prev_label = prefix, label
    return entities


def entity_scores(
    references: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]], strict: bool = False
) -> dict[str, float]:
    """Entity-level micro precision, recall and F1 over sentences (an entity counts when type, start and end all
    match), per-type F1 and token accuracy. Same numbers as seqeval's `classification_report` (default mode, or
    strict IOB2 with `strict=True`) and conlleval's overall line."""
    if len(references) != len(predictions):
        raise ValueError(f"{len(references)} reference sentences but {len(predictions)} predicted")
    true_total = pred_total = correct = 0
    per_type: dict[str, list[int]] = {}  # type -> [correct, predicted, true]
    tokens = tokens_correct = 0
    for number, (ref, pred) in enumerate(zip(references, predictions)):
        if len(ref) != len(pred):
            raise ValueError(f"sentence {number}: {len(ref)} reference tags but {len(pred)} predicted")
        tokens += len(ref)
        tokens_correct += sum(int(a == b) for a, b in zip(ref, pred))
        true_set = set(get_entities(ref, strict))
        pred_set = set(get_entities(pred, strict))
        hits = true_set & pred_set
        true_total, pred_total, correct = true_total + len(true_set), pred_total + len(pred_set), correct + len(hits)
        for entities, slot in ((hits, 0), (pred_set, 1), (true_set, 2)):
            for kind, _, _ in entities:
                per_type.setdefault(kind, [0, 0, 0])[slot] += 1

    def prf(hit: int, predicted: int, true: int) -> tuple[float, float, float]:
        precision = hit / predicted if predicted else 0.0
        recall = hit / true if true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    precision, recall, f1 = prf(correct, pred_total, true_total)
    scores = {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": tokens_correct / tokens if tokens else 0.0,
        "num_entities": float(true_total),
    }
    for kind in sorted(per_type):
        scores[f"{kind}_f1"] = prf(*per_type[kind])[2]
    return scores


def split_text(text: str, tokenizer, word_split: str | None) -> list[str]:
    """Words of `text`: with `word_split` (a name in `tokenization.WORD_SPLITTERS`), or the tokenizer's own rule."""
    from elmo_hf.tokenization import (
        split_words,  # transformers: imported by the run, not by a command's --help
    )

    return split_words(text, word_split or getattr(tokenizer, "word_split", "punctuation"))


def limit(examples: list, count: int | None) -> list:
    return examples if count is None else examples[:count]
