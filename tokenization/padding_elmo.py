"""Right-padding a batch of ELMo sentences: the one implementation, used by `ElmoTokenizer.pad` and the collators.

A sentence is a list of tokens, each a row of character ids (`[tokens, 50]`); a batch is padded on the token axis
to `[batch, tokens, 50]` with rows of zeros (a padding token is a row of `PADDING_ID`, see `character_ids.py`), and
every value that goes with a token (`attention_mask`, labels, ...) is padded with its own fill, `TOKEN_PAD_VALUES`.
Below it, what the tokenizer decides before padding: a batch's padded length under transformers' padding strategies
(`padded_target`, `tensor_length`) and what `ElmoTokenizer.pad` pads of the features it is given (`feature_columns`,
`token_level_keys`).

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library,
numpy, torch and transformers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers.tokenization_utils_base import PaddingStrategy

from .character_ids import PADDING_ID

LABEL_PAD_ID = -100  # padding of `vocab_ids` and of token-level `labels` (ignored by torch losses)
# The fill of each value padded along the token axis with the character rows.
TOKEN_PAD_VALUES = {
    "attention_mask": 0,
    "special_tokens_mask": 1,
    "token_type_ids": 0,
    "vocab_ids": LABEL_PAD_ID,
    "labels": LABEL_PAD_ID,
}


def pad_character_batch(
    input_ids: Sequence[Any],
    row_width: int,
    length: int | None,
    token_values: Mapping[str, Sequence[Any]] | None = None,
    fills: Mapping[str, int] | None = None,
    return_tensors: bool = True,
) -> dict[str, Any]:
    """Right-pad sentences of character rows, and the values that go with each of their tokens, to `length` tokens.

    Args:
        input_ids: one item per sentence: its rows of `row_width` ids, `[tokens_i, row_width]` (nested lists, or
            tensors; the caller checks their shape).
        row_width: ids per token (`ElmoTokenizer.row_width`, 50 for ELMo).
        length: the number of tokens after padding, at least every sentence's; None pads nothing (lists only:
            tensors need sentences of one length then).
        token_values: key -> one item per sentence holding one value per token (`attention_mask`, `labels`, ...;
            lists, numpy arrays or tensors).
        fills: key -> the value padding `token_values[key]`; `TOKEN_PAD_VALUES` for the keys it leaves out.
        return_tensors: int64 torch tensors (`[batch, length, row_width]` and `[batch, length]`), else nested
            lists.

    Returns:
        `{"input_ids": ..., **{key: ... for key in token_values}}`.
    """
    lengths = [len(seq) for seq in input_ids]
    out = {"input_ids": _pad_rows(input_ids, row_width, length, return_tensors)}
    for key, values in (token_values or {}).items():
        fill = (fills or {}).get(key, TOKEN_PAD_VALUES.get(key))
        if fill is None:
            raise ValueError(f"no padding value for {key!r}: pass fills={{{key!r}: value}}")
        out[key] = _pad_values(key, values, lengths, fill, length, return_tensors)
    return out


def _pad_rows(input_ids: Sequence[Any], row_width: int, length: int | None, return_tensors: bool):
    if not return_tensors:
        return [
            seq + [[PADDING_ID] * row_width for _ in range(max(0, (length or 0) - len(seq)))]
            for seq in input_ids
        ]
    if length is None:
        length = len(input_ids[0]) if input_ids else 0
    if input_ids and all(isinstance(seq, torch.Tensor) for seq in input_ids):
        padded = torch.full((len(input_ids), length, row_width), PADDING_ID, dtype=torch.int64)  # (B, T, W)
        for row, seq in enumerate(input_ids):
            padded[row, : seq.shape[0]] = seq
        return padded
    # numpy reads nested lists of ints about 6x faster than torch.tensor does.
    zero_row = [PADDING_ID] * row_width
    rows = [to_list(seq) + [zero_row] * (length - len(seq)) for seq in input_ids]
    return torch.from_numpy(np.array(rows, dtype=np.int64).reshape(len(input_ids), length, row_width))


def _pad_values(
    key: str, values: Sequence[Any], lengths: list[int], fill: int, length: int | None, return_tensors: bool
):
    """One value per token for each sentence (a mask, labels), padded with `fill` to `length` tokens."""
    values = [to_list(v) for v in values]
    for i, (v, n) in enumerate(zip(values, lengths, strict=True)):
        if not isinstance(v, list) or len(v) != n:
            raise ValueError(f"pad(): {key} of example {i} must have one value per token ({n})")
    padded = [v + [fill] * max(0, (length or 0) - len(v)) for v in values]
    if not return_tensors:
        return padded
    return torch.tensor(padded, dtype=torch.int64).reshape(len(values), -1)


def padded_length(length: int | None, pad_to_multiple_of: int | None) -> int | None:
    """`length` tokens rounded up to a multiple of `pad_to_multiple_of` (when given; None stays None)."""
    if length is not None and pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    return length


def to_list(value: Any) -> Any:
    """Tensors and numpy arrays (also inside lists) -> nested Python lists; other values unchanged."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple, str)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        if value and hasattr(value[0], "tolist") and not isinstance(value[0], (str, list, tuple)):
            return [v.tolist() for v in value]
        if isinstance(value, tuple):
            return [to_list(v) for v in value]
        if value and isinstance(value[0], tuple):
            return [to_list(v) for v in value]
    return value


# ----- the tokenizer's padding: a batch's padded length, `pad()`'s features ------------------------------------
def feature_columns(encoded_inputs: Any) -> tuple[dict[str, list], bool | None]:
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


def token_level_keys(columns: dict, lengths: list[int], return_attention_mask: bool) -> list[str]:
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


def padded_target(
    strategy: PaddingStrategy, lengths: list[int], max_length: int | None, pad_to_multiple_of: int | None
) -> int | None:
    """The padded number of tokens under a padding strategy (None: no padding)."""
    if strategy == PaddingStrategy.LONGEST:
        return padded_length(max(lengths), pad_to_multiple_of)
    if strategy == PaddingStrategy.MAX_LENGTH:
        return padded_length(max_length, pad_to_multiple_of)
    return None


def tensor_length(lengths: list[int], target: int | None) -> int:
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


def contains_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and isinstance(value[0], torch.Tensor)


def is_batch_of_sentences(ids: list) -> bool:
    """True for `[batch, tokens, width]` nested lists, False for one sentence `[tokens, width]`."""
    for item in ids:
        if isinstance(item, list) and item:
            return isinstance(item[0], list)
    return bool(ids)  # [] is one empty sentence, [[], []] a batch of empty sentences


def check_character_rows(ids_column: list, width: int) -> None:
    """Refuse, naming the example, `input_ids` that are not rows of `width` ids."""
    for i, seq in enumerate(ids_column):
        if not isinstance(seq, list) or any(not isinstance(row, list) or len(row) != width for row in seq):
            raise ValueError(
                f"pad(): input_ids of example {i} must be rows of {width} character ids ([tokens, {width}])"
            )
