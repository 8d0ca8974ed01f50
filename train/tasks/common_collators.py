"""Data collators for the ELMo task heads with `transformers.Trainer`.

Each example (a `datasets` row after `ElmoTokenizer` preprocessing) has `input_ids` of shape `[tokens, width]`
(50 character ids; an ELMoForManyLangs tokenizer adds a word id: `ElmoTokenizer.row_width`), optionally
`attention_mask` `[tokens]`, and a label. A batch is right-padded on the token axis by
`tokenization.pad_character_batch` (the padding of `ElmoTokenizer.pad` too): `input_ids` `[batch, tokens, width]` with
all-zero padding tokens, `attention_mask` `[batch, tokens]` with 0, and token labels with -100 (ignored by the
loss). A collator needs nothing but the data: the tokenizer argument is optional and only sets the row width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from elmo_hf.tokenization import LABEL_PAD_ID, pad_character_batch
from elmo_hf.tokenization.padding_elmo import padded_length


def _as_tensor(value: Any, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    return torch.as_tensor(value, dtype=dtype)


def _label_key(features: Sequence[Mapping[str, Any]]) -> str | None:
    """The examples' label column: `labels`, else `label` (as `datasets` names it), else None."""
    return "labels" if "labels" in features[0] else "label" if "label" in features[0] else None


@dataclass
class _ElmoCollatorBase:
    tokenizer: Any = None
    pad_to_multiple_of: int | None = None
    label_pad_token_id: int = LABEL_PAD_ID

    def _pad(self, features: Sequence[Mapping[str, Any]], token_labels: bool = False) -> dict[str, torch.Tensor]:
        """`input_ids` and `attention_mask` padded; with `token_labels`, also the labels (`labels` or `label`, one
        per token) when the examples have them."""
        if not features:
            raise ValueError("the collator got an empty batch")
        ids = [_as_tensor(f["input_ids"], torch.long) for f in features]  # each (T_i, width)
        # The width of the rows: the tokenizer's `row_width` (50 characters; 51 for an ELMoForManyLangs model with
        # characters and words), else the first example's. Not `max_characters_per_token`, which counts only the
        # characters.
        width = getattr(self.tokenizer, "row_width", None) or (ids[0].shape[-1] if ids[0].dim() == 2 else 0)
        for i, x in enumerate(ids):
            if x.dim() != 2 or x.shape[-1] != width:
                raise ValueError(
                    f"example {i}: input_ids must be [tokens, {width}] character ids, got shape {tuple(x.shape)}"
                )
        lengths = [x.shape[0] for x in ids]
        token_values = {
            "attention_mask": [
                f["attention_mask"] if "attention_mask" in f else [1] * n for f, n in zip(features, lengths)
            ]
        }
        if "token_type_ids" in features[0]:  # sentence pairs: 1 on each second sentence, padded with 0
            token_values["token_type_ids"] = [f["token_type_ids"] for f in features]
        key = _label_key(features)
        if token_labels and key is not None:
            token_values["labels"] = [
                self._token_labels(row, f[key], n) for row, (f, n) in enumerate(zip(features, lengths))
            ]
        return pad_character_batch(
            ids,
            width,
            padded_length(max(lengths), self.pad_to_multiple_of),
            token_values,
            fills={"labels": self.label_pad_token_id},
        )

    @staticmethod
    def _token_labels(row: int, labels: Any, n: int) -> torch.Tensor:
        values = _as_tensor(labels, torch.long)
        if values.shape != (n,):
            raise ValueError(f"example {row}: {n} tokens but labels of shape {tuple(values.shape)}")
        return values


@dataclass
class ElmoDataCollatorForSequenceClassification(_ElmoCollatorBase):
    """Pads character ids; stacks the sentence labels (`labels` or `label`: ints, floats or multi-hot lists)."""

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self._pad(features)
        key = _label_key(features)
        if key is not None:
            values = [f[key] for f in features]
            first = values[0]
            is_float = isinstance(first, float) or (
                isinstance(first, (list, tuple)) and first and isinstance(first[0], float)
            ) or (isinstance(first, torch.Tensor) and first.is_floating_point())
            batch["labels"] = torch.stack([_as_tensor(v, torch.float if is_float else torch.long) for v in values])
        return batch


@dataclass
class ElmoDataCollatorForTokenClassification(_ElmoCollatorBase):
    """Pads character ids and the per-token `labels` (with -100), which must have one entry per token."""

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        return self._pad(features, token_labels=True)


@dataclass
class ElmoDataCollatorForQuestionAnswering(_ElmoCollatorBase):
    """Pads the character ids and `token_type_ids` of (question, passage) windows; stacks `start_positions` and
    `end_positions` when the examples have them."""

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self._pad(features)
        for key in ("start_positions", "end_positions"):
            if key in features[0]:
                batch[key] = torch.tensor([int(f[key]) for f in features], dtype=torch.long)
        return batch
