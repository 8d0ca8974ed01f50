"""Data collators for the ELMo task heads with `transformers.Trainer`.

Each example (a `datasets` row after `ElmoTokenizer` preprocessing) has `input_ids` of shape `[tokens, 50]`
(character ids), optionally `attention_mask` `[tokens]`, and a label. A batch is right-padded on the token axis:
`input_ids` `[batch, tokens, 50]` with all-zero padding tokens, `attention_mask` `[batch, tokens]` with 0, and
token labels with -100 (ignored by the loss). The padding is done here rather than with `tokenizer.pad` so that a
collator needs nothing but the data (the tokenizer argument is optional and only sets the row width).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

LABEL_PAD_ID = -100


def _as_tensor(value: Any, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    return torch.as_tensor(value, dtype=dtype)


@dataclass
class _ElmoCollatorBase:
    tokenizer: Any = None
    pad_to_multiple_of: int | None = None
    label_pad_token_id: int = LABEL_PAD_ID

    def _pad_inputs(self, features: Sequence[Mapping[str, Any]]) -> tuple[dict[str, torch.Tensor], list[int]]:
        if not features:
            raise ValueError("the collator got an empty batch")
        ids = [_as_tensor(f["input_ids"], torch.long) for f in features]  # each (T_i, 50)
        width = getattr(self.tokenizer, "max_characters_per_token", None) or ids[0].shape[-1]
        for i, x in enumerate(ids):
            if x.dim() != 2 or x.shape[-1] != width:
                raise ValueError(
                    f"example {i}: input_ids must be [tokens, {width}] character ids, got shape {tuple(x.shape)}"
                )
        lengths = [x.shape[0] for x in ids]
        steps = max(lengths)
        if self.pad_to_multiple_of:
            steps = -(-steps // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids = torch.zeros(len(ids), steps, width, dtype=torch.long)  # (B, T, 50), padding tokens are zeros
        attention_mask = torch.zeros(len(ids), steps, dtype=torch.long)  # (B, T)
        for row, (x, feature) in enumerate(zip(ids, features)):
            input_ids[row, : x.shape[0]] = x
            if "attention_mask" in feature:
                mask = _as_tensor(feature["attention_mask"], torch.long)
                attention_mask[row, : mask.shape[0]] = mask
            else:
                attention_mask[row, : x.shape[0]] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}, lengths


@dataclass
class ElmoDataCollatorForSequenceClassification(_ElmoCollatorBase):
    """Pads character ids; stacks the sentence labels (`labels` or `label`: ints, floats or multi-hot lists)."""

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        batch, _ = self._pad_inputs(features)
        key = "labels" if "labels" in features[0] else "label" if "label" in features[0] else None
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
        batch, lengths = self._pad_inputs(features)
        key = "labels" if "labels" in features[0] else "label" if "label" in features[0] else None
        if key is not None:
            steps = batch["input_ids"].shape[1]
            labels = torch.full((len(features), steps), self.label_pad_token_id, dtype=torch.long)
            for row, (feature, n) in enumerate(zip(features, lengths)):
                values = _as_tensor(feature[key], torch.long)
                if values.shape != (n,):
                    raise ValueError(f"example {row}: {n} tokens but labels of shape {tuple(values.shape)}")
                labels[row, :n] = values
            batch["labels"] = labels
        return batch
