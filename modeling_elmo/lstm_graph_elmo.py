"""The "graph" LSTM kernel: inference on a padded layout whose shapes are fixed per (rows, steps) bucket, so that on a
CUDA GPU the whole time loop of a layer is captured once in a CUDA graph and replayed.

Why: the packed loop (`lstm_inference_elmo.lstm_loop`) shrinks its active rows at every step, so every step launches
its dozen small kernels from Python, and on a GPU it waits on those launches, not on the arithmetic (issue 15: 40k
tokens/s at batch 32, bfloat16 no faster than float32). Here every step has the same shapes: the rows are the state's
batch rounded up to a bucket (`bucket_rows`), the steps the longest length rounded up (`bucket_steps`), and a
per-step mask (row r is active at step t while t < its length; the packed layout's rows are sorted by decreasing
length, and direction 1 is already reversed within each row) freezes the state of finished rows and zeroes their
outputs. Active rows compute the reference's functions in its order (`lstm_cell_step` of `modeling_elmo.py`), so
results equal the reference to float32 rounding, padding and state included (tests/test_lstm_graph.py).

On CUDA (outside `torch.compile` tracing) each (bucket, dtypes, weights) gets one captured graph with its own static
input and output buffers; all graphs on a device share one memory pool for their intermediates (they never run at
once, and every call copies its results out before returning; the first graph captured is kept to keep the pool), and a
layer keeps its graphs in a bounded LRU cache (`GraphCache`, at most `GRAPH_CACHE_BYTES` of static buffers per layer),
emptied when training starts or the weights are loaded. Where Triton is installed the step's pointwise work runs as two
fused kernels (`lstm_triton_elmo.py`); the torch ops here are the fallback and the reference of those kernels. On the
CPU the same loop runs without a graph (what CI tests); "auto" picks this kernel for CUDA inference of clipped models
(`lstm_implementation`).

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch, the standard library and
its siblings.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

import torch

from .kernels_elmo import ALL_LSTM_FUNCTIONS
from .lstm_triton_elmo import available as triton_available
from .lstm_triton_elmo import cell_step as triton_cell_step
from .lstm_triton_elmo import tail as triton_tail
from .matmul_elmo import PackedWeights, compute_dtype, weights_key

LayerState = tuple[torch.Tensor, torch.Tensor]

# The input multiply of this many steps at a time, inside the loop: (2, k * rows, 4C) products stay a few hundred MB
# at bulk sizes (all steps at once would be gigabytes), and k * rows rows keep the multiply efficient.
_INPUT_STEPS = 8
# Static buffers (inputs, outputs, state, mask) of one layer's graphs, least recently used dropped past this.
GRAPH_CACHE_BYTES = 2 << 30
# Switches for benchmarks and tests: graphs on CUDA, and Triton's fused step where it can run.
USE_GRAPHS = True
USE_TRITON = True


def bucket_rows(rows: int) -> int:
    """The padded row count of a graph: a multiple of 8 up to 64, then of an eighth of the next power of two (80,
    96, 112, 128, 160, ...), so a batch runs less than a quarter more rows than it has and a corpus meets few
    buckets."""
    if rows <= 64:
        return max(8, -(-rows // 8) * 8)
    step = (1 << (rows - 1).bit_length()) // 8
    return -(-rows // step) * step


def bucket_steps(steps: int) -> int:
    """The padded step count of a graph: the longest length rounded up to a multiple of 8."""
    return max(8, -(-steps // 8) * 8)


def padded_layout(batch_sizes: list[int], rows: int, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For packed rows of `batch_sizes` in a (steps, rows) time-major layout: each packed row's flat position
    `t * rows + r` (N,), and the mask (steps, rows, 1) of the real (t, r) pairs. Both on the CPU."""
    sizes = torch.tensor(batch_sizes, dtype=torch.long)
    step = torch.repeat_interleave(torch.arange(len(batch_sizes)), sizes)  # (N,)
    row = torch.arange(int(sizes.sum())) - (torch.cumsum(sizes, 0) - sizes)[step]
    padded_sizes = torch.zeros(steps, dtype=torch.long)
    padded_sizes[: len(batch_sizes)] = sizes
    mask = torch.arange(rows).unsqueeze(0) < padded_sizes.unsqueeze(1)  # rows sorted by decreasing length
    return step * rows + row, mask.unsqueeze(-1)


