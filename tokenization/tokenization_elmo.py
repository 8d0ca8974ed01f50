"""Character tokenizer of ELMo (Peters et al. 2018) for Hugging Face transformers.

This file travels to the Hub as remote code, copied flat next to the model files: it imports only the standard
library, numpy (a dependency of transformers), torch and transformers.

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

The files of the tokenizer (they travel together)
-------------------------------------------------
`word_splits_elmo.py` (splitting text into words), `word_vocab_elmo.py` (the optional word vocabulary of
language-model targets), this file (the tokenizer: rows, vocabularies, decoding, the cache of rows),
`batch_encoding_elmo.py` (encoding and padding a batch) and `padding_elmo.py` (the padding shared with the
collators).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from transformers import PreTrainedTokenizer

from .batch_encoding_elmo import ElmoEncodingMixin, check_word, is_batch_of_sentences
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
from .padding_elmo import to_list
from .word_splits_elmo import (
    CJK_CHARACTER,
    CUSTOM_SPLIT_PREFIX,
    WORD_SPLITTERS,
    WordSplitError,
    check_word_split,
    is_import_path,
    split_name,
    split_words,
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


class ElmoTokenizer(ElmoEncodingMixin, PreTrainedTokenizer):
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
            `check_word_split(name, allow_import=True)`, a command's `--split name`, or
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
    model_input_names = ["input_ids", "attention_mask"]
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
        return [self._token_row(check_word(t, i)) for i, t in enumerate(tokens)]

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
        if is_batch_of_sentences(ids):
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
        if pair:
            raise ValueError("ElmoTokenizer encodes single sentences, not pairs")
        return 2

    def build_inputs_with_special_tokens(self, token_ids_0: list, token_ids_1: list | None = None) -> list:
        """Rows of a sentence -> `[<S> row] + rows + [</S> row]`."""
        if token_ids_1 is not None:
            raise ValueError("ElmoTokenizer encodes single sentences, not pairs")
        bos, eos = self._boundary_rows()
        return [bos, *token_ids_0, eos]

    def get_special_tokens_mask(
        self, token_ids_0: list, token_ids_1: list | None = None, already_has_special_tokens: bool = False
    ) -> list[int]:
        if token_ids_1 is not None:
            raise ValueError("ElmoTokenizer encodes single sentences, not pairs")
        if already_has_special_tokens:
            return [
                1 if not any(row) or self._is_boundary_row(list(row)) else 0 for row in to_list(token_ids_0)
            ]
        return [1] + [0] * len(token_ids_0) + [1]

    # ----- cache of rows -----------------------------------------------------------------------------------------
    # All mutable state lives in the dict `self.cache`: `datasets` blanks an attribute of that name when it hashes a
    # tokenizer, so `Dataset.map` fingerprints do not change as the cache fills; pickles and copies drop it.
    def _init_cache(self) -> None:
        # Indices 0, 1, 2 are reserved (CACHED_PAD, CACHED_BOS, CACHED_EOS in batch_encoding_elmo.py): padding, and
        # the <S>/</S> added by the tokenizer. A literal "<S>" in the input gets its own index with the same row.
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
