"""How `ElmoTokenizer` encodes and pads a batch: `ElmoBatchEncoding` and `ElmoEncodingMixin` (`__call__`, `encode`,
`pad`).

Text -> word lists (`split_words`) -> the tokenizer's cached rows (truncated, with the added `<S>`/`</S>`) ->
character ids `[batch, tokens, 50]`, padded on the right; every other output (`attention_mask`,
`special_tokens_mask`, `vocab_ids`, ...) depends only on each sentence's length and is built on one grid.

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library,
numpy, torch, transformers and its siblings.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy
from transformers.utils import TensorType

from .padding_elmo import LABEL_PAD_ID, TOKEN_PAD_VALUES, pad_character_batch, padded_length, to_list
from .word_splits_elmo import split_words
from .word_vocab_elmo import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN

logger = logging.getLogger(__name__)

# Reserved indices of the tokenizer's word cache (see ElmoTokenizer._init_cache).
CACHED_PAD, CACHED_BOS, CACHED_EOS = 0, 1, 2


class ElmoBatchEncoding(BatchEncoding):
    """`BatchEncoding` that also knows which input word each token position comes from.

    `word_ids(i)` maps each position of row `i` to the index of its word in the input (None for `<S>`, `</S>`
    and padding), `tokens(i)` gives the token strings, `sequence_ids(i)` is 0 for words and None elsewhere.
    These are only available on the output of `ElmoTokenizer.__call__`, not after `pad()`.
    """

    def __init__(self, data=None, tensor_type=None, prepend_batch_axis=False, alignment=None, batched=True):
        super().__init__(data, tensor_type=tensor_type, prepend_batch_axis=prepend_batch_axis, n_sequences=1)
        # alignment[i] = (words kept, index of the first kept word, has <S>/</S>)
        self._alignment = alignment
        self._batched = batched

    def __getstate__(self):
        return {**super().__getstate__(), "alignment": self._alignment, "batched": self._batched}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._alignment = state.get("alignment")
        self._batched = state.get("batched", True)

    def _row(self, batch_index: int) -> tuple[list[str], int, bool, int]:
        if self._alignment is None:
            raise ValueError(
                "word_ids()/tokens() are only available on the output of ElmoTokenizer.__call__ "
                "(not after pad() or on data rebuilt from lists)"
            )
        if not self._batched and batch_index != 0:
            raise IndexError(
                f"this encoding holds a single sequence; batch_index must be 0, got {batch_index}"
            )
        words, first, special = self._alignment[batch_index]
        ids = self.data["input_ids"]
        length = len(ids[batch_index]) if self._batched or not isinstance(ids, list) else len(ids)
        return words, first, special, length

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        words, first, special, length = self._row(batch_index)
        out: list[int | None] = [None] if special else []
        out.extend(range(first, first + len(words)))
        if special:
            out.append(None)
        return out + [None] * (length - len(out))

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        return [None if w is None else 0 for w in self.word_ids(batch_index)]

    def tokens(self, batch_index: int = 0) -> list[str]:
        words, _, special, length = self._row(batch_index)
        out = [BOS_TOKEN, *words, EOS_TOKEN] if special else list(words)
        return out + [PAD_TOKEN] * (length - len(out))


class ElmoEncodingMixin:
    """`__call__`, `encode` (through `_encode_plus`) and `pad` of `ElmoTokenizer`, mixed in before
    `PreTrainedTokenizer`. They read the tokenizer's row cache (`cache`, `_maybe_clear_cache`, `_indices`,
    `_gather`, `_nested_lists`, `_warn_once`), its `row_width`, `word_split` and word vocabulary
    (`_require_word_vocab`, `unk_word_id`)."""

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
        words or a list of lists of words.

        Returns an `ElmoBatchEncoding` with `input_ids` (`[batch, tokens, 50]` with `return_tensors`, nested lists
        otherwise; a single unbatched input drops the batch level unless `return_tensors` is set),
        `attention_mask` `[batch, tokens]` and, on request, `special_tokens_mask`, `token_type_ids` (zeros),
        `length` and `vocab_ids` (word-vocabulary ids, padding -100). `word_ids(i)` aligns positions with words.

        The one encoding path (also of the base class's `encode()`): text -> word lists -> cache indices
        (truncated, with the added `<S>`/`</S>`) -> character ids (padded), then the other outputs, which depend
        only on each sentence's length.
        """
        kwargs.pop("split_special_tokens", None)
        if kwargs.pop("tokenizer_kwargs", None):
            raise ValueError("tokenizer_kwargs is not supported by ElmoTokenizer: pass the arguments directly")
        _refuse_unsupported(
            text, text_pair, text_target, text_pair_target, stride, return_overflowing_tokens, return_offsets_mapping
        )
        if kwargs:
            logger.warning("ElmoTokenizer ignores the keyword arguments %s", sorted(kwargs))
        self._check_padding_side(padding_side)
        tensor_type = _tensor_type(return_tensors)
        vocab = self._require_word_vocab("return_vocab_ids=True") if return_vocab_ids else None
        batch, batched = _as_word_batch(text, is_split_into_words, self.word_split)
        padding_strategy, truncation_strategy, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding,
            truncation=truncation,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            verbose=verbose,
        )
        limit = _words_limit(truncation_strategy, max_length, add_special_tokens)
        input_ids, lengths, target, alignment = self._encode_words(
            batch, limit, add_special_tokens, (padding_strategy, max_length, pad_to_multiple_of), tensor_type, verbose
        )

        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        wanted = {
            "attention_mask": return_attention_mask,
            "token_type_ids": return_token_type_ids,
            "special_tokens_mask": return_special_tokens_mask,
            "length": return_length,
        }
        vocab_rows = None if vocab is None else self._vocab_rows(alignment, vocab)
        data = {
            "input_ids": input_ids,
            **_token_outputs(wanted, lengths, target, add_special_tokens, vocab_rows, tensor_type),
        }
        if tensor_type == TensorType.NUMPY:
            data = {k: v.numpy() for k, v in data.items()}
        if not batched and tensor_type is None:
            data = {k: v[0] for k, v in data.items()}
        return ElmoBatchEncoding(data, alignment=alignment, batched=batched or tensor_type is not None)

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
        batch: list[list[str]],
        limit: int | None,
        add_special_tokens: bool,
        padding: tuple[PaddingStrategy, int | None, int | None],
        tensor_type: TensorType | None,
        verbose: bool,
    ) -> tuple[Any, list[int], int | None, list[tuple[list[str], int, bool]]]:
        """The character ids of a batch of word lists, padded as `padding` = (strategy, max_length,
        pad_to_multiple_of) says, with each sentence's length, the padded length (None: not padded) and the
        alignment of positions with words."""
        with self.cache["lock"]:  # the cache is shared by every thread that uses this tokenizer
            self._maybe_clear_cache()
            sequences, alignment = self._cache_sequences(batch, limit, add_special_tokens)
            lengths = [len(s) for s in sequences]
            if limit is None and verbose:
                self._warn_if_too_long(lengths)
            target = _target_of(padding[0], lengths, padding[1], padding[2])
            if tensor_type is None:
                input_ids = self._nested_lists(sequences, target)
            else:
                target = _tensor_length(lengths, target)
                input_ids = self._gather(_index_tensor(sequences, target))
        return input_ids, lengths, target, alignment

    def _cache_sequences(
        self, batch: list[list[str]], limit: int | None, add_special_tokens: bool
    ) -> tuple[list[list[int]], list[tuple[list[str], int, bool]]]:
        """Each sentence's cache indices (at most `limit` words, then the added `<S>`/`</S>`) and its alignment:
        (words kept, index of the first kept word, whether `<S>`/`</S>` were added). Lock held."""
        sequences, alignment = [], []
        for words in batch:
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

    def _vocab_rows(self, alignment, vocab: dict[str, int]) -> list[list[int]]:
        unk = self.unk_word_id
        bos, eos = vocab[BOS_TOKEN], vocab[EOS_TOKEN]
        out = []
        for words, _, special in alignment:
            ids = [vocab.get(w, unk) for w in words]
            out.append([bos, *ids, eos] if special else ids)
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
            batched = is_batch_of_sentences(ids_column)
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