# --------------------------------------------------------------------------------------------------
# The step: torch ops (the reference of the fused kernels), or Triton's
# --------------------------------------------------------------------------------------------------


def cell_step_torch(gates: torch.Tensor, c: torch.Tensor, active: torch.Tensor, cell_clip: float | None,
                    dtype: torch.dtype) -> torch.Tensor:
    """The cell of `lstm_cell_step` on `gates` (2, B, 4C) (overwritten): `c` (2, B, C) updated in place where
    `active` (B, 1) holds; returns sigmoid(o) * tanh(c_new) (2, B, C) in `dtype`, for the projection. The same
    functions in the same order as the inference loop's `_lstm_cell_step_`."""
    cell = c.shape[-1]
    gates[..., : 2 * cell].sigmoid_()  # input and forget gates
    gates[..., 3 * cell :].sigmoid_()  # output gate
    gates[..., 2 * cell : 3 * cell].tanh_()  # cell candidate
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)
    c_new = torch.mul(c, forget_gate).add_(torch.mul(in_gate, cell_gate))  # sigmoid(f) * c + sigmoid(i) * tanh(g)
    if cell_clip is not None:
        c_new.clamp_(-cell_clip, cell_clip)
    hidden = torch.tanh(c_new).mul_(out_gate)
    torch.where(active, c_new, c, out=c)
    return hidden.to(dtype)


def tail_torch(new: torch.Tensor, h: torch.Tensor, out_step: torch.Tensor, active: torch.Tensor,
               proj_clip: float | None) -> None:
    """The projected output `new` (2, B, P), clipped, into `h` where `active` (B, 1) holds and into `out_step`
    (2, B, P), zero where it does not."""
    if proj_clip is not None:
        new.clamp_(-proj_clip, proj_clip)
    torch.where(active, new, h, out=h)
    torch.where(active, new, torch.zeros((), dtype=new.dtype, device=new.device), out=out_step)


@dataclass
class _Weights:
    """A layer's matrices in the compute dtype, transposed for `baddbmm`/`bmm` (views of the parameters when the
    dtype is theirs, so a graph reads the live values)."""

    bias: torch.Tensor  # (2, 1, 4C)
    ih: torch.Tensor  # (2, P, 4C)
    hh: torch.Tensor  # (2, P, 4C)
    hr: torch.Tensor | None  # (2, C, P)

    def tensors(self) -> tuple:
        return tuple(t for t in (self.bias, self.ih, self.hh, self.hr) if t is not None)


def _weights(layer, dtype: torch.dtype) -> _Weights:
    def build():
        hr = layer.weight_hr.detach().to(dtype).transpose(1, 2) if layer.weight_hr is not None else None
        return _Weights(layer.bias.detach().to(dtype).unsqueeze(1), layer.weight_ih.detach().to(dtype).transpose(1, 2),
                        layer.weight_hh.detach().to(dtype).transpose(1, 2), hr)

    if all(p.dtype == dtype for p in layer.parameters()):
        return build()  # views: nothing to keep
    # Converted copies (bfloat16 under autocast), kept with the graphs, by the oneDNN copies' rule for when they are
    # stale (`weights_key`).
    return graph_cache(layer).weights.get(weights_key(layer.parameters(), dtype), build)


def _recurrence(weights: _Weights, x: torch.Tensor, mask: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
                out: torch.Tensor, cell_clip: float | None, proj_clip: float | None, fused: bool) -> None:
    """The whole time loop on the padded layout, in place: `x` (2, T, B, P), `mask` (T, B, 1), `h` (2, B, P) and
    `c` (2, B, C) carried in and out, `out` (2, T, B, P) written at every step. Fixed shapes: capturable."""
    steps, rows, width = x.shape[1], x.shape[2], x.shape[3]
    dtype = x.dtype
    cell_step = triton_cell_step if fused else cell_step_torch
    tail = triton_tail if fused else tail_torch
    for start in range(0, steps, _INPUT_STEPS):
        end = min(start + _INPUT_STEPS, steps)
        inputs = torch.baddbmm(weights.bias, x[:, start:end].reshape(2, -1, width), weights.ih)
        inputs = inputs.view(2, end - start, rows, -1)  # (2, k, B, 4C)
        for t in range(start, end):
            gates = torch.baddbmm(inputs[:, t - start], h, weights.hh)  # (2, B, 4C)
            hidden = cell_step(gates, c, mask[t], cell_clip, dtype)
            new = torch.bmm(hidden, weights.hr) if weights.hr is not None else hidden  # (2, B, P)
            tail(new, h, out[:, t], mask[t], proj_clip)


