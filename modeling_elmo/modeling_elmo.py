"""ELMo biLM (Peters et al. 2018, "Deep contextualized word representations") as a transformers model.

Read top to bottom: the character encoder (layer 0), the biLSTM with projection, the base
`ElmoPreTrainedModel` (all initialisation), `ElmoModel`. Facts about the original TensorFlow model are
cited from `ELMO_SPEC.md` (shared docs) by section.

This file travels to the Hub as remote code: it imports only torch, transformers and its siblings.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import tempfile
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput
from transformers.utils import ModelOutput, logging

from .character_ids import BOS_CHAR_ID, BOW_ID, EOS_CHAR_ID, EOW_ID
from .configuration_elmo import ElmoConfig

logger = logging.get_logger(__name__)

# `state` is a pair (h, c): h of shape (L, 2, B, P), c of shape (L, 2, B, C); index 1 is the direction
# (0 = forward, 1 = backward), index 2 the batch row.
ElmoState = tuple[torch.Tensor, torch.Tensor]


# --------------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------------


@dataclass
class ElmoModelOutput(ModelOutput):
    """Output of `ElmoModel`.

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch, tokens, 2 * projection_dim)`):
            the top biLSTM layer, forward half first. Zeros at padding positions.
        hidden_states (`tuple(torch.FloatTensor)` of L + 1 tensors of that shape, with `output_hidden_states=True`):
            layer 0 (the context-independent token embedding, duplicated to `2 * projection_dim`), then
            every biLSTM layer.
        state (`tuple(torch.FloatTensor)`, with `use_cache=True`): `(h, c)` of shapes
            `(num_layers, 2, batch, projection_dim)` and `(num_layers, 2, batch, cell_size)`, the final LSTM
            states of every row, both directions (forward: after the row's last token; backward: after its
            first). Pass it back as `state=` to continue from there.
    """

    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: ElmoState | None = None


@dataclass
class ElmoForPreTrainingOutput(ModelOutput):
    """Output of `ElmoForPreTraining`.

    Args:
        loss (`torch.FloatTensor` of shape `()`): mean of the forward and backward LM losses.
        forward_loss, backward_loss (`torch.FloatTensor` of shape `()`): mean negative log-likelihood per
            predicted token of each direction; `exp` of either is its perplexity.
        forward_tokens, backward_tokens (`torch.LongTensor` of shape `()`): how many targets each loss averages.
        last_hidden_state, hidden_states, state: as in `ElmoModelOutput`.
    """

    loss: torch.FloatTensor | None = None
    forward_loss: torch.FloatTensor | None = None
    backward_loss: torch.FloatTensor | None = None
    forward_tokens: torch.LongTensor | None = None
    backward_tokens: torch.LongTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: ElmoState | None = None


# --------------------------------------------------------------------------------------------------
# Layer 0: the context-independent character encoder (ELMO_SPEC section 3)
# --------------------------------------------------------------------------------------------------


class ElmoHighway(nn.Module):
    """One highway layer: `y = g * relu(x W_t + b_t) + (1 - g) * x` with `g = sigmoid(x W_c + b_c)`.

    The leaf names keep bilm-tf's: its "carry" gate weights the *transform* branch (ELMO_SPEC 3.3), and the
    transform is a ReLU whatever the CNN activation is.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        width = config.num_char_filters
        self.carry = nn.Linear(width, width)
        self.transform = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.carry(x))
        return gate * F.relu(self.transform(x)) + (1.0 - gate) * x

    def _forward_packed(self, x: torch.Tensor, packed: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """`forward` for inference with oneDNN-packed (carry, transform) weights; the same element-wise operations,
        done in place."""
        gate = _linear(x, None, packed[0], bias=self.carry.bias.to(x.dtype)).sigmoid_()
        transform = _linear(x, None, packed[1], bias=self.transform.bias.to(x.dtype)).relu_()
        transform.mul_(gate)  # g * relu(x W_t + b_t)
        return transform.add_(gate.neg_().add_(1.0).mul_(x))  # + (1 - g) * x


class ElmoTokenCache:
    """A bounded LRU cache of layer-0 vectors: a token's character ids -> its `ElmoCharacterEncoder` output.

    For inference only: `ElmoCharacterEncoder` consults it only when no gradient is needed, and a forward pass that
    needs one (training) empties it. Entries are valid for one state of the encoder's weights: at every call the
    encoder compares `_weights_key` (every parameter's storage, version counter, dtype and device, a digest of the
    small parameters' values) and the autocast setting with the key the entries were made under, and empties the
    cache when they differ; `load_state_dict` empties it too. `hits` counts tokens served without running the
    character CNN (cached earlier, or repeated within the batch), `misses` the tokens it encoded.
    """

    def __init__(self, max_size: int):
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"the token cache size must be a positive integer, got {max_size!r}")
        self.max_size = max_size
        self.entries: OrderedDict[bytes, torch.Tensor] = OrderedDict()  # least recently used first
        self.weights_key: tuple | None = None
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        self.entries.clear()
        self.weights_key = None

    def info(self) -> dict:
        return {"size": len(self.entries), "max_size": self.max_size, "hits": self.hits, "misses": self.misses}


class ElmoCharacterEncoder(nn.Module):
    """Characters of each token -> a token vector of size `projection_dim` (layer 0 of ELMo).

    Character embedding, one convolution per `[width, count]` filter, max-pooling over the character
    positions, the activation, highway layers, then a linear projection (absent when F == P).

    With a token cache (`ElmoModel.enable_token_cache`), inference encodes each distinct token once: tokens
    repeated in the batch or seen in earlier calls skip the CNN. Layer 0 is context-independent, so the vectors
    are those of the plain path (tested). Training encodes each distinct token of a batch once
    (`_forward_distinct`); `lstm_implementation="reference"` turns both off.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        # Row 0 is the padding id and stays zero (the stored table has 261 rows, ELMO_SPEC 1).
        self.char_embedding = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, count, kernel_size=width) for width, count in config.char_cnn_filters
        )
        self._filters = [tuple(f) for f in config.char_cnn_filters]
        self.config = config  # `lstm_implementation="reference"` also turns the fast inference path off here
        self.activation = torch.tanh if config.char_cnn_activation == "tanh" else F.relu
        self.highways = nn.ModuleList(ElmoHighway(config) for _ in range(config.num_highway_layers))
        filters = config.num_char_filters
        self.projection = nn.Linear(filters, config.projection_dim) if filters != config.projection_dim else None
        self.token_cache: ElmoTokenCache | None = None  # not a parameter or buffer: never saved
        self._inference_weights = _PackedWeights()  # oneDNN copies for CPU inference, never saved

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """`char_ids` (N, 50) of real tokens -> (N, P)."""
        cache = self.token_cache
        if _needs_grad(*self.parameters()):
            # training: the weights are about to change (some optimizers leave no trace of it)
            self._inference_weights.clear()
            if cache is not None:
                cache.clear()
            if getattr(self.config, "lstm_implementation", "auto") != "reference" and not torch.compiler.is_compiling():
                return self._forward_distinct(char_ids)
        elif cache is not None and char_ids.shape[0] > 0 and not torch.compiler.is_compiling():
            return self._forward_cached(char_ids, cache)
        return self.encode(char_ids)

    def _forward_distinct(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Training: the CNN runs once per distinct token of the batch, and the vectors are gathered back. Natural
        text repeats words ("the", ".", ...), so this saves a large part of the layer-0 work of a training step;
        the gradient of a repeated token is summed over its positions, as the plain path sums it in the weights."""
        if char_ids.shape[0] < 2:
            return self.encode(char_ids)
        distinct, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        if distinct.shape[0] == char_ids.shape[0]:
            return self.encode(char_ids)
        return self.encode(distinct)[inverse]

    def encode(self, char_ids: torch.Tensor) -> torch.Tensor:
        """The character CNN itself, without the cache: (N, 50) -> (N, P)."""
        chars = self.char_embedding(char_ids)  # (N, 50, d)
        packed = None if _needs_grad(*self.parameters()) else self._packed_weights(chars)
        if packed is not None:
            return self._encode_packed(chars, packed)
        chars = chars.transpose(1, 2)  # (N, d, 50)
        # Max-pool then activate: the same as activate then max-pool, both are monotone (ELMO_SPEC 3.2).
        pooled = [conv(chars).amax(dim=-1) for conv in self.convolutions]  # F_i x (N, n_i)
        x = self.activation(torch.cat(pooled, dim=-1))  # (N, F)
        for highway in self.highways:
            x = highway(x)
        if self.projection is not None:
            x = self.projection(x)  # (N, P)
        return x

    def _encode_packed(self, chars: torch.Tensor, packed: dict) -> torch.Tensor:
        """`encode` for inference on the CPU: every matrix multiply through oneDNN with pre-packed weights (the
        convolutions as multiplies over character windows); the same operations otherwise. (N, 50, d) -> (N, P)."""
        with torch.autocast(chars.device.type, enabled=False):
            x = self.activation(self._convolve_packed(chars.to(packed["dtype"]), packed))  # (N, F)
            for highway, weights in zip(self.highways, packed["highways"]):
                x = highway._forward_packed(x, weights)
            if self.projection is not None:
                x = _linear(x, None, packed["projection"], bias=self.projection.bias.to(x.dtype))  # (N, P)
        return x

    def _convolve_packed(self, chars: torch.Tensor, packed: dict) -> torch.Tensor:
        """The convolutions and the max-pooling, as matrix multiplies of the weights (count, width * d) with the
        windows of `width` characters (a strided view, no copy), a few tokens at a time so that the (tokens, positions,
        count) products stay in the cache: (N, 50, d) -> (N, F), before the activation. The bias is added after the
        max, which is exact (rounding is monotone)."""
        tokens, length, dim = chars.shape
        chars = chars.contiguous()
        out = chars.new_empty(tokens, sum(count for _, count in self._filters))
        for start in range(0, tokens, _CONV_TOKENS_PER_BLOCK):
            block = chars[start : start + _CONV_TOKENS_PER_BLOCK]
            column = 0
            for (width, count), weight in zip(self._filters, packed["convolutions"]):
                windows = block.as_strided(
                    (block.shape[0], length - width + 1, width * dim), (length * dim, dim, 1), block.storage_offset()
                )  # (b, positions, width * d)
                products = _linear(windows, None, weight)  # (b, positions, count)
                torch.amax(products, dim=1, out=out[start : start + block.shape[0], column : column + count])
                column += count
        return out.add_(packed["conv_bias"])

    def _packed_weights(self, x: torch.Tensor) -> dict | None:
        """oneDNN-packed copies of the convolution, highway and projection matrices for CPU inference, or None."""
        dtype = _compute_dtype(x)
        if getattr(self.config, "lstm_implementation", "auto") == "reference" or not _use_onednn(x.device, dtype):
            return None

        def build():
            return {
                "dtype": dtype,
                # (count, d, width) -> (count, width * d), matching the windows' layout (position-major)
                "convolutions": [
                    _pack_weight(conv.weight.detach().permute(0, 2, 1).reshape(conv.out_channels, -1).to(dtype))
                    for conv in self.convolutions
                ],
                "conv_bias": torch.cat([conv.bias.detach() for conv in self.convolutions]).to(dtype),
                "highways": [
                    (_pack_weight(h.carry.weight.detach().to(dtype)), _pack_weight(h.transform.weight.detach().to(dtype)))
                    for h in self.highways
                ],
                "projection": _pack_weight(self.projection.weight.detach().to(dtype)) if self.projection else None,
            }

        return self._inference_weights.get(_weights_key(self.parameters(), dtype), build)

    def _forward_cached(self, char_ids: torch.Tensor, cache: ElmoTokenCache) -> torch.Tensor:
        device = char_ids.device
        autocast = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else None
        key = _weights_key(self.parameters(), autocast)  # what the cached vectors depend on besides the token
        if cache.weights_key != key:
            if cache.entries:
                logger.info("ELMo token cache emptied: the character encoder's weights (or autocast) changed")
            cache.clear()
            cache.weights_key = key
        rows = char_ids.detach().to(device="cpu", dtype=torch.int16).contiguous().numpy()  # ids < 262 fit
        blob, width = rows.tobytes(), rows.shape[1] * 2
        keys = [blob[i : i + width] for i in range(0, len(blob), width)]  # one key per token
        slot: dict[bytes, int] = {}  # distinct token -> its index among the distinct tokens of this batch
        first: list[int] = []  # the row of each distinct token's first occurrence
        inverse = []
        for row, token in enumerate(keys):
            index = slot.get(token)
            if index is None:
                index = slot[token] = len(first)
                first.append(row)
            inverse.append(index)
        entries = cache.entries
        vectors: list[torch.Tensor | None] = []
        missing = []
        for index, token in enumerate(slot):
            vector = entries.get(token)
            if vector is None:
                missing.append(index)
            else:
                entries.move_to_end(token)
            vectors.append(vector)
        if missing:
            rows_to_encode = torch.tensor([first[i] for i in missing], device=char_ids.device)
            encoded = self.encode(char_ids[rows_to_encode])  # (M, P)
            for index, vector in zip(missing, encoded):
                vector = vector.clone()  # its own storage, so that evicting frees it
                vectors[index] = vector
                entries[keys[first[index]]] = vector
            while len(entries) > cache.max_size:
                entries.popitem(last=False)
        cache.misses += len(missing)
        cache.hits += len(keys) - len(missing)
        table = torch.stack(vectors)  # (U, P)
        return table[torch.tensor(inverse, device=table.device)]  # (N, P)

    def _load_from_state_dict(self, *args, **kwargs):
        if self.token_cache is not None:
            self.token_cache.clear()
        self._inference_weights.clear()
        super()._load_from_state_dict(*args, **kwargs)


# --------------------------------------------------------------------------------------------------
# The biLSTM with projection and clipping (ELMO_SPEC section 4)
# --------------------------------------------------------------------------------------------------


def _needs_grad(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd would record an op on these tensors right now."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a matmul on `x` produces here: the autocast dtype when autocast is on, else `x.dtype`."""
    device_type = x.device.type
    if device_type in ("cpu", "cuda") and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


def _packed_index(batch_sizes: list[int], steps: int, batch: int, time_major: bool) -> torch.Tensor:
    """Flat positions of the real (step t, row r) pairs of length-sorted rows, in packed order (step by step, rows in
    order, as `torch.nn.utils.rnn.PackedSequence`): `t * batch + r` in (T, B) data, `r * steps + t` in (B, T) data."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    step = torch.repeat_interleave(torch.arange(len(batch_sizes)), sizes)  # (N,)
    row = torch.arange(int(sizes.sum())) - (torch.cumsum(sizes, 0) - sizes)[step]
    return step * batch + row if time_major else row * steps + step


def _last_rows(batch_sizes: list[int], device: torch.device) -> torch.Tensor:
    """Packed position of each row's last step (rows `0 .. batch_sizes[0] - 1`)."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes  # first packed position of each step
    rows = torch.arange(batch_sizes[0])
    lengths = (sizes.unsqueeze(0) > rows.unsqueeze(1)).sum(1)  # (rows,)
    return (starts[lengths - 1] + rows).to(device)


def _weights_key(parameters, *extra) -> tuple:
    """Identifies the current values of `parameters`, for caches derived from them (token vectors, packed weights).

    Every parameter's storage, version counter (bumped by in-place changes: optimizer steps, `load_state_dict`,
    `copy_`), dtype and device, plus a digest of the contents of the small ones (biases, the character table: a few
    thousand numbers): fused optimizers update parameters without bumping their version counters, but never leave
    all of those unchanged. Only writes through `.data` of the large matrices alone would go unnoticed.
    """
    digest = hashlib.blake2b(digest_size=16)
    versions = []
    for p in parameters:
        if p.numel() <= 65536:
            digest.update(p.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        versions.append((p.data_ptr(), p._version, p.dtype, p.device))
    return (*extra, digest.digest(), tuple(versions))


class _PackedWeights:
    """Derived copies of a module's weights for inference, rebuilt when `key` changes. Never copied or pickled with
    the module (oneDNN tensors cannot be): a copy starts empty."""

    def __init__(self):
        self.key, self.value = None, None

    def get(self, key, build):
        if self.key != key:
            self.key, self.value = None, None  # free the old copies before building new ones
            self.value, self.key = build(), key
        return self.value

    def clear(self) -> None:
        self.key, self.value = None, None

    def __deepcopy__(self, memo):
        return _PackedWeights()

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.key, self.value = None, None


_ONEDNN: dict[str, bool] = {}
_CONV_TOKENS_PER_BLOCK = 32  # tokens per block of the CPU inference convolution (their products fit in the cache)


def _use_onednn(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the CPU inference paths use oneDNN matrix multiplies with pre-packed weights: on CPU builds that have
    them, for float32 and bfloat16, outside `torch.compile` tracing."""
    if device.type != "cpu" or dtype not in (torch.float32, torch.bfloat16) or torch.compiler.is_compiling():
        return False
    if "available" not in _ONEDNN:
        try:
            weight = torch.ones(4, 3)
            out = torch.ops.mkldnn._linear_pointwise(torch.ones(2, 3), _pack_weight(weight), None, "none", [], "")
            _ONEDNN["available"] = bool(torch.equal(out, torch.full((2, 4), 3.0)))
        except (AttributeError, RuntimeError, NotImplementedError):
            _ONEDNN["available"] = False
    return _ONEDNN["available"]


def _pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """A (out, in) weight in oneDNN's blocked layout for `_linear`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), None)


def _linear(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    packed: torch.Tensor | None,
    bias: torch.Tensor | None = None,
    add: torch.Tensor | None = None,
) -> torch.Tensor:
    """`x @ weight.T (+ bias) (+ add)`: oneDNN with the packed weight when there is one, else torch. (oneDNN's fused
    "add" epilogue measured 5-15% slower than a separate `add_` here.)"""
    if packed is not None:
        out = torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    else:
        out = F.linear(x, weight, bias)
    return out if add is None else out.add_(add)


class ElmoBiLstmLayer(nn.Module):
    """One biLSTM layer: the forward and backward LSTM cells of one depth, stacked on a leading axis of 2.

    Parameters use `torch.nn.LSTM`'s names and gate order (i, f, g, o), with the forget-gate bias of
    +1 folded into `bias` (bilm-tf adds it at run time; the converter adds it when loading).

    - `weight_ih` (2, 4C, P), `weight_hh` (2, 4C, P), `bias` (2, 4C);
    - `weight_hr` (2, P, C): the projection of the cell output, no bias (absent when C == P).

    Three implementations of the same recurrence (`config.lstm_implementation`, read at every call; `implementation`
    says which one a call takes):

    - `_forward_reference`: the plain loop, written for autograd; the definition the others are tested against;
    - `_forward_loop` / `_forward_packed`: the same functions in the same order, for inference (no gradient
      needed): packed rows, the cell state updated in place, the step's input projection added in the matrix
      multiply's epilogue, and on the CPU oneDNN multiplies with weights packed once into its blocked layout
      (`_PackedWeights`, rebuilt when the weights change); `ElmoBiLm` runs the whole stack packed;
    - `_forward_fused`: torch's LSTM kernel (`torch._VF.lstm`, cuDNN on GPU) on packed sequences, fed with views of
      these parameters (nothing is copied or renamed), gradients included; exact only without clipping, which that
      kernel lacks.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        cell, proj = config.cell_size, config.projection_dim
        self.cell_size, self.projection_dim = cell, proj
        # TF's LSTMCell clips the projected state only when there is a projection (C != P).
        self.cell_clip = config.cell_clip
        self.proj_clip = config.proj_clip if cell != proj else None
        self.config = config  # `lstm_implementation` is read at call time, so it can be switched on a live model
        self.weight_ih = nn.Parameter(torch.empty(2, 4 * cell, proj))
        self.weight_hh = nn.Parameter(torch.empty(2, 4 * cell, proj))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell))
        self.weight_hr = nn.Parameter(torch.empty(2, proj, cell)) if cell != proj else None
        self._inference_weights = _PackedWeights()  # oneDNN copies for the CPU loop, never saved

    @property
    def clipped(self) -> bool:
        return self.cell_clip is not None or self.proj_clip is not None

    def implementation(self, inputs: torch.Tensor, state: ElmoState) -> str:
        """Which of `"reference"`, `"loop"`, `"fused"` a call with these arguments runs."""
        choice = getattr(self.config, "lstm_implementation", "auto")
        needs_grad = _needs_grad(inputs, *state, *self.parameters())
        if needs_grad:
            self._inference_weights.clear()  # training: the weights are about to change
        # "auto" takes torch's kernel where it is the faster exact path for unclipped models: on GPU (cuDNN), and for
        # training on the CPU (10-20% faster than the autograd loop); CPU inference runs the oneDNN loop, 2x faster
        # than the kernel at the original size (benchmarks/results_speed.md)
        if choice == "fused" or (
            choice == "auto" and not self.clipped and (inputs.device.type == "cuda" or needs_grad)
        ):
            if self.clipped:
                raise ValueError(
                    "lstm_implementation='fused' needs a model without clipping (torch's LSTM kernel has none): "
                    f"cell_clip={self.cell_clip!r}, proj_clip={self.proj_clip!r}"
                )
            return "fused"
        return "reference" if needs_grad or choice == "reference" else "loop"

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """Run both directions over time-major, length-sorted input.

        Args:
            inputs: (2, T, B, P); direction 1 holds each row already reversed within its own length.
                Rows are sorted by decreasing length, so at step t only the first `batch_sizes[t]` rows
                are real and no work is spent on padding.
            batch_sizes: the number of real rows at each step, non-increasing.
            state: (h, c) of shapes (2, B, P) and (2, B, C).

        Returns:
            outputs (2, T, B, P), zero past each row's length, and the final (h, c) of every row.
        """
        implementation = self.implementation(inputs, state)
        if implementation == "fused":
            return self._forward_fused(inputs, batch_sizes, state)
        if implementation == "loop":
            return self._forward_loop(inputs, batch_sizes, state)
        return self._forward_reference(inputs, batch_sizes, state)

    def _forward_reference(
        self, inputs: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """The recurrence of ELMO_SPEC 4, written plainly (autograd-friendly). Arguments as `forward`."""
        h, c = state
        cell = self.cell_size
        # Input projections of every timestep in one matrix multiply (bias included).
        x_proj = torch.baddbmm(
            self.bias.unsqueeze(1), inputs.flatten(1, 2), self.weight_ih.transpose(1, 2)
        ).view(2, inputs.shape[1], inputs.shape[2], 4 * cell)  # (2, T, B, 4C)
        w_hh = self.weight_hh.transpose(1, 2)  # (2, P, 4C)
        w_hr = self.weight_hr.transpose(1, 2) if self.weight_hr is not None else None  # (2, C, P)
        outputs = []
        for t, active in enumerate(batch_sizes):
            h_t, c_t = h[:, :active], c[:, :active]
            gates = torch.baddbmm(x_proj[:, t, :active], h_t, w_hh)  # (2, b, 4C)
            in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)
            c_new = torch.sigmoid(forget_gate) * c_t + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
            if self.cell_clip is not None:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = torch.sigmoid(out_gate) * torch.tanh(c_new)  # (2, b, C)
            if w_hr is not None:
                h_new = torch.bmm(h_new, w_hr)  # (2, b, P)
            if self.proj_clip is not None:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h_new)
            if active == h.shape[1]:
                h, c = h_new, c_new
            else:  # rows past their length keep their state
                h = torch.cat([h_new, h[:, active:].to(h_new.dtype)], dim=1)
                c = torch.cat([c_new, c[:, active:].to(c_new.dtype)], dim=1)
        batch = inputs.shape[2]
        out = torch.stack([F.pad(o, (0, 0, 0, batch - o.shape[1])) for o in outputs], dim=1)  # (2, T, B, P)
        return out, (h, c)

    def _forward_loop(
        self, inputs: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """`_forward_packed` behind the interface of `forward`: packs (2, T, B, P), runs, unpacks."""
        steps, batch = inputs.shape[1], inputs.shape[2]
        index = _packed_index(batch_sizes, steps, batch, time_major=True).to(inputs.device)  # positions t * B + r
        out, final_state = self._forward_packed(inputs.flatten(1, 2)[:, index], batch_sizes, state)
        unpacked = out.new_zeros(2, steps * batch, self.projection_dim)
        unpacked[:, index] = out
        return unpacked.view(2, steps, batch, -1), final_state

    def _forward_packed(
        self, x: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """The inference loop: `_forward_reference`'s recurrence without autograd bookkeeping, on packed input.

        Args:
            x: (2, N, P), packed: row `sum(batch_sizes[:t]) + r` is batch row r at step t (rows sorted by decreasing
                length, so step t holds rows `0 .. batch_sizes[t] - 1`), as in `torch.nn.utils.rnn.PackedSequence`.
            batch_sizes, state: as in `forward` (state rows in the same sorted order).

        Returns:
            outputs (2, N, P), packed the same way, and the final (h, c) of every row.

        The same functions in the same order as the reference, so results agree to rounding (tested), but: each
        step's rows are contiguous in the packed buffers and the cell state of the active rows is a contiguous
        prefix updated in place (no `torch.cat`, no copies of the state, no autograd bookkeeping); on the CPU,
        matrix multiplies run through oneDNN with the weights pre-packed once into its blocked layout
        (`_PackedWeights`), which stays near the machine's peak at the small row counts of a recurrence (MKL's
        `torch.mm` reaches about a third of that at 32 rows on the project's machines).
        """
        h0, c0 = state
        cell = self.cell_size
        device = x.device
        dtype = _compute_dtype(x)  # what the reference's matrix multiplies give under autocast
        rows = batch_sizes[0] if batch_sizes else 0
        with torch.autocast(device.type, enabled=False):
            x = x.to(dtype)
            packed = self._packed_weights(dtype, device)
            if packed is None:  # GPU (or a CPU build without oneDNN): both directions in each batched multiply
                return self._forward_packed_batched(x, batch_sizes, state, dtype)
            out = x.new_empty(x.shape[:2] + (self.projection_dim,))  # (2, N, P), every row written below
            state_dtype = torch.promote_types(c0.dtype, dtype)  # the reference promotes c to the gates' dtype
            h_final = h0.to(dtype, copy=True)  # (2, B, P): rows past their length keep theirs
            c_final = c0.to(state_dtype, copy=True)  # (2, B, C): updated in place, active rows are a prefix
            scratch = torch.empty((rows, cell), dtype=state_dtype, device=device)
            for d in range(2):
                p_ih, p_hh, p_hr = packed[d]  # oneDNN-packed weight_ih, weight_hh, weight_hr of this direction
                inputs = _linear(x[d], None, p_ih, bias=self.bias[d].to(dtype))  # (N, 4C)
                h_prev, c = h0[d, :rows].to(dtype), c_final[d]
                offset = 0
                for active in batch_sizes:
                    step = slice(offset, offset + active)
                    gates = _linear(h_prev[:active], None, p_hh, add=inputs[step])  # (b, 4C)
                    gates[:, : 2 * cell].sigmoid_()  # input and forget gates
                    gates[:, 3 * cell :].sigmoid_()  # output gate
                    gates[:, 2 * cell : 3 * cell].tanh_()  # cell candidate
                    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=1)  # (b, C) each
                    c_t, hidden = c[:active], scratch[:active]
                    torch.mul(in_gate, cell_gate, out=hidden)
                    c_t.mul_(forget_gate).add_(hidden)  # sigmoid(f) * c + sigmoid(i) * tanh(g)
                    if self.cell_clip is not None:
                        c_t.clamp_(-self.cell_clip, self.cell_clip)
                    torch.tanh(c_t, out=hidden).mul_(out_gate)  # (b, C)
                    h_t = out[d, step]  # (b, P)
                    h_t.copy_(_linear(hidden.to(dtype), None, p_hr) if p_hr is not None else hidden)
                    if self.proj_clip is not None:
                        h_t.clamp_(-self.proj_clip, self.proj_clip)
                    h_prev = h_t
                    offset += active
            if rows:  # the final h of each row is its output at its last step
                h_final[:, :rows] = out[:, _last_rows(batch_sizes, device)]
        return out, (h_final, c_final)

    def _forward_packed_batched(
        self, x: torch.Tensor, batch_sizes: list[int], state: ElmoState, dtype: torch.dtype
    ) -> tuple[torch.Tensor, ElmoState]:
        """`_forward_packed` with the two directions side by side in every `baddbmm`/`bmm` (half the kernel
        launches, for GPUs). Called with autocast off and `x` in `dtype`."""
        h0, c0 = state
        cell = self.cell_size
        rows = batch_sizes[0] if batch_sizes else 0
        bias, w_ih, w_hh = (w.to(dtype) for w in (self.bias, self.weight_ih, self.weight_hh))
        w_hr = self.weight_hr.to(dtype).transpose(1, 2) if self.weight_hr is not None else None  # (2, C, P)
        inputs = torch.baddbmm(bias.unsqueeze(1), x, w_ih.transpose(1, 2))  # (2, N, 4C)
        w_hh = w_hh.transpose(1, 2)  # (2, P, 4C)
        out = x.new_empty(x.shape[:2] + (self.projection_dim,))  # (2, N, P)
        state_dtype = torch.promote_types(c0.dtype, dtype)
        h_final = h0.to(dtype, copy=True)
        c_final = c0.to(state_dtype, copy=True)  # (2, B, C), active rows a prefix of each direction
        scratch = torch.empty((2, rows, cell), dtype=state_dtype, device=x.device)
        h_prev = h0[:, :rows].to(dtype)
        offset = 0
        for active in batch_sizes:
            step = slice(offset, offset + active)
            gates = torch.baddbmm(inputs[:, step], h_prev[:, :active], w_hh)  # (2, b, 4C)
            gates[..., : 2 * cell].sigmoid_()
            gates[..., 3 * cell :].sigmoid_()
            gates[..., 2 * cell : 3 * cell].tanh_()
            in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)
            c_t, hidden = c_final[:, :active], scratch[:, :active]
            torch.mul(in_gate, cell_gate, out=hidden)
            c_t.mul_(forget_gate).add_(hidden)
            if self.cell_clip is not None:
                c_t.clamp_(-self.cell_clip, self.cell_clip)
            torch.tanh(c_t, out=hidden).mul_(out_gate)
            h_t = out[:, step]  # (2, b, P)
            if w_hr is not None:
                torch.bmm(hidden.to(dtype), w_hr, out=h_t)
            else:
                h_t.copy_(hidden)
            if self.proj_clip is not None:
                h_t.clamp_(-self.proj_clip, self.proj_clip)
            h_prev = h_t
            offset += active
        if rows:
            h_final[:, :rows] = out[:, _last_rows(batch_sizes, x.device)]
        return out, (h_final, c_final)

    def _matrices(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        return self.weight_ih, self.weight_hh, self.weight_hr

    def _load_from_state_dict(self, *args, **kwargs):
        self._inference_weights.clear()
        super()._load_from_state_dict(*args, **kwargs)

    def _packed_weights(self, dtype: torch.dtype, device: torch.device) -> list[tuple] | None:
        """oneDNN-packed (w_ih, w_hh, w_hr) of each direction for CPU inference, or None where not used."""
        if not _use_onednn(device, dtype):
            return None

        def build():
            return [
                tuple(None if w is None else _pack_weight(w[d].detach().to(dtype)) for w in self._matrices())
                for d in range(2)
            ]

        return self._inference_weights.get(_weights_key(self.parameters(), dtype), build)

    def _forward_fused(
        self, inputs: torch.Tensor, batch_sizes: list[int], state: ElmoState
    ) -> tuple[torch.Tensor, ElmoState]:
        """torch's LSTM kernel, one direction at a time on packed sequences (directions do not mix between ELMo
        layers, so one bidirectional call cannot be used). Exact only without clipping."""
        h0, c0 = state
        steps, batch = inputs.shape[1], inputs.shape[2]
        rows = batch_sizes[0] if batch_sizes else 0
        dtype = _compute_dtype(inputs)
        out = inputs.new_zeros((2, steps, batch, self.projection_dim), dtype=dtype)
        if not rows:
            return out, (h0, c0)
        # flat positions (t * B + r) of the real rows of every step, in packed order
        device = inputs.device
        packed_index = torch.cat([torch.arange(b, device=device) + t * batch for t, b in enumerate(batch_sizes)])
        sizes = torch.tensor(batch_sizes, dtype=torch.int64)  # on the CPU, as PackedSequence keeps it
        bias = self.bias.to(dtype)
        zero_bias = bias.new_zeros(4 * self.cell_size)  # the kernel adds two biases; ours already holds both
        h_final, c_final = [], []
        with torch.autocast(device.type, enabled=False), warnings.catch_warnings():
            # cuDNN compacts weights that are not one flat buffer (ours are views of the stacked parameters)
            warnings.filterwarnings("ignore", message="RNN module weights are not part")
            for d in range(2):
                weights = [self.weight_ih[d].to(dtype), self.weight_hh[d].to(dtype), bias[d], zero_bias]
                if self.weight_hr is not None:
                    weights.append(self.weight_hr[d].to(dtype))
                data = inputs[d].reshape(steps * batch, -1)[packed_index].to(dtype)  # (N, P), packed
                hx = (h0[d : d + 1, :rows].to(dtype).contiguous(), c0[d : d + 1, :rows].to(dtype).contiguous())
                output, h_n, c_n = torch._VF.lstm(data, sizes, hx, weights, True, 1, 0.0, self.training, False)
                out[d].view(steps * batch, -1)[packed_index] = output  # (N, P) -> (T, B, P)
                h_final.append(torch.cat([h_n[0], h0[d, rows:].to(dtype)]))  # rows past their length keep theirs
                c_final.append(torch.cat([c_n[0], c0[d, rows:].to(dtype)]))
        return out, (torch.stack(h_final), torch.stack(c_final))


def _reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of `x` (B, T, ...) within its own length; positions past it stay where they are."""
    batch, steps = x.shape[:2]
    positions = torch.arange(steps, device=x.device).expand(batch, steps)
    lengths = lengths.unsqueeze(1)
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)  # (B, T)
    index = index.view(batch, steps, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class ElmoBiLm(nn.Module):
    """L biLSTM layers over the token vectors, padding-aware, without sorting the caller's batch."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.layers = nn.ModuleList(ElmoBiLstmLayer(config) for _ in range(config.num_layers))
        self.use_skip_connections = config.use_skip_connections
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        state: ElmoState,
        backward_tokens: torch.Tensor | None = None,
    ) -> tuple[list[torch.Tensor], ElmoState]:
        """`tokens` (B, T, P), `lengths` (B,), `state` (h (L,2,B,P), c (L,2,B,C)) ->
        a list of L outputs (B, T, 2P) and the final state.

        `backward_tokens` (B, T, P), for stream training: the sequence the backward LSTM reads, already in
        its reading order (bilm-tf feeds it each sentence reversed); its outputs are then returned in that
        order instead of being aligned to `tokens`.
        """
        batch, steps, _ = tokens.shape
        # Sort rows by decreasing length so that each step only touches real rows (like packed sequences).
        order = torch.argsort(lengths, descending=True, stable=True)
        restore = torch.argsort(order)
        sorted_lengths = lengths[order]
        batch_sizes = (sorted_lengths.unsqueeze(0) > torch.arange(steps, device=lengths.device).unsqueeze(1)).sum(1)
        batch_sizes = [int(b) for b in batch_sizes.tolist() if b > 0]
        x = tokens[order]
        if backward_tokens is None:
            # Backward direction: each row reversed within its length, so it starts on its own last token.
            x = torch.stack([x, _reverse_within_lengths(x, sorted_lengths)])  # (2, B, T, P)
        else:
            x = torch.stack([x, backward_tokens[order]])  # (2, B, T, P)
        h0, c0 = state[0][:, :, order], state[1][:, :, order]

        packed = all(
            layer.implementation(x, (h0[i], c0[i])) == "loop" for i, layer in enumerate(self.layers)
        )
        if packed:  # inference: the whole stack on packed, feature-major data (ElmoBiLstmLayer._forward_packed)
            index = _packed_index(batch_sizes, steps, batch, time_major=False).to(x.device)  # positions r * T + t
            x = x.flatten(1, 2)[:, index]  # (2, N, P)
        else:
            x = x[:, :, : len(batch_sizes)].transpose(1, 2)  # (2, T', B, P), time-major
        layer_outputs, final_h, final_c = [], [], []
        for i, layer in enumerate(self.layers):
            if packed:
                out, (h, c) = layer._forward_packed(self.dropout(x), batch_sizes, (h0[i], c0[i]))
            else:
                out, (h, c) = layer(self.dropout(x), batch_sizes, (h0[i], c0[i]))
            if self.use_skip_connections and i > 0:  # the residual touches the output, not the state
                out = out + x  # both are zero past each row's length
            x = out
            final_h.append(h)
            final_c.append(c)
            layer_outputs.append(out)

        results = []
        for out in layer_outputs:
            if packed:  # (2, N, P) -> (2, B, T, P), zeros past each row's length
                padded = out.new_zeros(2, batch * steps, out.shape[-1])
                padded[:, index] = out
                out = padded.view(2, batch, steps, -1)
            else:
                out = out.transpose(1, 2)  # (2, B, T', P)
                out = F.pad(out, (0, 0, 0, steps - out.shape[2]))
            backward = out[1] if backward_tokens is not None else _reverse_within_lengths(out[1], sorted_lengths)
            results.append(torch.cat([out[0], backward], dim=-1)[restore])  # (B, T, 2P)
        h = torch.stack(final_h)[:, :, restore]
        c = torch.stack(final_c)[:, :, restore]
        return results, (h, c)


# --------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------


class ElmoPreTrainedModel(PreTrainedModel):
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = ["ElmoBiLstmLayer"]
    # A pretraining folder opens as the feature model or a task model: its softmax is simply not used.
    _keys_to_ignore_on_load_unexpected = [r"^softmax\."]

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        model = super().from_pretrained(*args, **kwargs)
        # Weights memory-mapped from safetensors can sit at addresses that make the BLAS kernels take another
        # path, which changes results in the last bit. Copying them makes a loaded model give exactly the
        # outputs of the model that was saved.
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                if tensor.device.type == "cpu" and tensor.data_ptr() % 64:
                    tensor.data = tensor.data.clone()
        return model

    def push_to_hub(
        self,
        repo_id: str,
        commit_message: str | None = None,
        commit_description: str | None = None,
        private: bool | None = None,
        token: bool | str | None = None,
        revision: str | None = None,
        create_pr: bool = False,
        max_shard_size: int | str | None = "50GB",
        tags: list[str] | None = None,
    ):
        """Upload the model (weights, config.json with `auto_map`, the remote code) to the Hub in one commit, with
        the ELMo model card (`model_card.md` filled from the config) as README.md when the repository has no card
        yet. Arguments and return value (a `CommitInfo`) as `PreTrainedModel.push_to_hub`; a failure raises
        `HubPushError` saying what went wrong and what to do.

        The card and the single-commit push come from `modeling_elmo.hub_utils`, which does not travel with the
        remote code: a model loaded as remote code where this project is not installed pushes as any other
        transformers model, with transformers' generic card.
        """
        try:
            hub_utils = importlib.import_module("modeling_elmo.hub_utils")
        except ImportError:
            extra = {} if tags is None else {"tags": tags}  # transformers' own push fails on an explicit tags=None
            return super().push_to_hub(
                repo_id, commit_message=commit_message, commit_description=commit_description, private=private,
                token=token, revision=revision, create_pr=create_pr, max_shard_size=max_shard_size, **extra,
            )
        with tempfile.TemporaryDirectory() as folder:
            self.save_pretrained(folder, max_shard_size=max_shard_size)
            return hub_utils.push_folder(
                folder, repo_id, token=token, private=private, revision=revision, create_pr=create_pr,
                commit_message=commit_message or f"Upload {type(self).__name__}", commit_description=commit_description,
                tags=[*(self.model_tags or []), *(tags or [])],
            )

    def _initialize_weights(self, module, is_custom_code: bool = False):
        # transformers skips `_init_weights` for a module of remote code that has no parameters of its own
        # (ElmoCharacterEncoder, ElmoHighway), so their initialisation below would never run. Every write in
        # `_init_weights` goes through `transformers.initialization`, which leaves loaded tensors alone, so
        # the remote-code shortcut is not needed.
        super()._initialize_weights(module, is_custom_code=False)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialise every parameter, as bilm-tf's training graph does where it is known."""
        std = self.config.initializer_range
        if isinstance(module, ElmoCharacterEncoder):
            table = module.char_embedding.weight
            values = torch.empty_like(table).uniform_(-1.0, 1.0)
            values[0] = 0.0  # the padding row of the character table is zero (ELMO_SPEC 3.1)
            init.copy_(table, values)
            for conv in module.convolutions:
                init.uniform_(conv.weight, -0.05, 0.05)
                init.zeros_(conv.bias)
            if module.projection is not None:
                init.normal_(module.projection.weight, std=1.0 / math.sqrt(module.projection.in_features))
                init.zeros_(module.projection.bias)
        elif isinstance(module, ElmoHighway):
            width = module.carry.in_features
            init.normal_(module.carry.weight, std=1.0 / math.sqrt(width))
            init.constant_(module.carry.bias, -2.0)  # bilm-tf starts the highway mostly carrying x through
            init.normal_(module.transform.weight, std=1.0 / math.sqrt(width))
            init.zeros_(module.transform.bias)
        elif isinstance(module, ElmoBiLstmLayer):
            bound = 1.0 / math.sqrt(module.projection_dim)
            init.uniform_(module.weight_ih, -bound, bound)
            init.uniform_(module.weight_hh, -bound, bound)
            cell = module.cell_size
            bias = torch.zeros(2, 4 * cell)
            bias[:, cell : 2 * cell] = 1.0  # forget-gate bias of +1, as bilm-tf's LSTMCell(forget_bias=1.0)
            init.copy_(module.bias, bias)
            if module.weight_hr is not None:
                init.uniform_(module.weight_hr, -1.0 / math.sqrt(cell), 1.0 / math.sqrt(cell))
        elif isinstance(module, ElmoSoftmax) and module.softmax_type != "adaptive":
            init.normal_(module.weight, std=1.0 / math.sqrt(module.weight.shape[1]))
            init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):  # heads and the adaptive softmax
            init.normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, std=std)

    def _check_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Validate `input_ids` and `attention_mask`; return the token lengths (B,) of the right-padded rows."""
        config = self.config
        if not isinstance(input_ids, torch.Tensor):
            raise ValueError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}")
        if input_ids.dim() != 3 or input_ids.shape[-1] != config.max_characters_per_token:
            raise ValueError(
                "input_ids must be character ids of shape [batch, tokens, "
                f"{config.max_characters_per_token}] (ElmoTokenizer gives them), got shape {tuple(input_ids.shape)}"
            )
        if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
        if input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
            raise ValueError(f"input_ids is empty: shape {tuple(input_ids.shape)}; give at least one token per row")
        if not torch.compiler.is_compiling():
            low, high = int(input_ids.min()), int(input_ids.max())
            if low < 0 or high >= config.char_vocab_size:
                raise ValueError(
                    f"input_ids must lie in [0, {config.char_vocab_size}), got values from {low} to {high}"
                )
        token_mask = (input_ids > 0).any(-1)  # (B, T): a token is real iff any of its ids is > 0
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


class ElmoModel(ElmoPreTrainedModel):
    """The ELMo biLM without a softmax: character ids -> L + 1 layers of contextual token vectors.

    Stateless: every call starts from a zero LSTM state unless `state=` is given, so a sentence's vectors
    never depend on its batch, its row, its padding or earlier calls.

    Speed: under `torch.no_grad()` / `torch.inference_mode()` the model takes its inference paths (see
    `ElmoBiLstmLayer` and `config.lstm_implementation`; on the CPU, oneDNN multiplies with packed copies of the
    weights, about as much memory again as the weights, kept while they do not change). `enable_token_cache` adds
    a cache of layer-0 vectors. Results equal the reference implementation's to rounding (tests/test_fast_paths.py).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilm = ElmoBiLm(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.char_encoder.char_embedding

    def embed_tokens(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Layer 0 for the real positions only: (B, T, 50), (B, T) -> (B, T, P), zeros at padding."""
        return self._embed_streams([input_ids], mask)[0]

    def _embed_streams(self, streams: list[torch.Tensor], mask: torch.Tensor) -> list[torch.Tensor]:
        """`embed_tokens` of several id tensors with the same padding (the forward and the backward stream of
        stream training) in one pass of the character encoder, so that a word both streams hold is encoded once."""
        flat = [ids[mask] for ids in streams]  # (N, 50) each: no work on padding
        encoded = self.char_encoder((torch.cat(flat) if len(flat) > 1 else flat[0]).long())
        outputs = []
        for part in encoded.split([f.shape[0] for f in flat]):
            out = part.new_zeros(*mask.shape, part.shape[-1])
            out[mask] = part
            outputs.append(out)
        return outputs

    # ----- token cache (inference): layer 0 of frequent tokens without the character CNN --------------------------
    def enable_token_cache(self, max_size: int = 50_000) -> None:
        """Keep the layer-0 vectors of up to `max_size` distinct tokens (least recently used evicted) and encode each
        distinct token of a batch once. Used only when no gradient is needed; emptied whenever the weights change
        (see `ElmoTokenCache`). Costs `max_size * projection_dim` floats at most (100 MB for 50,000 tokens at the
        original size). Outputs equal those without the cache (tested)."""
        cache = self.char_encoder.token_cache
        if cache is None:
            self.char_encoder.token_cache = ElmoTokenCache(max_size)
        else:
            if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
                raise ValueError(f"the token cache size must be a positive integer, got {max_size!r}")
            cache.max_size = max_size
            while len(cache.entries) > max_size:
                cache.entries.popitem(last=False)

    def disable_token_cache(self) -> None:
        """Drop the token cache and its memory; every token goes through the character CNN again."""
        self.char_encoder.token_cache = None

    def clear_token_cache(self) -> None:
        """Empty the token cache (it stays enabled). Needed only after changing weights behind autograd's back
        (`param.data.copy_(...)`); every other change is noticed."""
        if self.char_encoder.token_cache is not None:
            self.char_encoder.token_cache.clear()

    def token_cache_info(self) -> dict | None:
        """`{"size", "max_size", "hits", "misses"}` of the token cache, or None when it is off."""
        cache = self.char_encoder.token_cache
        return cache.info() if cache is not None else None

    @torch.no_grad()
    def build_token_cache(self, tokens, tokenizer=None, batch_size: int = 4096) -> int:
        """Encode a vocabulary once into the token cache (enabling it, and growing it to fit when needed).

        Args:
            tokens: character ids `(V, max_characters_per_token)` (a tensor or nested lists), or words
                (`list[str]`) together with `tokenizer` (an `ElmoTokenizer`, whose `convert_tokens_to_char_ids` gives
                the ids).
            tokenizer: needed for words only.
            batch_size: tokens per run of the character CNN.

        Returns:
            The number of distinct tokens now cached.
        """
        if isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], str):
            if tokenizer is None:
                raise ValueError("build_token_cache got words: pass tokenizer= to turn them into character ids")
            tokens = tokenizer.convert_tokens_to_char_ids(list(tokens))
        char_ids = torch.as_tensor(tokens, dtype=torch.long)
        width = self.config.max_characters_per_token
        if char_ids.dim() != 2 or char_ids.shape[1] != width:
            raise ValueError(f"token character ids must have shape (V, {width}), got {tuple(char_ids.shape)}")
        cache = self.char_encoder.token_cache
        if cache is None or cache.max_size < char_ids.shape[0]:
            self.enable_token_cache(max(char_ids.shape[0], cache.max_size if cache is not None else 1))
        device = self.char_encoder.char_embedding.weight.device
        for chunk in char_ids.split(batch_size):
            self.char_encoder(chunk.to(device))
        return len(self.char_encoder.token_cache.entries)

    def zero_state(self, batch_size: int, device=None, dtype=torch.float32) -> ElmoState:
        c = self.config
        h = torch.zeros(c.num_layers, 2, batch_size, c.projection_dim, device=device, dtype=dtype)
        return h, torch.zeros(c.num_layers, 2, batch_size, c.cell_size, device=device, dtype=dtype)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        state: ElmoState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        backward_input_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> ElmoModelOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, tokens, max_characters_per_token)`):
                character ids from `ElmoTokenizer` (with `<S>`/`</S>`), right-padded with all-zero tokens.
            attention_mask (`torch.Tensor` of shape `(batch, tokens)`, *optional*):
                1 for real tokens; derived from `input_ids` when absent.
            state (`tuple(torch.FloatTensor)`, *optional*): `(h, c)` from a previous call's output with
                `use_cache=True`, to continue every row from where it stopped. Zeros when absent.
            use_cache (`bool`, *optional*): return the final LSTM states as `state`.
            output_hidden_states (`bool`, *optional*): return all L + 1 layers.
            backward_input_ids (`torch.LongTensor` of the shape of `input_ids`, *optional*): for training on
                token streams as bilm-tf did: what the backward LSTM reads, in its reading order (each sentence
                reversed), with the same lengths as `input_ids`. Its half of every output is then in that
                order. Leave it out to get ordinary contextual vectors.
        """
        if input_ids is None:
            raise ValueError("ElmoModel needs input_ids: character ids of shape [batch, tokens, 50]")
        unexpected = {k for k in kwargs if k not in ("token_type_ids", "position_ids")}
        if unexpected:
            raise TypeError(f"ElmoModel.forward got unexpected arguments {sorted(unexpected)}")
        config = self.config
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else config.return_dict
        use_cache = bool(use_cache)

        lengths = self._check_inputs(input_ids, attention_mask)
        batch, steps = input_ids.shape[:2]
        mask = torch.arange(steps, device=input_ids.device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)

        backward_tokens = None
        if backward_input_ids is not None:
            if backward_input_ids.shape != input_ids.shape:
                raise ValueError(
                    f"backward_input_ids must have the shape of input_ids {tuple(input_ids.shape)}, "
                    f"got {tuple(backward_input_ids.shape)}"
                )
            if not torch.equal(self._check_inputs(backward_input_ids, None), lengths):
                raise ValueError("backward_input_ids must have the same number of tokens as input_ids in every row")
            tokens, backward_tokens = self._embed_streams([input_ids, backward_input_ids], mask)  # (B, T, P) each
        else:
            tokens = self.embed_tokens(input_ids, mask)  # (B, T, P)
        if state is None:
            state = self.zero_state(batch, device=tokens.device, dtype=tokens.dtype)
        else:
            state = self._check_state(state, batch)
        layers, final_state = self.bilm(tokens, lengths, state, backward_tokens)

        last_hidden_state = layers[-1]
        hidden_states = None
        if output_hidden_states:
            hidden_states = (torch.cat([tokens, tokens], dim=-1), *layers)  # layer 0 duplicated to 2P
        final_state = final_state if use_cache else None
        if not return_dict:
            return tuple(v for v in (last_hidden_state, hidden_states, final_state) if v is not None)
        return ElmoModelOutput(last_hidden_state=last_hidden_state, hidden_states=hidden_states, state=final_state)

    def _check_state(self, state: ElmoState, batch: int) -> ElmoState:
        c = self.config
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


class ElmoSoftmax(nn.Module):
    """The word softmax shared by both LM directions: full, sampled (as bilm-tf trained) or adaptive.

    `weight` (V, P) and `bias` (V,) for "full" and "sampled"; "adaptive" uses
    `torch.nn.AdaptiveLogSoftmaxWithLoss` with `config.adaptive_cutoffs`.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        if config.vocab_size < 1:
            raise ValueError("ElmoForPreTraining needs a word vocabulary: set ElmoConfig.vocab_size > 0")
        self.softmax_type = config.softmax_type
        self.vocab_size = config.vocab_size
        self.num_sampled = config.num_sampled
        if self.softmax_type == "adaptive":
            cutoffs = config.adaptive_cutoffs or _default_cutoffs(config.vocab_size)
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(config.projection_dim, config.vocab_size, cutoffs, div_value=4.0)
        else:
            self.weight = nn.Parameter(torch.empty(config.vocab_size, config.projection_dim))
            self.bias = nn.Parameter(torch.empty(config.vocab_size))

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full log-probabilities over the vocabulary: (N, P) -> (N, V)."""
        if self.softmax_type == "adaptive":
            return self.adaptive.log_prob(hidden)
        return F.log_softmax(F.linear(hidden, self.weight, self.bias).float(), dim=-1)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of `targets` (N,) given `hidden` (N, P).

        While training with the sampled softmax, an estimate from `num_sampled` negatives shared by the
        batch (log-uniform over a frequency-sorted vocabulary, accidental hits removed, logits corrected by
        the log expected count), as TensorFlow's `sampled_softmax_loss` that bilm-tf used. Otherwise exact.
        """
        if self.softmax_type == "adaptive":
            return -self.adaptive(hidden, targets).output.float().sum()
        if self.softmax_type == "sampled" and self.training and self.num_sampled < self.vocab_size:
            return self._sampled_nll(hidden, targets)
        logits = F.linear(hidden, self.weight, self.bias).float()
        return F.cross_entropy(logits, targets, reduction="sum")

    def _log_uniform_log_q(self, ids: torch.Tensor, num_tries: int) -> torch.Tensor:
        """Log of the probability that `ids` is among the distinct ids of `num_tries` log-uniform draws."""
        ids = ids.double()
        prob = (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / math.log(self.vocab_size + 1.0)
        return torch.log(-torch.expm1(num_tries * torch.log1p(-prob))).float()

    def _sample_negatives(self, device: torch.device) -> tuple[torch.Tensor, int]:
        """`num_sampled` distinct ids from the log-uniform (Zipfian) distribution over a frequency-sorted
        vocabulary, P(k) = log((k + 2) / (k + 1)) / log(V + 1), and the number of draws it took."""
        draws = torch.rand(4 * self.num_sampled + 64, device=device, dtype=torch.float64)
        ids = (torch.exp(draws * math.log(self.vocab_size + 1.0)).floor().long() - 1).clamp_(0, self.vocab_size - 1)
        unique, inverse = torch.unique(ids, return_inverse=True)
        positions = torch.arange(ids.numel(), device=device)
        first = torch.full((unique.numel(),), ids.numel(), device=device).scatter_reduce(0, inverse, positions, "amin")
        first, order = first.sort()  # distinct ids in the order they were drawn
        count = min(self.num_sampled, unique.numel())
        num_tries = int(first[count - 1]) + 1 if count == self.num_sampled else ids.numel()
        return unique[order[:count]], num_tries

    def _sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        sampled, num_tries = self._sample_negatives(hidden.device)  # (S,)
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]  # (N,)
        true_logits = true_logits.float() - self._log_uniform_log_q(targets, num_tries)
        sampled_logits = F.linear(hidden, self.weight[sampled], self.bias[sampled]).float()  # (N, S)
        sampled_logits = sampled_logits - self._log_uniform_log_q(sampled, num_tries)
        hits = targets.unsqueeze(1) == sampled.unsqueeze(0)  # accidental hits: a target among the negatives
        sampled_logits = sampled_logits.masked_fill(hits, float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        return F.cross_entropy(logits, torch.zeros_like(targets), reduction="sum")


def _default_cutoffs(vocab_size: int) -> list[int]:
    cutoffs = [c for c in (2000, 10000, 50000) if c < vocab_size]
    return cutoffs or [max(1, vocab_size // 2)]


def _shifted_targets(labels: torch.Tensor, shift: int) -> torch.Tensor:
    """labels (B, T) -> the label `shift` positions later (+1) or earlier (-1), -100 past the ends."""
    out = torch.full_like(labels, -100)
    if shift > 0:
        out[:, :-shift] = labels[:, shift:]
    else:
        out[:, -shift:] = labels[:, :shift]
    return out


class ElmoForPreTraining(ElmoPreTrainedModel):
    """The biLM objective (Peters et al. 2018, section 3.1): the forward LM predicts the next word and the
    backward LM the previous one, each from its own direction's top layer, through one shared softmax.
    The loss is the mean of the two directions' mean losses.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        self.dropout = nn.Dropout(config.dropout)  # bilm-tf: dropout on the LSTM output before the softmax
        self.softmax = ElmoSoftmax(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        forward_labels: torch.Tensor | None = None,
        backward_labels: torch.Tensor | None = None,
        backward_input_ids: torch.Tensor | None = None,
        state: ElmoState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ElmoForPreTrainingOutput | tuple:
        r"""
        Args:
            labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*): the word-vocabulary id of
                every input token (-100 where there is none, e.g. padding), as `ElmoTokenizer` gives with a
                vocabulary. The forward target at position t is `labels[t + 1]`, the backward one `labels[t - 1]`.
            forward_labels, backward_labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*):
                explicit targets of each direction at each position, instead of `labels`: in stream training
                the last token of a window predicts the first of the next.
            backward_input_ids: see `ElmoModel.forward`.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        outputs = self.elmo(
            input_ids,
            attention_mask=attention_mask,
            state=state,
            use_cache=use_cache,
            output_hidden_states=output_hidden_states,
            backward_input_ids=backward_input_ids,
            return_dict=True,
            **kwargs,
        )
        if labels is not None:
            if forward_labels is not None or backward_labels is not None:
                raise ValueError("give either labels or forward_labels/backward_labels, not both")
            if labels.shape != outputs.last_hidden_state.shape[:2]:
                raise ValueError(f"labels must have shape [batch, tokens], got {tuple(labels.shape)}")
            forward_labels, backward_labels = _shifted_targets(labels, 1), _shifted_targets(labels, -1)
        loss = forward_loss = backward_loss = forward_tokens = backward_tokens = None
        if forward_labels is not None and backward_labels is not None:
            # no prediction from padding positions (a shifted label can land there)
            real = attention_mask.bool() if attention_mask is not None else (input_ids > 0).any(-1)
            forward_labels = forward_labels.masked_fill(~real, -100)
            backward_labels = backward_labels.masked_fill(~real, -100)
            p = self.config.projection_dim
            top = self.dropout(outputs.last_hidden_state)
            losses, counts = [], []
            for half, targets in ((top[..., :p], forward_labels), (top[..., p:], backward_labels)):
                valid = targets != -100
                chosen = targets[valid]
                if chosen.numel() and (int(chosen.min()) < 0 or int(chosen.max()) >= self.config.vocab_size):
                    raise ValueError(
                        f"labels must be word ids in [0, {self.config.vocab_size}) or -100, "
                        f"got values from {int(chosen.min())} to {int(chosen.max())}"
                    )
                count = valid.sum()
                losses.append(self.softmax.nll(half[valid], chosen) / count.clamp(min=1))
                counts.append(count)
            forward_loss, backward_loss = losses
            forward_tokens, backward_tokens = counts
            loss = 0.5 * (forward_loss + backward_loss)
        elif forward_labels is not None or backward_labels is not None:
            raise ValueError("give both forward_labels and backward_labels")

        output = ElmoForPreTrainingOutput(
            loss=loss,
            forward_loss=forward_loss,
            backward_loss=backward_loss,
            forward_tokens=forward_tokens,
            backward_tokens=backward_tokens,
            last_hidden_state=outputs.last_hidden_state,
            hidden_states=outputs.hidden_states,
            state=outputs.state,
        )
        return output if return_dict else output.to_tuple()

    @torch.no_grad()
    def initialize_softmax_from_token_embeddings(self, char_ids: torch.Tensor, batch_size: int = 4096) -> None:
        """Set the softmax to the model's own layer-0 vectors of the vocabulary words, and the bias to 0.

        A good start for continuing training from published weights, which hold no softmax.

        Args:
            char_ids (`torch.LongTensor` of shape `(vocab_size, max_characters_per_token)`): the character ids
                of every vocabulary word, in vocabulary order.
        """
        if self.softmax.softmax_type == "adaptive":
            raise ValueError("initialising from token embeddings needs the full or sampled softmax")
        if tuple(char_ids.shape) != (self.config.vocab_size, self.config.max_characters_per_token):
            raise ValueError(
                f"char_ids must have shape ({self.config.vocab_size}, {self.config.max_characters_per_token}), "
                f"got {tuple(char_ids.shape)}"
            )
        encoder = self.elmo.char_encoder
        vectors = [encoder(chunk.to(self.device)) for chunk in char_ids.split(batch_size)]
        self.softmax.weight.copy_(torch.cat(vectors))
        self.softmax.bias.zero_()


# --------------------------------------------------------------------------------------------------
# Downstream use: scalar mix and task heads (Peters et al. 2018 section 3.3, ELMO_SPEC section 7)
# --------------------------------------------------------------------------------------------------

# Polynomial hash of a token's character ids for the hashed word embedding (a Mersenne prime keeps the
# products in int64: 261 * 2**31 * 50 < 2**63).
_HASH_BASE, _HASH_MODULUS = 263, 2**31 - 1


def sentence_boundary_mask(input_ids: torch.Tensor) -> torch.Tensor:
    """(B, T, 50) character ids -> (B, T) bool, True at `<S>` and `</S>` tokens."""
    first, second, third = input_ids[..., 0], input_ids[..., 1], input_ids[..., 2]
    return (first == BOW_ID) & ((second == BOS_CHAR_ID) | (second == EOS_CHAR_ID)) & (third == EOW_ID)


class ElmoScalarMix(nn.Module):
    r"""`gamma * sum_k softmax(w)_k * layer_k` over the L + 1 biLM layers (ELMO_SPEC section 7).

    With `do_layer_norm`, each layer is first normalised as a whole, `(x - mean) / sqrt(var + 1e-12)`, the
    statistics taken over every unmasked element of the (B, T, D) tensor (bilm-tf `weight_layers`), not per token.

    Args:
        mixture_size (`int`): number of layers mixed, L + 1.
        do_layer_norm (`bool`): normalise each layer before weighting.
        initial_scalar_parameters (`list[float]`, *optional*): pre-softmax weights; zeros (equal weights) when
            absent, as allennlp and bilm-tf start.
        trainable (`bool`): learn `scalar_parameters` and `gamma`. Otherwise both are fixed buffers (gamma 1), as
            allennlp's `scalar_mix_parameters`; e.g. `[-9e10, 1, -9e10]` selects layer 1 exactly.
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
        gamma = torch.ones(1)
        if trainable:
            self.scalar_parameters = nn.Parameter(scalar_parameters)
            self.gamma = nn.Parameter(gamma)
        else:  # fixed: saved with the model, never trained (and never reset to trainable by loading)
            self.register_buffer("scalar_parameters", scalar_parameters)
            self.register_buffer("gamma", gamma)

    def normalized_weights(self) -> torch.Tensor:
        """The softmax-normalised layer weights s, shape (L + 1,)."""
        return torch.softmax(self.scalar_parameters.float(), dim=0)

    def l2_penalty(self, coefficient: float = 1.0) -> torch.Tensor:
        """`coefficient * sum(w ** 2)` of the pre-softmax weights (bilm-tf's regulariser); 0 for a fixed mix."""
        if not self.trainable:
            return self.scalar_parameters.new_zeros(())
        return coefficient * (self.scalar_parameters**2).sum()

    def forward(self, layers: list[torch.Tensor] | tuple[torch.Tensor, ...], mask: torch.Tensor | None = None) -> torch.Tensor:
        """`layers`: L + 1 tensors (B, T, D); `mask` (B, T), the positions whose elements enter the layer-norm
        statistics (all when absent). Returns (B, T, D)."""
        if len(layers) != self.mixture_size:
            raise ValueError(f"ElmoScalarMix was built for {self.mixture_size} layers, got {len(layers)}")
        weights = self.normalized_weights()
        mixed = None
        if self.do_layer_norm:
            if mask is None:
                mask = torch.ones(layers[0].shape[:-1], dtype=torch.bool, device=layers[0].device)
            elements = mask.unsqueeze(-1).float()  # (B, T, 1)
            count = (elements.sum() * layers[0].shape[-1]).clamp(min=1.0)
        for weight, layer in zip(weights, layers):
            if self.do_layer_norm:
                x = layer.float()
                mean = (x * elements).sum() / count
                variance = (((x - mean) * elements) ** 2).sum() / count
                layer = ((x - mean) / torch.sqrt(variance + self.eps)).to(layer.dtype)
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
        return buckets.masked_fill(~(input_ids > 0).any(-1), 0)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(self.bucket_ids(input_ids), self.weight, padding_idx=0)  # (B, T, dim)


def _left_align(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Move the masked positions of each row of `x` (B, T, D) to its front, in order; (B, T, D), lengths (B,)."""
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # kept positions first
    return x.gather(1, order.unsqueeze(-1).expand_as(x)), mask.sum(1)


def _run_lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A bidirectional `lstm` over left-aligned rows (B, T, D) of `lengths` (B,) >= 1 ->
    outputs (B, T, 2H) (zeros past each length) and the final states of both directions (B, 2H)."""
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, (h, _) = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, torch.cat([h[-2], h[-1]], dim=-1)  # forward after its last token, backward after its first


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


class ElmoPreTrainedModelForTasks(ElmoPreTrainedModel):
    """Shared part of the task heads: the biLM as `self.elmo`, `num_output_representations` scalar mixes,
    the optional hashed word embedding, dropout, and the freezing of the biLM.

    Freezing (`config.freeze_bilm`, default True): the biLM's parameters have `requires_grad=False` and it
    runs in eval mode (no dropout) under `torch.no_grad()`, so training the head leaves them bit-identical.
    """

    # The heads compute a plain mean loss: Trainer must not pass `num_items_in_batch` (HF_NOTES, Trainer).
    accepts_loss_kwargs = False

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        mixture_size = config.num_layers + 1
        if config.scalar_mix == "learned":
            initial, trainable = None, True
        elif config.scalar_mix == "top":
            initial, trainable = [-9e10] * config.num_layers + [1.0], False
        elif config.scalar_mix == "average":
            initial, trainable = [0.0] * mixture_size, False
        else:  # "fixed"
            initial, trainable = config.scalar_mix_parameters, False
        self.scalar_mixes = nn.ModuleList(
            ElmoScalarMix(mixture_size, config.scalar_mix_layer_norm, initial, trainable)
            for _ in range(config.num_output_representations)
        )
        self.word_embedding = (
            ElmoHashedWordEmbedding(config.word_embedding_buckets, config.word_embedding_dim)
            if config.word_embedding_dim > 0
            else None
        )
        self.representation_dropout = nn.Dropout(config.representation_dropout)
        self._apply_freeze()

    @property
    def representation_dim(self) -> int:
        """Width of what the head reads at each token: 2P, plus the word embedding when there is one."""
        return self.config.hidden_size + self.config.word_embedding_dim

    @property
    def head_hidden_size(self) -> int:
        return self.config.head_hidden_size or self.config.projection_dim

    def _apply_freeze(self) -> None:
        frozen = self.config.freeze_bilm
        self.elmo.requires_grad_(not frozen)
        if frozen:
            self.elmo.eval()

    def set_bilm_frozen(self, frozen: bool = True) -> None:
        """Freeze or unfreeze the biLM after construction (e.g. train the head first, then fine-tune all)."""
        self.config.freeze_bilm = bool(frozen)
        self._apply_freeze()
        if not frozen:
            self.elmo.train(self.training)

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # output_loading_info=True gives a pair
        model._apply_freeze()  # loading may hand back fresh parameters
        return loaded

    def train(self, mode: bool = True):
        super().train(mode)
        if self.config.freeze_bilm:
            self.elmo.eval()  # a frozen biLM never runs its dropout
        return self

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, ElmoScalarMix):
            init.copy_(module.scalar_parameters, torch.tensor(module.initial_scalar_parameters))
            init.ones_(module.gamma)
        elif isinstance(module, ElmoHashedWordEmbedding):
            values = torch.empty_like(module.weight).normal_(std=1.0 / math.sqrt(module.weight.shape[1]))
            values[0] = 0.0  # padding row
            init.copy_(module.weight, values)  # one guarded write: a loaded table is left as it is
        elif isinstance(module, nn.LSTM):  # the heads' biLSTM: torch's default
            bound = 1.0 / math.sqrt(module.hidden_size)
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)

    def _bilm_layers(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """Run the biLM once: its L + 1 layers, the real-token mask and the word mask, all (B, T[, 2P])."""
        if self.config.freeze_bilm:
            if self.elmo.training:
                self.elmo.eval()
            with torch.no_grad():
                outputs = self.elmo(input_ids, attention_mask=attention_mask, output_hidden_states=True,
                                    return_dict=True, **kwargs)
        else:
            outputs = self.elmo(input_ids, attention_mask=attention_mask, output_hidden_states=True,
                                return_dict=True, **kwargs)
        mask = attention_mask.bool() if attention_mask is not None else (input_ids > 0).any(-1)  # (B, T)
        word_mask = mask
        if not self.config.keep_sentence_boundaries:
            word_mask = mask & ~sentence_boundary_mask(input_ids)
            empty = ~word_mask.any(1, keepdim=True)  # "<S> </S>" only: keep what there is
            word_mask = torch.where(empty, mask, word_mask)
        return outputs.hidden_states, mask, word_mask

    def get_elmo_representations(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs
    ) -> ElmoRepresentationsOutput:
        """All `num_output_representations` ELMo mixes from one biLM run (allennlp `Elmo`'s
        `elmo_representations`), before dropout and without the word embedding."""
        layers, mask, word_mask = self._bilm_layers(input_ids, attention_mask, **kwargs)
        mixes = tuple(mix(layers, word_mask) for mix in self.scalar_mixes)
        return ElmoRepresentationsOutput(elmo_representations=mixes, mask=mask, word_mask=word_mask, hidden_states=layers)

    def _task_inputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """What the head reads: dropout([first mix ; word embedding]) (B, T, D), mask, word mask, biLM layers."""
        layers, mask, word_mask = self._bilm_layers(input_ids, attention_mask, **kwargs)
        x = self.scalar_mixes[0](layers, word_mask)  # (B, T, 2P)
        if self.word_embedding is not None:
            x = torch.cat([x, self.word_embedding(input_ids).to(x.dtype)], dim=-1)  # (B, T, 2P + E)
        return self.representation_dropout(x), mask, word_mask, layers

    def mix_l2_penalty(self) -> torch.Tensor:
        """`scalar_mix_l2_coef * sum(w ** 2)` of the mix the head uses (0 for a fixed mix)."""
        return self.scalar_mixes[0].l2_penalty(self.config.scalar_mix_l2_coef)

    def _regularized(self, loss: torch.Tensor) -> torch.Tensor:
        """The task loss plus, while training, the L2 penalty on the mix weights (Peters et al. 2018, eq. 1)."""
        if self.training and self.config.scalar_mix_l2_coef > 0 and self.scalar_mixes[0].trainable:
            loss = loss + self.mix_l2_penalty().to(loss.dtype)
        return loss


class ElmoForSequenceClassification(ElmoPreTrainedModelForTasks):
    """ELMo with a sentence classifier: the scalar mix of the biLM layers, pooled over the words of each sentence
    (`config.classifier_pooling`), then a linear layer. Regression (`num_labels == 1`), single-label and
    multi-label classification follow `config.problem_type`, as in transformers' BERT heads.

    `<S>`/`</S>` are not pooled unless `config.keep_sentence_boundaries` (allennlp and bilm-tf strip them before
    the task model).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        width = self.representation_dim
        pooling = config.classifier_pooling
        self.pooler_lstm = self.attention = None
        pooled = width
        if pooling == "lstm":
            self.pooler_lstm = nn.LSTM(width, self.head_hidden_size, batch_first=True, bidirectional=True)
            pooled = 2 * self.head_hidden_size
        elif pooling == "attention":  # attention pooling: score each token, softmax over the sentence
            self.attention = nn.Sequential(
                nn.Linear(width, self.head_hidden_size), nn.Tanh(), nn.Linear(self.head_hidden_size, 1)
            )
        self.classifier = nn.Linear(pooled, config.num_labels)
        self.post_init()

    def pool(self, x: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D) token vectors and (B, T) mask of the tokens to pool -> (B, D')."""
        pooling = self.config.classifier_pooling
        keep = word_mask.unsqueeze(-1)  # (B, T, 1)
        if pooling == "mean":
            return (x * keep).sum(1) / keep.sum(1).clamp(min=1).to(x.dtype)
        if pooling == "max":
            return x.masked_fill(~keep, torch.finfo(x.dtype).min).amax(1)
        if pooling == "lstm":
            aligned, lengths = _left_align(x, word_mask)
            return _run_lstm(self.pooler_lstm, aligned, lengths)[1]  # (B, 2H)
        scores = self.attention(x).squeeze(-1).float()  # (B, T)
        weights = torch.softmax(scores.masked_fill(~word_mask, float("-inf")), dim=-1).to(x.dtype)
        return torch.einsum("bt,btd->bd", weights, x)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch, tokens, max_characters_per_token)`): character ids
                from `ElmoTokenizer`, with `<S>`/`</S>`, right-padded with all-zero tokens.
            attention_mask (`torch.Tensor` of shape `(batch, tokens)`, *optional*): 1 for real tokens.
            labels (`torch.Tensor` of shape `(batch,)` or `(batch, num_labels)`, *optional*): class ids
                (single-label), floats (regression) or multi-hot floats (multi-label).
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        x, _, word_mask, layers = self._task_inputs(input_ids, attention_mask, **kwargs)
        logits = self.classifier(self.pool(x, word_mask))  # (B, num_labels)

        loss = None
        if labels is not None:
            labels = labels.to(logits.device)
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif self.num_labels > 1 and labels.dtype in (torch.long, torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"
            if self.config.problem_type == "regression":
                if self.num_labels == 1:
                    loss = F.mse_loss(logits.squeeze(-1).float(), labels.view(-1).float())
                else:
                    loss = F.mse_loss(logits.float(), labels.float())
            elif self.config.problem_type == "single_label_classification":
                loss = F.cross_entropy(logits.view(-1, self.num_labels).float(), labels.view(-1))
            else:
                loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
            loss = self._regularized(loss)

        hidden_states = layers if output_hidden_states else None
        if not return_dict:
            return tuple(v for v in (loss, logits, hidden_states) if v is not None)
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)


class ElmoForTokenClassification(ElmoPreTrainedModelForTasks):
    """ELMo with a tagger (NER, POS, chunking): the scalar mix at every token, optionally a trainable biLSTM
    (`config.token_classifier_encoder="lstm"`), then a linear layer. Logits cover every position of `input_ids`;
    labels at `<S>`/`</S>` and padding are -100 (the alignment from `word_ids()` gives that).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        width = self.representation_dim
        self.encoder = None
        if config.token_classifier_encoder == "lstm":
            self.encoder = nn.LSTM(width, self.head_hidden_size, batch_first=True, bidirectional=True)
            width = 2 * self.head_hidden_size
        self.classifier = nn.Linear(width, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> TokenClassifierOutput | tuple:
        r"""
        Args:
            input_ids, attention_mask: as in `ElmoForSequenceClassification.forward`.
            labels (`torch.LongTensor` of shape `(batch, tokens)`, *optional*): a label id per position of
                `input_ids`, -100 where there is none (`<S>`, `</S>`, padding).
            output_hidden_states (`bool`, *optional*): also return the L + 1 biLM layers.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        x, mask, _, layers = self._task_inputs(input_ids, attention_mask, **kwargs)  # (B, T, D)
        if self.encoder is not None:
            # right-padded rows are already left-aligned: the biLSTM reads each sentence, boundaries included
            x = self.representation_dropout(_run_lstm(self.encoder, x, mask.sum(1))[0])  # (B, T, 2H)
        logits = self.classifier(x)  # (B, T, num_labels)

        loss = None
        if labels is not None:
            if labels.shape != logits.shape[:2]:
                raise ValueError(
                    f"labels must have shape [batch, tokens] = {tuple(logits.shape[:2])}, got {tuple(labels.shape)}"
                )
            loss = F.cross_entropy(logits.view(-1, self.num_labels).float(), labels.to(logits.device).view(-1))
            loss = self._regularized(loss)

        hidden_states = layers if output_hidden_states else None
        if not return_dict:
            return tuple(v for v in (loss, logits, hidden_states) if v is not None)
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)


__all__ = [
    "ElmoModelOutput",
    "ElmoForPreTrainingOutput",
    "ElmoPreTrainedModel",
    "ElmoModel",
    "ElmoForPreTraining",
    "ElmoScalarMix",
    "ElmoRepresentationsOutput",
    "ElmoPreTrainedModelForTasks",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
]
