"""Fast ELMo tokenizer: `ElmoTokenizerFast`, a `PreTrainedTokenizerFast` giving exactly `ElmoTokenizer`'s outputs.

Why it exists: code written for transformers' fast tokenizers asks for the class, not for the outputs
(`run_qa.py`, `run_ner.py` and the other example scripts stop at `isinstance(tokenizer, PreTrainedTokenizerFast)`).
`ElmoTokenizer` gives offsets, `word_ids()` and windows itself, but is no such instance.

How it works: the `tokenizers` library does what it does for every fast tokenizer, on words instead of word pieces:
splitting (a pre-tokenizer: the word split), the offsets, `word_ids`, `sequence_ids`, the added `<S>`/`</S>` (a
template post-processor), truncation, the overflowing windows with their stride, and the padding. Its model is a
`WordLevel` over the 262 character names (the scalar vocabulary of `ElmoTokenizer`), so the `tokenizers` ids are
only placeholders: every word becomes `<bow>`. This class then replaces each position's id by its row of 50
character ids, read from the word's text (the input's characters at the position's offsets, or the pre-split word),
through a cache of rows like `ElmoTokenizer`'s. So `input_ids` is `[batch, tokens, 50]` as from `ElmoTokenizer`, and
the `BatchEncoding` carries the `tokenizers` encodings (`word_ids()`, `sequence_ids()`, `char_to_token()`, ...).
A plain call (no truncation, windows nor offsets) is encoded by `ElmoTokenizer` itself, at its speed, and its
`tokenizers` encodings are made when first asked for (`ElmoTokenizerFast._plain`).

The word split: `"whitespace"` is a `tokenizers` pre-tokenizer (a split on exactly the characters `str.isspace()`
accepts); every other split (`"punctuation"`, `"jieba"`, a registered or passed function) runs in Python as a custom
pre-tokenizer, the same function `ElmoTokenizer` calls, cutting the text at the words' spans. A split that changes
the words it returns (lower-cases them) is refused in one line: the words are read from the text.

A custom pre-tokenizer cannot be written to `tokenizer.json` nor pickled: the backend tokenizer is rebuilt from
`word_split` when the tokenizer is loaded, unpickled or copied, and no `tokenizer.json` is saved. It lives in
`self._fast` (`FastState`), which pickles, copies and hashes as an empty one. Not an attribute named `cache`:
`datasets` before 4.7 replaced that attribute of the live tokenizer with `{}` when it fingerprinted one.

What differs from `ElmoTokenizer`, both as transformers' own fast and slow tokenizers differ: a pair cut by
`truncation="longest_first"` without windows gives an odd word to the second sentence (the `tokenizers` rule, which
`ElmoTokenizer` follows only for `return_overflowing_tokens=True`); a `max_length` that leaves nothing of the
sentence `only_first`/`only_second` cuts is refused. Text with lone surrogates: the offsets count the characters
without them (they cannot reach the `tokenizers` library).

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library,
numpy, torch, transformers, tokenizers and its siblings.
"""

from __future__ import annotations

import gc
import logging
import re
import threading
from collections.abc import Sequence

import torch
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
from transformers import BatchEncoding, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy
from transformers.utils import TensorType

from .batch_encoding_elmo import offsets_output
from .character_ids import BOS_CHAR_ID, MAX_CHARACTERS_PER_TOKEN
from .padding_elmo import LABEL_PAD_ID, padded_target, tensor_length
from .row_cache_elmo import CACHED_PAD, reachable_by_name
from .text_inputs_elmo import as_pair_batch, refuse_unsupported, tensor_type_of
from .tokenization_elmo import ElmoTokenizer

# Imported by tokenization_elmo only: named here too, because transformers 4.x copies a local folder's remote code one
# level of relative imports deep (a file that only tokenization_elmo imports would be missing beside this one).
from .truncation_elmo import windows  # noqa: F401, E402
from .word_splits_elmo import CUSTOM_SPLIT_PREFIX, SPLITS_THAT_KEEP_WORDS, split_name, split_words, word_spans
from .word_vocab_elmo import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, VOCAB_FILES_NAMES

