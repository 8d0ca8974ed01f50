"""Downstream use of ELMo (Peters et al. 2018, section 3.3): the layers the task heads of `modeling_elmo.py` add on
top of the biLM: the scalar mix of its layers, the hashed word embedding, the sentence boundaries, pooling; and
the fixed sentence vector (TF Hub's `default`: `mean_pool`), which `elmo_hf.tools.embedding.sentence_vectors` and the
sentence-transformers module `elmo_sentence_pooling.py` compute from here.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, transformers and its
siblings (never `modeling_elmo.py`, which imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.utils import ModelOutput

from .character_ids import BOS_CHAR_ID, BOW_ID, EOS_CHAR_ID, EOW_ID, real_token_mask

# Polynomial hash of a token's character ids for the hashed word embedding (a Mersenne prime keeps the
# products in int64: 261 * 2**31 * 50 < 2**63).
_HASH_BASE, _HASH_MODULUS = 263, 2**31 - 1


def sentence_boundary_mask(input_ids: torch.Tensor, boundary_rows: list[list[int]] | None = None) -> torch.Tensor:
    """(B, T, 50) character ids -> (B, T) bool, True at `<S>` and `</S>` tokens; with `boundary_rows`
    (`ElmoConfig.sentence_boundary_rows`, e.g. ELMoForManyLangs' `<bos>`/`<eos>`), True at tokens equal to one."""
    if boundary_rows is not None:
        rows = torch.tensor(boundary_rows, dtype=input_ids.dtype, device=input_ids.device)  # (2, width)
        return (input_ids.unsqueeze(-2) == rows).all(-1).any(-1)
    first, second, third = input_ids[..., 0], input_ids[..., 1], input_ids[..., 2]
    return (first == BOW_ID) & ((second == BOS_CHAR_ID) | (second == EOS_CHAR_ID)) & (third == EOW_ID)


class ElmoScalarMix(nn.Module):
    r"""`gamma * sum_k softmax(w)_k * layer_k` over the L + 1 biLM layers (docs/original_model.md, "Scalar mix").

    With `do_layer_norm`, each layer is first normalised per sentence, `(x - mean) / sqrt(var + 1e-12)`, the
    statistics taken over every unmasked element of that sentence's (T, D) slice: not per token, and not over the
    whole batch as bilm-tf's `weight_layers` and allennlp's `ScalarMix` do, whose results depend on the other
    sentences of the batch (docs/original_model.md, "Scalar mix").

    Args:
        mixture_size (`int`): number of layers mixed, L + 1.
        do_layer_norm (`bool`): normalise each layer before weighting.
        initial_scalar_parameters (`list[float]`, *optional*): pre-softmax weights; zeros (equal weights) when
            absent, as allennlp and bilm-tf start.
        trainable (`bool`): learn `scalar_parameters` and `gamma`. Otherwise both are fixed buffers (gamma 1), as
            allennlp's `scalar_mix_parameters`; e.g. `[-9e10, 1, -9e10]` selects layer 1 exactly.

    The paper's gamma is the weight `scale` (`gamma` reads it): transformers up to 4.48 renames any weight whose name
    holds "gamma" as it loads a checkpoint, as it renames an old LayerNorm's. Checkpoints that name it `gamma` (saved
    before) load through `OLD_WEIGHT_NAMES`.
    """

    def __init__(
        self,
        mixture_size: int,
        do_layer_norm: bool = False,
        initial_scalar_parameters: list[float] | None = None,
        trainable: bool = True,
        eps: float = 1e-12,
    ):
        super().__init__()
        if initial_scalar_parameters is None:
            initial_scalar_parameters = [0.0] * mixture_size
        if len(initial_scalar_parameters) != mixture_size:
            raise ValueError(
                f"ElmoScalarMix needs {mixture_size} initial_scalar_parameters, got {initial_scalar_parameters!r}"
            )
        self.mixture_size = mixture_size
        self.do_layer_norm = do_layer_norm
        self.initial_scalar_parameters = [float(v) for v in initial_scalar_parameters]
        self.trainable = trainable
        self.eps = eps
        scalar_parameters = torch.tensor(self.initial_scalar_parameters)
        scale = torch.ones(1)
        if trainable:
            self.scalar_parameters = nn.Parameter(scalar_parameters)
            self.scale = nn.Parameter(scale)
        else:  # fixed: saved with the model, never trained (and never reset to trainable by loading)
            self.register_buffer("scalar_parameters", scalar_parameters)
            self.register_buffer("scale", scale)

    @property
    def gamma(self) -> torch.Tensor:
        """The paper's gamma, the weight `scale`."""
        return self.scale

    def normalized_weights(self) -> torch.Tensor:
        """The softmax-normalised layer weights s, shape (L + 1,)."""
        return torch.softmax(self.scalar_parameters.float(), dim=0)

    def l2_penalty(self, coefficient: float = 1.0) -> torch.Tensor:
        """`coefficient * sum(w ** 2)` of the pre-softmax weights (bilm-tf's regulariser); 0 for a fixed mix."""
        if not self.trainable:
            return self.scalar_parameters.new_zeros(())
        return coefficient * (self.scalar_parameters**2).sum()

    def _layer_norm(self, layer: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """`layer` (..., T, D) normalised per sentence: one mean and one variance over the (T, D) elements of each
        sentence's unmasked positions, so that a sentence's vectors never depend on the rest of its batch."""
        x = layer.float()
        if mask is None:
            mask = torch.ones(x.shape[:-1], dtype=torch.bool, device=x.device)
        # Sums in float64 (MPS has none), so that the statistics do not depend on how much padding a row gets.
        wide = torch.float32 if x.device.type == "mps" else torch.float64
        elements = mask.unsqueeze(-1).to(wide)  # (..., T, 1)
        count = (elements.sum((-2, -1), keepdim=True) * x.shape[-1]).clamp(min=1.0)
        mean = (x.to(wide) * elements).sum((-2, -1), keepdim=True) / count
        variance = (((x.to(wide) - mean) * elements) ** 2).sum((-2, -1), keepdim=True) / count
        return ((x - mean.float()) / torch.sqrt(variance + self.eps).float()).to(layer.dtype)

    def forward(self, layers: list[torch.Tensor] | tuple[torch.Tensor, ...],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """`layers`: L + 1 tensors (B, T, D); `mask` (B, T), the positions whose elements enter each sentence's
        layer-norm statistics (all when absent). Returns (B, T, D)."""
        if len(layers) != self.mixture_size:
            raise ValueError(f"ElmoScalarMix was built for {self.mixture_size} layers, got {len(layers)}")
        weights = self.normalized_weights()
        mixed = None
        for weight, layer in zip(weights, layers):
            if self.do_layer_norm:
                layer = self._layer_norm(layer, mask)
            term = weight.to(layer.dtype) * layer
            mixed = term if mixed is None else mixed + term
        return self.gamma.to(mixed.dtype) * mixed


class ElmoHashedWordEmbedding(nn.Module):
    """A trainable word embedding indexed by a hash of each token's character ids ("ELMo plus word embedding").

    Needs no vocabulary and no input besides the character ids: the same word always lands in the same one of
    `num_buckets - 1` rows (collisions are shared rows); row 0 is padding and stays zero.
    """

    def __init__(self, num_buckets: int, embedding_dim: int):
        super().__init__()
        self.num_buckets = num_buckets
        self.weight = nn.Parameter(torch.empty(num_buckets, embedding_dim))

    def bucket_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, 50) character ids -> (B, T) rows; padding tokens (all ids 0) -> 0."""
        width = input_ids.shape[-1]
        powers = torch.tensor(
            [pow(_HASH_BASE, i, _HASH_MODULUS) for i in range(width)], dtype=torch.long, device=input_ids.device
        )
        hashed = (input_ids.long() * powers).sum(-1) % _HASH_MODULUS  # (B, T)
        buckets = 1 + hashed % (self.num_buckets - 1)
        return buckets.masked_fill(~real_token_mask(input_ids), 0)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(self.bucket_ids(input_ids), self.weight, padding_idx=0)  # (B, T, dim)


def left_align(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Move the masked positions of each row of `x` (B, T, D) to its front, in order; (B, T, D), lengths (B,)."""
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # kept positions first
    return x.gather(1, order.unsqueeze(-1).expand_as(x)), mask.sum(1)


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A bidirectional `lstm` over left-aligned rows (B, T, D) of `lengths` (B,) >= 1 ->
    outputs (B, T, 2H) (zeros past each length) and the final states of both directions (B, 2H)."""
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, (h, _) = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, torch.cat([h[-2], h[-1]], dim=-1)  # forward after its last token, backward after its first


def split_pair(
    input_ids: torch.Tensor, mask: torch.Tensor, second: torch.Tensor
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...]:
    """The two sentences of every row of a batch of pairs, so that the biLM can read each on its own: for the first
    sentences, then for the second ones, `(input_ids, mask, positions)`: the side's tokens left-aligned (B, T_side,
    width) with zero rows past each length (its own padding, as if tokenized alone), its mask (B, T_side) and where
    each of its tokens sits in the row (B, T_side). `mask` (B, T): the real tokens; `second` (B, T): those of the
    second sentences (`token_type_ids` 1)."""
    sides = []
    for side in (mask & ~second, second):
        lengths = side.sum(1)
        width = max(int(lengths.max()), 1)
        positions = torch.argsort((~side).to(torch.int8), dim=1, stable=True)[:, :width]  # the side's tokens first
        side_mask = torch.arange(width, device=mask.device) < lengths.unsqueeze(1)
        ids = input_ids.gather(1, positions.unsqueeze(-1).expand(-1, -1, input_ids.shape[-1]))
        sides.append((ids * side_mask.unsqueeze(-1).to(ids.dtype), side_mask, positions))
    return tuple(sides)


def first_empty_side(sides: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> tuple[int, int] | None:
    """(side, row) of the first row of `split_pair`'s sides that has no token on that side (side 0: the first
    sentences, 1: the second ones), or None when every row holds both: the caller names what is missing."""
    for index, (_, side_mask, _) in enumerate(sides):
        empty = (~side_mask.any(1)).nonzero().flatten().tolist()
        if empty:
            return index, empty[0]
    return None


def place_back(sides: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], length: int) -> torch.Tensor:
    """`(values (B, T_side, D), mask, positions)` of each side of `split_pair` -> (B, length, D): every value back at
    its token's position in the pair's row, zeros at padding."""
    out = None
    for values, mask, positions in sides:
        values = values * mask.unsqueeze(-1).to(values.dtype)  # a side's padding lands on the other side's tokens
        if out is None:
            out = values.new_zeros(values.shape[0], length, values.shape[-1])
        out = out.scatter_add(1, positions.unsqueeze(-1).expand_as(values), values)
    return out


def combine_pair(u: torch.Tensor, v: torch.Tensor, combination: str) -> torch.Tensor:
    """The pooled vectors (B, D) of a pair's sentences -> what the classifier reads (`ElmoConfig.pair_combination`):
    `[u; v; |u - v|; u * v]` (the difference and product show how the two agree, which a linear layer over [u; v]
    alone cannot) or `[u; v]`."""
    if combination == "concat":
        return torch.cat([u, v], dim=-1)
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


@dataclass
class ElmoRepresentationsOutput(ModelOutput):
    """Output of `get_elmo_representations` on the task heads.

    Args:
        elmo_representations (`tuple(torch.FloatTensor)`): `num_output_representations` mixes, each of shape
            `(batch, tokens, 2 * projection_dim)`, before dropout. Positions match `input_ids` (boundaries kept).
        mask (`torch.BoolTensor` of shape `(batch, tokens)`): real tokens, `<S>`/`</S>` included.
        word_mask (`torch.BoolTensor` of shape `(batch, tokens)`): the tokens pooled and used for the layer-norm
            statistics: real tokens without `<S>`/`</S>` (unless `keep_sentence_boundaries`; a row with no word
            keeps its boundaries).
        hidden_states (`tuple(torch.FloatTensor)`): the L + 1 biLM layers that were mixed.
    """

    elmo_representations: tuple[torch.FloatTensor, ...] | None = None
    mask: torch.BoolTensor | None = None
    word_mask: torch.BoolTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None



def scalar_mixes(config) -> nn.ModuleList:
    """The `num_output_representations` scalar mixes of a task head, as `config.scalar_mix` asks: learned (allennlp's
    default), the top layer only, a fixed average, or fixed given weights."""
    mixture_size = config.num_layers + 1
    if config.scalar_mix == "learned":
        initial, trainable = None, True
    elif config.scalar_mix == "top":
        initial, trainable = [-9e10] * config.num_layers + [1.0], False
    elif config.scalar_mix == "average":
        initial, trainable = [0.0] * mixture_size, False
    else:  # "fixed"
        initial, trainable = config.scalar_mix_parameters, False
    return nn.ModuleList(
        ElmoScalarMix(mixture_size, config.scalar_mix_layer_norm, initial, trainable)
        for _ in range(config.num_output_representations)
    )


def word_mask_of(
    input_ids: torch.Tensor, mask: torch.Tensor, keep_sentence_boundaries: bool, boundary_rows=None
) -> torch.Tensor:
    """The tokens a head pools: the real ones, without `<S>`/`</S>` (or `boundary_rows`) unless kept; a row with no
    word keeps its boundaries ("<S> </S>" only: keep what there is)."""
    if keep_sentence_boundaries:
        return mask
    word_mask = mask & ~sentence_boundary_mask(input_ids, boundary_rows)
    empty = ~word_mask.any(1, keepdim=True)
    return torch.where(empty, mask, word_mask)


def pool(
    x: torch.Tensor, word_mask: torch.Tensor, pooling: str, lstm: nn.LSTM | None = None,
    attention: nn.Module | None = None
) -> torch.Tensor:
    """(B, T, D) token vectors and (B, T) mask of the tokens to pool -> (B, D'): "mean", "max", "lstm" (the final
    states of `lstm` over the words) or "attention" (softmax of `attention`'s scores over the words)."""
    keep = word_mask.unsqueeze(-1)  # (B, T, 1)
    if pooling == "mean":
        return (x * keep).sum(1) / keep.sum(1).clamp(min=1).to(x.dtype)
    if pooling == "max":
        return x.masked_fill(~keep, torch.finfo(x.dtype).min).amax(1)
    if pooling == "lstm":
        aligned, lengths = left_align(x, word_mask)
        return run_lstm(lstm, aligned, lengths)[1]  # (B, 2H)
    scores = attention(x).squeeze(-1).float()  # (B, T)
    weights = torch.softmax(scores.masked_fill(~word_mask, float("-inf")), dim=-1).to(x.dtype)
    return torch.einsum("bt,btd->bd", weights, x)


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """Regression (`num_labels == 1`), single-label or multi-label loss, by `config.problem_type` (set from the
    labels when absent), as transformers' BERT heads."""
    num_labels = config.num_labels
    labels = labels.to(logits.device)
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif num_labels > 1 and labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    if config.problem_type == "regression":
        if num_labels == 1:
            return F.mse_loss(logits.squeeze(-1).float(), labels.view(-1).float())
        return F.mse_loss(logits.float(), labels.float())
    if config.problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels).float(), labels.view(-1))
    if config.problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    # set after construction, past `ElmoConfig.validate`: refused rather than trained as multi-label
    raise ValueError(
        "config.problem_type must be 'regression', 'single_label_classification' or 'multi_label_classification', "
        f"got {config.problem_type!r}"
    )


