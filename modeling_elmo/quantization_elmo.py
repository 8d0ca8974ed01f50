"""int8 inference on the CPU: the matrix multiplies of the biLSTM (input, recurrent, projection) and of the character
CNN's highways and projection with int8 weights and int8 activations, through torch's own fbgemm kernels.

`lstm_implementation="int8"` turns it on (`ElmoPreTrainedModel.quantize_int8()` sets it after checking that this
torch can run it): "int8" in `kernels_elmo.ALL_LSTM_FUNCTIONS` (`lstm_int8`) and in `ALL_CHAR_CNN_FUNCTIONS`
(`encode_int8`, which `char_cnn_kernels_elmo` picks for the same setting). Inference only: a forward pass that needs
gradients is refused in one line, and so is a CPU or torch build without fbgemm.

The scheme (dynamic quantization, as `torch.ao.quantization.quantize_dynamic` does, with one difference):

* weights: int8 per output channel, symmetric (scale `max |w| / 127`), packed once per state of the weights into
  fbgemm's layout and kept on the layer (`_int8_weights`, beside the oneDNN copies of the float paths);
* activations: quantized at every multiply with one scale **per row**, not one per tensor as fbgemm's own dynamic
  linear (`quantized::linear_dynamic`) takes: a row is one sentence at one step, or one token, so with a scale per
  tensor a sentence's vectors would depend on the other sentences of its batch. The rows are divided by their own
  scale and run through `quantized::linear_with_input_q_dq_qweight_dq_output_fp32` with a fixed input scale of 1;
  its int32 accumulation is exact and the row scale multiplies the float result, so each row's output depends on
  that row alone (tested: the same bits batched or alone);
* 7 bits of activation: fbgemm multiplies unsigned 8-bit activations by signed 8-bit weights in pairs summed into
  16 bits (AVX2's `vpmaddubsw`), which saturates unless activations stay below 128: torch's `reduce_range` for the
  same reason. Signed rows use [-63, 63] around a zero point of 64; rows known to be non-negative (after the CNN's
  ReLU) use [0, 127].

Accumulation is float32 everywhere else (gates, cell state, highway gates). The deviation from float32 is measured
in benchmarks/results_int8.md and bounded in tests/test_int8.py. torch 2.13 deprecates the quantized dtypes
(`torch.qint8`) that fbgemm's packing still takes; the deprecation warning is silenced where the weights are packed
(the user can do nothing about it), and a torch that has dropped them gets the one-line refusal.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, the standard library and
its siblings.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import torch
import torch.nn.functional as F

from .char_cnn_kernels_elmo import convolve_onednn
from .kernels_elmo import ALL_CHAR_CNN_FUNCTIONS, ALL_LSTM_FUNCTIONS
from .lstm_inference_elmo import lstm_loop_packed
from .matmul_elmo import needs_grad, pack_weight, use_onednn, weights_key

INT8 = "int8"  # the `lstm_implementation` that runs this file's kernels
_ENGINE = "fbgemm"  # torch's quantized engine whose kernels run here (x86 CPUs)
_SIGNED_ZERO_POINT, _SIGNED_LEVELS = 64, 63  # signed rows: q in [-63, 63], stored as q + 64 in [1, 127]
_UNSIGNED_LEVELS = 127  # non-negative rows: q in [0, 127]


def _supported_engines() -> list[str]:
    return list(torch.backends.quantized.supported_engines)


@functools.cache
def int8_unavailable_reason() -> str | None:
    """Why int8 inference cannot run with this torch on this CPU (one line), or None when it can. Tried once per
    process on a tiny multiply whose result is known."""
    engines = _supported_engines()
    if _ENGINE not in engines:
        return (
            f"int8 inference needs torch's {_ENGINE} quantized engine (x86 CPUs); this torch offers {engines}: "
            "use lstm_implementation='auto' (float32)"
        )
    try:
        # values on the quantization grids (weights: steps of 0.01; the row: steps of 3 / 63), so exact
        weight = torch.tensor([[1.27, -0.5, 1.0], [0.5, 0.25, -1.27]])
        out = int8_linear(torch.tensor([[3.0, 1.0, -1.0]]), pack_int8(weight))
        expected = torch.tensor([[2.31, 3.02]])
        if not torch.allclose(out, expected, atol=1e-4):
            return f"int8 inference: torch's {_ENGINE} kernels gave {out.tolist()} for {expected.tolist()} here"
    except (AttributeError, RuntimeError, NotImplementedError, TypeError) as error:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return f"int8 inference needs torch's {_ENGINE} quantized kernels, which fail here: {first_line}"
    return None


def check_int8(device: torch.device | str = "cpu") -> None:
    """Raise a one-line RuntimeError when int8 inference cannot run here (see `int8_unavailable_reason`)."""
    if torch.device(device).type != "cpu":
        raise RuntimeError(f"int8 inference runs on the CPU ({_ENGINE}); the model is on {device}: move it with .cpu()")
    reason = int8_unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)


def quantize_int8(model):
    """Switch `model` (any Elmo class) to int8 inference: checks that this torch and CPU can run it, sets
    `config.lstm_implementation = "int8"` (saved with the model; set it back to "auto" for float32) and empties the
    token cache, whose vectors were float32's. The int8 weights are packed at the first forward pass. Returns
    `model`."""
    check_int8(model.device)
    model.config.lstm_implementation = INT8
    for module in model.modules():
        if getattr(module, "token_cache", None) is not None:
            module.token_cache.clear()
    return model


# --------------------------------------------------------------------------------------------------
# The multiply: int8 weights packed once, rows quantized at each call
# --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _engine():
    """fbgemm as torch's quantized engine within the block (packing follows the global setting; the multiply
    follows the packed weights)."""
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = _ENGINE
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


def pack_int8(weight: torch.Tensor):
    """A float (out, in) weight as int8 per output channel (symmetric), in fbgemm's packed layout."""
    weight = weight.detach().float().contiguous()
    scales = weight.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny).div_(127.0).double()
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with _engine(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*deprecated")
        quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(quantized, None)


def int8_linear(
    x: torch.Tensor,
    packed,
    bias: torch.Tensor | None = None,
    add: torch.Tensor | None = None,
    nonnegative: bool = False,
) -> torch.Tensor:
    """`x @ weight.T (+ bias) (+ add)` for float32 `x` (..., in), with `weight` packed by `pack_int8` and each row of
    `x` quantized with its own scale (`nonnegative`: the rows hold no negative value, 7 bits of magnitude instead of
    6 and a sign). `bias` and `add` are added in float32; the signature of `matmul_elmo.packed_linear`."""
    rows = x.reshape(-1, x.shape[-1])
    if nonnegative:
        scale = rows.amax(dim=1, keepdim=True).clamp_min_(torch.finfo(torch.float32).tiny).div_(_UNSIGNED_LEVELS)
        zero_point = 0
    else:
        scale = torch.linalg.vector_norm(rows, float("inf"), dim=1, keepdim=True)
        scale = scale.clamp_min_(torch.finfo(torch.float32).tiny).div_(_SIGNED_LEVELS)
        zero_point = _SIGNED_ZERO_POINT
    # rows / scale lies within the levels: the kernel's own quantization (scale 1) only rounds it
    products = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(rows / scale, 1.0, zero_point, packed)
    if add is not None:
        out = add.reshape(products.shape).addcmul(products, scale)  # add + products * scale, one pass
    elif bias is not None:
        out = torch.addcmul(bias, products, scale)
    else:
        out = products.mul_(scale)
    if add is not None and bias is not None:
        out.add_(bias)
    return out.view(*x.shape[:-1], out.shape[-1])


# --------------------------------------------------------------------------------------------------
# The kernels
# --------------------------------------------------------------------------------------------------


def _check_inference(what: str, device: torch.device, *tensors) -> None:
    if needs_grad(*tensors):
        raise ValueError(
            f"lstm_implementation='int8' is for inference: {what} needs gradients here; run under torch.no_grad() "
            "or set config.lstm_implementation = 'auto' to train"
        )
    check_int8(device)


def lstm_int8(layer, x: torch.Tensor, batch_sizes: list[int], state) -> tuple[torch.Tensor, tuple]:
    """The inference loop of `lstm_inference_elmo.lstm_loop` with int8 multiplies (`int8_linear`); computes in
    float32 and returns the input's dtype. Arguments as every LSTM kernel's."""
    _check_inference("the biLSTM", x.device, x, *state, *layer.parameters())
    dtype = x.dtype
    h0, c0 = state
    with torch.autocast(x.device.type, enabled=False):
        packed = _int8_lstm_weights(layer)
        out, (h, c) = lstm_loop_packed(layer, x.float(), batch_sizes, (h0.float(), c0.float()), packed, int8_linear)
    return out.to(dtype), (h.to(dtype), c.to(dtype))


def _int8_lstm_weights(layer) -> list[tuple]:
    """Packed int8 (w_ih, w_hh, w_hr) of each direction, rebuilt when the weights change."""

    def build():
        matrices = (layer.weight_ih, layer.weight_hh, layer.weight_hr)
        return [tuple(None if w is None else pack_int8(w[d]) for w in matrices) for d in range(2)]

    return layer._int8_weights.get(weights_key(layer.parameters(), INT8), build)


def encode_int8(encoder, char_ids: torch.Tensor) -> torch.Tensor:
    """`ElmoCharacterEncoder.encode` with int8 highways and projection (the convolutions stay float32: their
    multiplies are over 16-112 numbers, too short for int8 to pay). (N, 50) -> (N, P), float32."""
    _check_inference("the character CNN", char_ids.device, *encoder.parameters())
    weights = _int8_char_weights(encoder)
    nonnegative = encoder.config.char_cnn_activation == "relu"  # then every highway keeps its input >= 0
    with torch.autocast(char_ids.device.type, enabled=False):
        chars = encoder.char_embedding(char_ids).float()  # (N, 50, d)
        if weights["convolutions"] is not None:
            pooled = convolve_onednn(encoder, chars, weights)
        else:
            chars = chars.transpose(1, 2)  # (N, d, 50)
            pooled = torch.cat([F.conv1d(chars, conv.weight.float(), conv.bias.float()).amax(-1)
                                for conv in encoder.convolutions], dim=-1)
        x = encoder.activation(pooled)  # (N, F)
        for packed, bias in weights["highways"]:  # carry and transform in one multiply
            gate, hidden = int8_linear(x, packed, bias=bias, nonnegative=nonnegative).chunk(2, dim=-1)
            gate.sigmoid_()
            hidden = hidden.relu_().mul_(gate)
            x = hidden.add_(gate.neg_().add_(1.0).mul_(x))  # g * relu(x W_t + b_t) + (1 - g) * x
        if encoder.projection is not None:
            x = int8_linear(x, weights["projection"], bias=encoder.projection.bias.float(), nonnegative=nonnegative)
    return x


def _int8_char_weights(encoder) -> dict:
    """oneDNN-packed float32 convolutions (where oneDNN runs), int8 highways and projection."""

    def build():
        onednn = use_onednn(torch.device("cpu"), torch.float32)
        return {
            "convolutions": [
                pack_weight(conv.weight.detach().permute(0, 2, 1).reshape(conv.out_channels, -1).float())
                for conv in encoder.convolutions
            ] if onednn else None,
            "conv_bias": torch.cat([conv.bias.detach() for conv in encoder.convolutions]).float(),
            "highways": [
                (pack_int8(torch.cat([h.carry.weight, h.transform.weight])),
                 torch.cat([h.carry.bias, h.transform.bias]).detach().float())
                for h in encoder.highways
            ],
            "projection": pack_int8(encoder.projection.weight) if encoder.projection is not None else None,
        }

    return encoder._int8_weights.get(weights_key(encoder.parameters(), INT8), build)


ALL_LSTM_FUNCTIONS.register(INT8, lstm_int8)
ALL_CHAR_CNN_FUNCTIONS.register(INT8, encode_int8)
