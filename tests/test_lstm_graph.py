"""The "graph" LSTM kernel (modeling_elmo/lstm_graph_elmo.py) on the CPU, where it runs without a CUDA graph: its
padded, masked loop against the reference, with padding to a bucket, a state carried in and out, batch invariance
and bfloat16; the buckets, the layout, the dispatch and the graph cache; and its optional Triton step through
Triton's CPU interpreter where Triton is installed. The CUDA graphs themselves are tested in tests/test_cuda.py.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO, random_char_ids
from test_fast_paths import (
    BFLOAT16_COSINE,
    BFLOAT16_ROUTES,
    VARIANTS,
    assert_batch_invariant,
    assert_outputs_close,
    random_state,
    run,
    tiny_model,
)
from tolerances import REORDERED, assert_close

import elmo_hf.modeling_elmo.lstm_graph_elmo as graph
import elmo_hf.modeling_elmo.matmul_elmo as matmul
from elmo_hf.modeling_elmo.kernels_elmo import ALL_LSTM_FUNCTIONS
from elmo_hf.modeling_elmo.lstm_inference_elmo import packed_index


@pytest.mark.numerics
@pytest.mark.parametrize("overrides", VARIANTS)
def test_graph_kernel_equals_reference_with_padding_and_state(overrides):
    model = tiny_model(**overrides)
    lengths = [7, 3, 9, 1, 5, 9]
    ids = random_char_ids(lengths, seed=3)
    state = random_state(model, len(lengths))
    reference = run(model, "reference", ids, state)
    fast = run(model, "graph", ids, state)
    assert_outputs_close(fast, reference)
    for layer in fast.hidden_states:  # padding stays exactly zero
        assert layer[1, 3:].abs().max() == 0


def layer_call(layer, batch_sizes, batch, seed=1):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, sum(batch_sizes), layer.projection_dim, generator=generator)  # packed
    state = (torch.randn(2, batch, layer.projection_dim, generator=generator),
             torch.randn(2, batch, layer.cell_size, generator=generator) * 2)
    return x, state


@pytest.mark.numerics
@pytest.mark.parametrize("rows, steps", [(5, 4), (16, 8), (24, 16)])
def test_padded_rows_and_steps_change_nothing(rows, steps):
    """The loop on a layout padded past the batch and the longest length (what a CUDA graph's bucket runs):
    the real rows' outputs and every row's final state are the reference's; rows of length 0 (past
    `batch_sizes[0]`) keep their state exactly."""
    layer = tiny_model().bilm.layers[0]
    batch_sizes = [3, 3, 2, 1]  # rows 3 and 4 never run
    x, state = layer_call(layer, batch_sizes, batch=5)
    with torch.no_grad():
        out_ref, (h_ref, c_ref) = ALL_LSTM_FUNCTIONS["reference"](layer, x, batch_sizes, state)
        out, (h, c) = graph.run_padded(layer, x, batch_sizes, state, rows=rows, steps=steps)
    for name, got, expected in (("outputs", out, out_ref), ("h", h, h_ref), ("c", c, c_ref)):
        assert_close(got, expected, REORDERED, what=name)
    assert torch.equal(h[:, 3:], state[0][:, 3:]) and torch.equal(c[:, 3:], state[1][:, 3:])


def test_padded_layout_is_the_packed_order_transposed():
    batch_sizes, rows, steps = [4, 3, 3, 1], 6, 8
    index, mask = graph.padded_layout(batch_sizes, rows, steps)
    # packed_index gives r * T + t in (B, T); the padded layout is time-major: t * rows + r
    row_major = packed_index(batch_sizes, len(batch_sizes))
    t, r = row_major % len(batch_sizes), row_major // len(batch_sizes)
    assert torch.equal(index, t * rows + r)
    assert mask.shape == (steps, rows, 1) and int(mask.sum()) == sum(batch_sizes)
    assert mask.view(-1)[index].all()


def test_buckets_cover_the_size_and_waste_less_than_a_quarter():
    previous = 0
    for n in range(1, 3000):
        rows = graph.bucket_rows(n)
        assert rows >= n and rows >= previous and rows % 8 == 0
        assert rows <= max(8, n + 7) or rows < n * 5 / 4, (n, rows)
        previous = rows
    assert [graph.bucket_rows(n) for n in (1, 9, 64, 65, 97, 128, 129, 200)] == [8, 16, 64, 80, 112, 128, 160, 224]
    assert [graph.bucket_steps(n) for n in (1, 8, 9, 23)] == [8, 8, 16, 24]
    assert len({graph.bucket_rows(n) for n in range(1, 1025)}) == 24  # few graphs for any batch up to 1024


@pytest.mark.numerics
def test_graph_kernel_batch_invariance():
    assert_batch_invariant(tiny_model(lstm_implementation="graph"))


@pytest.mark.numerics
def test_graph_kernel_bfloat16_autocast_matches_the_reference_autocast(monkeypatch):
    """Plain torch's bfloat16 on both sides (oneDNN's would be another route): the same roundings."""
    monkeypatch.setitem(matmul._ONEDNN, torch.bfloat16, False)
    model = tiny_model()
    ids = random_char_ids([5, 3, 8], seed=6)
    outputs = {}
    for implementation in ("reference", "graph"):
        model.config.lstm_implementation = implementation
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            outputs[implementation] = model(ids, use_cache=True)
    fast, reference = outputs["graph"].last_hidden_state.float(), outputs["reference"].last_hidden_state.float()
    assert (fast - reference).abs().max() < BFLOAT16_ROUTES
    real = ids.abs().sum(-1) > 0
    exact = run(model, "reference", ids).last_hidden_state
    assert torch.nn.functional.cosine_similarity(fast[real], exact[real], dim=-1).min() >= BFLOAT16_COSINE
    for got, expected in zip(outputs["graph"].state, outputs["reference"].state):
        assert got.dtype == expected.dtype


def test_auto_takes_the_graph_kernel_for_cuda_inference_of_clipped_models_in_bfloat16_only():
    """In float32 the packed loop measured faster on a GPU (its multiplies, not its launches, take the time)."""
    clipped, unclipped = tiny_model(), tiny_model(cell_clip=None, proj_clip=None)
    state = (torch.zeros(2, 2, 16), torch.zeros(2, 2, 32))
    # all the choice looks at (and whether autocast is on)
    cuda_bfloat16 = SimpleNamespace(device=torch.device("cuda"), requires_grad=False, dtype=torch.bfloat16)
    cuda_float32 = SimpleNamespace(device=torch.device("cuda"), requires_grad=False, dtype=torch.float32)
    cpu_input = torch.zeros(2, 3, 16, dtype=torch.bfloat16)
    with torch.no_grad():
        assert clipped.bilm.layers[0].implementation(cuda_bfloat16, state) == "graph"
        assert clipped.bilm.layers[0].implementation(cuda_float32, state) == "loop"
        assert unclipped.bilm.layers[0].implementation(cuda_bfloat16, state) == "fused"  # cuDNN
        assert clipped.bilm.layers[0].implementation(cpu_input, state) == "loop"
    assert clipped.bilm.layers[0].implementation(cuda_bfloat16, state) == "reference"  # gradients: not this kernel
    clipped.config.lstm_implementation = "graph"
    with torch.no_grad():
        assert clipped.bilm.layers[0].implementation(cpu_input, state) == "graph"  # named: runs on the CPU too
    assert clipped.bilm.layers[0].implementation(cpu_input, state) == "reference"


def test_graph_named_with_gradients_trains_through_the_reference():
    model = tiny_model(lstm_implementation="graph")
    model.train()
    out = model(random_char_ids([4, 2], seed=2)).last_hidden_state
    out.sum().backward()
    assert model.bilm.layers[0].weight_hh.grad.abs().sum() > 0


def test_graph_cache_is_bounded_least_recently_used_and_not_copied(monkeypatch):
    monkeypatch.setattr(graph, "GRAPH_CACHE_BYTES", 250)
    cache = graph.GraphCache()
    built = []

    def entry(name):
        def build():
            built.append(name)
            return SimpleNamespace(nbytes=100, name=name)
        return build

    cache.get("a", entry("a"))
    cache.get("b", entry("b"))
    assert cache.get("a", entry("a")).name == "a" and built == ["a", "b"]  # a hit builds nothing
    cache.get("c", entry("c"))  # 300 bytes: "b", the least recently used, goes
    assert list(cache.entries) == ["a", "c"] and cache.nbytes == 200
    assert len(copy.deepcopy(cache)) == 0 and len(cache) == 2
    layer = tiny_model().bilm.layers[0]
    graph.graph_cache(layer).entries["x"] = SimpleNamespace(nbytes=1)
    matmul.forget_inference_copies(layer)  # training starts, or weights are loaded: graphs go
    assert len(graph.graph_cache(layer)) == 0
    assert len(copy.deepcopy(layer)._lstm_graphs) == 0


TRITON_CHECK = r"""
import torch
import elmo_hf.modeling_elmo.lstm_graph_elmo as graph
import elmo_hf.modeling_elmo.lstm_triton_elmo as fused
assert fused.available(torch.device("cpu"))
torch.manual_seed(0)
rows, cell, width = 5, 40, 16
active = torch.tensor([1, 1, 0, 1, 0], dtype=torch.bool).view(rows, 1)
gates = torch.randn(2, rows, 4 * cell) * 3
c = torch.randn(2, rows, cell) * 2
c_torch, c_fused = c.clone(), c.clone()
h_torch = graph.cell_step_torch(gates.clone(), c_torch, active, 1.5, torch.float32)
h_fused = fused.cell_step(gates.clone(), c_fused, active, 1.5, torch.float32)
print("cell", float((h_torch - h_fused).abs().max()), float((c_torch - c_fused).abs().max()))
assert torch.equal(c_fused[:, 2], c[:, 2]) and torch.equal(c_fused[:, 4], c[:, 4])
new = torch.randn(2, rows, width) * 3
h = torch.randn(2, rows, width)
out = torch.full((2, 3, rows, width), float("nan"))
h_a, out_a, h_b, out_b = h.clone(), out.clone(), h.clone(), out.clone()
graph.tail_torch(new.clone(), h_a, out_a[:, 1], active, 2.0)
fused.tail(new.clone(), h_b, out_b[:, 1], active, 2.0)
assert torch.equal(h_a, h_b) and torch.equal(out_a[:, 1], out_b[:, 1]) and out_b[:, [0, 2]].isnan().all()
"""


@pytest.mark.slow
@pytest.mark.numerics
def test_triton_step_equals_the_torch_step_in_the_interpreter(tmp_path):
    """The fused cell step and tail (lstm_triton_elmo.py) under Triton's CPU interpreter, float32: indexing, masks
    and the data flow. The interpreter lacks libdevice (its tanh is another formula, 1e-7 apart) and rounds to
    bfloat16 by truncation, so the arithmetic itself and bfloat16 are checked on a GPU (tests/test_cuda.py)."""
    pytest.importorskip("triton", reason="Triton is not installed (the fused step is optional)")
    script = tmp_path / "check.py"
    script.write_text(TRITON_CHECK + MODEL_CHECK)
    paths = [str(REPO), str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(paths)}
    result = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]


MODEL_CHECK = r"""
from conftest import random_char_ids
from test_fast_paths import assert_outputs_close, random_state, run, tiny_model
model = tiny_model()
ids = random_char_ids([7, 3, 9, 1], seed=3)
state = random_state(model, 4)
assert_outputs_close(run(model, "graph", ids, state), run(model, "reference", ids, state))
"""
