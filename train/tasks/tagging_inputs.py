"""What a tagger's inputs are made of, told before anything is trained or written: the layout of a file to tag (CoNLL
columns or a sentence a line), and whether the word split cuts text into the units the training file has.

A file of CoNLL columns and a file of sentences can look alike: Chinese sentences with a blank line between them
have one "column" on every line, as a CoNLL file of words without tags does; English sentences of three words each
have three, as `word POS tag` lines do. A sentence read as a CoNLL line becomes one word with one tag, and a tagger
trained on single characters tags the words of a split that joins characters: each would be a wrong result with
exit status 0, so the layout is told from more than the counts of columns, and said with its reason.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Sequence

from .common_data import column_fields

CONLL, LINES = "conll", "lines"
LAYOUTS = (CONLL, LINES)
# A tag or a code of a CoNLL column (POS, chunk, entity): printable ASCII without lower-case letters (NNP, B-NP,
# I-PER, O, ",").
_CODE = re.compile(r"[\x21-\x60\x7b-\x7e]+")
# The words a sentence of training data may be re-split into, per word of the file, before the split is said to cut
# the data into other units (CoNLL-2003 under the punctuation split: 1.00; characters under jieba: about 0.6).
UNITS_RATIO = (0.8, 1.25)
UNITS_SAMPLE = 500  # training sentences re-split to tell it


def test_file_layout(lines: Sequence[str], split, labels: Sequence[str]) -> tuple[str, str]:
    """`(CONLL or LINES, why)` for the lines of a file to tag: CoNLL columns (the word first) where a `-DOCSTART-`
    line says so, or blank lines separate lines of as many columns, whose columns after the first hold the tagger's
    `labels` or codes (upper case), or whose single column holds words (a line cut by `split` into at most two
    units, typically); sentences one a line otherwise."""
    filled = [line for line in lines if line.strip()]
    if any(line.startswith("-DOCSTART-") for line in filled):
        return CONLL, "it has a -DOCSTART- line"
    inner = lines[: max((i for i, line in enumerate(lines) if line.strip()), default=0)]
    if not any(not line.strip() for line in inner):
        return LINES, "no blank line separates sentences"
    counts = {len(column_fields(line)) for line in filled}
    if len(counts) > 1:
        return LINES, "its lines hold different numbers of words"
    columns = counts.pop()
    if columns > 1:
        rest = [field for line in filled for field in column_fields(line)[1:]]
        last = {column_fields(line)[-1] for line in filled}
        if last <= set(labels):
            return CONLL, f"the last of its {columns} columns holds the tagger's tags"
        if all(_CODE.fullmatch(field) for field in rest):
            return CONLL, f"the columns after the first of its {columns} hold codes (upper case), not words"
        return LINES, f"the other words of its lines of {columns} words are words, not tags or codes"
    from elmo_hf.tokenization import (
        split_words,  # transformers: imported by the run, not by a command's --help
    )

    units = statistics.median(len(split_words(line, split)) for line in filled)
    if units <= 2:
        return CONLL, f"a word a line (the split cuts the median line into {units:g} units)"
    return LINES, f"a sentence a line with blank lines between (the split cuts the median line into {units:g} words)"


def _cjk(character: str) -> bool:
    """Whether text of the character's script is written without spaces between words (Chinese, Japanese)."""
    name = unicodedata.name(character, "")
    return name.startswith(("CJK", "HIRAGANA", "KATAKANA", "FULLWIDTH", "IDEOGRAPHIC"))


def joined(words: Sequence[str]) -> str:
    """The words as text would have them: no space between two of a script written without spaces."""
    text = ""
    for word in words:
        text += word if text and _cjk(text[-1]) and _cjk(word[0]) else f" {word}" if text else word
    return text


def units_ratio(sentences: Sequence[dict], split) -> tuple[float, tuple[list[str], list[str]] | None]:
    """How many words `split` cuts the sentences' text into per word of the file (their first `UNITS_SAMPLE`), and
    the first sentence it cuts otherwise: `(file words, split words)`."""
    from elmo_hf.tokenization import split_words

    words = units = 0
    example = None
    for sentence in sentences[:UNITS_SAMPLE]:
        tokens = list(sentence["tokens"])
        cut = split_words(joined(tokens), split)
        words, units = words + len(tokens), units + len(cut)
        if example is None and cut != tokens:
            example = (tokens, cut)
    return units / max(words, 1), example


def fitting_splits(sentences: Sequence[dict]) -> list[str]:
    """The registered splits (their packages installed) that cut the sentences' text into the file's words."""
    from elmo_hf.tokenization import WORD_SPLITTERS

    fitting = []
    for name in WORD_SPLITTERS:
        try:
            ratio, example = units_ratio(sentences[:100], name)
        except (ImportError, ValueError):  # a split whose package is missing
            continue
        if example is None or UNITS_RATIO[0] <= ratio <= UNITS_RATIO[1]:
            fitting.append(name)
    return fitting


def split_mismatch(sentences: Sequence[dict], split) -> str | None:
    """Where `split` cuts the training sentences into other units than the file's words, what it does, in words
    for a message; None when it fits."""
    ratio, example = units_ratio(sentences, split)
    if example is None or UNITS_RATIO[0] <= ratio <= UNITS_RATIO[1]:
        return None
    tokens, cut = example
    fitting = [name for name in fitting_splits(sentences) if name != split]
    return (f"the word split {split} cuts the training sentences into {ratio:.2f} words per word of the file "
            f"({joined(tokens)[:40]!r} into {cut[:6]}{'...' if len(cut) > 6 else ''}, where the file has "
            f"{tokens[:6]}{'...' if len(tokens) > 6 else ''}): a tagger trained on the file's words would tag other "
            "units in text it reads"
            + (f"; --word_split {fitting[0]} cuts text as the file does" if fitting else ""))
