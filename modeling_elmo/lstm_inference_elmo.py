"""The biLSTM's kernels for inference, and the one function that picks the kernel of every call.

Every LSTM kernel has one signature, `fn(layer, inputs, batch_sizes, state) -> (outputs, (h, c))` on packed data
(see `packed_index` and `lstm_loop`), and registers itself in `kernels_elmo.ALL_LSTM_FUNCTIONS`; here:

* "reference" (`lstm_reference`): `ElmoBiLstmLayer.forward` of `modeling_elmo.py`, the definition, written for
  autograd;
* "loop" (`lstm_loop`): the same functions in the same order without autograd bookkeeping, for inference;
* "fused" (`lstm_fused`): torch's LSTM kernel (cuDNN on GPU), gradients included; exact only without clipping.

"training" (a written-out backward pass for clipped layers) is in `lstm_training_elmo.py`, "int8" (this loop with int8
multiplies, `lstm_loop_packed`) in `quantization_elmo.py`. `lstm_implementation`
names the kernel `ElmoBiLm.forward` runs. The kernels are tested against the reference to rounding
(tests/test_fast_paths.py); docs/architecture.md ("Fast paths").

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, the standard library and
its siblings `kernels_elmo.py` and `matmul_elmo.py`.
"""

from __future__ import annotations

import warnings

import torch

from .kernels_elmo import ALL_LSTM_FUNCTIONS
from .matmul_elmo import compute_dtype, needs_grad, pack_weight, packed_linear, use_onednn, weights_key

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


def last_rows(batch_sizes: list[int], device: torch.device) -> torch.Tensor:
    """Packed position of each row's last step (rows `0 .. batch_sizes[0] - 1`)."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes  # first packed position of each step
    rows = torch.arange(batch_sizes[0])
    lengths = (sizes.unsqueeze(0) > rows.unsqueeze(1)).sum(1)  # (rows,)
    return (starts[lengths - 1] + rows).to(device)


# The inference loop multiplies the inputs of this many steps at a time, just before they run: at the original size
# the (rows, 4C) products of a whole batch (44 MB for 32 sentences) leave the cache before the steps read them.
_INPUT_STEPS_PER_BLOCK = 4


# --------------------------------------------------------------------------------------------------
# biLSTM: one dispatch
# --------------------------------------------------------------------------------------------------


def lstm_implementation(config, inputs: torch.Tensor, state, layers) -> str:
    """Which kernel of `ALL_LSTM_FUNCTIONS` runs the biLSTM layers on these inputs (no side effect).

    - "reference" (`lstm_reference`): the plain loop written for autograd (`ElmoBiLstmLayer.forward`), the
      definition;
    - "loop" (`lstm_loop`): the same functions in the same order without autograd bookkeeping, for inference;
    - "fused" (`lstm_fused`): torch's LSTM kernel (cuDNN on GPU), gradients included; exact only without clipping;
    - "training" (`lstm_training_elmo.lstm_training`): the reference as one autograd function with its backward
      pass written out, for training clipped models ("auto" only; autocast and `torch.compile` tracing keep the
      reference);
    - "graph" (`lstm_graph_elmo.lstm_graph`): inference on a padded layout of fixed shapes per bucket, replayed
      from one CUDA graph per layer and bucket on a GPU (plain torch on the CPU); "auto" takes it for CUDA
      inference of clipped models in bfloat16 or float16 (outside `torch.compile` tracing), where the packed loop
      waits on kernel launches.

    "auto" takes torch's kernel where it is the faster exact path for unclipped models: on GPU (cuDNN), and for
    training on the CPU (10-20% faster than the autograd loop); CPU inference runs the oneDNN loop, 2x faster than
    the kernel at the original size (benchmarks/results_speed.md). Clipping is read from the layers (it can be
    switched off on a live model). "loop" and "graph" fall back to the reference where gradients are needed. Any
    other name a configuration gives (a kernel its user registered) runs as named.
    """
    choice = getattr(config, "lstm_implementation", "auto")
    grad_needed = needs_grad(inputs, *state, *(p for layer in layers for p in layer.parameters()))
    clipped = [layer for layer in layers if layer.clipped]
    if choice == "fused" or (choice == "auto" and not clipped and (inputs.device.type == "cuda" or grad_needed)):
        if clipped:
            raise ValueError(
                "lstm_implementation='fused' needs a model without clipping (torch's LSTM kernel has none): "
                f"cell_clip={clipped[0].cell_clip!r}, proj_clip={clipped[0].proj_clip!r}"
            )
        return "fused"
    if choice not in ("auto", "loop", "graph"):  # "reference", or a kernel registered by its user: runs as named
        return choice
    autocast = inputs.device.type in ("cpu", "cuda") and torch.is_autocast_enabled(inputs.device.type)
    cpu = inputs.device.type == "cpu"  # on a GPU the autograd loop measured faster (benchmarks/results_pretrain.md)
    if grad_needed and choice == "auto" and cpu and not autocast and not torch.compiler.is_compiling():
        return "training"
    if grad_needed:
        return "reference"
    # CUDA inference of clipped layers in bfloat16 or float16: the padded loop replayed from CUDA graphs, 1.7-2.1x the
    # packed loop at 32-128 sentences on an H200. In float32 the step's multiplies, not the launches, take the time,
    # and the packed loop (which skips finished rows) measured faster at every batch (benchmarks/results_speed.md).
    reduced = autocast or getattr(inputs, "dtype", torch.float32) in (torch.bfloat16, torch.float16)
    if choice == "graph" or (
        choice == "auto" and inputs.device.type == "cuda" and reduced and not torch.compiler.is_compiling()
    ):
        return "graph"
    return "loop"


def lstm_reference(
    layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState
) -> tuple[torch.Tensor, LayerState]:
    """The reference recurrence, `ElmoBiLstmLayer.forward` (modeling_elmo.py), behind the common signature."""
    return layer(x, batch_sizes, state)


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
    weights pre-packed once into its blocked layout (`PackedWeights`), which stays near the machine's peak at the
    small row counts of a recurrence (MKL's `torch.mm` reaches about a third of that at 32 rows here).
    """
    dtype = compute_dtype(x)  # what the reference's matrix multiplies give under autocast
    with torch.autocast(x.device.type, enabled=False):
        x = x.to(dtype)
        packed = _onednn_lstm_weights(layer, dtype, x.device)
        if packed is None:  # GPU (or a CPU build without oneDNN): both directions in each batched multiply
            return _lstm_loop_batched(layer, x, batch_sizes, state, dtype)
        return lstm_loop_packed(layer, x, batch_sizes, state, packed, packed_linear)


