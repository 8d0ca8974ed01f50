"""The biLSTM's training kernel: the projected, clipped layer as one autograd function with its backward pass
written out ("training" in `kernels_elmo.ALL_LSTM_FUNCTIONS`; `lstm_inference_elmo.lstm_implementation` picks it for
training clipped models on the CPU).

Tested against the reference (`ElmoBiLstmLayer.forward`) and with `torch.autograd.gradcheck`
(tests/test_fast_paths.py); docs/architecture.md ("Fast paths").

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch and its siblings.
"""

from __future__ import annotations

import torch

from .kernels_elmo import ALL_LSTM_FUNCTIONS
from .lstm_inference_elmo import LayerState, last_rows
from .matmul_elmo import mm_nt, mm_tn, pack_weight, packed_linear, training_onednn


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
        return torch.stack([mm_nt(a[d], b[d], bias[d] if bias is not None else None) for d in range(2)])
    out = torch.bmm(a, b.transpose(1, 2))
    return out.add_(bias.unsqueeze(1)) if bias is not None else out


def _bmm_tn(a: torch.Tensor, b: torch.Tensor, onednn: bool) -> torch.Tensor:
    """`a[d].T @ b[d]` for both directions d (weight gradients): (2, M, O), (2, M, I) -> (2, O, I)."""
    if onednn:
        return torch.stack([mm_tn(a[d], b[d]) for d in range(2)])
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
        self.packed = [pack_weight(w) for w in weight] if use_onednn else None

    def write(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return torch.bmm(x, self.weight_t, out=out)
        for d in range(2):
            out[d].copy_(packed_linear(x[d], self.packed[d]))
        return out

    def add_to(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return out.baddbmm_(x, self.weight_t)
        for d in range(2):
            out[d].add_(packed_linear(x[d], self.packed[d]))
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
        onednn = training_onednn(x, w_ih)
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
        last = last_rows(batch_sizes, x.device)
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


# Picked by the dispatch only: a configuration does not name it (it is "auto"'s choice where it is exact and faster).
ALL_LSTM_FUNCTIONS.register("training", lstm_training, user_choice=False)
