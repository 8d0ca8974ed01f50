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
`word_split` is a name registered in `WORD_SPLITTERS` (`word_splits_elmo.py`): `"punctuation"` (default: PTB-like words,
one token per CJK ideograph or kana, never cutting a user-perceived character such as an emoji sequence), `"whitespace"`
(`str.split()`, for text that is already tokenized, such as PTB or the 1B Word Benchmark the published models were
trained on), `"jieba"` (Chinese word segmentation, the optional extra `elmo-hf[zh]`) or one registered with
`WORD_SPLITTERS.register`; or any function `str -> list[str]`. It is saved in tokenizer_config.json and used again after
`from_pretrained`. Pre-split words (`is_split_into_words=True`) are used verbatim, one token per word.

Encoding a batch
----------------
Text -> word lists (`split_words`) -> the tokenizer's cached rows (truncated, with the added `<S>`/`</S>`) ->
character ids `[batch, tokens, 50]`, padded on the right; every other output (`attention_mask`,
`special_tokens_mask`, `vocab_ids`, ...) depends only on each sentence's length and is built on one grid. The
output is an `ElmoBatchEncoding`, which also aligns token positions with the input words (`word_ids`).

The files of the tokenizer (they travel together), one concept each
--------------------------------------------------------------------
this file (`ElmoTokenizer`: rows, vocabularies, decoding, and `__call__`/`pad`, which drive the others),
`text_inputs_elmo.py` (what it accepts as text, turned into word lists), `word_splits_elmo.py` (splitting text into
words), `truncation_elmo.py` (which words a sentence or a pair keeps), `row_cache_elmo.py` (the thread-locked cache
of rows), `padding_elmo.py` (padding, shared with the collators), `batch_encoding_elmo.py` (`ElmoBatchEncoding`: the
other outputs and the alignment of positions with words and characters) and `word_vocab_elmo.py` (the optional word
vocabulary of language-model targets). Folders saved by earlier releases carry the files of their time, and load
with their own copies.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy
from transformers.utils import TensorType

