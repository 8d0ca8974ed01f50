"""Character tokenizer of ELMo (Peters et al. 2018) for Hugging Face transformers.

This file travels to the Hub as remote code, copied flat next to the model files: it imports only the standard
library, numpy (a dependency of transformers), torch, transformers and its siblings.

Character ids (their values are defined once, in `character_ids.py`)
---------------------------------------------------------------------
Every token (a word) becomes a row of `max_characters_per_token` (50) character ids, exactly as in the original
implementations (allennlp `ELMoCharacterMapper`, bilm-tf `UnicodeCharsVocabulary`; see docs/architecture.md,
"Character ids"):

* the token is encoded with `token.encode("utf-8", "ignore")`; each byte `b` (0..255) is character id `b + 1`;
* the bytes are cut after 48 (`max_characters_per_token - 2`), which may split a multi-byte character;
* the row is `[BOW, b1 + 1, ..., bk + 1, EOW, CHAR_PAD, ..., CHAR_PAD]`;
* the ids below already include the +1 shift of the inference code, so that id 0 is free for padding:

  ====  ===========================  ===================================
  id    name in `get_vocab()`        meaning
  ====  ===========================  ===================================
  0     `<pad>`                      padding token: a row of 50 zeros
  1-256 `<0x00>` ... `<0xFF>`        byte 0x00 ... 0xFF
  257   `<S>`                        begin-of-sentence character
  258   `</S>`                       end-of-sentence character
  259   `<bow>`                      begin of word (BOW)
  260   `<eow>`                      end of word (EOW)
  261   `<char_pad>`                 padding character inside a word row
  ====  ===========================  ===================================

* the sentence boundary tokens are `<S>` = `[259, 257, 260, 261 x 47]` and `</S>` = `[259, 258, 260, 261 x 47]`;
  the literal strings `"<S>"` and `"</S>"` in the input map to these same rows (as in both originals);
* example: `"a"` = `[259, 98, 260, 261 x 47]`.

So the tokenizer's scalar vocabulary (`get_vocab()`, `vocab_size`, `len(tokenizer)`, `pad_token_id`,
`bos_token_id`, `convert_tokens_to_ids`) is this table of 262 character ids (= `ElmoConfig.char_vocab_size`),
while `input_ids` holds one row of 50 character ids per token: shape `[batch, tokens, 50]`.

Splitting raw text into words
-----------------------------
`word_split` is a name registered in `WORD_SPLITTERS` (`word_splits_elmo.py`): `"punctuation"` (default: PTB-like
words, one token per CJK ideograph or kana, never cutting a user-perceived character such as an emoji sequence), `"whitespace"` (`str.split()`, for text that is already tokenized, such
as PTB or the 1B Word Benchmark the published models were trained on), `"jieba"` (Chinese word segmentation, the
optional extra `elmo-hf[zh]`) or one registered with `WORD_SPLITTERS.register`; or any function `str -> list[str]`.
It is saved in tokenizer_config.json and used again after `from_pretrained`. Pre-split words
(`is_split_into_words=True`) are used verbatim, one token per word.

Encoding a batch
----------------
Text -> word lists (`split_words`) -> the tokenizer's cached rows (truncated, with the added `<S>`/`</S>`) ->
character ids `[batch, tokens, 50]`, padded on the right; every other output (`attention_mask`,
`special_tokens_mask`, `vocab_ids`, ...) depends only on each sentence's length and is built on one grid. The
output is an `ElmoBatchEncoding`, which also aligns token positions with the input words (`word_ids`).

The files of the tokenizer (they travel together)
-------------------------------------------------
`word_splits_elmo.py` (splitting text into words), `word_vocab_elmo.py` (the optional word vocabulary of
language-model targets), this file (the tokenizer: rows, vocabularies, decoding, encoding and padding a batch, the
cache of rows) and `padding_elmo.py` (the padding shared with the collators). `ElmoTokenizer` is one class in one
file, as transformers' tokenizers are (tests/test_layout.py lets a file of one class pass its line cap). Folders
saved by earlier releases also carry `batch_encoding_elmo.py` (the batch encoding, once a file of its own), and
load with their own copies.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedTokenizer
from transformers.tokenization_utils_base import CharSpan, TokenSpan
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy
from transformers.utils import TensorType

from .character_ids import (
    BOS_CHAR_ID,
    BOW_ID,
    BYTE_OFFSET,
    CHAR_PAD_ID,
    EOS_CHAR_ID,
    EOW_ID,
    MAX_CHARACTERS_PER_TOKEN,
    NUM_CHARACTER_IDS,
    PADDING_ID,
)
from .padding_elmo import LABEL_PAD_ID, TOKEN_PAD_VALUES, pad_character_batch, padded_length, to_list
from .word_splits_elmo import (
    CJK_CHARACTER,
    CUSTOM_SPLIT_PREFIX,
    WORD_SPLITTERS,
    WordSplitError,
    check_word_split,
    is_import_path,
    split_name,
    split_words,
    word_spans,
)
from .word_vocab_elmo import (
    BOS_TOKEN,
    EOS_TOKEN,
    PAD_TOKEN,
    UNK_TOKEN,
    VOCAB_FILES_NAMES,
    build_vocab,
    check_word_vocab,
    load_vocab,
    write_vocab,
)

logger = logging.getLogger(__name__)

_CHARACTER_NAMES: list[str] = (
    [PAD_TOKEN]
    + [f"<0x{b:02X}>" for b in range(256)]
    + [BOS_TOKEN, EOS_TOKEN, "<bow>", "<eow>", "<char_pad>"]
)
assert len(_CHARACTER_NAMES) == NUM_CHARACTER_IDS  # module invariant, not user input


def word_to_char_ids(word: str, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN) -> list[int]:
    """The row of character ids of one token, as laid out in the module docstring.

    `"<S>"` and `"</S>"` give the sentence-boundary rows. Control characters are ordinary bytes; lone surrogates are
    dropped by `encode("utf-8", "ignore")`; an empty word gives `[BOW, EOW, CHAR_PAD, ...]` like the originals.
    """
    width = max_characters_per_token
    if word == BOS_TOKEN or word == EOS_TOKEN:
        return [BOW_ID, BOS_CHAR_ID if word == BOS_TOKEN else EOS_CHAR_ID, EOW_ID] + [CHAR_PAD_ID] * (
            width - 3
        )
    data = word.encode("utf-8", "ignore")[: width - 2]
    return [BOW_ID, *(b + BYTE_OFFSET for b in data), EOW_ID] + [CHAR_PAD_ID] * (width - 2 - len(data))


def _check_saved_split(word_split: Any) -> None:
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


# Reserved indices of the tokenizer's word cache (see ElmoTokenizer._init_cache).
CACHED_PAD, CACHED_BOS, CACHED_EOS = 0, 1, 2


class ElmoBatchEncoding(BatchEncoding):
    """`BatchEncoding` that also knows which input word each token position comes from.

    `word_ids(i)` maps each position of row `i` to the index of its word in the input (None for `<S>`, `</S>`
    and padding), `tokens(i)` gives the token strings, `sequence_ids(i)` is 0 for the words of the first sentence,
    1 for those of the second of a pair, and None elsewhere. The words of a pair's second sentence are numbered
    from 0, as transformers' tokenizers number them. These are only available on the output of
    `ElmoTokenizer.__call__`, not after `pad()`.
    """

    def __init__(self, data=None, tensor_type=None, prepend_batch_axis=False, alignment=None, batched=True,
                 pair_alignment=None, sources=None):
        super().__init__(data, tensor_type=tensor_type, prepend_batch_axis=prepend_batch_axis,
                         n_sequences=1 if pair_alignment is None else 2)
        # alignment[i] = (words kept, index of the first kept word, has <S>/</S>); pair_alignment[i] the same for
        # the second sentence of pair i (None: single sentences)
        self._alignment = alignment
        self._pair_alignment = pair_alignment
        self._batched = batched
        # sources[s][i] = (text or None for pre-split words, all its words) of sentence s of row i: the character
        # spans of its words are worked out when first asked for (`_word_spans`), not on every call
        self._sources = sources
        self._spans: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def __getstate__(self):
        return {**super().__getstate__(), "alignment": self._alignment, "batched": self._batched,
                "pair_alignment": self._pair_alignment, "sources": self._sources}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._alignment = state.get("alignment")
        self._pair_alignment = state.get("pair_alignment")
        self._batched = state.get("batched", True)
        self._sources = state.get("sources")
        self._spans = {}

    def _positions(self, batch_index: int) -> list[tuple[int | None, int | None, str]]:
        """(word index, sentence index, token string) of every position of row `batch_index`."""
        if self._alignment is None:
            raise ValueError(
                "word_ids()/tokens() are only available on the output of ElmoTokenizer.__call__ "
                "(not after pad() or on data rebuilt from lists)"
            )
        if not self._batched and batch_index != 0:
            raise IndexError(
                f"this encoding holds a single sequence; batch_index must be 0, got {batch_index}"
            )
        segments = [self._alignment[batch_index]]
        if self._pair_alignment is not None:
            segments.append(self._pair_alignment[batch_index])
        out: list[tuple[int | None, int | None, str]] = []
        for sequence, (words, first, special) in enumerate(segments):
            words_here = [(first + k, sequence, word) for k, word in enumerate(words)]
            out.extend([(None, None, BOS_TOKEN), *words_here, (None, None, EOS_TOKEN)] if special else words_here)
        ids = self.data["input_ids"]
        length = len(ids[batch_index]) if self._batched or not isinstance(ids, list) else len(ids)
        return out + [(None, None, PAD_TOKEN)] * (length - len(out))

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        return [word for word, _, _ in self._positions(batch_index)]

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        return [sequence for _, sequence, _ in self._positions(batch_index)]

    def tokens(self, batch_index: int = 0) -> list[str]:
        return [token for _, _, token in self._positions(batch_index)]

    # ----- characters: transformers' BatchEncoding methods, which read a fast tokenizer's encodings elsewhere ----
    def _word_spans(self, batch_index: int, sequence: int) -> list[tuple[int, int]]:
        """The (start, end) characters of every word of sentence `sequence` of row `batch_index` in its text
        (within each word for pre-split words)."""
        if self._sources is None:
            raise ValueError("character offsets are only available on the output of ElmoTokenizer.__call__")
        key = (batch_index, sequence)
        if key not in self._spans:
            text, words = self._sources[sequence][batch_index]
            if text is None:
                self._spans[key] = [(0, len(word)) for word in words]
            else:
                self._spans[key], found_all = word_spans(text, words)
                if not found_all:
                    logger.warning("The word split changed some words of sentence %d: their character offsets "
                                   "are empty", batch_index)
        return self._spans[key]

    def offsets(self, batch_index: int = 0) -> list[tuple[int, int]]:
        """`offset_mapping` of row `batch_index`: each position's characters in its sentence, (0, 0) for `<S>`,
        `</S>` and padding."""
        return [(0, 0) if word is None else self._word_spans(batch_index, sequence)[word]
                for word, sequence, _ in self._positions(batch_index)]

    def _row_and(self, batch_or_index: int, index: int | None) -> tuple[int, int]:
        """transformers' convention: (batch index, index), or (0, index) when only an index is given."""
        return (0, batch_or_index) if index is None else (batch_or_index, index)

    def token_to_sequence(self, batch_or_token_index: int, token_index: int | None = None) -> int | None:
        row, token = self._row_and(batch_or_token_index, token_index)
        return self.sequence_ids(row)[token]

    def token_to_word(self, batch_or_token_index: int, token_index: int | None = None) -> int | None:
        row, token = self._row_and(batch_or_token_index, token_index)
        return self.word_ids(row)[token]

    def token_to_chars(self, batch_or_token_index: int, token_index: int | None = None) -> CharSpan | None:
        row, token = self._row_and(batch_or_token_index, token_index)
        word, sequence, _ = self._positions(row)[token]
        return None if word is None else CharSpan(*self._word_spans(row, sequence)[word])

    def word_to_tokens(self, batch_or_word_index: int, word_index: int | None = None,
                       sequence_index: int = 0) -> TokenSpan | None:
        row, word = self._row_and(batch_or_word_index, word_index)
        for position, (w, sequence, _) in enumerate(self._positions(row)):
            if w == word and sequence == sequence_index:
                return TokenSpan(position, position + 1)
        return None  # a word cut off by truncation

    def word_to_chars(self, batch_or_word_index: int, word_index: int | None = None,
                      sequence_index: int = 0) -> CharSpan:
        row, word = self._row_and(batch_or_word_index, word_index)
        return CharSpan(*self._word_spans(row, sequence_index)[word])

    def char_to_word(self, batch_or_char_index: int, char_index: int | None = None,
                     sequence_index: int = 0) -> int | None:
        row, char = self._row_and(batch_or_char_index, char_index)
        for word, (start, end) in enumerate(self._word_spans(row, sequence_index)):
            if start <= char < end:
                return word
        return None  # whitespace between words, or past the text

    def char_to_token(self, batch_or_char_index: int, char_index: int | None = None,
                      sequence_index: int = 0) -> int | None:
        row, char = self._row_and(batch_or_char_index, char_index)
        word = self.char_to_word(row, char, sequence_index)
        span = None if word is None else self.word_to_tokens(row, word, sequence_index)
        return None if span is None else span.start