# --------------------------------------------------------------------------------------------------
# CUDA graphs: one per bucket, dtypes and weights; bounded per layer; one shared memory pool
# --------------------------------------------------------------------------------------------------


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    x: torch.Tensor
    mask: torch.Tensor
    h: torch.Tensor
    c: torch.Tensor
    out: torch.Tensor
    weights: _Weights  # kept alive: the graph reads them by address
    nbytes: int = 0


@dataclass
class GraphCache:
    """A layer's captured graphs by key, least recently used first out past `GRAPH_CACHE_BYTES` of static buffers.
    Never copied or pickled with the layer (a copy starts empty)."""

    entries: collections.OrderedDict = field(default_factory=collections.OrderedDict)
    nbytes: int = 0
    weights: PackedWeights = field(default_factory=PackedWeights)  # converted weights, where the dtype is not theirs

    def get(self, key, build) -> _Graph:
        entry = self.entries.get(key)
        if entry is None:
            entry = build()
            self.entries[key] = entry
            self.nbytes += entry.nbytes
            while self.nbytes > GRAPH_CACHE_BYTES and len(self.entries) > 1:
                _, dropped = self.entries.popitem(last=False)
                self.nbytes -= dropped.nbytes
        self.entries.move_to_end(key)
        return entry

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0
        self.weights.clear()

    def __len__(self) -> int:
        return len(self.entries)

    def __deepcopy__(self, memo):
        return GraphCache()

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.entries, self.nbytes, self.weights = collections.OrderedDict(), 0, PackedWeights()


# Device index -> the first graph captured on it, kept for the life of the process: every later graph shares its
# memory pool (`pool=anchor.pool()`). A pool lives while a graph that uses it does; were the graphs of a cache all
# dropped (training clears the cache), the next capture into that pool fails (an internal assert of torch's
# allocator, seen on torch 2.11): the anchor keeps it alive. It is never replayed, so what it read may be gone.
_POOL_ANCHORS: dict[int, torch.cuda.CUDAGraph] = {}
# Calls of this kernel one at a time per process: a graph's static buffers are filled, replayed and read in one call,
# and a capture must not see another thread's work.
_CALL_LOCK = threading.Lock()


def graph_cache(layer) -> GraphCache:
    cache = layer.__dict__.get("_lstm_graphs")
    if cache is None:
        cache = layer.__dict__["_lstm_graphs"] = GraphCache()
    return cache


def _capture(weights: _Weights, rows: int, steps: int, dtype: torch.dtype, state_dtype: torch.dtype,
             cell: int, device: torch.device, clips: tuple, fused: bool) -> _Graph:
    width = weights.ih.shape[1]
    with torch.inference_mode(False), torch.no_grad():  # plain tensors: copied into under no_grad or inference mode
        x = torch.zeros((2, steps, rows, width), dtype=dtype, device=device)
        mask = torch.zeros((steps, rows, 1), dtype=torch.bool, device=device)
        h = torch.zeros((2, rows, width), dtype=dtype, device=device)
        c = torch.zeros((2, rows, cell), dtype=state_dtype, device=device)
        out = torch.zeros((2, steps, rows, width), dtype=dtype, device=device)
        run = lambda: _recurrence(weights, x, mask, h, c, out, *clips, fused)  # noqa: E731
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            run()  # warm-up outside the capture: cuBLAS handles, Triton's compilation
        torch.cuda.current_stream(device).wait_stream(side)
        anchor = _POOL_ANCHORS.get(device.index)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=anchor.pool() if anchor is not None else None,
                              capture_error_mode="thread_local"):
            run()
        _POOL_ANCHORS.setdefault(device.index, graph)
    nbytes = sum(t.numel() * t.element_size() for t in (x, mask, h, c, out))
    return _Graph(graph, x, mask, h, c, out, weights, nbytes)