logger = logging.getLogger(__name__)

# Every word's placeholder id in the `tokenizers` encodings (its row is made from its text).
_WORD_TOKEN = "<bow>"
_SURROGATES = re.compile("[\ud800-\udfff]")
# Exactly what `str.isspace()` accepts (the "whitespace" split is `str.split()`), written out: working it out over
# every code point took 0.24 s at each import. tests/test_tokenizer_fast.py holds it equal to this Python's.
_PYTHON_SPACES = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                  "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# A pre-split word the `tokenizers` library would drop (empty, or only lone surrogates) travels as this one
# character; its row and offsets are the word's own.
_EMPTY_WORD_STANDIN = " "


class _WordSplitPreTokenizer:
    """A `tokenizers` custom pre-tokenizer running a word split of `word_splits_elmo` (the one `ElmoTokenizer`
    runs) and cutting the text at its words' spans, so that the offsets are the words' characters."""

    def __init__(self, word_split):
        self.word_split = word_split

    def pre_tokenize(self, pretok) -> None:
        pretok.split(self._split)

    def _split(self, _index: int, normalized) -> list:
        text = str(normalized)
        words = split_words(text, self.word_split)
        spans, found_all = word_spans(text, words)
        if not found_all:
            raise ValueError(
                f"word_split {split_name(self.word_split)!r} changed some words of the text; ElmoTokenizerFast reads "
                "the words from the text: use ElmoTokenizer (use_fast=False) for this split"
            )
        return [normalized[start:end] for start, end in spans]


def _backend(word_split, pre_split: bool, vocab: dict[str, int]) -> Tokenizer:
    """The `tokenizers` pipeline: the word split (none for pre-split words, which are used as they are), a
    `WordLevel` model over the character names, and `<S>`/`</S>` around each sentence (token type 1 on the second
    sentence of a pair, its `<S>` and `</S>` included)."""
    backend = Tokenizer(models.WordLevel(dict(vocab), unk_token=_WORD_TOKEN))
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A {EOS_TOKEN}",
        pair=f"{BOS_TOKEN}:0 $A:0 {EOS_TOKEN}:0 {BOS_TOKEN}:1 $B:1 {EOS_TOKEN}:1",
        special_tokens=[(BOS_TOKEN, vocab[BOS_TOKEN]), (EOS_TOKEN, vocab[EOS_TOKEN])],
    )
    if pre_split:
        return backend
    if word_split == "whitespace":
        backend.pre_tokenizer = pre_tokenizers.Split(Regex(f"[{_PYTHON_SPACES}]+"), behavior="removed")
    else:
        backend.pre_tokenizer = pre_tokenizers.PreTokenizer.custom(_WordSplitPreTokenizer(word_split))
    return backend


class FastState(dict):
    """The per-process state of an `ElmoTokenizerFast` (its `tokenizers` backends, the lock, the row cache, the
    `ElmoTokenizer` it hands decoding and padding to): pickles, copies and hashes as an empty one, which the tokenizer
    builds again from its settings."""

    def __reduce__(self):
        return (FastState, ())


