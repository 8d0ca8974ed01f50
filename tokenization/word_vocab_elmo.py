"""The optional word vocabulary of ELMo (the language-model softmax): its files, its special tokens, `build_vocab`.

A vocabulary file holds one token per line; word id i = line i (blank lines skipped); `<S>`, `</S>` and `<UNK>` are
found by name on any line, as in the original ELMo vocabulary files.

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library
and its siblings.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence

from .word_splits_elmo import WordSplit, check_word_split, split_words

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
UNK_TOKEN = "<UNK>"  # of the optional word vocabulary, not of the character vocabulary
PAD_TOKEN = "<pad>"
# The lines every word-vocabulary file holds, found by name anywhere in the file (their ids are where they are;
# `build_vocab` puts them first, in this order).
WORD_VOCAB_SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
VOCAB_FILES_NAMES = {"vocab_file": "vocab.txt"}

logger = logging.getLogger(__name__)


class WordVocabulary:
    """A word vocabulary's tokens (word id i = token i) and the id of each word; a repeated token keeps its first id,
    with a warning."""

    def __init__(self, tokens: Sequence[str]):
        self.tokens = list(tokens)
        self.ids: dict[str, int] = {}
        for i, token in enumerate(self.tokens):
            if token in self.ids:
                logger.warning("Vocabulary token %r repeated at position %d; keeping its first id %d", token, i + 1,
                               self.ids[token])
                continue
            self.ids[token] = i
        self.unk_id = self.ids[UNK_TOKEN]

    def ids_of(self, words: Iterable[str]) -> list[int]:
        """The ids of `words`, `<UNK>`'s for words not in the vocabulary."""
        ids, unk = self.ids, self.unk_id
        return [ids.get(word, unk) for word in words]

    def rows(self, alignments) -> list[list[int]]:
        """The ids of every row of an encoding, from its alignments (of the first sentences, and of the second
        sentences of pairs or None; each row (words kept, first word's index, whether `<S>`/`</S>` were added)):
        each sentence's words, framed by the ids of `<S>` and `</S>` where those were added."""
        bos, eos = self.ids[BOS_TOKEN], self.ids[EOS_TOKEN]
        out = []
        for segments in zip(*(a for a in alignments if a is not None)):
            row = []
            for words, _, special in segments:
                ids = self.ids_of(words)
                row.extend([bos, *ids, eos] if special else ids)
            out.append(row)
        return out


def load_vocab(vocab_file: str | os.PathLike) -> list[str]:
    """Read a vocabulary file: one token per line; word id i is the i-th (non-blank) line.

    `<S>`, `</S>` and `<UNK>` must each appear, on any line: the original format looks them up by name (bilm-tf's
    `Vocabulary`; the released 1B Word Benchmark vocabulary begins with `</S>`, `<S>`, `<UNK>`, AllenNLP's test
    fixture has them on lines 21, 118 and 225). Their ids are wherever they are, and so are the softmax rows of
    a language model trained with the file.

    Lines are stripped of surrounding whitespace like in bilm-tf; blank lines are skipped; a repeated token keeps
    its first id (with a warning).
    """
    with open(vocab_file, encoding="utf-8") as handle:
        tokens = [line.strip() for line in handle]
    tokens = [token for token in tokens if token]
    missing = _missing_specials(tokens)
    if missing:
        raise ValueError(
            f"The vocabulary file {os.fspath(vocab_file)!r} lacks the line(s) {missing}: a word vocabulary must hold "
            f"{list(WORD_VOCAB_SPECIALS)}, on any line (like the original ELMo vocabulary files)"
        )
    return tokens


def _missing_specials(tokens: Sequence[str]) -> list[str]:
    present = set(tokens)
    return [special for special in WORD_VOCAB_SPECIALS if special not in present]


def write_vocab(tokens: Sequence[str], path: str | os.PathLike) -> str:
    """Write `tokens` (e.g. from `build_vocab`) to `path`, one per line; returns the path as a string."""
    check_word_vocab(tokens)
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as handle:
        for token in tokens:
            handle.write(token + "\n")
    return path


def check_word_vocab(tokens: Sequence[str]) -> None:
    """Refuse a word vocabulary that lacks a special token or holds a token a vocabulary file cannot."""
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise TypeError("A word vocabulary must be a list of str")
    missing = _missing_specials(tokens)
    if missing:
        raise ValueError(
            f"A word vocabulary must hold {list(WORD_VOCAB_SPECIALS)} (on any line), but {missing} is missing"
        )
    bad = [t for t in tokens if not t or t != t.strip() or "\n" in t]
    if bad:
        raise ValueError(
            f"Vocabulary tokens must be non-empty and contain no surrounding whitespace, got {bad[:5]}"
        )


def build_vocab(
    texts_or_files: Iterable[str | os.PathLike],
    max_size: int | None = None,
    min_count: int = 1,
    split: str | WordSplit = "punctuation",
) -> list[str]:
    """Count the words of a corpus and return a word vocabulary for `ElmoTokenizer(vocab_file=...)`.

    Args:
        texts_or_files: an iterable whose `str` items are texts (each one sentence or document) and whose
            `os.PathLike` items (e.g. `pathlib.Path`) are UTF-8 files read line by line. A plain `str` is always
            text, never a path: wrap paths in `pathlib.Path`.
        max_size: size of the returned list including the three special tokens (so it can be used as
            `ElmoConfig.vocab_size`); None keeps every word seen at least `min_count` times.
        min_count: words seen fewer times are left out.
        split: a name in `WORD_SPLITTERS` (`"punctuation"`, `"whitespace"`, `"jieba"`, see `split_words`) or a
            function `str -> list[str]`.

    Returns:
        `["<S>", "</S>", "<UNK>", ...]` then the words by descending count, ties in code-point order. The special
        strings themselves are never counted.
    """
    if isinstance(texts_or_files, (str, bytes, os.PathLike)):
        raise TypeError(
            "build_vocab expects an iterable of texts or paths, got a single "
            f"{type(texts_or_files).__name__}: wrap it in a list"
        )
    if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 3):
        raise ValueError(
            f"max_size must be an integer >= 3 (the three special tokens count), got {max_size!r}"
        )
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    check_word_split(split, option="split")

    def split_fn(text: str) -> list[str]:
        return split_words(text, split)

    counts: Counter[str] = Counter()
    for index, item in enumerate(texts_or_files):
        if isinstance(item, str):
            counts.update(split_fn(item))
        elif isinstance(item, os.PathLike):
            with open(item, encoding="utf-8") as handle:
                for line in handle:
                    counts.update(split_fn(line))
        else:
            raise TypeError(
                f"build_vocab item {index} must be a str text or an os.PathLike file, got {type(item).__name__}"
            )
    for special in WORD_VOCAB_SPECIALS:
        counts.pop(special, None)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    vocab = list(WORD_VOCAB_SPECIALS) + words
    return vocab if max_size is None else vocab[:max_size]
