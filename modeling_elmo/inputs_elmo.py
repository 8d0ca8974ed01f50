"""What the ELMo models are given, checked before any work: each mistake gets a one-line error naming what was
wrong (shape, dtype, range, padding), never a failure deep inside the layers.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch and its siblings.
"""

from __future__ import annotations

import torch
from transformers.utils import logging

from .character_ids import (
    BOS_CHAR_ID,
    BOW_ID,
    CHAR_PAD_ID,
    EOS_CHAR_ID,
    EOW_ID,
    MAX_CHARACTERS_PER_TOKEN,
    real_token_mask,
)
from .configuration_elmo import ElmoConfig
from .word_char_encoder import token_id_parts

logger = logging.get_logger(__name__)


def answer_layer_count_probe(config: ElmoConfig, input_ids):
    """`input_ids`, or for flair's layer count probe the input that stands in for it (and a warning that says so).

    flair's `TransformerWordEmbeddings(..., layers="all")` counts a model's layers by running it on exactly
    `torch.tensor([[1]])` (one vocabulary id) and reading the length of its hidden states. ELMo reads rows of
    character ids (a real input is 3-D), so exactly that tensor, and nothing else, runs as the empty sentence
    (`<S> </S>`), whose outputs have the layers flair counts; any other 2-D input is refused by `check_inputs` as
    before. The warning is there so that no one takes these vectors for the vectors of an input.
    """
    if not (isinstance(input_ids, torch.Tensor) and tuple(input_ids.shape) == (1, 1)
            and input_ids.dtype == torch.long and int(input_ids[0, 0]) == 1):
        return input_ids
    logger.warning("input_ids tensor([[1]]) is flair's layer count probe (layers=\"all\"): ran as the empty "
                   "sentence <S> </S>; give character ids of shape [batch, tokens, 50] for vectors")
    rows = config.sentence_boundary_rows
    if rows is None:
        pad = [CHAR_PAD_ID] * (MAX_CHARACTERS_PER_TOKEN - 3)
        rows = [[BOW_ID, mark, EOW_ID, *pad] + [0] * (config.token_row_width - MAX_CHARACTERS_PER_TOKEN)
                for mark in (BOS_CHAR_ID, EOS_CHAR_ID)]
    return torch.tensor([rows], dtype=torch.long, device=input_ids.device)


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