class ElmoTokenizer(PreTrainedTokenizer):
    r"""ELMo character tokenizer: text -> `input_ids` `[batch, tokens, 50]` character ids + `attention_mask`.

    The character-id layout is in the module docstring. `<S>` and `</S>` are added around every sentence by
    default (like CLS/SEP), padding is on the right and is a row of zeros.

    Args:
        vocab_file (`str`, *optional*): word vocabulary, one token per line (word id i = line i), holding `<S>`,
            `</S>` and `<UNK>` on any lines (the format of the original ELMo vocabulary files). Only needed for
            `return_vocab_ids=True` (language-model targets); saved as `vocab.txt` by `save_pretrained`.
        word_vocab (`list[str]`, *optional*): the same vocabulary given as a list (e.g. from `build_vocab`).
        word_split (`str` or function, *optional*, defaults to `"punctuation"`): how raw text is split into words
            (see `split_words`): a name in `WORD_SPLITTERS`, `"punctuation"` (one token per CJK ideograph or kana),
            `"whitespace"` (pre-tokenized), `"jieba"` (Chinese word segmentation, the optional extra `elmo-hf[zh]`)
            or one registered with `WORD_SPLITTERS.register`, or any function `str -> list[str]`. Ignored for
            `is_split_into_words=True`. Saved in tokenizer_config.json: a function as its registered name or its
            import path `module:function` (loading it then needs that name registered in the loading process:
            `check_word_split(name, allow_import=True)`, a command's `--word_split name`, or
            `from_pretrained(path, word_split=function)`; it is never imported from the file), and a function that
            cannot be imported by name (a lambda) as the placeholder `"custom:<module>.<name>"`, which loading
            refuses until the function is passed again, instead of silently splitting another way. A split whose
            package is missing (jieba) or not registered yet is reported, in one line, when text is first split.
        max_characters_per_token (`int`, *optional*, defaults to 50): row width, `ElmoConfig.max_characters_per_token`.
        cache_size (`int`, *optional*, defaults to 65536): distinct words whose rows are cached; the cache is
            cleared when it grows past this (between calls), so memory stays bounded.

    Call keyword arguments are those of every transformers tokenizer (`add_special_tokens`, `padding`,
    `truncation`, `max_length` counted in tokens including `<S>`/`</S>`, `pad_to_multiple_of`,
    `return_tensors`, `return_attention_mask`, `return_special_tokens_mask`, `return_length`,
    `return_token_type_ids`, `is_split_into_words`) plus `return_vocab_ids`.
    """

    vocab_files_names = VOCAB_FILES_NAMES
    # token_type_ids: 1 on the second sentence of a pair, which the sequence head reads on its own (pipelines pass
    # exactly these keys to the model)
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    padding_side = "right"

    def __init__(
        self,
        vocab_file: str | None = None,
        word_vocab: Sequence[str] | None = None,
        word_split: str = "punctuation",
        max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
        cache_size: int = 65536,
        bos_token: str = BOS_TOKEN,
        eos_token: str = EOS_TOKEN,
        pad_token: str = PAD_TOKEN,
        **kwargs,
    ):
        for name, value, expected in (
            ("bos_token", bos_token, BOS_TOKEN),
            ("eos_token", eos_token, EOS_TOKEN),
            ("pad_token", pad_token, PAD_TOKEN),
        ):
            if str(value) != expected:
                raise ValueError(
                    f"ElmoTokenizer's {name} is fixed to {expected!r} by the ELMo format, got {value!r}"
                )
        _check_saved_split(word_split)
        if (
            isinstance(max_characters_per_token, bool)
            or not isinstance(max_characters_per_token, int)
            or max_characters_per_token < 3
        ):
            raise ValueError(
                f"max_characters_per_token must be an integer >= 3 (begin, one byte, end), got {max_characters_per_token!r}"
            )
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"cache_size must be a positive integer, got {cache_size!r}")
        if kwargs.get("padding_side", "right") != "right":
            raise ValueError(
                f"ElmoTokenizer pads on the right only (the biLM reads </S> right after the last word), "
                f"got padding_side={kwargs['padding_side']!r}"
            )
        if vocab_file is not None and word_vocab is not None:
            raise ValueError("Give either vocab_file or word_vocab, not both")

        if vocab_file is not None:
            word_vocab = load_vocab(vocab_file)
        elif word_vocab is not None:
            word_vocab = list(word_vocab)
            check_word_vocab(word_vocab)
        self._set_word_vocab(word_vocab)

        self.max_characters_per_token = max_characters_per_token
        self.cache_size = cache_size
        self._character_ids = {name: i for i, name in enumerate(_CHARACTER_NAMES)}
        self._init_cache()

        super().__init__(
            word_split=split_name(word_split),  # transformers deep-copies and saves these arguments
            max_characters_per_token=max_characters_per_token,
            cache_size=cache_size,
            bos_token=bos_token,
            eos_token=eos_token,
            pad_token=pad_token,
            **kwargs,
        )
        self.word_split = word_split  # after the base class, which refuses an argument named like a function

    # ----- word vocabulary -----------------------------------------------------------------------------------
    def _set_word_vocab(self, word_vocab: list[str] | None) -> None:
        self._word_vocab = word_vocab
        self._word_to_vocab_id: dict[str, int] | None = None
        if word_vocab is not None:
            mapping: dict[str, int] = {}
            for i, token in enumerate(word_vocab):
                if token in mapping:
                    logger.warning(
                        "Vocabulary token %r repeated at position %d; keeping its first id %d",
                        token,
                        i + 1,
                        mapping[token],
                    )
                    continue
                mapping[token] = i
            self._word_to_vocab_id = mapping

    @property
    def word_vocab(self) -> list[str] | None:
        """The word vocabulary of the language-model softmax (`<S>`, `</S>`, `<UNK>`, ...), or None."""
        return None if self._word_vocab is None else list(self._word_vocab)

    @property
    def word_vocab_size(self) -> int:
        """Size of the word vocabulary (`ElmoConfig.vocab_size`), 0 without one."""
        return 0 if self._word_vocab is None else len(self._word_vocab)

    @property
    def unk_word_id(self) -> int:
        return self._require_word_vocab("unk_word_id")[UNK_TOKEN]

    def _require_word_vocab(self, what: str) -> dict[str, int]:
        if self._word_to_vocab_id is None:
            raise ValueError(
                f"{what} needs a word vocabulary: ElmoTokenizer(vocab_file=...) or ElmoTokenizer.from_corpus(...)"
            )
        return self._word_to_vocab_id

    def convert_tokens_to_vocab_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Word-vocabulary ids of tokens (unknown -> the id of `<UNK>`); `<S>`/`</S>` get their own ids."""
        mapping = self._require_word_vocab("convert_tokens_to_vocab_ids")
        unk = self.unk_word_id
        if isinstance(tokens, str):
            return mapping.get(tokens, unk)
        return [mapping.get(token, unk) for token in tokens]

    def convert_vocab_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """Inverse of `convert_tokens_to_vocab_ids` (e.g. to read language-model predictions)."""
        self._require_word_vocab("convert_vocab_ids_to_tokens")
        vocab = self._word_vocab
        if isinstance(ids, int):
            return vocab[ids]
        return [vocab[int(i)] for i in ids]

    @classmethod
    def from_corpus(
        cls,
        texts_or_files: Iterable[str | os.PathLike],
        max_size: int | None = None,
        min_count: int = 1,
        **kwargs,
    ) -> ElmoTokenizer:
        """A tokenizer whose word vocabulary is built from a corpus with `build_vocab`, using its own split rule."""
        split = kwargs.get("word_split", "punctuation")
        vocab = build_vocab(texts_or_files, max_size=max_size, min_count=min_count, split=split)
        return cls(word_vocab=vocab, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedTokenizer.save_pretrained`; a `word_split` function is recorded by name (it cannot be
        written to JSON), so that loading the folder asks for it again rather than splitting text another way."""
        if not callable(self.word_split):
            return super().save_pretrained(save_directory, *args, **kwargs)
        function, name = self.word_split, split_name(self.word_split)
        if name.startswith(CUSTOM_SPLIT_PREFIX):
            logger.warning(
                "word_split is the function %s, which cannot be imported again by name (a lambda, a local function, "
                "or one in __main__): tokenizer_config.json records %r, and loading the tokenizer needs "
                "from_pretrained(path, word_split=...) with the same function",
                name[len(CUSTOM_SPLIT_PREFIX) :],
                name,
            )
        self.word_split = name  # what transformers writes to tokenizer_config.json
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.word_split = function

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write the word vocabulary as `vocab.txt` (nothing when the tokenizer has none)."""
        path = os.path.join(
            save_directory,
            (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILES_NAMES["vocab_file"],
        )
        if self._word_vocab is None:
            if os.path.exists(path):
                logger.warning(
                    "%s already exists but this tokenizer has no word vocabulary: it will be loaded with it; delete it",
                    path,
                )
            return ()
        return (write_vocab(self._word_vocab, path),)

    # ----- character vocabulary (the scalar ids transformers knows about) -----------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of character ids (262 = `ElmoConfig.char_vocab_size`), not the word vocabulary."""
        return NUM_CHARACTER_IDS

    def get_vocab(self) -> dict[str, int]:
        """The character vocabulary: `<pad>` 0, `<0x00>`..`<0xFF>` 1..256, `<S>` 257, `</S>` 258, `<bow>` 259,
        `<eow>` 260, `<char_pad>` 261."""
        return dict(self._character_ids)

    def _convert_token_to_id(self, token: str) -> int:
        try:
            return self._character_ids[token]
        except KeyError:
            raise ValueError(
                f"{token!r} is not a character of ElmoTokenizer's vocabulary (scalar ids are character ids, see "
                "get_vocab()); use convert_tokens_to_char_ids() for the 50 character ids of a word"
            ) from None

    def _convert_id_to_token(self, index: int) -> str:
        if not 0 <= index < NUM_CHARACTER_IDS:
            raise ValueError(f"character id must be in [0, {NUM_CHARACTER_IDS}), got {index}")
        return _CHARACTER_NAMES[index]

    def add_tokens(self, *args, **kwargs) -> int:
        raise NotImplementedError("ElmoTokenizer encodes any word from its bytes: there are no tokens to add")

    # ----- rows: hooks for a tokenizer with another id layout (ElmoManyLangsTokenizer) -------------------------------
    _ROW_DTYPE = torch.int16  # of the cached rows: byte ids < 262

    @property
    def row_width(self) -> int:
        """Ids per token in `input_ids` (`ElmoConfig.token_row_width`): `max_characters_per_token` here."""
        return self.max_characters_per_token

    def _token_row(self, word: str) -> list[int]:
        """The row of ids of one word; `"<S>"`/`"</S>"` give the sentence-boundary rows."""
        return word_to_char_ids(word, self.max_characters_per_token)

    def _boundary_rows(self) -> tuple[list[int], list[int]]:
        """The rows of the begin- and end-of-sentence tokens the tokenizer adds."""
        return self._token_row(BOS_TOKEN), self._token_row(EOS_TOKEN)

    def convert_tokens_to_char_ids(self, tokens: str | Sequence[str]) -> list[int] | list[list[int]]:
        """The 50 character ids of a word (or a list of rows for a list of words), without `<S>`/`</S>` added."""
        if isinstance(tokens, str):
            return self._token_row(tokens)
        return [self._token_row(_check_word(t, i)) for i, t in enumerate(tokens)]

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        """Character ids -> names (an int or a list of ints), or rows of 50 ids -> words (padding rows dropped)."""
        ids = to_list(ids)
        if isinstance(ids, int):
            return self._convert_id_to_token(ids)
        if ids and isinstance(ids[0], list):
            return [
                word
                for row in ids
                if (word := self._row_to_token(row)) is not None
                and not (
                    skip_special_tokens and word in (BOS_TOKEN, EOS_TOKEN) and self._is_boundary_row(row)
                )
            ]
        skip = {PADDING_ID, BOS_CHAR_ID, EOS_CHAR_ID} if skip_special_tokens else set()
        return [self._convert_id_to_token(int(i)) for i in ids if int(i) not in skip]

    def _is_boundary_row(self, row: list[int]) -> bool:
        return len(row) > 2 and row[0] == BOW_ID and row[1] in (BOS_CHAR_ID, EOS_CHAR_ID) and row[2] == EOW_ID

    def _row_to_token(self, row: list[int]) -> str | None:
        if not any(row):
            return None
        if self._is_boundary_row(row):
            return BOS_TOKEN if row[1] == BOS_CHAR_ID else EOS_TOKEN
        data = bytes(c - BYTE_OFFSET for c in row if BYTE_OFFSET <= c < BOS_CHAR_ID)
        return data.decode("utf-8", errors="replace")

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    def decode(self, token_ids, skip_special_tokens: bool = False, **kwargs) -> str | list[str]:
        """Rows of character ids -> text: `[tokens, 50]` gives a string, `[batch, tokens, 50]` a list of strings.

        Words are joined with single spaces; padding rows are dropped; words longer than 48 bytes come back cut.
        """
        ids = to_list(token_ids)
        if not isinstance(ids, list):
            raise ValueError("decode expects rows of character ids: [tokens, 50] or [batch, tokens, 50]")
        if not ids:
            return ""
        if isinstance(ids[0], int):  # a single row: one word
            return self._row_to_token(ids) or ""
        if _is_batch_of_sentences(ids):
            return [self.decode(seq, skip_special_tokens=skip_special_tokens) for seq in ids]
        return " ".join(self.convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens))

    def batch_decode(self, sequences, skip_special_tokens: bool = False, **kwargs) -> list[str]:
        out = self.decode(sequences, skip_special_tokens=skip_special_tokens)
        return [out] if isinstance(out, str) else out

    # ----- words ------------------------------------------------------------------------------------------------
    def tokenize(self, text: str, add_special_tokens: bool = False, **kwargs) -> list[str]:
        """The words `text` is split into (see `split_words`), with `<S>`/`</S>` if `add_special_tokens`."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize expects a str, got {type(text).__name__}")
        words = split_words(text, self.word_split)
        return [BOS_TOKEN, *words, EOS_TOKEN] if add_special_tokens else words

    def _tokenize(self, text, **kwargs):
        return split_words(text, self.word_split)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 4 if pair else 2  # each sentence of a pair has its own <S> and </S>

    def build_inputs_with_special_tokens(self, token_ids_0: list, token_ids_1: list | None = None) -> list:
        """Rows of a sentence -> `[<S> row] + rows + [</S> row]`; of a pair, the two sentences so framed, one after
        the other (the biLM reads each on its own: `ElmoForSequenceClassification`)."""
        bos, eos = self._boundary_rows()
        pair = [] if token_ids_1 is None else [bos, *token_ids_1, eos]
        return [bos, *token_ids_0, eos, *pair]

    def create_token_type_ids_from_sequences(self, token_ids_0: list, token_ids_1: list | None = None) -> list[int]:
        """0 at the first sentence's positions (its <S> and </S> included), 1 at the second's."""
        second = [] if token_ids_1 is None else [1] * (len(token_ids_1) + 2)
        return [0] * (len(token_ids_0) + 2) + second

    def get_special_tokens_mask(
        self, token_ids_0: list, token_ids_1: list | None = None, already_has_special_tokens: bool = False
    ) -> list[int]:
        if already_has_special_tokens:
            rows = to_list(token_ids_0) + ([] if token_ids_1 is None else to_list(token_ids_1))
            return [1 if not any(row) or self._is_boundary_row(list(row)) else 0 for row in rows]
        second = [] if token_ids_1 is None else [1] + [0] * len(token_ids_1) + [1]
        return [1] + [0] * len(token_ids_0) + [1] + second

    # ----- encoding a batch (`__call__`; the base class's `encode` comes through `_encode_plus`) ------------------
    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        text_pair=None,
        text_target=None,
        text_pair_target=None,
        add_special_tokens: bool = True,
        padding: bool | str | PaddingStrategy = False,
        truncation: bool | str | TruncationStrategy | None = None,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: str | TensorType | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        return_vocab_ids: bool = False,
        **kwargs,
    ) -> ElmoBatchEncoding:
        """Encode one sentence or a batch: a `str`, a list of `str`, or (with `is_split_into_words=True`) a list of
        words or a list of lists of words. Pairs of sentences: `text_pair` of the same form as `text`, or a list of
        `[first, second]` pairs of `str` (as transformers' zero-shot pipeline passes them).

        Returns an `ElmoBatchEncoding` with `input_ids` (`[batch, tokens, 50]` with `return_tensors`, nested lists
        otherwise; a single unbatched input drops the batch level unless `return_tensors` is set),
        `attention_mask` `[batch, tokens]` and, on request, `special_tokens_mask`, `token_type_ids`, `length` and
        `vocab_ids` (word-vocabulary ids, padding -100). `word_ids(i)` aligns positions with words.

        A pair is its two sentences one after the other, each with its own `<S>` and `</S>`, and `token_type_ids` (0
        on the first sentence and on padding, 1 on the second) come with it unless `return_token_type_ids=False`;
        a single sentence gets them (zeros) only when asked. `max_length` then counts the tokens of both, and
        `truncation` takes transformers' strategies for pairs: `longest_first` (`True`: a word at a time from the
        longer sentence, from the second on a tie), `only_first`, `only_second`, `do_not_truncate`.

        The one encoding path (also of the base class's `encode()`): text -> word lists -> cache indices
        (truncated, with the added `<S>`/`</S>`) -> character ids (padded), then the other outputs, which depend
        only on each sentence's length.
        """
        kwargs.pop("split_special_tokens", None)
        if kwargs.pop("tokenizer_kwargs", None):
            raise ValueError("tokenizer_kwargs is not supported by ElmoTokenizer: pass the arguments directly")
        _refuse_unsupported(text, text_target, text_pair_target, stride, return_overflowing_tokens)
        if kwargs:
            logger.warning("ElmoTokenizer ignores the keyword arguments %s", sorted(kwargs))
        self._check_padding_side(padding_side)
        tensor_type = _tensor_type(return_tensors)
        vocab = self._require_word_vocab("return_vocab_ids=True") if return_vocab_ids else None
        batch, pair_batch, batched = _as_pair_batch(text, text_pair, is_split_into_words, self.word_split)
        padding_strategy, truncation_strategy, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding,
            truncation=truncation,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            verbose=verbose,
        )
        if pair_batch is None:
            limits = [(_words_limit(truncation_strategy, max_length, add_special_tokens), None)] * len(batch)
        else:
            limits = _pair_limits(truncation_strategy, max_length, add_special_tokens, batch, pair_batch)
        input_ids, lengths, target, alignments = self._encode_words(
            (batch, pair_batch), limits, add_special_tokens, (padding_strategy, max_length, pad_to_multiple_of),
            tensor_type, verbose,
        )

        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        wanted = {
            "attention_mask": return_attention_mask,
            "token_type_ids": pair_batch is not None if return_token_type_ids is None else return_token_type_ids,
            "special_tokens_mask": return_special_tokens_mask,
            "length": return_length,
        }
        vocab_rows = None if vocab is None else self._vocab_rows(alignments, vocab)
        first_lengths = None if pair_batch is None else [_sentence_length(row) for row in alignments[0]]
        data = {
            "input_ids": input_ids,
            **_token_outputs(wanted, lengths, target, (add_special_tokens, first_lengths), vocab_rows, tensor_type),
        }
        if tensor_type == TensorType.NUMPY:
            data = {k: v.numpy() for k, v in data.items()}
        if not batched and tensor_type is None:
            data = {k: v[0] for k, v in data.items()}
        encoding = ElmoBatchEncoding(data, alignment=alignments[0], pair_alignment=alignments[1],
                                     batched=batched or tensor_type is not None,
                                     sources=_sentence_sources(text, text_pair, is_split_into_words, batch, pair_batch))
        if return_offsets_mapping:
            offsets = [encoding.offsets(i) for i in range(len(batch))]
            encoding["offset_mapping"] = _offsets_output(offsets, tensor_type, batched)
        return encoding

    def _encode_plus(
        self,
        text,
        text_pair=None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        **kwargs,
    ) -> ElmoBatchEncoding:
        # Entry point of the base class's `encode()`: strategies are already resolved.
        return self(
            text,
            text_pair=text_pair,
            add_special_tokens=add_special_tokens,
            padding=padding_strategy,
            truncation=truncation_strategy,
            max_length=max_length,
            **kwargs,
        )

    def _encode_words(
        self,
        batches: tuple[list[list[str]], list[list[str]] | None],
        limits: list[tuple[int | None, int | None]],
        add_special_tokens: bool,
        padding: tuple[PaddingStrategy, int | None, int | None],
        tensor_type: TensorType | None,
        verbose: bool,
    ) -> tuple[Any, list[int], int | None, tuple[list, list | None]]:
        """The character ids of a batch of word lists (or of pairs of them: `batches` = (first sentences, second
        sentences or None), each pair's sentences one after the other), at most `limits` words of each, padded as
        `padding` = (strategy, max_length, pad_to_multiple_of) says, with each row's length, the padded length (None:
        not padded) and the alignments of positions with words (of the first sentences, of the second or None)."""
        first, second = batches
        with self.cache["lock"]:  # the cache is shared by every thread that uses this tokenizer
            self._maybe_clear_cache()
            sequences, alignment = self._cache_sequences(first, [a for a, _ in limits], add_special_tokens)
            pair_alignment = None
            if second is not None:
                seconds, pair_alignment = self._cache_sequences(second, [b for _, b in limits], add_special_tokens)
                sequences = [a + b for a, b in zip(sequences, seconds)]
            lengths = [len(s) for s in sequences]
            if limits[0] == (None, None) and verbose:
                self._warn_if_too_long(lengths)
            target = _target_of(padding[0], lengths, padding[1], padding[2])
            if tensor_type is None:
                input_ids = self._nested_lists(sequences, target)
            else:
                target = _tensor_length(lengths, target)
                input_ids = self._gather(_index_tensor(sequences, target))
        return input_ids, lengths, target, (alignment, pair_alignment)

    def _cache_sequences(
        self, batch: list[list[str]], limits: list[int | None], add_special_tokens: bool
    ) -> tuple[list[list[int]], list[tuple[list[str], int, bool]]]:
        """Each sentence's cache indices (at most its `limits` words, then the added `<S>`/`</S>`) and its alignment:
        (words kept, index of the first kept word, whether `<S>`/`</S>` were added). Lock held."""
        sequences, alignment = [], []
        for words, limit in zip(batch, limits, strict=True):
            first = 0
            if limit is not None and len(words) > limit:
                first = len(words) - limit if self.truncation_side == "left" else 0
                words = words[first : first + limit]
            indices = self._indices(words)
            sequences.append([CACHED_BOS, *indices, CACHED_EOS] if add_special_tokens else indices)
            alignment.append((words, first, add_special_tokens))
        return sequences, alignment

    def _warn_if_too_long(self, lengths: list[int]) -> None:
        if self.model_max_length >= 10**12:  # transformers' "no limit"
            return
        too_long = [i for i, n in enumerate(lengths) if n > self.model_max_length]
        if too_long:
            self._warn_once(
                "too_long",
                "Sentence %d has %d tokens, more than model_max_length=%d; pass truncation=True",
                too_long[0],
                lengths[too_long[0]],
                self.model_max_length,
            )

    def _vocab_rows(self, alignments, vocab: dict[str, int]) -> list[list[int]]:
        """The word-vocabulary ids of every row: of its sentence, or of both sentences of its pair."""
        unk = self.unk_word_id
        bos, eos = vocab[BOS_TOKEN], vocab[EOS_TOKEN]
        out = []
        for segments in zip(*(a for a in alignments if a is not None)):
            row = []
            for words, _, special in segments:
                ids = [vocab.get(w, unk) for w in words]
                row.extend([bos, *ids, eos] if special else ids)
            out.append(row)
        return out

    def _check_padding_side(self, padding_side: str | None) -> None:
        side = self.padding_side if padding_side is None else padding_side
        if side != "right":
            raise ValueError(
                f"ElmoTokenizer pads on the right only (the biLM reads </S> right after the last word), got {side!r}"
            )

    # ----- padding (data collators) ------------------------------------------------------------------------------
    def pad(
        self,
        encoded_inputs,
        padding: bool | str | PaddingStrategy = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
        return_tensors: str | TensorType | None = None,
        verbose: bool = True,
    ) -> ElmoBatchEncoding:
        """Pad encoded sentences to a batch, e.g. in a data collator (`DataCollatorWithPadding(tokenizer)`).

        `encoded_inputs` is a list of features (dicts, as a `DataLoader` gives a collator) or a dict of lists, whose
        `input_ids` are rows of 50 character ids (lists, numpy arrays or tensors). Keys padded along the token axis:
        `input_ids` (zero rows), `attention_mask` (0), `special_tokens_mask` (1), `token_type_ids` (0),
        `vocab_ids` (-100) and `labels` when every example's labels are a list as long as its `input_ids`
        (token-level labels, padded with -100). Every other key (e.g. a scalar `label`) is passed through, as a tensor
        when it converts to one and as a list otherwise. Without `return_tensors`, tensors come back when the inputs
        were tensors.
        """
        self._check_padding_side(padding_side)
        columns, batched = _feature_columns(encoded_inputs)
        if return_tensors is None and _contains_tensor(columns["input_ids"]):
            return_tensors = "pt"
        tensor_type = _tensor_type(return_tensors)
        ids_column = to_list(columns["input_ids"])
        if batched is None:  # a dict: one sentence ([tokens, 50]) or a batch ([batch, tokens, 50])
            batched = _is_batch_of_sentences(ids_column)
        if not batched:
            ids_column = [ids_column]
            columns = {k: [v] for k, v in columns.items()}
        columns["input_ids"] = ids_column
        self._check_character_rows(ids_column)
        lengths = [len(seq) for seq in ids_column]
        target = self._pad_target(lengths, padding, max_length, pad_to_multiple_of, tensor_type, verbose)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        token_keys = _token_level_keys(columns, lengths, return_attention_mask)
        padded = pad_character_batch(
            ids_column,
            self.row_width,
            target,
            token_values={key: columns[key] for key in token_keys},
            return_tensors=tensor_type is not None,
        )
        out = {key: padded[key] if key in padded else self._passthrough(key, values, tensor_type)
               for key, values in columns.items()}
        if tensor_type == TensorType.NUMPY:
            out = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
        if not batched and tensor_type is None:
            out = {k: v[0] for k, v in out.items()}
        return ElmoBatchEncoding(out, batched=batched or tensor_type is not None)

    def _check_character_rows(self, ids_column: list) -> None:
        width = self.row_width
        for i, seq in enumerate(ids_column):
            if not isinstance(seq, list) or any(
                not isinstance(row, list) or len(row) != width for row in seq
            ):
                raise ValueError(
                    f"pad(): input_ids of example {i} must be rows of {width} character ids ([tokens, {width}])"
                )

    def _pad_target(
        self, lengths: list[int], padding, max_length, pad_to_multiple_of, tensor_type, verbose
    ) -> int | None:
        """The padded number of tokens (None: no padding); tensors need one length for every example."""
        padding_strategy, _, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, max_length=max_length, verbose=verbose
        )
        target = _target_of(padding_strategy, lengths, max_length, pad_to_multiple_of)
        if tensor_type is None:
            return target
        if target is None:
            if len(set(lengths)) > 1:
                raise ValueError(
                    "pad(padding=False) got sentences of different lengths; cannot return tensors"
                )
            return max(lengths)
        if max(lengths) > target:
            raise ValueError(f"pad(): an example has {max(lengths)} tokens, more than max_length={target}")
        return target

    def _passthrough(self, key: str, values: list, tensor_type: TensorType | None):
        if tensor_type is None:
            return values
        try:
            if all(isinstance(v, torch.Tensor) for v in values):
                return torch.stack(values)
            return torch.tensor(to_list(values))
        except (TypeError, ValueError, RuntimeError):
            self._warn_once(key, "pad(): %r is not numeric or not rectangular; it is returned as a list", key)
            return values

    # ----- cache of rows -----------------------------------------------------------------------------------------
    # All mutable state lives in the dict `self.cache`: `datasets` blanks an attribute of that name when it hashes a
    # tokenizer, so `Dataset.map` fingerprints do not change as the cache fills; pickles and copies drop it.
    def _init_cache(self) -> None:
        # Indices 0, 1, 2 are reserved (CACHED_PAD, CACHED_BOS, CACHED_EOS): padding, and the <S>/</S> added by
        # the tokenizer. A literal "<S>" in the input gets its own index with the same row.
        rows: list[tuple[int, ...]] = [
            (PADDING_ID,) * self.row_width,
            *(tuple(row) for row in self._boundary_rows()),
        ]
        self.cache = {
            "lock": threading.Lock(),  # encoding is thread-safe: one call at a time touches the cache
            "index": {},  # word -> index into rows
            "rows": rows,  # character ids of each cached word, as tuples
            "table": torch.tensor(rows, dtype=self._ROW_DTYPE),  # the same rows as a tensor, extended lazily
            "warned": set(),  # warnings already given once
        }

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("cache", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_cache()

    def _warn_once(self, key: str, message: str, *args) -> None:
        if key not in self.cache["warned"]:
            self.cache["warned"].add(key)
            logger.warning(message, *args)

    def _indices(self, words: Sequence[str]) -> list[int]:
        """Cache indices of `words` (lock held)."""
        index = self.cache["index"]
        rows = self.cache["rows"]
        out = []
        for word in words:
            i = index.get(word)
            if i is None:
                i = index[word] = len(rows)
                row = self._token_row(word)
                rows.append(tuple(row))
                if row[-1] == EOW_ID:  # no room left in the row: the word may have been cut
                    self._warn_if_cut_cjk(word)
            out.append(i)
        return out

    def _warn_if_cut_cjk(self, word: str) -> None:
        """A CJK "word" longer than a row is unsegmented text (e.g. Chinese with word_split="whitespace")."""
        size = len(word.encode("utf-8", "ignore"))
        if size > self.max_characters_per_token - 2 and CJK_CHARACTER.search(word):
            self._warn_once(
                "cut_cjk",
                "The word %r has %d bytes; its character ids keep the first %d. Unsegmented Chinese or Japanese "
                "needs word_split='punctuation' (one token per character), 'jieba' or a segmenter",
                word[:20] + "...",
                size,
                self.max_characters_per_token - 2,
            )

    def _gather(self, index: torch.Tensor) -> torch.Tensor:
        """`[batch, tokens]` cache indices -> `[batch, tokens, width]` int64 character ids (lock held)."""
        rows, table = self.cache["rows"], self.cache["table"]
        have = table.shape[0]
        if have < len(rows):
            table = self.cache["table"] = torch.cat([table, torch.tensor(rows[have:], dtype=self._ROW_DTYPE)])
        if index.numel() == 0:
            return torch.zeros((*index.shape, self.row_width), dtype=torch.int64)
        return table[index].to(torch.int64)

    def _nested_lists(self, sequences: list[list[int]], target: int | None) -> list[list[list[int]]]:
        """Cache indices -> fresh nested lists of character ids, padded to `target` tokens when given (lock held)."""
        rows = self.cache["rows"]
        width = self.row_width
        # One new list per token: hundreds of thousands of acyclic containers per call, which would trigger the
        # cyclic garbage collector over and over (7x slower seen on 10,000 PTB sentences). Pause it meanwhile.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            input_ids = []
            for seq_indices in sequences:
                seq = [list(rows[i]) for i in seq_indices]
                if target is not None and target > len(seq_indices):
                    seq.extend([PADDING_ID] * width for _ in range(target - len(seq_indices)))
                input_ids.append(seq)
        finally:
            if gc_was_enabled:
                gc.enable()
        return input_ids

    def _maybe_clear_cache(self) -> None:
        """Start afresh once more than `cache_size` words are cached (lock held; never in the middle of a call)."""
        cache = self.cache
        if len(cache["rows"]) - 3 > self.cache_size:
            logger.debug("ElmoTokenizer: clearing the cache of %d words", len(cache["rows"]) - 3)
            cache["index"] = {}
            del cache["rows"][3:]
            cache["table"] = cache["table"][:3].clone()


# ---------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------
def _refuse_unsupported(text, text_target, text_pair_target, stride, overflowing) -> None:
    if text is None:
        raise TypeError(
            "ElmoTokenizer needs text: a str, a list of str, or lists of words with is_split_into_words=True; got None"
        )
    if text_target is not None or text_pair_target is not None:
        raise ValueError(
            "ElmoTokenizer encodes the model's inputs only: text_target/text_pair_target are not supported"
        )
    if overflowing or stride:
        raise NotImplementedError(
            "ElmoTokenizer does not return overflowing tokens (stride/return_overflowing_tokens)"
        )


def _sentence_sources(text, text_pair, is_split_into_words: bool, batch: list, pair_batch: list | None) -> list:
    """For each sentence of the batch (and of the pairs' second sentences): (its text, or None for pre-split words;
    all its words), from which `ElmoBatchEncoding` works out character offsets."""
    if text_pair is None and pair_batch is not None:  # a list of [first, second] pairs
        text, text_pair = [a for a, _ in text], [b for _, b in text]

    def texts(given, count: int) -> list:
        if is_split_into_words:
            return [None] * count
        return [given] if isinstance(given, str) else list(given)

    sources = [list(zip(texts(text, len(batch)), batch, strict=True))]
    if pair_batch is not None:
        sources.append(list(zip(texts(text_pair, len(pair_batch)), pair_batch, strict=True)))
    return sources


def _offsets_output(offsets: list[list[tuple[int, int]]], tensor_type: TensorType | None, batched: bool):
    """`offset_mapping` in the form of the other outputs: a tensor `[batch, tokens, 2]`, an array, or lists."""
    if tensor_type == TensorType.PYTORCH:
        return torch.tensor(offsets, dtype=torch.long).reshape(len(offsets), -1, 2)
    if tensor_type == TensorType.NUMPY:
        return np.array(offsets, dtype=np.int64).reshape(len(offsets), -1, 2)
    return offsets if batched else offsets[0]


def _check_word(word: Any, where: Any) -> str:
    if not isinstance(word, str):
        raise TypeError(f"word {where} must be a str, got {type(word).__name__}: {word!r:.50}")
    return word


def _as_word_batch(text: Any, is_split_into_words: bool, rule: str) -> tuple[list[list[str]], bool]:
    """Validate the input and return (a list of word lists, whether the input was a batch)."""
    if isinstance(text, str):
        if is_split_into_words:
            raise TypeError(
                "is_split_into_words=True expects a list of words (or a list of such lists), got a str"
            )
        return [split_words(text, rule)], False
    if not isinstance(text, (list, tuple)):
        hint = ": decode bytes first" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"ElmoTokenizer expects a str or a list, got {type(text).__name__}{hint}")
    if len(text) == 0:
        raise ValueError(
            'ElmoTokenizer got an empty list (a batch of zero sentences); to encode an empty sentence pass "" '
            "(or [[]] with is_split_into_words=True)"
        )
    if not is_split_into_words:
        for i, item in enumerate(text):
            if not isinstance(item, str):
                hint = (
                    " (pass is_split_into_words=True for pre-split words)"
                    if isinstance(item, (list, tuple))
                    else ""
                )
                raise TypeError(f"text[{i}] must be a str, got {type(item).__name__}{hint}")
        return [split_words(item, rule) for item in text], True
    if isinstance(text[0], str):
        return [[_check_word(w, f"text[{i}]") for i, w in enumerate(text)]], False
    batch = []
    for i, words in enumerate(text):
        if not isinstance(words, (list, tuple)):
            raise TypeError(f"text[{i}] must be a list of words (str), got {type(words).__name__}")
        batch.append([_check_word(w, f"text[{i}][{j}]") for j, w in enumerate(words)])
    return batch, True


def _is_pair(item: Any) -> bool:
    return isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item)


def _as_pair_batch(
    text: Any, text_pair: Any, is_split_into_words: bool, rule: Any
) -> tuple[list[list[str]], list[list[str]] | None, bool]:
    """(word lists of the first sentences, of the second ones or None for single sentences, whether the input was a
    batch). Pairs come as `text` and `text_pair` of the same form, or as a list of `[first, second]` pairs of str
    (transformers' way of batching pairs, which the zero-shot pipeline uses)."""
    if text_pair is None:
        if not is_split_into_words and isinstance(text, (list, tuple)) and text and all(map(_is_pair, text)):
            text, text_pair = [a for a, _ in text], [b for _, b in text]
        else:
            batch, batched = _as_word_batch(text, is_split_into_words, rule)
            return batch, None, batched
    first, batched = _as_word_batch(text, is_split_into_words, rule)
    second, pair_batched = _as_word_batch(text_pair, is_split_into_words, rule)
    if batched != pair_batched or len(first) != len(second):
        shapes = [f"a batch of {len(b)}" if is_batch else "one sentence"
                  for b, is_batch in ((first, batched), (second, pair_batched))]
        raise ValueError(f"text is {shapes[0]} and text_pair {shapes[1]}: give one second sentence for every first one")
    return first, second, batched


def _sentence_length(alignment_row: tuple[list[str], int, bool]) -> int:
    """The tokens of one encoded sentence: its words kept, and its <S> and </S> when added."""
    words, _, special = alignment_row
    return len(words) + (2 if special else 0)


def _feature_columns(encoded_inputs: Any) -> tuple[dict[str, list], bool | None]:
    """`pad()` input -> (columns by key, whether it is a batch; None for a dict, decided from its input_ids)."""
    if isinstance(encoded_inputs, (list, tuple)):
        if not encoded_inputs:
            raise ValueError("pad() got an empty list of features")
        for i, feature in enumerate(encoded_inputs):
            if not isinstance(feature, Mapping):
                raise TypeError(f"pad() feature {i} must be a dict, got {type(feature).__name__}")
        keys = list(encoded_inputs[0].keys())
        for i, feature in enumerate(encoded_inputs):
            if set(feature.keys()) != set(keys):
                raise ValueError(
                    f"pad() feature {i} has keys {sorted(feature)}, feature 0 has {sorted(keys)}"
                )
        columns, batched = {k: [f[k] for f in encoded_inputs] for k in keys}, True
    elif isinstance(encoded_inputs, Mapping):
        columns, batched = dict(encoded_inputs.items()), None
    else:
        raise TypeError(f"pad() expects a list of dicts or a dict, got {type(encoded_inputs).__name__}")
    if "input_ids" not in columns:
        raise ValueError(f"pad() needs input_ids among the features, got keys {sorted(columns)}")
    return columns, batched


def _token_level_keys(columns: dict, lengths: list[int], return_attention_mask: bool) -> list[str]:
    """The columns `pad()` pads along the token axis; adds or drops `attention_mask` as asked and keeps `labels`
    token-level only when every example has one label per token."""
    if return_attention_mask and "attention_mask" not in columns:
        columns["attention_mask"] = [[1] * n for n in lengths]
    if not return_attention_mask:
        columns.pop("attention_mask", None)
    keys = [key for key in TOKEN_PAD_VALUES if key != "labels" and key in columns]
    if "labels" in columns:
        labels = [to_list(x) for x in columns["labels"]]
        if all(isinstance(x, list) and len(x) == n for x, n in zip(labels, lengths, strict=True)):
            columns["labels"] = labels
            keys.append("labels")
    return keys


def _words_limit(
    truncation_strategy: TruncationStrategy, max_length: int | None, add_special_tokens: bool
) -> int | None:
    """How many words a sentence keeps under truncation (None: all), leaving room for the added <S> and </S>."""
    if truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
        return None
    if truncation_strategy == TruncationStrategy.ONLY_SECOND:
        raise ValueError("truncation='only_second' needs a pair of sequences; ElmoTokenizer encodes one")
    limit = max_length - (2 if add_special_tokens else 0)
    if limit < 0:
        raise ValueError(f"max_length={max_length} leaves no room for <S> and </S>; use max_length >= 2")
    return limit


def _pair_limits(
    strategy: TruncationStrategy, max_length: int | None, add_special_tokens: bool,
    first: list[list[str]], second: list[list[str]],
) -> list[tuple[int | None, int | None]]:
    """How many words each sentence of each pair keeps ((None, None): all), so that the pair's tokens, both
    sentences' <S> and </S> included, are at most `max_length`: transformers' strategies for pairs."""
    if strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
        return [(None, None)] * len(first)
    room = max_length - (4 if add_special_tokens else 0)
    if room < 0:
        raise ValueError(f"max_length={max_length} leaves no room for the <S> and </S> of both sentences of a pair; "
                         "use max_length >= 4")
    limits = []
    for i, (a, b) in enumerate(zip(map(len, first), map(len, second))):
        over = a + b - room
        if over <= 0:
            limits.append((None, None))
        elif strategy == TruncationStrategy.LONGEST_FIRST:
            # transformers' rule: words go from the longer sentence until both are as long, then from each in turn,
            # the second first (a, b >= over // 2 here, since a + b > room >= 0)
            even = min(abs(a - b), over)
            a, b = (a - even, b) if a > b else (a, b - even)
            limits.append((a - (over - even) // 2, b - (over - even + 1) // 2))
        else:
            cut = 0 if strategy == TruncationStrategy.ONLY_FIRST else 1
            kept = (a, b)[cut] - over
            if kept < 0:
                raise ValueError(
                    f"max_length={max_length} is too short for truncation={strategy.value!r}: the "
                    f"{('second', 'first')[cut]} sentence of pair {i} alone has {(b, a)[cut]} words "
                    "(truncation='longest_first' cuts both)"
                )
            limits.append((kept, None) if cut == 0 else (None, kept))
    return limits


def _target_of(
    strategy: PaddingStrategy, lengths: list[int], max_length: int | None, pad_to_multiple_of: int | None
) -> int | None:
    """The padded number of tokens under a padding strategy (None: no padding)."""
    if strategy == PaddingStrategy.LONGEST:
        return padded_length(max(lengths), pad_to_multiple_of)
    if strategy == PaddingStrategy.MAX_LENGTH:
        return padded_length(max_length, pad_to_multiple_of)
    return None


def _tensor_length(lengths: list[int], target: int | None) -> int:
    """The number of tokens of a tensor batch: the padded length, or the common length when not padding."""
    if target is None:
        if len(set(lengths)) > 1:
            raise ValueError(
                f"Sentences have different numbers of tokens ({min(lengths)}..{max(lengths)}): "
                "pass padding=True to return tensors"
            )
        return lengths[0]
    if max(lengths) > target:
        i = lengths.index(max(lengths))
        raise ValueError(
            f"Sentence {i} has {lengths[i]} tokens, more than max_length={target}: pass truncation=True"
        )
    return target


def _index_tensor(sequences: list[list[int]], target: int) -> torch.Tensor:
    """Cache indices padded to `target` tokens, as a `[batch, target]` tensor (numpy reads the lists fastest)."""
    padded = [s + [CACHED_PAD] * (target - len(s)) for s in sequences]
    return torch.from_numpy(np.array(padded, dtype=np.int64).reshape(len(padded), target))


def _token_outputs(
    wanted: dict[str, bool | None],
    lengths: list[int],
    target: int | None,
    special: tuple[bool, list[int] | None],
    vocab_rows: list[list[int]] | None,
    tensor_type: TensorType | None,
) -> dict[str, Any]:
    """Every output besides `input_ids`, built once for tensors and lists alike: each depends only on the
    row lengths (and the vocabulary ids), on a `[batch, width]` grid that lists then cut back to each
    row's length (padded to `target` when padding). `special`: (whether `<S>`/`</S>` were added, the lengths of
    the first sentences of pairs or None)."""
    add_special_tokens, first_lengths = special
    n = np.array(lengths, dtype=np.int64).reshape(-1, 1)
    width = max(lengths) if target is None else max(target, *lengths)
    position = np.arange(width)
    real = position < n
    # where the second sentence of a pair starts (the end of the row for single sentences)
    start = n if first_lengths is None else np.array(first_lengths, dtype=np.int64).reshape(-1, 1)
    grids: dict[str, np.ndarray | None] = {}
    if wanted["attention_mask"]:
        grids["attention_mask"] = real
    if wanted["token_type_ids"]:
        grids["token_type_ids"] = real & (position >= start)
    if wanted["special_tokens_mask"]:
        ends = (position == 0) | (position == n - 1) | (position == start - 1) | (position == start)
        grids["special_tokens_mask"] = ~real | (ends & real if add_special_tokens else False)
    if wanted["length"]:
        grids["length"] = None  # the lengths themselves, not a grid
    if vocab_rows is not None:
        padded = [ids + [LABEL_PAD_ID] * (width - len(ids)) for ids in vocab_rows]
        grids["vocab_ids"] = np.array(padded, dtype=np.int64).reshape(len(lengths), width)

    if tensor_type is not None:
        return {
            key: torch.tensor(lengths, dtype=torch.int64)
            if grid is None
            else torch.from_numpy(grid.astype(np.int64))
            for key, grid in grids.items()
        }
    keep = lengths if target is None else [max(k, target) for k in lengths]
    return {key: list(lengths) if grid is None else _grid_rows(grid, keep) for key, grid in grids.items()}


def _grid_rows(grid: np.ndarray, keep: list[int]) -> list[list[int]]:
    """The rows of a `[batch, width]` grid as lists, row i cut to `keep[i]` values."""
    grid = grid.astype(np.int64)
    if all(k == grid.shape[1] for k in keep):
        return grid.tolist()
    return [grid[i, :k].tolist() for i, k in enumerate(keep)]


def _tensor_type(return_tensors: str | TensorType | None) -> TensorType | None:
    if return_tensors is None:
        return None
    tensor_type = TensorType(return_tensors)
    if tensor_type not in (TensorType.PYTORCH, TensorType.NUMPY):
        raise ValueError(f"ElmoTokenizer returns 'pt' or 'np' tensors, got return_tensors={return_tensors!r}")
    return tensor_type


def _contains_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and isinstance(value[0], torch.Tensor)


def _is_batch_of_sentences(ids: list) -> bool:
    """True for `[batch, tokens, width]` nested lists, False for one sentence `[tokens, width]`."""
    for item in ids:
        if isinstance(item, list) and item:
            return isinstance(item[0], list)
    return bool(ids)  # [] is one empty sentence, [[], []] a batch of empty sentences