# --------------------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------------------


def lstm_graph(layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState) -> tuple[torch.Tensor, LayerState]:
    """Every LSTM kernel's signature (`lstm_inference_elmo.lstm_loop` documents it), for inference: packed inputs
    (2, N, P) are laid out padded, the loop runs (replayed from a CUDA graph on a GPU, on a bucket's padded sizes),
    and the outputs come back packed, with the final (h, c) of every row (rows that never ran keep theirs)."""
    graphed = USE_GRAPHS and x.device.type == "cuda" and not torch.compiler.is_compiling()
    batch, steps = state[0].shape[1], len(batch_sizes)
    if graphed:
        return run_padded(layer, x, batch_sizes, state, bucket_rows(batch), bucket_steps(steps), graphed=True)
    return run_padded(layer, x, batch_sizes, state, batch, steps)


def run_padded(layer, x: torch.Tensor, batch_sizes: list[int], state: LayerState, rows: int, steps: int,
               graphed: bool = False) -> tuple[torch.Tensor, LayerState]:
    """`lstm_graph` on a layout of `rows` >= the state's batch and `steps` >= the longest length, through the layer's
    cached CUDA graph for these sizes when `graphed`."""
    h0, c0 = state
    dtype = compute_dtype(x)
    state_dtype = torch.promote_types(c0.dtype, dtype)  # the reference promotes c to the gates' dtype
    batch = h0.shape[1]
    if not batch_sizes:
        empty = x.new_zeros((2, 0, layer.projection_dim), dtype=dtype)
        return empty, (h0.to(dtype, copy=True), c0.to(state_dtype, copy=True))
    device = x.device
    fused = USE_TRITON and triton_available(device) and not torch.compiler.is_compiling()
    index, mask = padded_layout(batch_sizes, rows, steps)
    index = index.to(device)
    clips = (layer.cell_clip, layer.proj_clip)
    with torch.autocast(device.type, enabled=False), _CALL_LOCK:
        weights = _weights(layer, dtype)
        if graphed:
            key = (rows, steps, dtype, state_dtype, device, clips, fused,
                   tuple(t.data_ptr() for t in weights.tensors()))
            build = lambda: _capture(  # noqa: E731
                weights, rows, steps, dtype, state_dtype, layer.cell_size, device, clips, fused)
            buffers = graph_cache(layer).get(key, build)
        else:
            buffers = SimpleBuffers(rows, steps, x.shape[-1], layer.cell_size, dtype, state_dtype, device)
        buffers.x.zero_()
        buffers.x.view(2, steps * rows, -1).index_copy_(1, index, x.to(dtype))
        buffers.mask.copy_(mask)
        buffers.h.zero_()
        buffers.h[:, :batch] = h0
        buffers.c.zero_()
        buffers.c[:, :batch] = c0
        if graphed:
            buffers.graph.replay()
        else:
            _recurrence(weights, buffers.x, buffers.mask, buffers.h, buffers.c, buffers.out, *clips, fused)
        out = buffers.out.view(2, steps * rows, -1).index_select(1, index)  # (2, N, P), packed again
        return out, (buffers.h[:, :batch].clone(), buffers.c[:, :batch].clone())


class SimpleBuffers:
    """The padded buffers of one call without a graph (the CPU, `torch.compile`)."""

    def __init__(self, rows, steps, width, cell, dtype, state_dtype, device):
        self.x = torch.empty((2, steps, rows, width), dtype=dtype, device=device)
        self.mask = torch.empty((steps, rows, 1), dtype=torch.bool, device=device)
        self.h = torch.empty((2, rows, width), dtype=dtype, device=device)
        self.c = torch.empty((2, rows, cell), dtype=state_dtype, device=device)
        self.out = torch.empty((2, steps, rows, width), dtype=dtype, device=device)


ALL_LSTM_FUNCTIONS.register("graph", lstm_graph)