# ---------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------
def _refuse_unsupported(text, text_pair, text_target, text_pair_target, stride, overflowing, offsets) -> None:
    if text is None:
        raise TypeError(
            "ElmoTokenizer needs text: a str, a list of str, or lists of words with is_split_into_words=True; got None"
        )
    if text_pair is not None or text_target is not None or text_pair_target is not None:
        raise ValueError(
            "ElmoTokenizer encodes single sentences: text_pair/text_target are not supported"
        )
    if overflowing or stride:
        raise NotImplementedError(
            "ElmoTokenizer does not return overflowing tokens (stride/return_overflowing_tokens)"
        )
    if offsets:
        raise NotImplementedError(
            "return_offsets_mapping is not available; use word_ids() to align words"
        )


def check_word(word: Any, where: Any) -> str:
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
        return [[check_word(w, f"text[{i}]") for i, w in enumerate(text)]], False
    batch = []
    for i, words in enumerate(text):
        if not isinstance(words, (list, tuple)):
            raise TypeError(f"text[{i}] must be a list of words (str), got {type(words).__name__}")
        batch.append([check_word(w, f"text[{i}][{j}]") for j, w in enumerate(words)])
    return batch, True


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
    add_special_tokens: bool,
    vocab_rows: list[list[int]] | None,
    tensor_type: TensorType | None,
) -> dict[str, Any]:
    """Every output besides `input_ids`, built once for tensors and lists alike: each depends only on the
    sentence lengths (and the vocabulary ids), on a `[batch, width]` grid that lists then cut back to each
    sentence's length (padded to `target` when padding)."""
    n = np.array(lengths, dtype=np.int64).reshape(-1, 1)
    width = max(lengths) if target is None else max(target, *lengths)
    position = np.arange(width)
    real = position < n
    grids: dict[str, np.ndarray | None] = {}
    if wanted["attention_mask"]:
        grids["attention_mask"] = real
    if wanted["token_type_ids"]:
        grids["token_type_ids"] = np.zeros_like(real)
    if wanted["special_tokens_mask"]:
        added = (position == 0) | (position == n - 1) if add_special_tokens else np.zeros_like(real)
        grids["special_tokens_mask"] = ~real | added
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


def is_batch_of_sentences(ids: list) -> bool:
    """True for `[batch, tokens, width]` nested lists, False for one sentence `[tokens, width]`."""
    for item in ids:
        if isinstance(item, list) and item:
            return isinstance(item[0], list)
    return bool(ids)  # [] is one empty sentence, [[], []] a batch of empty sentences