# --------------------------------------------------------------------------------------------------
# The fixed sentence vector (TF Hub's `default`): no trained weights, the same in every saved folder
# --------------------------------------------------------------------------------------------------

# Which layers a sentence vector mixes: "average", "top", a layer index, or L + 1 weights.
LayerChoice = str | int | Sequence[float]


def sentence_word_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                       boundary_rows: list[list[int]] | None = None) -> torch.Tensor:
    """(B, T, 50) character ids -> (B, T) bool: True at real words, False at `<S>`, `</S>` (or the model's
    `boundary_rows`, `ElmoConfig.sentence_boundary_rows`) and padding (a row without words stays all False, unlike
    `word_mask_of`, which then keeps the boundaries)."""
    real = real_token_mask(input_ids)
    if attention_mask is not None:
        real = real & attention_mask.bool()
    return real & ~sentence_boundary_mask(input_ids, boundary_rows)


def mix_layers(hidden_states: Sequence[torch.Tensor] | torch.Tensor, layers: LayerChoice = "average") -> torch.Tensor:
    """The L + 1 layers (a sequence of (B, T, D) tensors, or one (L + 1, B, T, D) tensor) -> (B, T, D): their mean
    ("average"), the top one ("top"), layer k (an int), or `sum_k layers[k] * layer_k` (L + 1 weights)."""
    stacked = hidden_states if isinstance(hidden_states, torch.Tensor) else torch.stack(tuple(hidden_states))
    if isinstance(layers, str):
        if layers == "average":
            return stacked.mean(0)
        if layers == "top":
            return stacked[-1]
        raise ValueError(f"layers must be 'average', 'top', a layer index or a list of weights, got {layers!r}")
    if isinstance(layers, int):
        if not -len(stacked) <= layers < len(stacked):
            raise ValueError(f"layers={layers} is not a layer of the {len(stacked)} in hidden_states")
        return stacked[layers]
    weights = torch.as_tensor(list(layers), dtype=stacked.dtype, device=stacked.device)
    if weights.shape != (len(stacked),):
        raise ValueError(f"layers needs {len(stacked)} weights (one per layer), got {list(layers)!r}")
    return torch.einsum("l,lbtd->btd", weights, stacked)


def mean_pool(hidden_states: Sequence[torch.Tensor] | torch.Tensor, input_ids: torch.Tensor,
              attention_mask: torch.Tensor | None = None, layers: LayerChoice = "average",
              boundary_rows: list[list[int]] | None = None) -> torch.Tensor:
    """(B, D) float32: per row, the mean over its words (`sentence_word_mask`) of the `layers` mix; zeros for a
    row without words. `boundary_rows`: the model's `config.sentence_boundary_rows` (ELMoForManyLangs' markers)."""
    mixed = mix_layers(hidden_states, layers).double()
    mask = sentence_word_mask(input_ids, attention_mask, boundary_rows).to(mixed.device)
    # Rows are summed in float64, so that the result does not depend on how much padding a batch adds.
    summed = (mixed * mask.unsqueeze(-1)).sum(1)
    counts = mask.sum(1, keepdim=True).clamp(min=1)
    return (summed / counts).float()
