"""Splitting raw text into the words ELMo encodes: the registry of word splits, `WORD_SPLITTERS`.

A word split is a function `str -> list[str]` registered under a name: `"punctuation"` (default of the tokenizer:
PTB-like words, one token per CJK ideograph or kana), `"whitespace"` (`str.split()`, for text that is already
tokenized) and `"jieba"` (Chinese word segmentation, the optional extra `elmo-hf[zh]`, imported when first used).
The tokenizer's `word_split`, `build_vocab(split=...)` and the commands' `--word_split` options take any
registered name, so a new segmenter is one function and one call:

    >>> from elmo_hf.tokenization import WORD_SPLITTERS
    >>> WORD_SPLITTERS.register("thai", pythainlp.word_tokenize)

(as a prompt's lines: transformers up to 4.50 reads a remote file's imports with a text pattern that would take a
line starting with `from` for an import, and then refuses to load the model without this project installed)

or, without code, its import path `module:function` (`--word_split pythainlp:word_tokenize`): `check_word_split(...,
allow_import=True)`, which the commands call on their options, imports it and registers it under that name. A name
read from a saved tokenizer is never imported (a tokenizer_config.json from the Hub must not choose which installed
function runs on the user's text): it must be registered in the process first, and a clear error says so.

The rules treat a user-perceived character (a Unicode extended grapheme cluster: an emoji ZWJ sequence, an emoji
with its skin tone, a flag, a letter with combining accents, an ideograph with its variation selector) as one unit,
as found by the `regex` package (a dependency of transformers, so remote code has it too).

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library
and `regex`.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import regex

logger = logging.getLogger(__name__)

WordSplit = Callable[[str], list[str]]


# A `word_split` function cannot be written to tokenizer_config.json: this prefix and its name are written instead
# (so no registered name may start with it).
CUSTOM_SPLIT_PREFIX = "custom:"


class WordSplitError(ValueError):
    """A word split that cannot be used in this process: a name not registered, an import path (`module:function`)
    that does not import or was not registered, a package that is missing. The message is one line naming it."""


class WordSplitDependencyError(ImportError, WordSplitError):
    """A registered word split whose package is not installed. An `ImportError` (what it is) that is also a
    `ValueError`, so that commands validating a `--word_split` option catch it with their other option errors."""


# ---------------------------------------------------------------------------------------------------------------
# The punctuation rule
# ---------------------------------------------------------------------------------------------------------------
# CJK ideographs: each is a token of its own by default, as in multilingual tokenizers (BERT's `_is_chinese_char`).
# Whole blocks, so that ideographs newer than this Python's unicodedata are covered too (an unassigned code point
# is a token of its own anyway).
_IDEOGRAPHS = (
    r"\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    r"\u4e00-\u9fff"  # CJK Unified Ideographs
    r"\uf900-\ufaff"  # CJK Compatibility Ideographs
    r"\U00020000-\U0002a6df"  # Extension B
    r"\U0002a700-\U0002ee5f"  # Extensions C, D, E, F, I
    r"\U0002f800-\U0002fa1f"  # CJK Compatibility Ideographs Supplement
    r"\U00030000-\U000323af"  # Extensions G, H
)
# Kana too (unlike BERT): Japanese is written without spaces, so a run of kana is no word ("日本語のテキスト" would
# give "のテキスト") and long runs would be cut at 48 bytes. Hangul keeps the word rule: Korean puts spaces between
# words.
_KANA = (
    r"\u3040-\u30ff"  # Hiragana, Katakana
    r"\u31f0-\u31ff"  # Katakana Phonetic Extensions
    r"\uff66-\uff9f"  # Halfwidth Katakana
    r"\U0001aff0-\U0001b16f"  # Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana Extension
)
_WORD_CHAR = rf"[^\W{_IDEOGRAPHS}{_KANA}]"  # \w without ideographs and kana
_LETTER = rf"[^\W\d_{_IDEOGRAPHS}{_KANA}]"
_PUNCTUATION_RULE = rf"""
      </?[A-Za-z]{_WORD_CHAR}*>                           # markers kept whole: <S>, </S>, <unk>, <UNK>, <br>
    | (?:{_LETTER}\.){{2,}}(?!{_WORD_CHAR})                # abbreviations written with periods: U.S., e.g., a.m.
    | (?i:['’](?:s|d|m|ll|re|ve))(?!{_WORD_CHAR})         # clitics already split off: 's 're 've 'll 'd 'm
    | {_WORD_CHAR}+(?:(?:[-'’.]|(?<=\d),(?=\d)){_WORD_CHAR}+)*  # words, numbers (3.14, 1,000), bio-identical, O'Neill
    | \.\.+ | --+ | `` | ''                              # runs kept whole: ellipsis, dashes, PTB quotes
    | CJK_CHARACTERS                                      # ideographs and kana
    | [^\w\s]                                             # any other character alone: punctuation, symbols, emoji
"""
# Default: each ideograph and each kana alone. For a Chinese segmenter: runs of ideographs, kana alone.
_PUNCTUATION_SPLIT = re.compile(
    _PUNCTUATION_RULE.replace("CJK_CHARACTERS", f"[{_IDEOGRAPHS}{_KANA}]"), re.VERBOSE
)
_IDEOGRAPH_RUNS_SPLIT = re.compile(
    _PUNCTUATION_RULE.replace("CJK_CHARACTERS", f"[{_IDEOGRAPHS}]+ | [{_KANA}]"), re.VERBOSE
)
_IDEOGRAPH = re.compile(f"[{_IDEOGRAPHS}]")

# Unicode's extended grapheme clusters (UAX #29), as the `regex` package implements them. A text in which no
# character has one of the other Grapheme_Cluster_Break values has single-character clusters only (a CR LF pair
# aside, which is whitespace): the rules then run on the text as it is, as fast as before and with the same words.
_GRAPHEME = regex.compile(r"\X")
_MAY_JOIN_A_CLUSTER = regex.compile(
    r"[^\p{GCB=Other}\p{GCB=Control}\p{GCB=CR}\p{GCB=LF}\p{GCB=LV}\p{GCB=LVT}]"
)


def _find_words(pattern: re.Pattern, text: str) -> list[str]:
    """`pattern.findall(text)` with every grapheme cluster a unit: the rule runs on each cluster's first character,
    and each token it finds is given its clusters whole (`e` + U+0301 stays in its word; a family emoji, a thumbs-up
    with a skin tone, a flag are one token each)."""
    if text.isascii() or not _MAY_JOIN_A_CLUSTER.search(text):
        return pattern.findall(text)
    starts, firsts = [], []  # where each unit starts in `text`, and the character the rule sees for it
    for match in _GRAPHEME.finditer(text):
        start, end = match.span()
        if end - start > 1 and text[start].isspace():
            # A space carrying a mark: the space stays a separator and the marks become a unit of their own, as
            # they were before (a token never holds whitespace).
            starts.append(start)
            firsts.append(text[start])
            start += 1
        starts.append(start)
        firsts.append(text[start])
    starts.append(len(text))
    return [text[starts[m.start()] : starts[m.end()]] for m in pattern.finditer("".join(firsts))]

CJK_CHARACTER = re.compile(f"[{_IDEOGRAPHS}{_KANA}]")  # an ideograph or a kana anywhere in a word
_CLITIC_SUFFIX = re.compile(r"(.+)((?i:['’](?:s|d|m|ll|re|ve)))")  # it's -> it 's ; O'Neill's -> O'Neill 's
_NEGATION_SUFFIX = re.compile(r"(\w+)((?i:n['’]t))")  # don't -> do n't ; can't -> ca n't (as in the PTB)
_SURROGATES = re.compile("[\ud800-\udfff]")


def _split_clitics(word: str) -> list[str]:
    out = []
    match = _CLITIC_SUFFIX.fullmatch(word)
    if match:
        word, clitic = match.group(1), match.group(2)
        out.append(clitic)
    match = _NEGATION_SUFFIX.fullmatch(word)
    if match:
        out.append(match.group(2))
        word = match.group(1)
    out.append(word)
    return out[::-1]


def _with_clitics_split(text: str, words: list[str]) -> list[str]:
    if "'" not in text and "’" not in text:
        return words
    out: list[str] = []
    for word in words:
        if len(word) > 2 and ("'" in word or "’" in word):
            out.extend(_split_clitics(word))
        else:
            out.append(word)
    return out


def punctuation_words(text: str) -> list[str]:
    """The `"punctuation"` rule (see `split_words`)."""
    return _with_clitics_split(text, _find_words(_PUNCTUATION_SPLIT, text))


def whitespace_words(text: str) -> list[str]:
    """The `"whitespace"` rule: `text.split()`."""
    return text.split()


# ---------------------------------------------------------------------------------------------------------------
# Segmenters (functions str -> list[str])
# ---------------------------------------------------------------------------------------------------------------
def function_name(function: Callable) -> str:
    module = getattr(function, "__module__", None) or type(function).__module__
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{module}.{name}"


def _segmenter_words(segment: Callable[[str], Iterable[str]], text: str) -> list[str]:
    words = segment(text)
    if isinstance(words, str) or not isinstance(words, Iterable):
        raise TypeError(
            f"word_split function {function_name(segment)} must return a list of str, got {words!r:.80}"
        )
    words = list(words)
    for word in words:
        if not isinstance(word, str):
            raise TypeError(
                f"word_split function {function_name(segment)} must return a list of str, got a {type(word).__name__}"
            )
    return [w for w in words if w and not w.isspace()]


def _segment_ideograph_runs(text: str, segment: Callable[[str], list[str]]) -> list[str]:
    """The punctuation rule with each run of ideographs given to `segment` instead of split per ideograph."""
    words = _find_words(_IDEOGRAPH_RUNS_SPLIT, text)
    if text.isascii():
        return words
    out: list[str] = []
    for word in words:
        if _IDEOGRAPH.match(word):
            out.extend(_segmenter_words(segment, word))
        else:
            out.append(word)
    return out


def _require_jieba():
    # The import sits in a try block so that transformers, which lists the imports of remote code to check they
    # are installed, does not require jieba to load a tokenizer that never uses it.
    try:
        import jieba
    except ImportError:
        raise WordSplitDependencyError(
            "word_split='jieba' needs the jieba package: pip install 'elmo-hf[zh]' (or pip install jieba)"
        ) from None
    _quiet(jieba)
    return jieba


def _quiet(jieba) -> None:
    """jieba logs "Building prefix dict ..." at DEBUG to a handler of its own (and again through the root logger
    when an application has configured one): shown only when this module's logger shows DEBUG (`--verbose`)."""
    level = logging.DEBUG if logger.isEnabledFor(logging.DEBUG) else logging.WARNING
    if jieba.default_logger.level != level:  # setting a level clears every logger's cache: not once per line
        jieba.setLogLevel(level)


def jieba_words(text: str) -> list[str]:
    """The `"jieba"` rule: the punctuation rule with each run of ideographs segmented into words by jieba."""
    return _with_clitics_split(text, _segment_ideograph_runs(text, _require_jieba().lcut))


# ---------------------------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------------------------
class WordSplitters(Mapping[str, WordSplit]):
    """The word splits by name: a read-only mapping name -> function `str -> list[str]`, added to with `register`.

    Like transformers' `AttentionInterface`: every place that takes a split by name (the tokenizer's `word_split`,
    `build_vocab(split=...)`, the commands' options) reads this one mapping.
    """

    def __init__(self) -> None:
        self._functions: dict[str, WordSplit] = {}
        self._requirements: dict[str, Callable[[], object]] = {}

    def __getitem__(self, name: str) -> WordSplit:
        return self._functions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __repr__(self) -> str:
        return f"WordSplitters({sorted(self._functions)})"

    def register(self, name: str, function: WordSplit, requires: Callable[[], object] | None = None) -> None:
        """Register (or replace) the word split `name`.

        Args:
            name: what `word_split=`/`--word_split` take; saved in tokenizer_config.json, so a saved tokenizer
                loads again once `name` is registered in the loading process.
            function: `str -> list[str]`; empty and whitespace-only words it returns are dropped.
            requires: optional, called by `check_word_split(name)`: raises `ImportError` (one line saying what to
                install) when a package `function` needs is missing.
        """
        if not isinstance(name, str) or not name or name.startswith(CUSTOM_SPLIT_PREFIX):
            raise ValueError(
                f"a word split name must be a non-empty str not starting with {CUSTOM_SPLIT_PREFIX!r}, got {name!r}"
            )
        if not callable(function):
            raise TypeError(
                f"word split {name!r} must be a function str -> list[str], got {type(function).__name__}"
            )
        self._functions[name] = function
        self._requirements.pop(name, None)
        if requires is not None:
            self._requirements[name] = requires

    def check_requirements(self, name: str) -> None:
        """Raise `WordSplitDependencyError` when the split `name` needs a package that is not installed."""
        requires = self._requirements.get(name)
        if requires is None:
            return
        try:
            requires()
        except ImportError as error:
            raise WordSplitDependencyError(str(error)) from None


WORD_SPLITTERS = WordSplitters()
WORD_SPLITTERS.register("punctuation", punctuation_words)
WORD_SPLITTERS.register("whitespace", whitespace_words)
WORD_SPLITTERS.register("jieba", jieba_words, requires=_require_jieba)
# The splits above return the words as the text spells them (a registered function may change them: lower-case):
# `ElmoTokenizerFast` reads their offsets from the text, so a tokenizer of these is saved as it too.
SPLITS_THAT_KEEP_WORDS = frozenset(WORD_SPLITTERS)
# The built-in rules give no empty word: their output skips the check a registered or passed function goes through.
_CLEAN_SPLITS = (punctuation_words, whitespace_words, jieba_words)


# An import path `package.module:function` (the entry-point syntax); the function may be nested: `module:Class.method`.
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def is_import_path(name: object) -> bool:
    """Whether `name` has the form `module:function` that `check_word_split(..., allow_import=True)` imports."""
    return isinstance(name, str) and _IMPORT_PATH.fullmatch(name) is not None


def import_path(function: Callable) -> str | None:
    """`module:qualname` of a function that can be imported again from it in another process, else None (a lambda,
    a function defined inside another or in `__main__`, a callable object)."""
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    path = f"{module}:{qualname}"
    try:
        found = _resolve(path)
    except (ImportError, AttributeError):
        return None
    return path if found is function else None


def _resolve(path: str) -> object:
    module_name, _, qualname = path.partition(":")
    found = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _import_split(path: str, option: str) -> WordSplit:
    try:
        function = _resolve(path)
    except ImportError as error:
        raise WordSplitDependencyError(
            f"{option} {path!r}: cannot import {path.partition(':')[0]} ({error}); install the package that "
            "defines the function"
        ) from None
    except AttributeError:
        raise WordSplitError(f"{option} {path!r}: {path.partition(':')[0]} has no {path.partition(':')[2]}") from None
    if not callable(function):
        raise WordSplitError(f"{option} {path!r}: is a {type(function).__name__}, not a function str -> list[str]")
    return function


def check_word_split(rule: str | WordSplit, option: str = "word_split", allow_import: bool = False) -> None:
    """Refuse, in one line, a name that is not registered or whose package is missing (`WordSplitError`, a
    `ValueError`; `WordSplitDependencyError` for a missing package, also an `ImportError`). A function passes.
    `option` names the argument in the message.

    `allow_import=True` (the commands, for the options a user types): an import path `module:function` not yet
    registered is imported and registered under that name. Never for a name read from a saved tokenizer.
    """
    if callable(rule):
        return
    if is_import_path(rule) and rule not in WORD_SPLITTERS:
        if not allow_import:
            raise WordSplitError(
                f"{option} {rule!r} names a function that is not registered in this process: give it as an option "
                f"(--word_split {rule} imports it), pass the function itself (word_split=...), or register it "
                f"(tokenization.check_word_split({rule!r}, allow_import=True))"
            )
        WORD_SPLITTERS.register(rule, _import_split(rule, option))
    if not isinstance(rule, str) or rule not in WORD_SPLITTERS:
        raise WordSplitError(
            f"{option} must be one of {tuple(WORD_SPLITTERS)} (see tokenization.WORD_SPLITTERS), an import path "
            f"module:function, or a function str -> list[str], got {rule!r}"
        )
    WORD_SPLITTERS.check_requirements(rule)


def split_name(rule: str | WordSplit) -> str:
    """How `rule` is written down (tokenizer_config.json, a command's outputs): its name; for a function, the name
    it is registered under, else its import path, else the placeholder `custom:<module>.<name>`, which loading
    refuses (a function cannot be written to JSON)."""
    if not callable(rule):
        return rule
    for name, function in WORD_SPLITTERS.items():
        if function is rule:
            return name
    return import_path(rule) or f"{CUSTOM_SPLIT_PREFIX}{function_name(rule)}"


def split_words(text: str, rule: str | WordSplit = "punctuation") -> list[str]:
    """Split raw text into the words ELMo encodes, one token per word.

    Every rule first drops lone surrogates (`"\\ud800"`), which `encode("utf-8", "ignore")` drops in the original;
    the built-in rules treat as whitespace exactly what `str.isspace()` accepts (so empty or whitespace-only text
    gives no word).

    `rule="punctuation"` (default), close to the PTB / Moses tokenization of the published models' training data:

    * words are runs of letters, digits and `_`, kept whole across inner hyphens, apostrophes and periods and
      across commas between digits: `bio-identical`, `O'Neill`, `3.14`, `1,000`, `www.example.com`;
    * clitics are split off as in the PTB: `don't` -> `do n't`, `can't` -> `ca n't`, `it's` -> `it 's`,
      `they're` -> `they 're`, `John's` -> `John 's` (also with the typographic apostrophe `’`);
    * abbreviations written with periods stay whole (`U.S.`, `e.g.`), other trailing periods are split off
      (`Dr.` -> `Dr .`: there is no abbreviation list);
    * markers in angle brackets stay whole (`<S>`, `</S>`, `<unk>`), as do runs of periods (`...`), of
      hyphens (`--`) and the PTB quotes ``` `` ``` and `''`;
    * every CJK ideograph is a token of its own (the CJK Unified Ideographs, extensions A to I and the
      compatibility ideographs), as in multilingual tokenizers: `"我在Google工作了3年。"` -> `我 在 Google 工 作
      了 3 年 。`; so is every kana (Japanese has no spaces either). Hangul follows the word rule (Korean
      separates words with spaces), as do other scripts; for Thai or word-level Japanese pass a segmenter;
    * every other non-space character is a token of its own: punctuation (CJK punctuation too: `，。「」《》`),
      symbols, each emoji, control characters (`"a\\x01b"` -> `a`, `\\x01`, `b`);
    * a user-perceived character (a Unicode extended grapheme cluster) is never cut: a letter with combining accents
      stays in its word (`"cafe\\u0301"` -> one word), an emoji ZWJ sequence (a family), an emoji with its skin tone,
      a flag or a keycap is one token, an ideograph with its variation selector one token. The rule runs on each
      cluster's first character, so text without such sequences splits as if they did not exist;
    * no lower-casing and no Unicode normalisation (the published models are case-sensitive).

    `rule="jieba"`: the same, except that each run of ideographs is segmented into words by jieba (the optional
    extra `pip install 'elmo-hf[zh]'`): `我 在 Google 工作 了 3 年 。`.

    `rule="whitespace"`: `text.split()`, for text that is already tokenized (PTB, the 1B Word Benchmark, Chinese
    segmented with spaces). Ideographs are not split: unsegmented Chinese stays one "word" per run.

    `rule=` another name registered in `WORD_SPLITTERS` (an import path `module:function` once registered), or any
    segmenter `str -> list[str]`: its words are used as
    they are, except that empty and whitespace-only ones are dropped (segmenters such as `jieba.lcut` return the
    spaces).

    Splitting text that the built-in rules produced again gives the same words (tested).
    """
    if not text.isascii():
        text = _SURROGATES.sub("", text)
    if callable(rule):
        return _segmenter_words(rule, text)
    function = WORD_SPLITTERS.get(rule) if isinstance(rule, str) else None
    if function is None:
        check_word_split(rule)  # raises: not a registered name (an import path is not imported here)
    if function in _CLEAN_SPLITS:  # a tuple: compared by identity, no hashing needed
        return function(text)
    return _segmenter_words(function, text)


def word_spans(text: str, words: Sequence[str]) -> tuple[list[tuple[int, int]], bool]:
    """Where each of `words` (a split of `text`) lies in `text`: one (start, end) per word, and whether every word
    was found. The words are looked for in order, each after the one before, so a word that occurs twice gets the
    span of its own occurrence. Every built-in split keeps the characters of the text, so all its words are found;
    a word that a custom split changed (lower-cased, normalised) is not, and gets the empty span where the search
    stands (its neighbours keep theirs)."""
    spans, cursor, found_all = [], 0, True
    for word in words:
        start = text.find(word, cursor)
        if start < 0:
            spans.append((cursor, cursor))
            found_all = False
            continue
        cursor = start + len(word)
        spans.append((start, cursor))
    return spans, found_all


def check_saved_split(word_split: Any) -> None:
    """Refuse, in one line, a `word_split` that is no split at all (a name not registered, the placeholder of a
    function saved with a tokenizer). What may work once the process is ready is accepted and checked when text is
    first split: a registered split whose package is missing (jieba), an import path `module:function` not
    registered yet (never imported from a saved file). So a saved tokenizer loads wherever its files do, and
    pre-split words (`is_split_into_words=True`) need neither."""
    if isinstance(word_split, str) and word_split.startswith(CUSTOM_SPLIT_PREFIX):
        name = word_split[len(CUSTOM_SPLIT_PREFIX) :]
        raise WordSplitError(
            f"This tokenizer was saved with the word_split function {name}, which tokenizer_config.json cannot "
            f"hold: pass it again, e.g. ElmoTokenizer.from_pretrained(path, word_split={name.rsplit('.', 1)[-1]})"
        )
    if is_import_path(word_split) or (isinstance(word_split, str) and word_split in WORD_SPLITTERS):
        return
    check_word_split(word_split)
