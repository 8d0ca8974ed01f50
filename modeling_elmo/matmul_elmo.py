"""Matrix multiplies and device settings shared by the kernels (`lstm_inference_elmo.py`, `lstm_training_elmo.py`,
`char_cnn_kernels_elmo.py`) and the softmax, and the derived copies of the weights they keep for inference.

On the CPU, multiplies go through oneDNN where the torch build has it: with weights packed once into its blocked
layout for inference (float32, bfloat16: `pack_weight`, `packed_linear`), and with plain tensors for training
(float32: `training_linear`, `mm_nt`, `mm_tn`), where it measured 1.05-2.2x MKL's `torch.mm` at the shapes of a
training step on these machines (benchmarks/bench_matmul.py). On CUDA, `float32_cudnn` keeps cuDNN's float32 in
float32. The packed copies live on each layer as `PackedWeights`, rebuilt when `weights_key` says the weights
changed, and freed by `forget_inference_copies` when training starts.

The names without an underscore are the interface the other files of this folder import; `_ONEDNN` (the per-process
probe of oneDNN) and `_OneDnnLinear` stay private to this file.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch and the standard library.
"""

from __future__ import annotations

import contextlib
import hashlib

import torch

_ONEDNN: dict[torch.dtype, bool] = {}  # per dtype: does oneDNN's packed linear run, and right, on this CPU?


def needs_grad(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd would record an op on these tensors right now."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a matmul on `x` produces here: the autocast dtype when autocast is on, else `x.dtype`."""
    device_type = x.device.type
    if device_type in ("cpu", "cuda") and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


def use_onednn(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the CPU inference paths use oneDNN matrix multiplies with pre-packed weights: on CPU builds that have
    them, for float32 and bfloat16, outside `torch.compile` tracing. Each dtype is tried once per process: oneDNN's
    bfloat16 packing needs AVX-512 (or AVX-NE-CONVERT), so on an AVX2-only CPU bfloat16 takes the plain torch path
    while float32 keeps oneDNN."""
    if device.type != "cpu" or dtype not in (torch.float32, torch.bfloat16) or torch.compiler.is_compiling():
        return False
    if dtype not in _ONEDNN:
        try:
            weight = torch.ones(4, 3, dtype=dtype)
            out = torch.ops.mkldnn._linear_pointwise(
                torch.ones(2, 3, dtype=dtype), pack_weight(weight), None, "none", [], ""
            )
            _ONEDNN[dtype] = bool(torch.equal(out, torch.full((2, 4), 3.0, dtype=dtype)))
        except (AttributeError, RuntimeError, NotImplementedError):
            _ONEDNN[dtype] = False
    return _ONEDNN[dtype]


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """A (out, in) weight in oneDNN's blocked layout for `packed_linear`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), None)


def packed_linear(
    x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None, add: torch.Tensor | None = None
) -> torch.Tensor:
    """`x @ weight.T (+ bias) (+ add)` through oneDNN with the packed weight. (oneDNN's fused "add" epilogue measured
    5-15% slower than a separate `add_` here.)"""
    out = torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    return out if add is None else out.add_(add)


@contextlib.contextmanager
def float32_cudnn(device: torch.device):
    """cuDNN's convolutions and LSTM kernel in true float32 within the block, on CUDA: torch lets cuDNN compute float32
    in TF32 by default (`torch.backends.cudnn.allow_tf32`), which moves ELMo's outputs by about 1e-4 on an H100, ten
    times the converted weights' tolerance. bfloat16 autocast is the fast way on a GPU. Backward passes, run after the
    block, keep torch's setting."""
    cudnn = torch.backends.cudnn
    if device.type != "cuda" or not cudnn.allow_tf32:
        yield
        return
    cudnn.allow_tf32 = False
    try:
        yield
    finally:
        cudnn.allow_tf32 = True


def training_onednn(*tensors: torch.Tensor) -> bool:
    """Whether training's matrix multiplies on these tensors go through oneDNN: float32 on a CPU with oneDNN, outside
    autocast (whose dtype rules stay torch's). oneDNN multiplies the shapes of a training step here 1.05-2.2x faster
    than MKL's `torch.mm` (benchmarks/bench_matmul.py); results agree to float32 rounding."""
    x = tensors[0]
    return (
        all(t.dtype == torch.float32 for t in tensors)
        and not torch.is_autocast_enabled("cpu")
        and use_onednn(x.device, torch.float32)
    )


def mm_nt(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`a @ b.T (+ bias)` for 2-d float32 CPU tensors through oneDNN, with `b` taken as it is (not packed)."""
    return torch.ops.mkldnn._linear_pointwise(a, b, bias, "none", [], "")


def mm_tn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a.T @ b` (a weight's gradient: (M, O) and (M, I) -> (O, I)) through oneDNN, in the orientation it runs
    faster: with the wider of the two outputs' sides as oneDNN's weight (measured 2x apart at some shapes)."""
    if b.shape[1] >= a.shape[1]:
        return mm_nt(a.t(), b.t())
    return mm_nt(b.t(), a.t()).t()


class _OneDnnLinear(torch.autograd.Function):
    """`F.linear(x, weight, bias)` with its forward and backward multiplies through oneDNN (`training_linear`)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        rows = x.reshape(-1, x.shape[-1])
        return mm_nt(rows, weight, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad = grad.reshape(-1, weight.shape[0])
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = mm_nt(grad, weight.t()).view(x.shape)
        if ctx.needs_input_grad[1]:
            grad_weight = mm_tn(grad, x.reshape(-1, x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.sum(0)
        return grad_x, grad_weight, grad_bias


def training_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear` for the training fast paths: through oneDNN where `training_onednn` says so, else `F.linear`."""
    if training_onednn(x, weight) and x.shape[0] > 0:
        return _OneDnnLinear.apply(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)


# --------------------------------------------------------------------------------------------------
# Derived copies of the weights (oneDNN), and when they are stale
# --------------------------------------------------------------------------------------------------


def weights_key(parameters, *extra) -> tuple:
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


class PackedWeights:
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
        return PackedWeights()

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.key, self.value = None, None


def forget_inference_copies(*modules) -> None:
    """Free what inference derived from these modules' weights (oneDNN copies, the token cache): called when a
    forward pass needs gradients, as the weights are about to change (some optimizers leave no trace of it)."""
    for module in modules:
        module._inference_weights.clear()
        if getattr(module, "_int8_weights", None) is not None:
            module._int8_weights.clear()
        if getattr(module, "token_cache", None) is not None:
            module.token_cache.clear()
        if module.__dict__.get("_lstm_graphs") is not None:  # the "graph" kernel's CUDA graphs (lstm_graph_elmo.py)
            module._lstm_graphs.clear()
