"""Optional Triton kernels for the "graph" LSTM kernel's step (`lstm_graph_elmo.py`): the cell's pointwise work and the
projection's tail, each one launch instead of the dozen small torch kernels of the same functions.

Used only where Triton imports and the tensors are on a CUDA GPU (or Triton's CPU interpreter is on,
`TRITON_INTERPRET=1`, which the tests use); everywhere else `lstm_graph_elmo.py` runs the same functions with torch
ops, the fallback and the reference these kernels are tested against.

The functions are the reference's (`lstm_cell_step` of `modeling_elmo.py`) in the same order, computed in float32
registers, with the roundings of the torch path kept where they change values: the gates' activations and the
input-times-candidate product are rounded to the gates' dtype (bfloat16 under autocast) as torch's in-place ops on a
bfloat16 tensor round them. On a GPU `exp` and `tanh` are libdevice's (the accurate ones torch's CUDA kernels call);
the interpreter has no libdevice, so there `tanh(x)` is `2 sigmoid(2x) - 1` (about 1e-7 apart): the interpreter checks
the indexing, masking and data flow, the GPU run the arithmetic (tests/test_cuda.py).

This file travels to the Hub as remote code: it imports only torch, the standard library and, when installed,
triton (guarded: remote code loads without it).
"""

from __future__ import annotations

import os

import torch

try:  # optional: the torch ops of lstm_graph_elmo.py run without it
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
except ImportError:
    triton = None

# One program handles this many columns of one row (the cell or projection width is split across programs).
_BLOCK = 1024


def interpreting() -> bool:
    """Whether Triton runs its CPU interpreter in this process (read when Triton decorates the kernels)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def available(device: torch.device) -> bool:
    """Whether the fused step runs on tensors of `device`: Triton is installed, and the device is a CUDA GPU (or the
    CPU under Triton's interpreter)."""
    if triton is None:
        return False
    return device.type == "cuda" or (device.type == "cpu" and interpreting())


if triton is not None:

    @triton.jit
    def _sigmoid(x, PRECISE: tl.constexpr):
        if PRECISE:
            return 1.0 / (1.0 + libdevice.exp(-x))
        else:
            return tl.sigmoid(x)

    @triton.jit
    def _tanh(x, PRECISE: tl.constexpr):
        if PRECISE:
            return libdevice.tanh(x)
        else:
            return 2.0 * tl.sigmoid(2.0 * x) - 1.0

    @triton.jit
    def _cell_step_kernel(gates_ptr, c_ptr, hidden_ptr, mask_ptr, rows, cell, clip,
                          HAS_CLIP: tl.constexpr, PRECISE: tl.constexpr, BLOCK: tl.constexpr):
        """One (direction, row) of `gates` (2 * rows, 4C) and `c` (2 * rows, C) per program row: `c` updated where the
        row is active (`mask_ptr[row % rows]`), `hidden` (2 * rows, C) = sigmoid(o) * tanh(c_new) everywhere."""
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < cell
        active = tl.load(mask_ptr + row % rows) != 0
        gates = gates_ptr + row.to(tl.int64) * 4 * cell + cols
        gate_type = gates_ptr.dtype.element_ty
        # Each activation rounded to the gates' dtype, as torch's in-place ops on that tensor round it.
        in_gate = _sigmoid(tl.load(gates, mask=inside).to(tl.float32), PRECISE).to(gate_type).to(tl.float32)
        forget_gate = _sigmoid(tl.load(gates + cell, mask=inside).to(tl.float32), PRECISE).to(gate_type)
        cell_gate = _tanh(tl.load(gates + 2 * cell, mask=inside).to(tl.float32), PRECISE).to(gate_type).to(tl.float32)
        out_gate = _sigmoid(tl.load(gates + 3 * cell, mask=inside).to(tl.float32), PRECISE).to(gate_type)
        state = c_ptr + row.to(tl.int64) * cell + cols
        c_old = tl.load(state, mask=inside)
        state_type = c_ptr.dtype.element_ty
        # Every product and sum rounded to the dtype torch gives it (no-ops in float32): i * g in the gates' dtype,
        # the rest in the state's (float32, or the gates' when the state is in it).
        candidate = (in_gate * cell_gate).to(gate_type).to(tl.float32)
        kept = (c_old.to(tl.float32) * forget_gate.to(tl.float32)).to(state_type).to(tl.float32)
        c_new = (kept + candidate).to(state_type).to(tl.float32)
        if HAS_CLIP:
            c_new = tl.minimum(tl.maximum(c_new, -clip), clip)
        squashed = _tanh(c_new, PRECISE).to(state_type).to(tl.float32)
        hidden = (squashed * out_gate.to(tl.float32)).to(state_type)
        tl.store(state, c_new.to(state_type), mask=inside & active)
        tl.store(hidden_ptr + row.to(tl.int64) * cell + cols, hidden.to(hidden_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def _tail_kernel(new_ptr, h_ptr, out_ptr, mask_ptr, rows, width, out_direction_stride, clip,
                     HAS_CLIP: tl.constexpr, BLOCK: tl.constexpr):
        """The projected output `new` (2 * rows, P), clipped: into `h` (2 * rows, P) where the row is active, and into
        this step's outputs (direction d at `out_ptr + d * out_direction_stride`, rows of P), zero where it is not."""
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < width
        batch_row = row % rows
        direction = row // rows
        active = tl.load(mask_ptr + batch_row) != 0
        value = tl.load(new_ptr + row.to(tl.int64) * width + cols, mask=inside)
        if HAS_CLIP:
            value = tl.minimum(tl.maximum(value, -clip), clip)
        tl.store(h_ptr + row.to(tl.int64) * width + cols, value, mask=inside & active)
        out = out_ptr + direction.to(tl.int64) * out_direction_stride + batch_row.to(tl.int64) * width + cols
        tl.store(out, tl.where(active, value, tl.zeros_like(value)), mask=inside)


def cell_step(gates: torch.Tensor, c: torch.Tensor, active: torch.Tensor, cell_clip: float | None,
              dtype: torch.dtype) -> torch.Tensor:
    """`lstm_graph_elmo.cell_step_torch` in one launch: `gates` (2, B, 4C), `c` (2, B, C) updated in place where
    `active` (B, 1) holds; returns sigmoid(o) * tanh(c) (2, B, C) in `dtype`."""
    directions, rows, cell = c.shape
    hidden = torch.empty((directions, rows, cell), dtype=dtype, device=c.device)
    grid = (directions * rows, triton.cdiv(cell, _BLOCK))
    _cell_step_kernel[grid](gates, c, hidden, active, rows, cell, float(cell_clip or 0.0),
                            HAS_CLIP=cell_clip is not None, PRECISE=not interpreting(), BLOCK=_BLOCK)
    return hidden


def tail(new: torch.Tensor, h: torch.Tensor, out_step: torch.Tensor, active: torch.Tensor,
         proj_clip: float | None) -> None:
    """`lstm_graph_elmo.tail_torch` in one launch: clip `new` (2, B, P), copy it into `h` where `active` (B, 1) holds,
    and into `out_step` (2, B, P; a step of the (2, T, B, P) outputs), zero where it does not."""
    directions, rows, width = new.shape
    grid = (directions * rows, triton.cdiv(width, _BLOCK))
    _tail_kernel[grid](new, h, out_step, active, rows, width, out_step.stride(0), float(proj_clip or 0.0),
                       HAS_CLIP=proj_clip is not None, BLOCK=_BLOCK)