class ElmoTokenizerFast(PreTrainedTokenizerFast):
    r"""ELMo character tokenizer on the `tokenizers` library: the outputs of `ElmoTokenizer`, from a
    `PreTrainedTokenizerFast` (see the module docstring for how, and for what differs).

    Takes the arguments of `ElmoTokenizer` (`vocab_file`, `word_vocab`, `word_split`, `max_characters_per_token`,
    `cache_size`), loads any folder either class saved, and saves one that `AutoTokenizer` loads as this class with
    `trust_remote_code=True` (tokenizer_config.json's `auto_map` names both classes; transformers takes the fast
    one, which 5.x always does and 4.x does with `use_fast=True`). Its call takes `ElmoTokenizer`'s keyword
    arguments, `return_vocab_ids` included; decoding, `pad()` (the data collators), the word vocabulary and the
    scalar character vocabulary are `ElmoTokenizer`'s own, from one it holds.
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    padding_side = "right"
    slow_tokenizer_class = ElmoTokenizer

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
        # Built from word_split, never from files: what transformers' loading passes for them is dropped.
        for key in ("tokenizer_file", "tokenizer_object", "vocab", "merges", "split_special_tokens"):
            kwargs.pop(key, None)
        self._fast = FastState()  # before anything reads `_tokenizer`, which lives in it
        # ElmoTokenizer checks every argument and keeps the word vocabulary, decoding and pad()
        slow = ElmoTokenizer(vocab_file=vocab_file, word_vocab=word_vocab, word_split=word_split,
                             max_characters_per_token=max_characters_per_token, cache_size=cache_size,
                             bos_token=bos_token, eos_token=eos_token, pad_token=pad_token,
                             padding_side=kwargs.get("padding_side", "right"))
        self._fast["slow"] = slow  # what the methods delegated to it need, also while the base class initialises
        self._word_vocab_tokens = slow.word_vocab
        self.max_characters_per_token = max_characters_per_token
        self.cache_size = cache_size
        super().__init__(
            tokenizer_object=_backend(word_split, True, slow.get_vocab()),
            word_split=split_name(word_split),  # transformers deep-copies and saves these arguments
            max_characters_per_token=max_characters_per_token,
            cache_size=cache_size,
            bos_token=bos_token,
            eos_token=eos_token,
            pad_token=pad_token,
            **kwargs,
        )
        self.word_split = word_split  # after the base class, which refuses an argument named like a function
        self._init_cache(slow)

    # ----- per-process state: the backends, the rows, the slow tokenizer -------------------------------------------
    # `self._fast` is a `FastState`: it hashes and pickles as an empty one (datasets' fingerprints do not change as the
    # rows fill), and the
    # custom pre-tokenizer in it could not be pickled anyway; pickles and copies rebuild it from the settings.
    @property
    def _tokenizer(self) -> Tokenizer | None:
        return self._fast.get("backend")

    @_tokenizer.setter
    def _tokenizer(self, value: Tokenizer) -> None:
        self._fast["backend"] = value

    def _init_cache(self, slow: ElmoTokenizer | None = None) -> None:
        if slow is None:
            slow = ElmoTokenizer(word_vocab=self._word_vocab_tokens, word_split=self.word_split,
                                 max_characters_per_token=self.max_characters_per_token, cache_size=self.cache_size)
        vocab = slow.get_vocab()
        backends = {}
        for key, pre_split in (("backend", False), ("words_backend", True)):
            backend = _backend(self.word_split, pre_split, vocab)
            backend.add_special_tokens([BOS_TOKEN, EOS_TOKEN, PAD_TOKEN])  # in the vocabulary: no new ids
            backend.encode_special_tokens = True  # a literal "<S>" in the text is a word, as in ElmoTokenizer
            backends[key] = backend
        self._fast.update(
            backends,
            lock=threading.Lock(),
            slow=slow,
            rows=slow._encoding_state().rows,  # the slow tokenizer's rows: one cache, whichever path encodes
        )

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_fast", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._fast = FastState()
        self._init_cache()

    def update_post_processor(self) -> None:
        """The template of `<S>`/`</S>` is fixed by the ELMo format (transformers 5 rewrites it from
        `add_bos_token`/`add_eos_token` here)."""

    # ----- ElmoTokenizer's own: vocabularies, rows, decoding, padding ------------------------------------------------
    @property
    def _slow(self) -> ElmoTokenizer:
        return self._fast["slow"]

    @property
    def word_vocab(self) -> list[str] | None:
        return self._slow.word_vocab

    @property
    def word_vocab_size(self) -> int:
        return self._slow.word_vocab_size

    @property
    def unk_word_id(self) -> int:
        return self._slow.unk_word_id

    @property
    def row_width(self) -> int:
        return self._slow.row_width

    @property
    def vocab_size(self) -> int:
        return self._slow.vocab_size

    def get_vocab(self) -> dict[str, int]:
        return self._slow.get_vocab()

    def convert_tokens_to_vocab_ids(self, tokens):
        return self._slow.convert_tokens_to_vocab_ids(tokens)

    def convert_vocab_ids_to_tokens(self, ids):
        return self._slow.convert_vocab_ids_to_tokens(ids)

    def convert_tokens_to_char_ids(self, tokens):
        return self._slow.convert_tokens_to_char_ids(tokens)

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        return self._slow.convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        # transformers 4.x's asks the `tokenizers` backend's decoder, which this class has none of (the NER pipeline's
        # word aggregation calls it); 5.x's joined the words already
        return self._slow.convert_tokens_to_string(tokens)

    def decode(self, token_ids, skip_special_tokens: bool = False, **kwargs):
        return self._slow.decode(token_ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(self, sequences, skip_special_tokens: bool = False, **kwargs) -> list[str]:
        return self._slow.batch_decode(sequences, skip_special_tokens=skip_special_tokens)

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs) -> list[str]:
        """The words `text` is split into, with `<S>`/`</S>` if `add_special_tokens` (as `ElmoTokenizer.tokenize`)."""
        return self._slow.tokenize(text, add_special_tokens=add_special_tokens)

    def pad(self, encoded_inputs, *args, **kwargs):
        """`ElmoTokenizer.pad`: rows of character ids padded with zero rows (the data collators call it)."""
        return self._slow.pad(encoded_inputs, *args, **kwargs)

    def add_tokens(self, new_tokens, special_tokens: bool = False, **kwargs) -> int:
        """Adds nothing and returns 0, as `ElmoTokenizer`: every word is encoded from its bytes."""
        return 0

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return self._slow.save_vocabulary(save_directory, filename_prefix)

    def _save_pretrained(self, save_directory, file_names, legacy_format=None, filename_prefix=None):
        """The word vocabulary (`vocab.txt`) and no `tokenizer.json`: the backend is rebuilt from `word_split`,
        whose Python pre-tokenizer `tokenizers` cannot write."""
        return tuple(file_names) + tuple(self.save_vocabulary(str(save_directory), filename_prefix))

    def save_pretrained(self, save_directory, *args, **kwargs):
        """A `word_split` function is recorded by name, as `ElmoTokenizer.save_pretrained` records it (loading asks
        for the function again rather than splitting text another way)."""
        if not callable(self.word_split):
            return super().save_pretrained(save_directory, *args, **kwargs)
        function, name = self.word_split, split_name(self.word_split)
        if name.startswith(CUSTOM_SPLIT_PREFIX):
            logger.warning(
                "word_split is the function %s, which cannot be imported again by name: tokenizer_config.json "
                "records %r, and loading the tokenizer needs from_pretrained(path, word_split=...) with the "
                "same function", name[len(CUSTOM_SPLIT_PREFIX):], name)
        self.word_split = name  # what transformers writes to tokenizer_config.json
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.word_split = function

    # ----- encoding: the `tokenizers` encodings, then each position's row ------------------------------------------
    def __call__(
        self,
        text=None,
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
    ) -> BatchEncoding:
        """Encode as `ElmoTokenizer.__call__` does (the same inputs, keyword arguments and outputs); the
        `BatchEncoding` holds the `tokenizers` encodings, one per row (windows included)."""
        kwargs.pop("split_special_tokens", None)
        if kwargs.pop("tokenizer_kwargs", None):
            raise ValueError("tokenizer_kwargs is not supported by ElmoTokenizerFast: pass the arguments directly")
        refuse_unsupported(text, text_target, text_pair_target)
        if kwargs:
            logger.warning("ElmoTokenizerFast ignores the keyword arguments %s", sorted(kwargs))
        if (padding_side or self.padding_side) != "right":
            raise ValueError(f"ElmoTokenizerFast pads on the right only (the biLM reads </S> right after the last "
                             f"word), got {padding_side or self.padding_side!r}")
        tensor_type = tensor_type_of(return_tensors)
        if return_vocab_ids and self.word_vocab is None:
            raise ValueError("return_vocab_ids=True needs a word vocabulary: ElmoTokenizerFast(vocab_file=...)")
        padding_strategy, truncation_strategy, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, truncation=truncation, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
            verbose=verbose,
        )
        padding_settings = (padding_strategy, max_length, pad_to_multiple_of)
        if self._plain(truncation_strategy, max_length, return_overflowing_tokens, return_offsets_mapping):
            encoding = self._slow(
                text, text_pair, add_special_tokens=add_special_tokens, padding=padding_strategy,
                truncation=TruncationStrategy.DO_NOT_TRUNCATE, max_length=max_length,
                is_split_into_words=is_split_into_words, pad_to_multiple_of=pad_to_multiple_of,
                return_tensors=return_tensors, return_token_type_ids=return_token_type_ids,
                return_attention_mask=return_attention_mask, return_special_tokens_mask=return_special_tokens_mask,
                return_length=return_length, verbose=verbose, return_vocab_ids=return_vocab_ids,
            )
            # what the encodings are made from, as given now (the caller may reuse its lists)
            inputs = (_snapshot(text), _snapshot(text_pair), is_split_into_words)
            pending = self._pending_encodings(inputs, padding_settings, add_special_tokens)
            return ElmoFastBatchEncoding(encoding.data, n_sequences=encoding.n_sequences, pending=pending,
                                         slow_encoding=encoding)
        first, second, batched = as_pair_batch(text, text_pair, is_split_into_words, _whole_text)
        sources, inputs = _backend_inputs(first, second, is_split_into_words)
        backend = self._fast["words_backend" if is_split_into_words else "backend"]
        with self._fast["lock"]:  # the backend's truncation and padding are set for each call: one call at a time
            self._configure(backend, padding_settings, (truncation_strategy, stride), add_special_tokens,
                            second is not None)
            encodings = _encode(backend, inputs, add_special_tokens, is_split_into_words)
        rows = [(sample, e) for sample, top in enumerate(encodings)
                for e in ([top, *top.overflowing] if return_overflowing_tokens else [top])]
        columns = _columns([e for _, e in rows], [sources[0][s] for s, _ in rows],
                           None if sources[1] is None else [sources[1][s] for s, _ in rows], is_split_into_words)
        lengths = [sum(mask) for mask in columns["attention_mask"]]
        target = padded_target(padding_strategy, lengths, max_length, pad_to_multiple_of)
        data = {"input_ids": self._rows(columns["tokens"], lengths, target, tensor_type)}
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        wanted = {
            "attention_mask": return_attention_mask,
            "token_type_ids": second is not None if return_token_type_ids is None else return_token_type_ids,
            "special_tokens_mask": return_special_tokens_mask,
        }
        data.update((key, columns[key]) for key, on in wanted.items() if on)
        if return_length:
            data["length"] = lengths
        if return_vocab_ids:
            data["vocab_ids"] = [[LABEL_PAD_ID if token is None else i for token, i in
                                  zip(tokens, self.convert_tokens_to_vocab_ids([t or BOS_TOKEN for t in tokens]))]
                                 for tokens in columns["tokens"]]
        if return_overflowing_tokens:
            data["overflow_to_sample_mapping"] = [sample for sample, _ in rows]
        batched = batched or return_overflowing_tokens  # windows are rows of a batch, also of one text
        for key, value in data.items():
            if key != "input_ids" and tensor_type is not None:
                value = torch.tensor(value, dtype=torch.int64)
                data[key] = value.numpy() if tensor_type == TensorType.NUMPY else value
        if tensor_type == TensorType.NUMPY:
            data["input_ids"] = data["input_ids"].numpy()
        if return_offsets_mapping:
            data["offset_mapping"] = offsets_output(columns["offsets"], tensor_type, True)
        if not batched and tensor_type is None:
            data = {k: v[0] for k, v in data.items()}
        tokens = [[PAD_TOKEN if t is None else t for t in row] for row in columns["tokens"]]
        return ElmoFastBatchEncoding(data, encoding=[e for _, e in rows], n_sequences=1 if second is None else 2,
                                     tokens=tokens)

    # Plain calls (no truncation, windows nor offsets: what a model's forward pass and `datasets.map` mostly ask for)
    # take the slow tokenizer's path, whose outputs are the same by construction and tested equal, at its speed: the
    # `tokenizers` encoding and the reading of every position back in Python made this class 3-7x slower than
    # `ElmoTokenizer` on plain text. The `tokenizers` encodings are made when first asked for (`word_ids()`,
    # `encodings`, `char_to_token()`, ...), from the same inputs and padding. A word_split function is not taken this
    # way: the fast path refuses one that changes the words, the slow one accepts it.
    _plain_calls = True

    def _plain(self, truncation_strategy, max_length, overflowing: bool, offsets: bool) -> bool:
        no_truncation = truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None
        return (self._plain_calls and isinstance(self.word_split, str) and no_truncation and not overflowing
                and not offsets)

    def _pending_encodings(self, given: tuple, padding: tuple, add_special_tokens: bool):
        """The `tokenizers` encodings of a plain call, made when first asked for from its `(text, text_pair,
        is_split_into_words)`."""
        def encodings() -> list:
            text, text_pair, pre_split = given
            first, second, _ = as_pair_batch(text, text_pair, pre_split, _whole_text)
            _, inputs = _backend_inputs(first, second, pre_split)
            backend = self._fast["words_backend" if pre_split else "backend"]
            with self._fast["lock"]:
                self._configure(backend, padding, (TruncationStrategy.DO_NOT_TRUNCATE, 0), add_special_tokens,
                                second is not None)
                return _encode(backend, inputs, add_special_tokens, pre_split)
        return encodings

    def _configure(self, backend: Tokenizer, padding: tuple, truncation: tuple, add_special_tokens: bool,
                   pairs: bool) -> None:
        """Truncation and padding of the `tokenizers` backend for one call, refusing in one line what it would
        refuse with a panic or with the message of another tokenizer."""
        padding_strategy, max_length, pad_to_multiple_of = padding
        truncation_strategy, stride = truncation
        if truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
            backend.no_truncation()
        else:
            if not pairs and truncation_strategy == TruncationStrategy.ONLY_SECOND:
                raise ValueError("truncation='only_second' needs a pair of sequences; ElmoTokenizerFast encodes one")
            added = (4 if pairs else 2) if add_special_tokens else 0
            if max_length < added:
                what = "<S> and </S> of both sentences of a pair" if pairs else "<S> and </S>"
                raise ValueError(f"max_length={max_length} leaves no room for the {what}; use max_length >= {added}")
            if not isinstance(stride, int) or isinstance(stride, bool) or stride < 0:
                raise ValueError(f"stride must be a non-negative integer (the words consecutive windows share), "
                                 f"got {stride!r}")
            if not pairs and stride and stride >= max_length - added:
                raise ValueError(f"stride={stride} must be less than the {max_length - added} words a window holds "
                                 "(max_length less the <S> and </S>)")
            backend.enable_truncation(max_length, stride=stride, strategy=truncation_strategy.value,
                                      direction=self.truncation_side)
        if padding_strategy == PaddingStrategy.DO_NOT_PAD:
            backend.no_padding()
        else:
            backend.enable_padding(
                direction="right", pad_id=0, pad_type_id=0, pad_token=PAD_TOKEN,
                length=max_length if padding_strategy == PaddingStrategy.MAX_LENGTH else None,
                pad_to_multiple_of=pad_to_multiple_of,
            )

    def _rows(self, tokens: list[list[str | None]], lengths: list[int], target: int | None, tensor_type):
        """The character ids of every position (None: padding, a zero row), through the cache of rows."""
        cache = self._fast["rows"]
        with cache.lock:  # the cache is shared by every thread that uses this tokenizer
            cache.clear_if_full()
            sequences = []
            for row, n in zip(tokens, lengths, strict=True):
                indices = cache.indices(row[:n])
                sequences.append(indices + [CACHED_PAD] * (len(row) - n))
            if tensor_type is None:
                return cache.nested_lists(sequences, None)
            return cache.tensor(sequences, tensor_length([len(s) for s in sequences], target))

    def _encode_plus(self, text, text_pair=None, add_special_tokens: bool = True,
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: int | None = None, **kwargs) -> BatchEncoding:
        # Entry point of the base class's `encode()`: strategies are already resolved.
        return self(text, text_pair=text_pair, add_special_tokens=add_special_tokens, padding=padding_strategy,
                    truncation=truncation_strategy, max_length=max_length, **kwargs)

    def _batch_encode_plus(self, batch_text_or_text_pairs, add_special_tokens: bool = True,
                           padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                           truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                           max_length: int | None = None, **kwargs) -> BatchEncoding:
        # transformers 4.x's `batch_encode_plus()`.
        return self(list(batch_text_or_text_pairs), add_special_tokens=add_special_tokens, padding=padding_strategy,
                    truncation=truncation_strategy, max_length=max_length, **kwargs)


class ElmoFastBatchEncoding(BatchEncoding):
    """`BatchEncoding` of `ElmoTokenizerFast`: the `tokenizers` encodings answer `word_ids()`, `sequence_ids()` and
    the character offsets; `tokens()` gives the words (the encodings hold placeholders), `<S>`, `</S>` and `<pad>`,
    as `ElmoTokenizer`'s outputs do."""

    def __init__(self, data=None, encoding=None, tensor_type=None, prepend_batch_axis=False, n_sequences=None,
                 tokens=None, pending=None, slow_encoding=None):
        # A plain call's encodings are made when first read (`pending`); its tokens are its `ElmoTokenizer` output's.
        self._pending = pending
        self._slow_encoding = slow_encoding
        super().__init__(data, encoding=encoding, tensor_type=tensor_type, prepend_batch_axis=prepend_batch_axis,
                         n_sequences=n_sequences)
        self._tokens = tokens

    @property
    def _encodings(self):
        if self._pending is not None:
            self._made_encodings, self._pending = self._pending(), None
        return self._made_encodings

    @_encodings.setter
    def _encodings(self, value) -> None:
        self._made_encodings = value

    @property
    def is_fast(self) -> bool:
        return self._pending is not None or self._made_encodings is not None

    def __getstate__(self):
        tokens = self._tokens
        if tokens is None and self._slow_encoding is not None:
            tokens = [self._slow_encoding.tokens(i) for i in range(len(self._encodings))]
        return {**super().__getstate__(), "tokens": tokens}

    def __setstate__(self, state):
        self._pending = self._slow_encoding = self._made_encodings = None
        super().__setstate__(state)
        self._tokens = state.get("tokens")

    def tokens(self, batch_index: int = 0) -> list[str]:
        if self._tokens is not None:
            return list(self._tokens[batch_index])
        if self._slow_encoding is not None:
            return self._slow_encoding.tokens(batch_index)
        return super().tokens(batch_index)