def lstm_loop_packed(
    layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState, packed: list[tuple], linear
) -> tuple[torch.Tensor, LayerState]:
    """The loop of `lstm_loop` over packed weights: `packed[d]` holds (w_ih, w_hh, w_hr) of direction d in the layout
    `linear(x, w, bias=None, add=None)` multiplies (`matmul_elmo.packed_linear` for oneDNN's,
    `quantization_elmo.int8_linear` for int8). Called with autocast off and `x` in the compute dtype."""
    dtype = x.dtype
    h0, c0 = state
    rows = batch_sizes[0] if batch_sizes else 0
    out = x.new_empty(x.shape[:2] + (layer.projection_dim,))  # (2, N, P), every row written below
    state_dtype = torch.promote_types(c0.dtype, dtype)  # the reference promotes c to the gates' dtype
    h_final = h0.to(dtype, copy=True)  # (2, B, P): rows past their length keep theirs
    c_final = c0.to(state_dtype, copy=True)  # (2, B, C): updated in place, active rows are a prefix
    scratch = torch.empty((rows, layer.cell_size), dtype=state_dtype, device=x.device)
    for d in range(2):
        p_ih, p_hh, p_hr = packed[d]  # packed weight_ih, weight_hh, weight_hr of this direction
        bias = layer.bias[d].to(dtype)
        h_prev = h0[d, :rows].to(dtype)
        offset = block_end = 0
        for t, active in enumerate(batch_sizes):
            if offset >= block_end:  # the input multiply of the next steps, just before they run (see above)
                block_start, block_end = offset, offset + sum(batch_sizes[t : t + _INPUT_STEPS_PER_BLOCK])
                inputs = linear(x[d, block_start:block_end], p_ih, bias=bias)  # (rows of the block, 4C)
            step = slice(offset - block_start, offset - block_start + active)
            gates = linear(h_prev[:active], p_hh, add=inputs[step])  # (b, 4C)
            _, hidden = _lstm_cell_step_(gates, c_final[d, :active], scratch[:active], layer.cell_clip)
            h_t = out[d, offset : offset + active]  # (b, P)
            h_t.copy_(linear(hidden.to(dtype), p_hr) if p_hr is not None else hidden)
            if layer.proj_clip is not None:
                h_t.clamp_(-layer.proj_clip, layer.proj_clip)
            h_prev = h_t
            offset += active
    if rows:  # the final h of each row is its output at its last step
        h_final[:, :rows] = out[:, last_rows(batch_sizes, x.device)]
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
        h_final[:, :rows] = out[:, last_rows(batch_sizes, x.device)]
    return out, (h_final, c_final)


def _onednn_lstm_weights(layer, dtype: torch.dtype, device: torch.device) -> list[tuple] | None:
    """oneDNN-packed (w_ih, w_hh, w_hr) of each direction for CPU inference, or None where not used."""
    if not use_onednn(device, dtype):
        return None

    def build():
        matrices = (layer.weight_ih, layer.weight_hh, layer.weight_hr)
        return [tuple(None if w is None else pack_weight(w[d].detach().to(dtype)) for w in matrices) for d in range(2)]

    return layer._inference_weights.get(weights_key(layer.parameters(), dtype), build)


def lstm_fused(layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState) -> tuple[torch.Tensor, LayerState]:
    """torch's LSTM kernel, one direction at a time on the packed sequences (directions do not mix between ELMo
    layers, so one bidirectional call cannot be used), fed with views of the layer's parameters (nothing copied or
    renamed), gradients included. Exact only without clipping, which that kernel lacks. Arguments as `lstm_loop`."""
    h0, c0 = state
    rows = batch_sizes[0] if batch_sizes else 0
    dtype = compute_dtype(x)
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


# The names a configuration may choose, in the order `ElmoConfig`'s message lists them.
ALL_LSTM_FUNCTIONS.register("loop", lstm_loop)
ALL_LSTM_FUNCTIONS.register("fused", lstm_fused)
ALL_LSTM_FUNCTIONS.register("reference", lstm_reference)
