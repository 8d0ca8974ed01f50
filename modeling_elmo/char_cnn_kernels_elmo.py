"""The character CNN's kernels, and the one function that picks the kernel of every call.

Every kernel has one signature, `fn(encoder, char_ids) -> (N, P)` for the (N, max_characters_per_token) character
ids of N real tokens, and registers itself in `kernels_elmo.ALL_CHAR_CNN_FUNCTIONS`; here:

* "reference" (`encode_reference`): `ElmoCharacterEncoder.encode` of `modeling_elmo.py`, the definition;
* "onednn" (`encode_onednn`): inference on the CPU, every multiply through oneDNN with pre-packed weights;
* "distinct" (`encode_distinct`): training on the CPU, once per distinct token, each cut to its length group;
* "windows" (`encode_windows`): on a GPU (inference and training), every convolution in one matrix multiply and one
  max.

"cached" (through the token cache) is in `token_cache_elmo.py`. `char_cnn_implementation` names the kernel
`ElmoCharacterEncoder.forward` runs. Tested against the reference to rounding (tests/test_fast_paths.py);
docs/architecture.md ("Fast paths").

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, the standard library and
its siblings.
"""

from __future__ import annotations

import functools

import torch

from .kernels_elmo import ALL_CHAR_CNN_FUNCTIONS
from .matmul_elmo import (
    compute_dtype,
    needs_grad,
    pack_weight,
    packed_linear,
    training_linear,
    use_onednn,
    weights_key,
)

_CONV_TOKENS_PER_BLOCK = 32  # tokens per block of the CPU inference convolution (their products fit in the cache)
_WINDOW_TOKENS_PER_BLOCK = 4096  # tokens per block of the GPU's one multiply: (4096, 44, 2048) products, 0.7 GB in bf16
# The character CNN on a GPU, for inference and for training: "windows" (one multiply; on an H200 the CNN 3.3-4.1x
# cuDNN's seven convolutions in bfloat16, 1.2x in float32, a bfloat16 training step 1.3x: benchmarks/results_speed.md)
# or "reference" (cuDNN). Module settings, as lstm_graph_elmo.USE_TRITON, so that the benchmark times both in one run.
CUDA_INFERENCE_KERNEL = "windows"
CUDA_TRAINING_KERNEL = "windows"


def char_cnn_implementation(encoder, char_ids: torch.Tensor) -> str:
    """Which kernel of `ALL_CHAR_CNN_FUNCTIONS` `ElmoCharacterEncoder.forward` runs (no side effect).

    Training on the CPU ("distinct"): the CNN runs once per distinct token of the batch, each cut to its length
    group; on a GPU, where the grouping waits for the GPU (benchmarks/results_pretrain.md), all convolutions in one
    multiply ("windows", `CUDA_TRAINING_KERNEL`).
    Inference: through the token cache when there is one ("cached"), else with oneDNN-packed weights on the CPU
    ("onednn"), with all convolutions in one multiply on a GPU ("windows", `CUDA_INFERENCE_KERNEL`).
    `lstm_implementation="reference"` and `torch.compile` tracing take the plain CNN.
    """
    if getattr(encoder.config, "lstm_implementation", "auto") == "reference" or torch.compiler.is_compiling():
        return "reference"
    if needs_grad(*encoder.parameters()):
        return "distinct" if char_ids.device.type == "cpu" else CUDA_TRAINING_KERNEL
    if encoder.token_cache is not None and char_ids.shape[0] > 0:
        return "cached"
    if _int8(encoder):
        return "int8"
    if char_ids.device.type == "cuda":
        return CUDA_INFERENCE_KERNEL
    return "onednn" if use_onednn(char_ids.device, _char_dtype(encoder, char_ids.device)) else "reference"


def _char_dtype(encoder, device: torch.device) -> torch.dtype:
    """The dtype of the character CNN's matrix multiplies here (autocast's when it is on)."""
    if device.type in ("cpu", "cuda") and torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return encoder.char_embedding.weight.dtype


def _int8(encoder) -> bool:
    """Whether the model runs int8 inference (`quantization_elmo.py`, registered as "int8", looked up by name here:
    that file imports this one)."""
    return getattr(encoder.config, "lstm_implementation", "auto") == "int8"


