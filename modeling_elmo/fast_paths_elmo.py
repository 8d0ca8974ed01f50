"""The fast paths of ELMo: the same functions as the reference layers of `modeling_elmo.py`, run faster.

`modeling_elmo.py` holds the reference implementation (the definition, written for autograd). This module holds
what only makes it faster, behind one dispatch per layer kind, each chosen in one place:

* the biLSTM: `lstm_implementation(...)` names one of "reference", "loop", "fused", "training" (pure: no side
  effect), and `ElmoBiLm.forward` runs `LSTM_FUNCTIONS[name]` (the reference for "reference"). Every function has
  one signature, `fn(layer, inputs, batch_sizes, state) -> (outputs, (h, c))`, on packed data (see `pack`);
* the character CNN: `char_cnn_implementation(...)` names one of "reference", "onednn", "distinct", "cached", and
  `ElmoCharacterEncoder.forward` runs `CHAR_CNN_FUNCTIONS[name]`, each `fn(encoder, char_ids) -> (N, P)`.

The fast functions read the layers' parameters (and their derived, never saved inference copies) and are tested
against the reference to rounding (tests/test_fast_paths.py). See docs/architecture.md ("Fast paths").

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, the standard library and
`matmul_elmo.py`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import warnings
from collections import OrderedDict

import torch

from .matmul_elmo import (
    _compute_dtype,
    _linear,
    _mm_nt,
    _mm_tn,
    _needs_grad,
    _pack_weight,
    _training_onednn,
    _use_onednn,
    training_linear,
)

logger = logging.getLogger(__name__)

# (h, c): h of shape (2, B, P), c of shape (2, B, C) for one layer; index 0 is the direction, 1 the batch row.
LayerState = tuple[torch.Tensor, torch.Tensor]


# --------------------------------------------------------------------------------------------------
# Helpers: packed layout
# --------------------------------------------------------------------------------------------------


def packed_index(batch_sizes: list[int], steps: int) -> torch.Tensor:
    """Flat positions `r * steps + t` in (B, T) data of the real (step t, row r) pairs of length-sorted rows, in
    packed order (step by step, rows in order, as `torch.nn.utils.rnn.PackedSequence`)."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    step = torch.repeat_interleave(torch.arange(len(batch_sizes)), sizes)  # (N,)
    row = torch.arange(int(sizes.sum())) - (torch.cumsum(sizes, 0) - sizes)[step]
    return row * steps + step


def _last_rows(batch_sizes: list[int], device: torch.device) -> torch.Tensor:
    """Packed position of each row's last step (rows `0 .. batch_sizes[0] - 1`)."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes  # first packed position of each step
    rows = torch.arange(batch_sizes[0])
    lengths = (sizes.unsqueeze(0) > rows.unsqueeze(1)).sum(1)  # (rows,)
    return (starts[lengths - 1] + rows).to(device)


# --------------------------------------------------------------------------------------------------
# Derived copies of the weights (oneDNN), and when they are stale
# --------------------------------------------------------------------------------------------------


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


_CONV_TOKENS_PER_BLOCK = 32  # tokens per block of the CPU inference convolution (their products fit in the cache)
# The inference loop multiplies the inputs of this many steps at a time, just before they run: at the original size
# the (rows, 4C) products of a whole batch (44 MB for 32 sentences) leave the cache before the steps read them.
_INPUT_STEPS_PER_BLOCK = 4


def forget_inference_copies(*modules) -> None:
    """Free what inference derived from these modules' weights (oneDNN copies, the token cache): called when a
    forward pass needs gradients, as the weights are about to change (some optimizers leave no trace of it)."""
    for module in modules:
        module._inference_weights.clear()
        if getattr(module, "token_cache", None) is not None:
            module.token_cache.clear()


# --------------------------------------------------------------------------------------------------
# Character CNN: one dispatch
# --------------------------------------------------------------------------------------------------


def char_cnn_implementation(encoder, char_ids: torch.Tensor) -> str:
    """Which of "reference", "onednn", "distinct", "cached" `ElmoCharacterEncoder.forward` runs (no side effect).

    Training on the CPU ("distinct"): the CNN runs once per distinct token of the batch, each cut to its length
    group; on a GPU the plain CNN measured faster (the grouping waits for the GPU; benchmarks/results_pretrain.md).
    Inference: through the token cache when there is one ("cached"), else with oneDNN-packed weights on the CPU
    ("onednn"). `lstm_implementation="reference"` and `torch.compile` tracing take the plain CNN.
    """
    if getattr(encoder.config, "lstm_implementation", "auto") == "reference" or torch.compiler.is_compiling():
        return "reference"
    if _needs_grad(*encoder.parameters()):
        return "distinct" if char_ids.device.type == "cpu" else "reference"
    if encoder.token_cache is not None and char_ids.shape[0] > 0:
        return "cached"
    return "onednn" if _use_onednn(char_ids.device, _char_dtype(encoder, char_ids.device)) else "reference"


def _char_dtype(encoder, device: torch.device) -> torch.dtype:
    """The dtype of the character CNN's matrix multiplies here (autocast's when it is on)."""
    if device.type in ("cpu", "cuda") and torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return encoder.char_embedding.weight.dtype


def _encode_inference(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """The CNN without gradients: oneDNN where available, else the reference."""
    if _use_onednn(char_ids.device, _char_dtype(encoder, char_ids.device)):
        return encode_onednn(encoder, char_ids)
    return encoder.encode(char_ids)


def encode_distinct(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """Training: the CNN runs once per distinct token of the batch (`encode_trimmed`), and the vectors are gathered
    back. Natural text repeats words ("the", ".", ...), so this saves a large part of the layer-0 work of a training
    step; the gradient of a repeated token is summed over its positions, as the plain path sums it in the weights."""
    if char_ids.shape[0] < 2:
        return encode_trimmed(encoder, char_ids)
    distinct, inverse = _distinct_rows(char_ids)
    if distinct.shape[0] == char_ids.shape[0]:
        return encode_trimmed(encoder, char_ids)
    return encode_trimmed(encoder, distinct)[inverse]


@functools.lru_cache(maxsize=8)
def _row_hash_multipliers(columns: int, device: torch.device) -> torch.Tensor:
    """Fixed odd int64 multipliers, one per character position, for `_distinct_rows` (made once per width and device,
    not at every training step)."""
    generator = torch.Generator().manual_seed(columns)
    return torch.randint(1, 2**62, (columns,), generator=generator).mul_(2).add_(1).to(device)


def _distinct_rows(char_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`torch.unique(char_ids, dim=0, return_inverse=True)` up to the order of the distinct rows, several times faster
    (it compares rows one by one): each row is hashed to one int64 (multiply-adds that wrap around), the hashes are
    made unique, and the rows are checked against their representative; a collision falls back to `torch.unique`."""
    multipliers = _row_hash_multipliers(char_ids.shape[1], char_ids.device)
    keys, inverse = torch.unique((char_ids.long() * multipliers).sum(1), return_inverse=True)
    first = torch.empty_like(keys).scatter_(0, inverse, torch.arange(char_ids.shape[0], device=char_ids.device))
    distinct = char_ids[first]
    if not torch.equal(distinct[inverse], char_ids):
        return torch.unique(char_ids, dim=0, return_inverse=True)
    return distinct, inverse