def _snapshot(given):
    """A call's input as it is now: its lists copied (words of pre-split sentences included), strings kept."""
    if isinstance(given, (list, tuple)):
        return [list(item) if isinstance(item, (list, tuple)) else item for item in given]
    return given


def _whole_text(text: str) -> list[str]:
    """A "split" that keeps the text whole: `as_pair_batch` then checks the inputs as `ElmoTokenizer` does and
    drops lone surrogates, and the `tokenizers` pre-tokenizer splits."""
    return [text]


def _backend_inputs(first: list[list[str]], second: list[list[str]] | None, pre_split: bool) -> tuple[tuple, list]:
    """(What each position's word is read from: the texts or the word lists, of the first sentences and of the
    second ones or None; the inputs of `encode_batch`)."""
    if pre_split:
        sources = (first, second)
        inputs = [[_clean_word(w) for w in words] for words in first]
        if second is not None:
            inputs = list(zip(inputs, [[_clean_word(w) for w in words] for words in second], strict=True))
        return sources, inputs
    texts = [words[0] if words else "" for words in first]  # `_whole_text`: one "word", or none for blank text
    pair_texts = None if second is None else [words[0] if words else "" for words in second]
    return (texts, pair_texts), texts if pair_texts is None else list(zip(texts, pair_texts, strict=True))