from .batch_encoding_elmo import (
    ElmoBatchEncoding,
    offsets_output,
    position_outputs,
    sentence_length,
    sentence_sources,
)
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
from .padding_elmo import (
    check_character_rows,
    contains_tensor,
    feature_columns,
    is_batch_of_sentences,
    pad_character_batch,
    padded_target,
    tensor_length,
    to_list,
    token_level_keys,
)
from .row_cache_elmo import CACHED_BOS, CACHED_EOS, EncodingState, RowCache, reachable_by_name
from .text_inputs_elmo import as_pair_batch, check_word, refuse_unsupported, tensor_type_of
from .truncation_elmo import kept_spans, windows
from .word_splits_elmo import CJK_CHARACTER, CUSTOM_SPLIT_PREFIX, check_saved_split, split_name, split_words
from .word_vocab_elmo import (
    BOS_TOKEN,
    EOS_TOKEN,
    PAD_TOKEN,
    VOCAB_FILES_NAMES,
    WordVocabulary,
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
        check_saved_split(word_split)
        if (
            isinstance(max_characters_per_token, bool)
            or not isinstance(max_characters_per_token, int)
            or max_characters_per_token < 3
        ):
            raise ValueError(
                "max_characters_per_token must be an integer >= 3 (begin, one byte, end), got "
                f"{max_characters_per_token!r}")
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
        self._init_cache()  # after the rows' settings, before the base class (which may encode)

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
        self._word_vocab = None if word_vocab is None else WordVocabulary(word_vocab)

    @property
    def word_vocab(self) -> list[str] | None:
        """The word vocabulary of the language-model softmax (`<S>`, `</S>`, `<UNK>`, ...), or None."""
        return None if self._word_vocab is None else list(self._word_vocab.tokens)

    @property
    def word_vocab_size(self) -> int:
        """Size of the word vocabulary (`ElmoConfig.vocab_size`), 0 without one."""
        return 0 if self._word_vocab is None else len(self._word_vocab.tokens)

    @property
    def unk_word_id(self) -> int:
        return self._require_word_vocab("unk_word_id").unk_id

    def _require_word_vocab(self, what: str) -> WordVocabulary:
        if self._word_vocab is None:
            raise ValueError(
                f"{what} needs a word vocabulary: ElmoTokenizer(vocab_file=...) or ElmoTokenizer.from_corpus(...)"
            )
        return self._word_vocab

    def convert_tokens_to_vocab_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Word-vocabulary ids of tokens (unknown -> the id of `<UNK>`); `<S>`/`</S>` get their own ids."""
        vocab = self._require_word_vocab("convert_tokens_to_vocab_ids")
        return vocab.ids_of([tokens])[0] if isinstance(tokens, str) else vocab.ids_of(tokens)

    def convert_vocab_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """Inverse of `convert_tokens_to_vocab_ids` (e.g. to read language-model predictions)."""
        tokens = self._require_word_vocab("convert_vocab_ids_to_tokens").tokens
        return tokens[ids] if isinstance(ids, int) else [tokens[int(i)] for i in ids]

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
        return (write_vocab(self._word_vocab.tokens, path),)

    @property
    def is_fast(self) -> bool:
        """True. Libraries read `is_fast` as "gives `offset_mapping`, `word_ids()` and windows with
        `overflow_to_sample_mapping`" (flair takes a token's vectors by `word_ids()` only then; transformers' pipelines
        and whole-word masking ask it before asking for offsets), and this tokenizer gives all of them itself. It has no
        Rust backend (`backend_tokenizer`): transformers' code that needs one asks by class, not by this flag."""
        return True

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

    def add_tokens(self, new_tokens, special_tokens: bool = False, **kwargs) -> int:
        """Adds nothing and returns 0: every word is encoded from its bytes, so any token is one this tokenizer has
        (flair adds its context separator this way; transformers' `add_special_tokens` still records special ones)."""
        return 0

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
        """Character ids -> names (an int or a list of ints), or rows of 50 ids -> words, a padding row `<pad>` (one
        string per row, as transformers' tokenizers give one per id: spaCy counts them). `skip_special_tokens`
        leaves out padding and the `<S>`/`</S>` the tokenizer adds."""
        ids = to_list(ids)
        if isinstance(ids, int):
            return self._convert_id_to_token(ids)
        if ids and isinstance(ids[0], list):
            words = [(row, self._row_to_token(row)) for row in ids]
            if skip_special_tokens:
                return [word for row, word in words
                        if word is not None and not (word in (BOS_TOKEN, EOS_TOKEN) and self._is_boundary_row(row))]
            return [PAD_TOKEN if word is None else word for _, word in words]
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
        rows = [row for row in ids if any(row)]  # padding rows dropped
        return " ".join(self.convert_ids_to_tokens(rows, skip_special_tokens=skip_special_tokens)) if rows else ""

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
        refuse_unsupported(text, text_target, text_pair_target)
        if kwargs:
            logger.warning("ElmoTokenizer ignores the keyword arguments %s", sorted(kwargs))
        self._check_padding_side(padding_side)
        tensor_type = tensor_type_of(return_tensors)
        vocab = self._require_word_vocab("return_vocab_ids=True") if return_vocab_ids else None
        batch, pair_batch, batched = as_pair_batch(text, text_pair, is_split_into_words, self.word_split)
        padding_strategy, truncation_strategy, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding,
            truncation=truncation,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            verbose=verbose,
        )
        lengths = [len(words) for words in batch], None if pair_batch is None else list(map(len, pair_batch))
        if return_overflowing_tokens:  # rows: windows of each sample, as transformers' fast tokenizers give them
            rows = windows(truncation_strategy, max_length, stride, self.truncation_side == "left",
                           add_special_tokens, *lengths)
        else:
            spans = kept_spans(self.truncate_sequences, truncation_strategy, max_length, add_special_tokens, *lengths)
            rows = [(i, *kept) for i, kept in enumerate(spans)]
        samples = [sample for sample, _, _ in rows]
        input_ids, lengths, target, alignments = self._encode_words(
            ([batch[i] for i in samples], None if pair_batch is None else [pair_batch[i] for i in samples]),
            [(first, second) for _, first, second in rows], add_special_tokens,
            (padding_strategy, max_length, pad_to_multiple_of), tensor_type,
            verbose and truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE,
        )
        batched = batched or return_overflowing_tokens  # windows are rows of a batch, also of one text

        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        wanted = {
            "attention_mask": return_attention_mask,
            "token_type_ids": pair_batch is not None if return_token_type_ids is None else return_token_type_ids,
            "special_tokens_mask": return_special_tokens_mask,
            "length": return_length,
        }
        vocab_rows = None if vocab is None else vocab.rows(alignments)
        first_lengths = None if pair_batch is None else [sentence_length(row) for row in alignments[0]]
        data = {
            "input_ids": input_ids,
            **position_outputs(wanted, lengths, target, (add_special_tokens, first_lengths), vocab_rows, tensor_type),
        }
        if return_overflowing_tokens:
            data["overflow_to_sample_mapping"] = samples if tensor_type is None else torch.tensor(samples)
        if tensor_type == TensorType.NUMPY:
            data = {k: v.numpy() for k, v in data.items()}
        if not batched and tensor_type is None:
            data = {k: v[0] for k, v in data.items()}
        encoding = ElmoBatchEncoding(data, alignment=alignments[0], pair_alignment=alignments[1],
                                     batched=batched or tensor_type is not None, samples=samples,
                                     sources=sentence_sources(text, text_pair, is_split_into_words, batch, pair_batch))
        if return_offsets_mapping:
            offsets = [encoding.offsets(i) for i in range(len(samples))]
            encoding["offset_mapping"] = offsets_output(offsets, tensor_type, batched)
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
        spans: list[tuple[tuple[int, int], tuple[int, int] | None]],
        add_special_tokens: bool,
        padding: tuple[PaddingStrategy, int | None, int | None],
        tensor_type: TensorType | None,
        warn_if_too_long: bool,
    ) -> tuple[Any, list[int], int | None, tuple[list, list | None]]:
        """The character ids of a batch of word lists (or of pairs of them: `batches` = (first sentences, second
        sentences or None), each pair's sentences one after the other), the words `spans` keeps of each, padded as
        `padding` = (strategy, max_length, pad_to_multiple_of) says, with each row's length, the padded length (None:
        not padded) and the alignments of positions with words (of the first sentences, of the second or None)."""
        first, second = batches
        cache = self._encoding_state().rows
        with cache.lock:  # the cache is shared by every thread that uses this tokenizer
            cache.clear_if_full()
            sequences, alignment = self._cache_sequences(first, [a for a, _ in spans], add_special_tokens)
            pair_alignment = None
            if second is not None:
                seconds, pair_alignment = self._cache_sequences(second, [b for _, b in spans], add_special_tokens)
                sequences = [a + b for a, b in zip(sequences, seconds)]
            lengths = [len(s) for s in sequences]
            if warn_if_too_long:
                self._warn_if_too_long(lengths)
            target = padded_target(padding[0], lengths, padding[1], padding[2])
            if tensor_type is None:
                input_ids = cache.nested_lists(sequences, target)
            else:
                target = tensor_length(lengths, target)
                input_ids = cache.tensor(sequences, target)
        return input_ids, lengths, target, (alignment, pair_alignment)

    def _cache_sequences(
        self, batch: list[list[str]], spans: list[tuple[int, int]], add_special_tokens: bool
    ) -> tuple[list[list[int]], list[tuple[list[str], int, bool]]]:
        """Each sentence's cache indices (the words of its span, then the added `<S>`/`</S>`) and its alignment:
        (words kept, index of the first kept word, whether `<S>`/`</S>` were added). Lock held."""
        sequences, alignment = [], []
        indices_of = self._encoding_state().rows.indices
        for words, (start, stop) in zip(batch, spans, strict=True):
            if (start, stop) != (0, len(words)):
                words = words[start:stop]
            indices = indices_of(words)
            sequences.append([CACHED_BOS, *indices, CACHED_EOS] if add_special_tokens else indices)
            alignment.append((words, start, add_special_tokens))
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
        columns, batched = feature_columns(encoded_inputs)
        if return_tensors is None and contains_tensor(columns["input_ids"]):
            return_tensors = "pt"
        tensor_type = tensor_type_of(return_tensors)
        ids_column = to_list(columns["input_ids"])
        if batched is None:  # a dict: one sentence ([tokens, 50]) or a batch ([batch, tokens, 50])
            batched = is_batch_of_sentences(ids_column)
        if not batched:
            ids_column = [ids_column]
            columns = {k: [v] for k, v in columns.items()}
        columns["input_ids"] = ids_column
        check_character_rows(ids_column, self.row_width)
        lengths = [len(seq) for seq in ids_column]
        target = self._pad_target(lengths, padding, max_length, pad_to_multiple_of, tensor_type, verbose)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        token_keys = token_level_keys(columns, lengths, return_attention_mask)
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

    def _pad_target(
        self, lengths: list[int], padding, max_length, pad_to_multiple_of, tensor_type, verbose
    ) -> int | None:
        """The padded number of tokens (None: no padding); tensors need one length for every example."""
        padding_strategy, _, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, max_length=max_length, verbose=verbose
        )
        target = padded_target(padding_strategy, lengths, max_length, pad_to_multiple_of)
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

    # ----- the row cache (`row_cache_elmo.py`) ---------------------------------------------------------------------
    # All mutable state lives in `self._encoding` (`EncodingState`), which pickles, copies and hashes as an empty one,
    # made afresh on first use: `Dataset.map` fingerprints do not change as the cache fills, and pickles and copies
    # have their own. Not an attribute named `cache`: datasets before 4.7 replaces that one with `{}` on the live
    # tokenizer when it hashes it, which took the rows away mid-use (`KeyError: 'rows'`, issue 54).
    def _init_cache(self) -> None:
        self._encoding = EncodingState(
            RowCache(self._new_row, self._boundary_rows(), self.row_width, self.cache_size, self._ROW_DTYPE))

    def _encoding_state(self) -> EncodingState:
        """The tokenizer's `EncodingState`, made afresh where it is an empty one (in a pickle or a copy)."""
        state = self.__dict__.get("_encoding")
        if state is None or state.rows is None:
            self._init_cache()
            state = self._encoding
        return state

    def _new_row(self, word: str) -> list[int]:
        """The row of a word met for the first time (the cache's `make_row`)."""
        row = self._token_row(word)
        if row[-1] == EOW_ID:  # no room left in the row: the word may have been cut
            self._warn_if_cut_cjk(word)
        return row

    def _warn_once(self, key: str, message: str, *args) -> None:
        warned = self._encoding_state().warned
        if key not in warned:
            warned.add(key)
            logger.warning(message, *args)

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

reachable_by_name(__name__)  # datasets' fingerprint names this class, even as remote code (row_cache_elmo.py)
