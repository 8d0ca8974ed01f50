"""What the ELMo models are given, checked before any work: each mistake gets a one-line error naming what was
wrong (shape, dtype, range, padding), never a failure deep inside the layers.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch and its siblings.
"""

from __future__ import annotations

import torch

from .character_ids import real_token_mask
from .configuration_elmo import ElmoConfig
from .word_char_encoder import token_id_parts


def check_inputs(config: ElmoConfig, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Validate `input_ids` and `attention_mask`; return the token lengths (B,) of the right-padded rows."""
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
    if input_ids.dim() != 3 or input_ids.shape[-1] != config.token_row_width:
        raise ValueError(
            "input_ids must be character ids of shape [batch, tokens, "
            f"{config.token_row_width}] (ElmoTokenizer gives them), got shape {tuple(input_ids.shape)}"
        )
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
    if input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids is empty: shape {tuple(input_ids.shape)}; give at least one token per row")
    if not torch.compiler.is_compiling():
        for what, ids, size in token_id_parts(input_ids, config):  # character ids (and word ids, ELMoForManyLangs)
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= size:
                raise ValueError(f"{what} must lie in [0, {size}), got values from {low} to {high}")
    token_mask = real_token_mask(input_ids)  # (B, T)
    if attention_mask is None:
        attention_mask = token_mask
    elif attention_mask.shape != input_ids.shape[:2]:
        raise ValueError(
            f"attention_mask must have shape [batch, tokens] = {tuple(input_ids.shape[:2])}, "
            f"got {tuple(attention_mask.shape)}"
        )
    mask = attention_mask.bool()
    lengths = mask.sum(-1)
    if not torch.compiler.is_compiling():
        if bool((lengths == 0).any()):
            rows = (lengths == 0).nonzero().flatten().tolist()
            raise ValueError(f"rows {rows} have no tokens; every row needs at least one (e.g. <S> </S>)")
        steps = torch.arange(mask.shape[1], device=mask.device)
        if not bool((mask == (steps < lengths.unsqueeze(1))).all()):
            raise ValueError("attention_mask must be right-padded: ones for the real tokens first, then zeros")
        if bool((mask & ~token_mask).any()):
            raise ValueError("attention_mask marks positions as real whose character ids are all 0 (padding)")
    return lengths


def check_state(config: ElmoConfig, state, batch: int):
    """Validate a `state=` argument: the pair (h, c) of a previous call with `use_cache=True`, for this batch."""
    c = config
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise ValueError("state must be the pair (h, c) returned as `state` by a call with use_cache=True")
    h, cell = state
    expected_h = (c.num_layers, 2, batch, c.projection_dim)
    expected_c = (c.num_layers, 2, batch, c.cell_size)
    if tuple(h.shape) != expected_h or tuple(cell.shape) != expected_c:
        raise ValueError(
            f"state shapes must be h {expected_h} and c {expected_c} for this batch, "
            f"got {tuple(h.shape)} and {tuple(cell.shape)}"
        )
    return h, cell