def _clean_word(word: str) -> str:
    if not word.isascii():
        word = _SURROGATES.sub("", word)
    return word or _EMPTY_WORD_STANDIN


def _encode(backend: Tokenizer, inputs: list, add_special_tokens: bool, pre_split: bool) -> list:
    try:
        return backend.encode_batch(inputs, add_special_tokens=add_special_tokens, is_pretokenized=pre_split)
    except Exception as error:  # the `tokenizers` library's errors, and those of the word split, in one line
        raise ValueError(f"ElmoTokenizerFast: {str(error).strip().splitlines()[-1]}") from None
    except BaseException as error:  # a panic of its Rust code (pyo3_runtime.PanicException): a stride too long
        if type(error).__name__ != "PanicException":
            raise
        raise ValueError(f"ElmoTokenizerFast: {str(error).splitlines()[0]}") from None


def _columns(encodings: list, texts: list, pair_texts: list | None, pre_split: bool) -> dict[str, list]:
    """Each row's token strings (the words; `<S>`/`</S>` where added; None for padding), offsets, masks and token
    types, read once from its encoding."""
    out: dict[str, list] = {key: [] for key in ("tokens", "offsets", "attention_mask", "token_type_ids",
                                               "special_tokens_mask")}
    # Hundreds of thousands of acyclic lists and tuples: the cyclic garbage collector, run over and over meanwhile,
    # made this 5x slower (as in `RowCache.nested_lists`). Paused.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _read_encodings(encodings, texts, pair_texts, pre_split, out)
    finally:
        if gc_was_enabled:
            gc.enable()
    return out