def encode_inference(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """The CNN without gradients: int8 when the model runs int8, oneDNN where available, the GPU's kernel on a GPU,
    else the reference."""
    if _int8(encoder):
        return ALL_CHAR_CNN_FUNCTIONS["int8"](encoder, char_ids)
    if char_ids.device.type == "cuda":
        return ALL_CHAR_CNN_FUNCTIONS[CUDA_INFERENCE_KERNEL](encoder, char_ids)
    if use_onednn(char_ids.device, _char_dtype(encoder, char_ids.device)):
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
    positions instead of 50.

    Each group's convolutions are one multiply, as `encode_windows` does them: every filter padded with zero weights
    to the widest, the character windows times one (d * widest, F) matrix. In a cut group the positions where a
    narrower filter's window would pass the widest one's last lie in the padding run too, so they need no tail; the
    group of whole tokens takes `encode_windows`' tail. On the CPU the CNN's forward and backward ran 1.16-1.56x as
    fast as with the seven convolutions, a training step 1.07-1.10x (benchmarks/results_pretrain.md). The pooling
    takes `max` with its indices: its backward pass writes one gradient per filter where `amax`'s compares every
    position (where windows tie, the gradient goes to one of them instead of being shared; tied windows are equal,
    so the weights' and the embedding's gradients are the same)."""
    tokens, width = char_ids.shape
    if tokens == 0:
        return encoder.encode(char_ids)
    varying = torch.arange(1, width + 1, device=char_ids.device) * (char_ids != char_ids[:, -1:])
    limits = torch.tensor(_TRIM_LENGTHS, device=char_ids.device)
    groups = torch.searchsorted(limits, varying.amax(dim=1))  # (N,): index of the first limit >= the varying length
    weight, bias, widest = _window_weights(encoder)
    order = groups.argsort(stable=True)
    pooled = []
    for group, rows in enumerate(order.split(torch.bincount(groups, minlength=len(_TRIM_LENGTHS) + 1).tolist())):
        if len(rows):
            limit = _TRIM_LENGTHS[group] if group < len(_TRIM_LENGTHS) else width
            chars = encoder.char_embedding(char_ids[rows, : min(width, limit + widest)])  # (n, end, d)
            best = _window_products(chars, weight, widest).max(dim=1).values  # (n, F)
            if limit + widest > width and widest > 1:  # whole tokens: the last positions, where narrower filters fit
                tail = _tail_products(chars, weight, widest)
                tail = tail + _past_the_end(encoder, width - widest + 1, width, tail.dtype, tail.device)
                best = torch.maximum(best, tail.max(dim=1).values)
            pooled.append(best)
    place = torch.empty_like(order)
    place[order] = torch.arange(tokens, device=order.device)  # row i of the input is row place[i] when sorted
    pooled = torch.cat(pooled)[place]
    return encoder.from_pooled(pooled + bias.to(pooled.dtype), linear=training_linear)


def encode_onednn(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """`encode` for inference on the CPU: every matrix multiply through oneDNN with pre-packed weights (the
    convolutions as multiplies over character windows); the same operations otherwise. (N, 50) -> (N, P)."""
    chars = encoder.char_embedding(char_ids)  # (N, 50, d)
    packed = _onednn_char_weights(encoder, compute_dtype(chars))
    with torch.autocast(chars.device.type, enabled=False):
        x = encoder.activation(convolve_onednn(encoder, chars.to(packed["dtype"]), packed))  # (N, F)
        for highway, (carry, transform) in zip(encoder.highways, packed["highways"]):
            gate = packed_linear(x, carry, bias=highway.carry.bias.to(x.dtype)).sigmoid_()
            hidden = packed_linear(x, transform, bias=highway.transform.bias.to(x.dtype)).relu_().mul_(gate)
            x = hidden.add_(gate.neg_().add_(1.0).mul_(x))  # g * relu(x W_t + b_t) + (1 - g) * x, in place
        if encoder.projection is not None:
            x = packed_linear(x, packed["projection"], bias=encoder.projection.bias.to(x.dtype))  # (N, P)
    return x


def convolve_onednn(encoder, chars: torch.Tensor, packed: dict) -> torch.Tensor:
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
            products = packed_linear(windows, weight)  # (b, positions, count)
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
                pack_weight(conv.weight.detach().permute(0, 2, 1).reshape(conv.out_channels, -1).to(dtype))
                for conv in encoder.convolutions
            ],
            "conv_bias": torch.cat([conv.bias.detach() for conv in encoder.convolutions]).to(dtype),
            "highways": [
                (pack_weight(h.carry.weight.detach().to(dtype)), pack_weight(h.transform.weight.detach().to(dtype)))
                for h in encoder.highways
            ],
            "projection": pack_weight(encoder.projection.weight.detach().to(dtype)) if encoder.projection else None,
        }

    return encoder._inference_weights.get(weights_key(encoder.parameters(), dtype), build)


def encode_windows(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """`encode` as one matrix multiply for every filter at once, for a GPU (inference and training): (N, 50) -> (N, P).

    cuDNN runs one convolution per filter width (seven at the original size), each with its own layout changes, and
    a max over positions per width: about 30 kernels where the arithmetic takes 0.1 ms in bfloat16 (a forward's
    profile, benchmarks/results_speed.md). Here every filter is padded with zero weights to the widest one, so that one
    multiply of the (N, positions, d * widest) character windows by the (d * widest, F) weights convolves them all.
    Over the first 50 - widest + 1 positions every filter's window lies within the token's 50 characters; the last
    widest - 1 positions, where only the narrower filters have windows, are multiplied apart (the characters padded
    with zeros), the windows that run past the end set to -inf, and the two maxima joined. The bias is added after
    the max (exact: rounding is monotone). 30% more multiply-adds than the seven convolutions, in two calls; the sums
    are the same products in another order (tested against `encode`)."""
    chars = encoder.char_embedding(char_ids)  # (N, 50, d)
    dtype = _char_dtype(encoder, chars.device)
    weight, bias, widest = _window_weights(encoder)
    chars, weight = chars.to(dtype), weight.to(dtype)  # the windows are copied once, in the multiply's dtype
    tokens, length, _ = chars.shape
    inside = length - widest + 1  # positions where every filter's window lies within the token
    past_the_end = _past_the_end(encoder, inside, length, dtype, chars.device)  # (widest - 1, F)
    pooled = []
    with torch.autocast(chars.device.type, enabled=False):
        for block in chars.split(_WINDOW_TOKENS_PER_BLOCK):
            best = _window_products(block, weight, widest).amax(dim=1)  # (b, F) over the inside positions
            if widest > 1:  # and the last widest - 1, where the narrower filters have windows too
                best = torch.maximum(best, _tail_products(block, weight, widest).add_(past_the_end).amax(dim=1))
            pooled.append(best)
    pooled = torch.cat(pooled) if len(pooled) != 1 else pooled[0]
    return encoder.from_pooled(pooled + bias.to(pooled.dtype))


def _window_products(chars: torch.Tensor, weight: torch.Tensor, widest: int) -> torch.Tensor:
    """(n, L, d) characters -> (n, L - widest + 1, F): every filter (`weight`, `_window_weights`) at every position
    where the widest one's window lies within the L characters."""
    return torch.nn.functional.linear(chars.unfold(1, widest, 1).flatten(2), weight)


def _tail_products(chars: torch.Tensor, weight: torch.Tensor, widest: int) -> torch.Tensor:
    """(n, L, d) characters -> (n, widest - 1, F): every filter at the last widest - 1 positions, the characters past
    the end taken as zeros (the windows that reach them are for the caller to drop)."""
    tail = torch.nn.functional.pad(chars[:, chars.shape[1] - widest + 1 :], (0, 0, 0, widest - 1))
    return _window_products(tail, weight, widest)


def _window_weights(encoder) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The convolutions' weights as one (F, d * widest) matrix in the windows' layout (`unfold`'s: channel-major, as
    the convolutions keep them, each filter padded with zeros to the widest), their biases (F,), and the widest
    width. Built at every call from the live parameters (a few small copies, gradients flowing back to them): no cache
    to go stale when the weights change."""
    widest = max(conv.kernel_size[0] for conv in encoder.convolutions)
    weights = [torch.nn.functional.pad(conv.weight, (0, widest - conv.kernel_size[0])) for conv in encoder.convolutions]
    bias = torch.cat([conv.bias for conv in encoder.convolutions])
    return torch.cat(weights).flatten(1), bias, widest


def _past_the_end(encoder, first: int, length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(length - first, F) for positions first .. length - 1: 0 where a filter's window lies within the token's
    `length` characters, -inf where it runs past them. It depends on the configuration alone: made once per shape,
    dtype and device."""
    widths = tuple(conv.kernel_size[0] for conv in encoder.convolutions)
    counts = tuple(conv.out_channels for conv in encoder.convolutions)
    return _past_the_end_mask(widths, counts, first, length, dtype, device)


@functools.lru_cache(maxsize=8)
def _past_the_end_mask(widths: tuple, counts: tuple, first: int, length: int, dtype, device) -> torch.Tensor:
    last_start = torch.tensor([length - w for w, n in zip(widths, counts) for _ in range(n)])  # (F,)
    past = torch.arange(first, length).unsqueeze(1) > last_start  # (length - first, F)
    return torch.zeros(past.shape, dtype=dtype).masked_fill_(past, float("-inf")).to(device)


def encode_reference(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """The reference, `ElmoCharacterEncoder.encode` (modeling_elmo.py), behind the common signature."""
    return encoder.encode(char_ids)


ALL_CHAR_CNN_FUNCTIONS.register("reference", encode_reference)
ALL_CHAR_CNN_FUNCTIONS.register("onednn", encode_onednn)
ALL_CHAR_CNN_FUNCTIONS.register("distinct", encode_distinct)
ALL_CHAR_CNN_FUNCTIONS.register("windows", encode_windows)