# A token whose characters vary over at most 8 (16, 24) positions is convolved over that many + the widest filter's
# positions, longer ones over all 50: a token's cut depends on the token alone, not on the others of its batch.
_TRIM_LENGTHS = (8, 16, 24)


def encode_trimmed(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """`encode` with the same values and gradients (to rounding) and less work, for training.

    A token's character row ends in a run of one id (the padding character, 43 positions for a 5-letter word), and
    every convolution window that lies wholly in that run has the same value. Max-pooling needs one of them, so a
    token's characters can be cut after its varying part plus the widest filter: the cut removes only copies of a
    window that stays. Tokens are grouped by that length (`_TRIM_LENGTHS`), so most of a batch convolves 15-25
    positions instead of 50. The pooling takes `max` with its indices: its backward pass writes one gradient per
    filter where `amax`'s compares every position (where windows tie, the gradient goes to one of them instead of
    being shared; tied windows are equal, so the weights' and the embedding's gradients are the same)."""
    tokens, width = char_ids.shape
    if tokens == 0:
        return encoder.encode(char_ids)
    varying = torch.arange(1, width + 1, device=char_ids.device) * (char_ids != char_ids[:, -1:])
    limits = torch.tensor(_TRIM_LENGTHS, device=char_ids.device)
    groups = torch.searchsorted(limits, varying.amax(dim=1))  # (N,): index of the first limit >= the varying length
    widest = max(conv.kernel_size[0] for conv in encoder.convolutions)
    order = groups.argsort(stable=True)
    pooled = []
    for group, rows in enumerate(order.split(torch.bincount(groups, minlength=len(_TRIM_LENGTHS) + 1).tolist())):
        if len(rows):
            end = min(width, _TRIM_LENGTHS[group] + widest) if group < len(_TRIM_LENGTHS) else width
            chars = encoder.char_embedding(char_ids[rows, :end]).transpose(1, 2)  # (n, d, end)
            pooled.append(torch.cat([conv(chars).max(dim=-1).values for conv in encoder.convolutions], dim=-1))
    place = torch.empty_like(order)
    place[order] = torch.arange(tokens, device=order.device)  # row i of the input is row place[i] when sorted
    return encoder.from_pooled(torch.cat(pooled)[place], linear=training_linear)


def encode_onednn(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """`encode` for inference on the CPU: every matrix multiply through oneDNN with pre-packed weights (the
    convolutions as multiplies over character windows); the same operations otherwise. (N, 50) -> (N, P)."""
    chars = encoder.char_embedding(char_ids)  # (N, 50, d)
    packed = _onednn_char_weights(encoder, _compute_dtype(chars))
    with torch.autocast(chars.device.type, enabled=False):
        x = encoder.activation(_convolve_onednn(encoder, chars.to(packed["dtype"]), packed))  # (N, F)
        for highway, (carry, transform) in zip(encoder.highways, packed["highways"]):
            gate = _linear(x, carry, bias=highway.carry.bias.to(x.dtype)).sigmoid_()
            hidden = _linear(x, transform, bias=highway.transform.bias.to(x.dtype)).relu_().mul_(gate)
            x = hidden.add_(gate.neg_().add_(1.0).mul_(x))  # g * relu(x W_t + b_t) + (1 - g) * x, in place
        if encoder.projection is not None:
            x = _linear(x, packed["projection"], bias=encoder.projection.bias.to(x.dtype))  # (N, P)
    return x


def _convolve_onednn(encoder, chars: torch.Tensor, packed: dict) -> torch.Tensor:
    """The convolutions and the max-pooling, as matrix multiplies of the weights (count, width * d) with the
    windows of `width` characters (a strided view, no copy), a few tokens at a time so that the (tokens, positions,
    count) products stay in the cache: (N, 50, d) -> (N, F), before the activation. The bias is added after the
    max, which is exact (rounding is monotone)."""
    tokens, length, dim = chars.shape
    chars = chars.contiguous()
    filters = [(conv.kernel_size[0], conv.out_channels) for conv in encoder.convolutions]
    out = chars.new_empty(tokens, sum(count for _, count in filters))
    for start in range(0, tokens, _CONV_TOKENS_PER_BLOCK):
        block = chars[start : start + _CONV_TOKENS_PER_BLOCK]
        column = 0
        for (width, count), weight in zip(filters, packed["convolutions"]):
            windows = block.as_strided(
                (block.shape[0], length - width + 1, width * dim), (length * dim, dim, 1), block.storage_offset()
            )  # (b, positions, width * d)
            products = _linear(windows, weight)  # (b, positions, count)
            torch.amax(products, dim=1, out=out[start : start + block.shape[0], column : column + count])
            column += count
    return out.add_(packed["conv_bias"])


def _onednn_char_weights(encoder, dtype: torch.dtype) -> dict:
    """oneDNN-packed copies of the convolution, highway and projection matrices for CPU inference."""

    def build():
        return {
            "dtype": dtype,
            # (count, d, width) -> (count, width * d), matching the windows' layout (position-major)
            "convolutions": [
                _pack_weight(conv.weight.detach().permute(0, 2, 1).reshape(conv.out_channels, -1).to(dtype))
                for conv in encoder.convolutions
            ],
            "conv_bias": torch.cat([conv.bias.detach() for conv in encoder.convolutions]).to(dtype),
            "highways": [
                (_pack_weight(h.carry.weight.detach().to(dtype)), _pack_weight(h.transform.weight.detach().to(dtype)))
                for h in encoder.highways
            ],
            "projection": _pack_weight(encoder.projection.weight.detach().to(dtype)) if encoder.projection else None,
        }

    return encoder._inference_weights.get(_weights_key(encoder.parameters(), dtype), build)


class ElmoTokenCache:
    """A bounded LRU cache of layer-0 vectors: a token's character ids -> its `ElmoCharacterEncoder` output.

    For inference only: the encoder consults it only when no gradient is needed, and a forward pass that needs one
    (training) empties it. Entries are valid for one state of the encoder's weights: at every call `encode_cached`
    compares `_weights_key` (every parameter's storage, version counter, dtype and device, a digest of the small
    parameters' values) and the autocast setting with the key the entries were made under, and empties the cache
    when they differ; `load_state_dict` empties it too. `hits` counts tokens served without running the character
    CNN (cached earlier, or repeated within the batch), `misses` the tokens it encoded.
    """

    def __init__(self, max_size: int):
        self.max_size = _check_cache_size(max_size)
        self.entries: OrderedDict[bytes, torch.Tensor] = OrderedDict()  # least recently used first
        self.weights_key: tuple | None = None
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        self.entries.clear()
        self.weights_key = None

    def resize(self, max_size: int) -> None:
        self.max_size = _check_cache_size(max_size)
        while len(self.entries) > self.max_size:
            self.entries.popitem(last=False)

    def info(self) -> dict:
        return {"size": len(self.entries), "max_size": self.max_size, "hits": self.hits, "misses": self.misses}


def _check_cache_size(max_size) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ValueError(f"the token cache size must be a positive integer, got {max_size!r}")
    return max_size


def encode_cached(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """Inference through the token cache: each distinct token of the batch is looked up, and only the missing ones
    run through the CNN. Layer 0 is context-independent, so the vectors are those of the plain path (tested)."""
    cache = encoder.token_cache
    device = char_ids.device
    autocast = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else None
    key = _weights_key(encoder.parameters(), autocast)  # what the cached vectors depend on besides the token
    if cache.weights_key != key:
        if cache.entries:
            logger.info("ELMo token cache emptied: the character encoder's weights (or autocast) changed")
        cache.clear()
        cache.weights_key = key
    # int16 holds the 262 byte ids; a character dictionary (ELMoForManyLangs) may need more
    key_dtype = torch.int16 if encoder.char_embedding.num_embeddings <= 2**15 else torch.int32
    rows = char_ids.detach().to(device="cpu", dtype=key_dtype).contiguous().numpy()
    blob, width = rows.tobytes(), rows.shape[1] * rows.itemsize
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
        rows_to_encode = torch.tensor([first[i] for i in missing], device=device)
        encoded = _encode_inference(encoder, char_ids[rows_to_encode])  # (M, P)
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


CHAR_CNN_FUNCTIONS = {
    "reference": lambda encoder, char_ids: encoder.encode(char_ids),
    "onednn": encode_onednn,
    "distinct": encode_distinct,
    "cached": encode_cached,
}


# --------------------------------------------------------------------------------------------------
# biLSTM: one dispatch
# --------------------------------------------------------------------------------------------------


def lstm_implementation(config, inputs: torch.Tensor, state, layers) -> str:
    """Which of "reference", "loop", "fused", "training" runs the biLSTM layers on these inputs (no side effect).

    - "reference": the plain loop written for autograd (`ElmoBiLstmLayer.forward`), the definition;
    - "loop" (`lstm_loop`): the same functions in the same order without autograd bookkeeping, for inference;
    - "fused" (`lstm_fused`): torch's LSTM kernel (cuDNN on GPU), gradients included; exact only without clipping;
    - "training" (`lstm_training`): the reference as one autograd function with its backward pass written out, for
      training clipped models ("auto" only; autocast and `torch.compile` tracing keep the reference).

    "auto" takes torch's kernel where it is the faster exact path for unclipped models: on GPU (cuDNN), and for
    training on the CPU (10-20% faster than the autograd loop); CPU inference runs the oneDNN loop, 2x faster than
    the kernel at the original size (benchmarks/results_speed.md). Clipping is read from the layers (it can be
    switched off on a live model).
    """
    choice = getattr(config, "lstm_implementation", "auto")
    needs_grad = _needs_grad(inputs, *state, *(p for layer in layers for p in layer.parameters()))
    clipped = [layer for layer in layers if layer.clipped]
    if choice == "fused" or (choice == "auto" and not clipped and (inputs.device.type == "cuda" or needs_grad)):
        if clipped:
            raise ValueError(
                "lstm_implementation='fused' needs a model without clipping (torch's LSTM kernel has none): "
                f"cell_clip={clipped[0].cell_clip!r}, proj_clip={clipped[0].proj_clip!r}"
            )
        return "fused"
    autocast = inputs.device.type in ("cpu", "cuda") and torch.is_autocast_enabled(inputs.device.type)
    cpu = inputs.device.type == "cpu"  # on a GPU the autograd loop measured faster (benchmarks/results_pretrain.md)
    if needs_grad and choice == "auto" and cpu and not autocast and not torch.compiler.is_compiling():
        return "training"
    return "reference" if needs_grad or choice == "reference" else "loop"


def _lstm_cell_step_(
    gates: torch.Tensor, c: torch.Tensor, hidden: torch.Tensor, cell_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`lstm_cell_step` of `modeling_elmo.py` in place, for the inference loops: the same functions in the same
    order, without allocations. `gates` (..., b, 4C) are overwritten, `c` (..., b, C) is updated, `hidden` (..., b, C)
    receives `sigmoid(o) * tanh(c)` (before the projection). Returns (c, hidden)."""
    cell = c.shape[-1]
    gates[..., : 2 * cell].sigmoid_()  # input and forget gates
    gates[..., 3 * cell :].sigmoid_()  # output gate
    gates[..., 2 * cell : 3 * cell].tanh_()  # cell candidate
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)  # (..., b, C) each
    torch.mul(in_gate, cell_gate, out=hidden)
    c.mul_(forget_gate).add_(hidden)  # sigmoid(f) * c + sigmoid(i) * tanh(g)
    if cell_clip is not None:
        c.clamp_(-cell_clip, cell_clip)
    torch.tanh(c, out=hidden).mul_(out_gate)
    return c, hidden


def lstm_loop(layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState) -> tuple[torch.Tensor, LayerState]:
    """The inference loop: the reference recurrence without autograd bookkeeping.

    Args (every LSTM function's):
        layer: the `ElmoBiLstmLayer` whose parameters run.
        x: (2, N, P), packed: row `sum(batch_sizes[:t]) + r` is batch row r at step t (rows sorted by decreasing
            length, so step t holds rows `0 .. batch_sizes[t] - 1`), as in `torch.nn.utils.rnn.PackedSequence`;
            direction 1 holds each row already reversed within its own length.
        batch_sizes: the number of real rows at each step, non-increasing.
        state: (h, c) of shapes (2, B, P) and (2, B, C), rows in the same sorted order.

    Returns:
        outputs (2, N, P), packed the same way, and the final (h, c) of every row (rows that never ran keep theirs).

    The same functions in the same order as the reference, so results agree to rounding (tested), but: each step's
    rows are contiguous in the packed buffers and the cell state of the active rows is a contiguous prefix updated
    in place (no `torch.cat`, no copies of the state); on the CPU, matrix multiplies run through oneDNN with the
    weights pre-packed once into its blocked layout (`_PackedWeights`), which stays near the machine's peak at the
    small row counts of a recurrence (MKL's `torch.mm` reaches about a third of that at 32 rows here).
    """
    dtype = _compute_dtype(x)  # what the reference's matrix multiplies give under autocast
    with torch.autocast(x.device.type, enabled=False):
        x = x.to(dtype)
        packed = _onednn_lstm_weights(layer, dtype, x.device)
        if packed is None:  # GPU (or a CPU build without oneDNN): both directions in each batched multiply
            return _lstm_loop_batched(layer, x, batch_sizes, state, dtype)
        h0, c0 = state
        rows = batch_sizes[0] if batch_sizes else 0
        out = x.new_empty(x.shape[:2] + (layer.projection_dim,))  # (2, N, P), every row written below
        state_dtype = torch.promote_types(c0.dtype, dtype)  # the reference promotes c to the gates' dtype
        h_final = h0.to(dtype, copy=True)  # (2, B, P): rows past their length keep theirs
        c_final = c0.to(state_dtype, copy=True)  # (2, B, C): updated in place, active rows are a prefix
        scratch = torch.empty((rows, layer.cell_size), dtype=state_dtype, device=x.device)
        for d in range(2):
            p_ih, p_hh, p_hr = packed[d]  # oneDNN-packed weight_ih, weight_hh, weight_hr of this direction
            bias = layer.bias[d].to(dtype)
            h_prev = h0[d, :rows].to(dtype)
            offset = block_end = 0
            for t, active in enumerate(batch_sizes):
                if offset >= block_end:  # the input multiply of the next steps, just before they run (see above)
                    block_start, block_end = offset, offset + sum(batch_sizes[t : t + _INPUT_STEPS_PER_BLOCK])
                    inputs = _linear(x[d, block_start:block_end], p_ih, bias=bias)  # (rows of the block, 4C)
                step = slice(offset - block_start, offset - block_start + active)
                gates = _linear(h_prev[:active], p_hh, add=inputs[step])  # (b, 4C)
                _, hidden = _lstm_cell_step_(gates, c_final[d, :active], scratch[:active], layer.cell_clip)
                h_t = out[d, offset : offset + active]  # (b, P)
                h_t.copy_(_linear(hidden.to(dtype), p_hr) if p_hr is not None else hidden)
                if layer.proj_clip is not None:
                    h_t.clamp_(-layer.proj_clip, layer.proj_clip)
                h_prev = h_t
                offset += active
        if rows:  # the final h of each row is its output at its last step
            h_final[:, :rows] = out[:, _last_rows(batch_sizes, x.device)]
    return out, (h_final, c_final)


def _lstm_loop_batched(
    layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState, dtype: torch.dtype
) -> tuple[torch.Tensor, LayerState]:
    """`lstm_loop` with the two directions side by side in every `baddbmm`/`bmm` (half the kernel launches, for
    GPUs). Called with autocast off and `x` in `dtype`."""
    h0, c0 = state
    rows = batch_sizes[0] if batch_sizes else 0
    bias, w_ih, w_hh = (w.to(dtype) for w in (layer.bias, layer.weight_ih, layer.weight_hh))
    w_hr = layer.weight_hr.to(dtype).transpose(1, 2) if layer.weight_hr is not None else None  # (2, C, P)
    inputs = torch.baddbmm(bias.unsqueeze(1), x, w_ih.transpose(1, 2))  # (2, N, 4C)
    w_hh = w_hh.transpose(1, 2)  # (2, P, 4C)
    out = x.new_empty(x.shape[:2] + (layer.projection_dim,))  # (2, N, P)
    state_dtype = torch.promote_types(c0.dtype, dtype)
    h_final = h0.to(dtype, copy=True)
    c_final = c0.to(state_dtype, copy=True)  # (2, B, C), active rows a prefix of each direction
    scratch = torch.empty((2, rows, layer.cell_size), dtype=state_dtype, device=x.device)
    h_prev = h0[:, :rows].to(dtype)
    offset = 0
    for active in batch_sizes:
        step = slice(offset, offset + active)
        gates = torch.baddbmm(inputs[:, step], h_prev[:, :active], w_hh)  # (2, b, 4C)
        _, hidden = _lstm_cell_step_(gates, c_final[:, :active], scratch[:, :active], layer.cell_clip)
        h_t = out[:, step]  # (2, b, P)
        if w_hr is not None:
            torch.bmm(hidden.to(dtype), w_hr, out=h_t)
        else:
            h_t.copy_(hidden)
        if layer.proj_clip is not None:
            h_t.clamp_(-layer.proj_clip, layer.proj_clip)
        h_prev = h_t
        offset += active
    if rows:
        h_final[:, :rows] = out[:, _last_rows(batch_sizes, x.device)]
    return out, (h_final, c_final)


def _onednn_lstm_weights(layer, dtype: torch.dtype, device: torch.device) -> list[tuple] | None:
    """oneDNN-packed (w_ih, w_hh, w_hr) of each direction for CPU inference, or None where not used."""
    if not _use_onednn(device, dtype):
        return None

    def build():
        matrices = (layer.weight_ih, layer.weight_hh, layer.weight_hr)
        return [tuple(None if w is None else _pack_weight(w[d].detach().to(dtype)) for w in matrices) for d in range(2)]

    return layer._inference_weights.get(_weights_key(layer.parameters(), dtype), build)


def lstm_fused(layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState) -> tuple[torch.Tensor, LayerState]:
    """torch's LSTM kernel, one direction at a time on the packed sequences (directions do not mix between ELMo
    layers, so one bidirectional call cannot be used), fed with views of the layer's parameters (nothing copied or
    renamed), gradients included. Exact only without clipping, which that kernel lacks. Arguments as `lstm_loop`."""
    h0, c0 = state
    rows = batch_sizes[0] if batch_sizes else 0
    dtype = _compute_dtype(x)
    if not rows:
        return x.new_zeros((2, 0, layer.projection_dim), dtype=dtype), (h0, c0)
    sizes = torch.tensor(batch_sizes, dtype=torch.int64)  # on the CPU, as PackedSequence keeps it
    bias = layer.bias.to(dtype)
    zero_bias = bias.new_zeros(4 * layer.cell_size)  # the kernel adds two biases; ours already holds both
    outputs, h_final, c_final = [], [], []
    with torch.autocast(x.device.type, enabled=False), warnings.catch_warnings():
        # cuDNN compacts weights that are not one flat buffer (ours are views of the stacked parameters)
        warnings.filterwarnings("ignore", message="RNN module weights are not part")
        for d in range(2):
            weights = [layer.weight_ih[d].to(dtype), layer.weight_hh[d].to(dtype), bias[d], zero_bias]
            if layer.weight_hr is not None:
                weights.append(layer.weight_hr[d].to(dtype))
            hx = (h0[d : d + 1, :rows].to(dtype).contiguous(), c0[d : d + 1, :rows].to(dtype).contiguous())
            output, h_n, c_n = torch._VF.lstm(x[d].to(dtype), sizes, hx, weights, True, 1, 0.0, layer.training, False)
            outputs.append(output)  # (N, P), packed
            h_final.append(torch.cat([h_n[0], h0[d, rows:].to(dtype)]))  # rows past their length keep theirs
            c_final.append(torch.cat([c_n[0], c0[d, rows:].to(dtype)]))
    return torch.stack(outputs), (torch.stack(h_final), torch.stack(c_final))


# --------------------------------------------------------------------------------------------------
# biLSTM training: a written-out backward pass for the projected, clipped layer
# --------------------------------------------------------------------------------------------------


def lstm_training(layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState) -> tuple[torch.Tensor, LayerState]:
    """Training of a clipped layer: the reference recurrence as one autograd function (`_LstmTrainingFunction`),
    gradients included. Arguments and results as `lstm_loop`.

    The autograd loop records about 15 small operations per step, each with its own bookkeeping, and replays twice as
    many backwards. Here the forward pass runs the same functions in the same order as the reference into
    preallocated buffers (gates, cell states, outputs of every step), and the backward pass is written out: one
    multiply per step for the recurrent gradient and one for the projection, the element-wise chain between them, and
    the weight gradients as one large multiply each after the loop, over all steps at once.
    """
    h0, c0 = state
    if not batch_sizes:
        return x.new_zeros((2, 0, layer.projection_dim)), (h0, c0)
    dtype = torch.promote_types(x.dtype, layer.weight_ih.dtype)
    weights = (layer.weight_ih, layer.weight_hh, layer.bias, layer.weight_hr)
    x, h0, c0 = x.to(dtype), h0.to(dtype), c0.to(dtype)
    out, h, c = _LstmTrainingFunction.apply(x, h0, c0, *weights, batch_sizes, layer.cell_clip, layer.proj_clip)
    return out, (h, c)


def _step_layout(batch_sizes: list[int], rows: int, device: torch.device) -> tuple[list[tuple[int, int]], torch.Tensor]:
    """(offset, active) of every step, and for every packed row the packed position of the same batch row one step
    earlier, or `-1 - r` for batch row r at step 0 (where the previous state is the initial one)."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes
    steps = [(int(s), int(b)) for s, b in zip(starts, sizes)]
    step = torch.repeat_interleave(torch.arange(len(batch_sizes)), sizes)  # (N,)
    row = torch.arange(int(sizes.sum())) - starts[step]
    previous = torch.where(step > 0, starts[(step - 1).clamp(min=0)] + row, -1 - row)
    return steps, previous.to(device)


def _previous_rows(values: torch.Tensor, initial: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """(2, N, D) values of each packed row's previous step: `values` at `previous`, `initial` (2, B, D) at step 0."""
    first = int((previous < 0).sum())
    return torch.cat([initial[:, :first], values[:, previous[first:]]], dim=1)


def _bmm_nt(a: torch.Tensor, b: torch.Tensor, onednn: bool, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`a[d] @ b[d].T (+ bias[d])` for both directions d: (2, M, K), (2, N, K) -> (2, M, N)."""
    if onednn:
        return torch.stack([_mm_nt(a[d], b[d], bias[d] if bias is not None else None) for d in range(2)])
    out = torch.bmm(a, b.transpose(1, 2))
    return out.add_(bias.unsqueeze(1)) if bias is not None else out


def _bmm_tn(a: torch.Tensor, b: torch.Tensor, onednn: bool) -> torch.Tensor:
    """`a[d].T @ b[d]` for both directions d (weight gradients): (2, M, O), (2, M, I) -> (2, O, I)."""
    if onednn:
        return torch.stack([_mm_tn(a[d], b[d]) for d in range(2)])
    return torch.bmm(a.transpose(1, 2), b)


_STEP_ONEDNN_MIN_MACS = 8_000_000  # below this per direction and step, one `bmm` beats two oneDNN calls (measured)


class _StepMatmul:
    """`x[d] @ weight[d].T` for both directions d, (2, b, K) -> (2, b, N) with b <= rows: the multiply of every step
    of the training loop, written into or added to a slice of a preallocated buffer. `weight` (2, N, K) is packed for
    oneDNN once per call of the loop where the multiply is large enough for oneDNN to be the faster (the small
    preset's, not the demo's); else one batched `bmm`."""

    def __init__(self, weight: torch.Tensor, onednn: bool, rows: int):
        self.weight_t = weight.transpose(1, 2)
        use_onednn = onednn and rows * weight.shape[1] * weight.shape[2] >= _STEP_ONEDNN_MIN_MACS
        self.packed = [_pack_weight(w) for w in weight] if use_onednn else None

    def write(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return torch.bmm(x, self.weight_t, out=out)
        for d in range(2):
            out[d].copy_(_linear(x[d], self.packed[d]))
        return out

    def add_to(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return out.baddbmm_(x, self.weight_t)
        for d in range(2):
            out[d].add_(_linear(x[d], self.packed[d]))
        return out


class _LstmTrainingFunction(torch.autograd.Function):
    """Forward and backward of `ElmoBiLstmLayer.forward` (the same arguments as there, unpacked). Tested against the
    reference and with `torch.autograd.gradcheck` (tests/test_fast_paths.py)."""

    @staticmethod
    def forward(ctx, x, h0, c0, weight_ih, weight_hh, bias, weight_hr, batch_sizes, cell_clip, proj_clip):
        dtype, cell = x.dtype, weight_hh.shape[1] // 4
        w_ih, w_hh, b = (w.to(dtype) for w in (weight_ih, weight_hh, bias))
        w_hr = weight_hr.to(dtype) if weight_hr is not None else None
        steps, previous = _step_layout(batch_sizes, h0.shape[1], x.device)
        onednn = _training_onednn(x, w_ih)
        gates = _bmm_nt(x, w_ih, onednn, bias=b)  # (2, N, 4C), activated in place below
        cells = x.new_empty(gates.shape[:2] + (cell,))  # (2, N, C): cell states before the clip
        tanh_cells = torch.empty_like(cells)  # tanh of the clipped cell states
        hidden = torch.empty_like(cells)  # sigmoid(o) * tanh(c), before the projection
        out = x.new_empty(x.shape[:2] + (w_hh.shape[2],))  # (2, N, P): after the clip
        projected = torch.empty_like(out) if proj_clip is not None else out  # before the clip
        rows = batch_sizes[0]
        recurrent = _StepMatmul(w_hh, onednn, rows)
        project = _StepMatmul(w_hr, onednn, rows) if w_hr is not None else None
        h_prev, c_prev = h0, c0
        for offset, active in steps:
            s = slice(offset, offset + active)
            g = gates[:, s]
            recurrent.add_to(g, h_prev[:, :active])
            g[..., : 2 * cell].sigmoid_()  # input and forget gates
            g[..., 3 * cell :].sigmoid_()  # output gate
            g[..., 2 * cell : 3 * cell].tanh_()  # cell candidate
            in_gate, forget_gate, cell_gate, out_gate = g.chunk(4, dim=-1)
            c = torch.mul(forget_gate, c_prev[:, :active], out=cells[:, s]).addcmul_(in_gate, cell_gate)
            c_clipped = c.clamp(-cell_clip, cell_clip) if cell_clip is not None else c
            torch.tanh(c_clipped, out=tanh_cells[:, s])
            h = torch.mul(out_gate, tanh_cells[:, s], out=hidden[:, s])
            if project is not None:
                h = project.write(projected[:, s], h)
            else:
                projected[:, s] = h
            if proj_clip is not None:
                torch.clamp(h, -proj_clip, proj_clip, out=out[:, s])
            h_prev, c_prev = out[:, s], c_clipped
        ctx.batch_sizes, ctx.cell_clip, ctx.proj_clip, ctx.previous = batch_sizes, cell_clip, proj_clip, previous
        ctx.onednn = onednn  # the backward pass multiplies the way the forward pass did
        ctx.weight_dtypes = [w.dtype if w is not None else None for w in (weight_ih, weight_hh, bias, weight_hr)]
        ctx.save_for_backward(x, h0, c0, w_ih, w_hh, w_hr, gates, cells, tanh_cells, hidden, projected, out)
        h_final, c_final = h0.clone(), c0.clone()  # rows that never ran keep theirs
        last = _last_rows(batch_sizes, x.device)
        h_final[:, : len(last)] = out[:, last]
        c_last = cells[:, last]
        c_final[:, : len(last)] = c_last.clamp(-cell_clip, cell_clip) if cell_clip is not None else c_last
        return out, h_final, c_final

    @staticmethod
    @torch.autograd.function.once_differentiable  # a second derivative raises a clear error
    def backward(ctx, grad_out, grad_h, grad_c):
        x, h0, c0, w_ih, w_hh, w_hr, gates, cells, tanh_cells, hidden, projected, out = ctx.saved_tensors
        cell_clip, proj_clip, previous = ctx.cell_clip, ctx.proj_clip, ctx.previous
        steps, _ = _step_layout(ctx.batch_sizes, h0.shape[1], x.device)
        cell = tanh_cells.shape[-1]
        onednn = ctx.onednn
        rows = ctx.batch_sizes[0]
        # d(out) -> d(hidden), and d(gates) -> d(h) of the previous step
        to_hidden = _StepMatmul(w_hr.transpose(1, 2), onednn, rows) if w_hr is not None else None
        to_previous = _StepMatmul(w_hh.transpose(1, 2), onednn, rows)
        d_hidden_buffer = torch.empty_like(hidden[:, :rows]) if w_hr is not None else None
        grad_out = grad_out.clone() if grad_out is not None else torch.zeros_like(out)
        # Element-wise factors of every step at once: d(gates) = [dc, dc, dc, d(hidden)] * factors, where dc is the
        # gradient of the clipped cell state (the clip's mask folded into the factors of i, f, g and of the carry).
        # Written into one buffer, two passes a factor (s - s * s is the sigmoid's derivative): at the demo size these
        # passes over every step cost as much as the step loop itself.
        c_prev = _previous_rows(cells.clamp(-cell_clip, cell_clip) if cell_clip is not None else cells, c0, previous)
        i, f, g, o = gates.chunk(4, dim=-1)
        factors = torch.empty_like(gates)
        of_i, of_f, of_g, of_o = factors.chunk(4, dim=-1)
        torch.addcmul(i, i, i, value=-1, out=of_i).mul_(g)  # g * i * (1 - i)
        torch.addcmul(f, f, f, value=-1, out=of_f).mul_(c_prev)  # c_prev * f * (1 - f)
        torch.addcmul(i, i, torch.mul(g, g, out=of_g), value=-1, out=of_g)  # i * (1 - g * g)
        torch.addcmul(o, o, o, value=-1, out=of_o).mul_(tanh_cells)  # tanh(c) * o * (1 - o)
        carry = f  # d(c_prev) = dc * f (* mask)
        if cell_clip is not None:
            mask = cells.abs() <= cell_clip
            factors[..., : 3 * cell].view(*mask.shape[:2], 3, cell).mul_(mask.unsqueeze(2))
            carry = f * mask
        to_cell = torch.mul(tanh_cells, tanh_cells)
        torch.addcmul(o, o, to_cell, value=-1, out=to_cell)  # d(clipped c) / d(hidden): o * (1 - tanh(c)^2)
        proj_mask = None
        if proj_clip is not None:
            proj_mask = (projected.abs() <= proj_clip).to(x.dtype)
            grad_out.mul_(proj_mask)
        grad_h = grad_h.clone() if grad_h is not None else torch.zeros_like(h0)  # carried: d(h) of every row
        grad_c = grad_c.clone() if grad_c is not None else torch.zeros_like(c0)  # carried: d(clipped c)
        grad_gates = torch.empty_like(gates)
        for offset, active in reversed(steps):
            s = slice(offset, offset + active)
            dh = grad_out[:, s]  # becomes d(projected) of this step
            if proj_mask is not None:
                dh.addcmul_(grad_h[:, :active], proj_mask[:, s])
            else:
                dh.add_(grad_h[:, :active])
            d_hidden = to_hidden.write(d_hidden_buffer[:, :active], dh) if to_hidden is not None else dh  # (2, b, C)
            dc = grad_c[:, :active].addcmul_(d_hidden, to_cell[:, s])
            dg = grad_gates[:, s].view(2, active, 4, cell)
            torch.mul(dc.unsqueeze(2), factors[:, s, : 3 * cell].view(2, active, 3, cell), out=dg[:, :, :3])
            torch.mul(d_hidden, factors[:, s, 3 * cell :], out=dg[:, :, 3])
            dc.mul_(carry[:, s])
            to_previous.write(grad_h[:, :active], grad_gates[:, s])
        h_prev = _previous_rows(out, h0, previous)
        grad_x = _bmm_nt(grad_gates, w_ih.transpose(1, 2), onednn) if ctx.needs_input_grad[0] else None
        grad_w_ih = _bmm_tn(grad_gates, x, onednn)
        grad_w_hh = _bmm_tn(grad_gates, h_prev, onednn)
        grad_bias = grad_gates.sum(1)
        grad_w_hr = _bmm_tn(grad_out, hidden, onednn) if w_hr is not None else None
        weights = ctx.weight_dtypes
        grads = [g if g is None else g.to(dt) for g, dt in zip((grad_w_ih, grad_w_hh, grad_bias, grad_w_hr), weights)]
        return (grad_x, grad_h, grad_c, *grads, None, None, None)


# "reference": ElmoBiLstmLayer.forward (modeling_elmo.py)
LSTM_FUNCTIONS = {"loop": lstm_loop, "fused": lstm_fused, "training": lstm_training}


class ElmoTokenCacheMixin:
    """The token cache's methods on `ElmoModel` (inference: layer 0 of frequent tokens without the character CNN).
    The cache lives on `self.char_encoder.token_cache`; it is never saved."""

    def enable_token_cache(self, max_size: int = 50_000) -> None:
        """Keep the layer-0 vectors of up to `max_size` distinct tokens (least recently used evicted) and encode each
        distinct token of a batch once. Used only when no gradient is needed; emptied whenever the weights change
        (see `ElmoTokenCache`). Costs `max_size * projection_dim` floats at most (100 MB for 50,000 tokens at the
        original size). Outputs equal those without the cache (tested)."""
        if self.char_encoder.token_cache is None:
            self.char_encoder.token_cache = ElmoTokenCache(max_size)
        else:
            self.char_encoder.token_cache.resize(max_size)

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