def _read_encodings(encodings: list, texts: list, pair_texts: list | None, pre_split: bool,
                    out: dict[str, list]) -> None:
    for row, e in enumerate(encodings):
        sources = (texts[row], None if pair_texts is None else pair_texts[row])
        mask, special, offsets = e.attention_mask, e.special_tokens_mask, e.offsets
        tokens = []
        for k, (sequence, word, token_id) in enumerate(zip(e.sequence_ids, e.word_ids, e.ids)):
            if not mask[k]:
                tokens.append(None)
            elif sequence is None:  # an added <S> or </S>
                tokens.append(BOS_TOKEN if token_id == BOS_CHAR_ID else EOS_TOKEN)
            elif pre_split:
                tokens.append(sources[sequence][word])
                offsets[k] = (0, len(tokens[-1]))
            else:
                start, end = offsets[k]
                tokens.append(sources[sequence][start:end])
        out["tokens"].append(tokens)
        out["offsets"].append(offsets)
        out["attention_mask"].append(mask)
        out["token_type_ids"].append(e.type_ids)
        out["special_tokens_mask"].append(special)


def save_with_fast_twin(tokenizer, folder) -> None:
    """Save the tokenizer of a folder the project writes (a conversion, a pretraining, a fine-tuning run) so that it
    opens as a `PreTrainedTokenizerFast`, which transformers' example scripts (run_qa.py, run_ner.py) require of the
    folder they are given: an `ElmoTokenizer` whose word split keeps the words is saved as this class too
    (tokenizer_config.json's `auto_map` then names both; the project's commands still load `ElmoTokenizer` from it).
    Any other tokenizer (a registered function's split, which may change the words this class reads from the text;
    ELMoForManyLangs' dictionaries) is saved as it is."""
    tokenizer.save_pretrained(folder)
    if type(tokenizer) is ElmoTokenizer and tokenizer.word_split in SPLITS_THAT_KEEP_WORDS:
        ElmoTokenizerFast.from_pretrained(folder).save_pretrained(folder)


reachable_by_name(__name__)  # datasets' fingerprint names this class, even as remote code (row_cache_elmo.py)
