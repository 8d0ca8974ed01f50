"""Fast paths of ElmoModel against the reference implementation (issue 8).

`lstm_implementation="reference"` is the plain loop written for autograd (and the plain character CNN); the fast
paths must give its results: the inference loop ("loop", with oneDNN on the CPU and without), torch's fused LSTM
kernel ("fused", unclipped models only), the token cache, and torch.compile.
"""

from __future__ import annotations

import copy
import pickle
from types import SimpleNamespace

import pytest
import torch
from conftest import random_char_ids
from tolerances import EPS, FLOAT64, GRADIENT, REORDERED, assert_close

import elmo_hf.modeling_elmo.char_cnn_kernels_elmo as char_cnn
import elmo_hf.modeling_elmo.lstm_training_elmo as lstm_training
import elmo_hf.modeling_elmo.matmul_elmo as matmul
import elmo_hf.modeling_elmo.modeling_elmo as modeling
import elmo_hf.modeling_elmo.softmax_elmo as softmax
from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel
from elmo_hf.modeling_elmo.kernels_elmo import ALL_LSTM_FUNCTIONS

VARIANTS = [
    dict(),
    dict(cell_clip=None, proj_clip=None),
    dict(use_skip_connections=False, num_layers=3),
    dict(char_cnn_activation="tanh", num_highway_layers=0),
    dict(cell_size=16, char_cnn_filters=[[1, 8], [2, 8]]),  # C == P and F == P: no projections
]

# bfloat16 is lossy, so its bounds are stated here (test_cpu_branches and test_cuda use them too). It keeps 8
# significant bits: every multiply's inputs round by up to 2**-8 (0.4%) of their size.
# Against float32: the tiny model's outputs reach 3 (the clip), and the error passes through 4 sums in
# sequence (CNN, highway, two LSTM layers) and the recurrence: 8 roundings of the largest value,
# 8 * 3 * 2**-8 = 0.094. Measured: 0.017 (AVX2 and older kernels).
BFLOAT16_FROM_FLOAT32 = 0.1
# Two bfloat16 routes (oneDNN's packed bfloat16 multiplies, plain torch's) round apart by half that: 4
# roundings of 3. Measured: 0 where both routes are plain torch's (CPUs without AVX-512).
BFLOAT16_ROUTES = 0.05
# Every vector's cosine to float32's: an error up to sqrt(2 * (1 - 0.99)) = 14% of the vector's length, the 8
# roundings above on each of a vector's entries with room to spare. Measured: 0.9998.
BFLOAT16_COSINE = 0.99

# float32 is marked numerics, float64 not: its comparisons use 0.2% of their bound (measured)
FLOAT32_NUMERICS = pytest.param(torch.float32, marks=pytest.mark.numerics)


def tiny_model(**overrides) -> ElmoModel:
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig.from_preset("tiny", **overrides)).eval()
    with torch.no_grad():  # larger weights than the initialisation, so that clipping and saturation happen
        for name, parameter in model.named_parameters():
            if "bilm" in name:
                parameter.mul_(3.0)
    return model


def random_state(model: ElmoModel, batch: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    c = model.config
    h = torch.randn(c.num_layers, 2, batch, c.projection_dim, generator=generator)
    return h, torch.randn(c.num_layers, 2, batch, c.cell_size, generator=generator) * 2


def run(model: ElmoModel, implementation: str, ids, state=None, grad: bool = False):
    model.config.lstm_implementation = implementation
    with torch.set_grad_enabled(grad):
        return model(ids, state=state, use_cache=True, output_hidden_states=True)


def assert_outputs_close(got, expected, what: str = "") -> None:
    """Every layer and both state tensors of two runs of one model: the same float32 arithmetic by another
    route (REORDERED, of each tensor's largest value)."""
    names = [f"layer {i}" for i in range(len(expected.hidden_states))] + ["h", "c"]
    pairs = zip([*got.hidden_states, *got.state], [*expected.hidden_states, *expected.state])
    for name, (a, b) in zip(names, pairs):
        assert_close(a, b, REORDERED, what=f"{what}{name}")


def assert_gradients_close(got: dict, expected: dict) -> None:
    """Every parameter's gradient by two routes, summed in another order: GRADIENT, of its largest entry."""
    for name, grad in expected.items():
        assert_close(got[name], grad, GRADIENT, what=f"gradient of {name}")


def count_encoded_rows(monkeypatch) -> list[int]:
    """The number of tokens of each pass through the character CNN (every path ends in `from_pooled`)."""
    rows = []
    from_pooled = modeling.ElmoCharacterEncoder.from_pooled
    monkeypatch.setattr(modeling.ElmoCharacterEncoder, "from_pooled",
                        lambda self, pooled, **kw: rows.append(pooled.shape[0]) or from_pooled(self, pooled, **kw))
    return rows


@pytest.fixture(params=["onednn", "batched"])
def matmul_path(request, monkeypatch):
    """The CPU loop with oneDNN packed weights, and the batched-`bmm` loop that GPUs (and CPUs without oneDNN) run."""
    if request.param == "batched":
        monkeypatch.setattr(matmul, "_ONEDNN", {torch.float32: False, torch.bfloat16: False})
    elif not matmul.use_onednn(torch.device("cpu"), torch.float32):
        pytest.skip("this torch build has no oneDNN")
    return request.param


@pytest.mark.numerics
@pytest.mark.parametrize("overrides", VARIANTS)
def test_loop_equals_reference_with_padding_and_state(overrides, matmul_path):
    model = tiny_model(**overrides)
    lengths = [7, 3, 9, 1, 5, 9]
    ids = random_char_ids(lengths, seed=3)
    state = random_state(model, len(lengths))
    reference = run(model, "reference", ids, state)
    fast = run(model, "loop", ids, state)
    assert_outputs_close(fast, reference)
    for layer in fast.hidden_states:  # padding stays exactly zero
        assert layer[1, 3:].abs().max() == 0


@pytest.mark.numerics
def test_loop_equals_reference_on_backward_streams():
    """Stream training's `backward_input_ids` (the backward LSTM's own reading order) in the packed loop."""
    model = tiny_model()
    ids, backward = random_char_ids([6, 4, 6], seed=1), random_char_ids([6, 4, 6], seed=2)
    state = random_state(model, 3, seed=3)
    outputs = {}
    for implementation in ("reference", "loop"):
        model.config.lstm_implementation = implementation
        with torch.no_grad():
            outputs[implementation] = model(
                ids, backward_input_ids=backward, state=state, use_cache=True, output_hidden_states=True
            )
    assert_outputs_close(outputs["loop"], outputs["reference"])


def test_training_encodes_each_distinct_token_once_with_the_same_outputs_and_gradients(monkeypatch):
    """With gradients, the character CNN runs on the distinct tokens of the batch only; the layer-0 vectors, the
    outputs and every gradient are those of the plain path (lstm_implementation="reference")."""
    model = tiny_model()
    ids = random_char_ids([7, 5, 7], seed=4)
    ids[1, :3] = ids[0, 2:5]  # repeated tokens, across rows and positions
    ids[2, 6] = ids[0, 0]
    encoded_rows = count_encoded_rows(monkeypatch)
    results = {}
    for implementation in ("reference", "auto"):
        model.zero_grad(set_to_none=True)
        out = run(model, implementation, ids, grad=True)
        (out.last_hidden_state.square().sum() + out.hidden_states[0].sum()).backward()
        results[implementation] = out, {n: p.grad.clone() for n, p in model.named_parameters()}
    distinct = torch.unique(ids[ids.abs().sum(-1) > 0], dim=0).shape[0]
    assert encoded_rows == [19, distinct] and distinct == 15  # all real tokens, then the distinct ones
    assert_outputs_close(results["auto"][0], results["reference"][0])
    assert_gradients_close(results["auto"][1], results["reference"][1])


@pytest.mark.parametrize("dtype", [torch.float64, FLOAT32_NUMERICS])
@pytest.mark.parametrize("filters", [[[1, 4], [3, 8], [5, 16]], [[1, 8]]])
def test_trimmed_character_cnn_gives_the_values_and_gradients_of_the_reference(dtype, filters, monkeypatch):
    """Training's CNN cuts each token's characters after its length group's limit (+ the widest filter) and pools
    with `max`: the same vectors and gradients as `encode` over all 50 positions, for tokens of every length (one
    fills all 50 positions, one repeats a character so that windows tie) and for a batch of one token; the
    convolutions see fewer positions, and a token's pooled values are the same in any batch."""
    model = tiny_model(char_cnn_filters=filters).to(dtype)
    encoder = model.char_encoder
    ids = random_char_ids([9], seed=5)[0]  # 9 tokens of random characters and lengths
    ids = torch.cat([ids, ids[:1]])
    ids[-1, 1:49] = ids[0, 1]  # the first token's first letter repeated: ties between equal windows
    ids[-1, 49] = ids[0, 2]  # ... and a token that fills all 50 positions
    seen, trimming = [], [False]  # the characters each of encode_trimmed's groups convolves
    hook = encoder.char_embedding.register_forward_hook(
        lambda m, args, out: seen.append(args[0].shape[-1]) if trimming[0] else None)
    for rows in (ids, ids[:1], ids[1:-1]):
        weights = torch.randn(rows.shape[0], model.config.projection_dim, generator=torch.Generator().manual_seed(0))
        results = []
        for encode in (encoder.encode, lambda c: char_cnn.encode_trimmed(encoder, c)):
            encoder.zero_grad(set_to_none=True)
            trimming[0] = encode != encoder.encode  # (bound methods: equal, not identical)
            out = encode(rows)
            trimming[0] = False
            (out * weights.to(dtype)).sum().backward()
            results.append((out.detach(), {n: p.grad.clone() for n, p in encoder.named_parameters()}))
        (reference, reference_grads), (trimmed, trimmed_grads) = results
        # the same convolutions over fewer positions: another route to the same sums
        values, gradients = (FLOAT64, FLOAT64) if dtype == torch.float64 else (REORDERED, GRADIENT)
        assert_close(trimmed, reference, values, what=f"{rows.shape[0]} tokens")
        for name, grad in reference_grads.items():
            what = f"gradient of {name}, {rows.shape[0]} tokens"
            assert_close(trimmed_grads[name], grad, gradients, what=what)
    hook.remove()
    assert max(seen) == 50 and min(seen) < 20  # the full token is convolved whole, short groups cut
    # A token's cut depends on itself only: its pooled convolutions do not depend on the other tokens of the batch
    # (in float64; float32 convolutions of 1 and of 10 tokens differ by rounding, with or without the cut).
    if dtype == torch.float64:
        monkeypatch.setattr(modeling.ElmoCharacterEncoder, "from_pooled", lambda self, pooled, **kw: pooled)
        with torch.no_grad():
            together = char_cnn.encode_trimmed(encoder, ids)
            singles = [char_cnn.encode_trimmed(encoder, ids[i : i + 1])[0] for i in range(10)]
        assert all(torch.equal(single, pooled) for single, pooled in zip(singles, together))


@pytest.mark.parametrize("dtype", [torch.float64, FLOAT32_NUMERICS])
@pytest.mark.parametrize("filters", [[[1, 4], [3, 8], [5, 16]], [[2, 8]], [[1, 8]]])
def test_window_character_cnn_gives_the_values_of_the_reference(dtype, filters, monkeypatch):
    """The GPU's inference CNN ("windows": every filter padded to the widest, one multiply, the windows that run past
    a token's end masked) gives `encode`'s vectors: on tokens of every length, one that fills all 50 positions (where
    a narrow filter's last windows are the ones the mask must keep and a wide one's the ones it must drop), in one
    block of tokens and in blocks of 3, with the reference's gradients; and the dispatch takes it on a GPU only."""
    encoder = tiny_model(char_cnn_filters=filters).to(dtype).char_encoder
    ids = random_char_ids([9], seed=5)[0]
    ids = torch.cat([ids, ids[:1]])
    ids[-1, 1:49] = ids[0, 1]
    ids[-1, 49] = ids[0, 2]  # a token that fills all 50 positions, its last window different from the others
    bound = FLOAT64 if dtype == torch.float64 else REORDERED
    with torch.no_grad():
        reference = encoder.encode(ids)
        assert_close(char_cnn.encode_windows(encoder, ids), reference, bound, what="windows, one block")
        monkeypatch.setattr(char_cnn, "_WINDOW_TOKENS_PER_BLOCK", 3)
        assert_close(char_cnn.encode_windows(encoder, ids), reference, bound, what="windows, blocks of 3")
        assert_close(char_cnn.encode_inference(encoder, ids), reference, bound, what="the CPU's inference CNN")
    # Its gradients too (a GPU's training takes it: CUDA_TRAINING_KERNEL): the weights' and the embedding's
    grads = []
    for encode in (encoder.encode, lambda rows: char_cnn.encode_windows(encoder, rows)):
        encoder.zero_grad(set_to_none=True)
        weights = torch.linspace(-1, 1, reference.numel(), dtype=dtype).view_as(reference)
        (encode(ids) * weights).sum().backward()
        grads.append({name: p.grad.clone() for name, p in encoder.named_parameters()})
    for name, grad in grads[0].items():
        assert_close(grads[1][name], grad, FLOAT64 if dtype == torch.float64 else GRADIENT, what=f"gradient of {name}")
    on_gpu = SimpleNamespace(device=torch.device("cuda"), shape=ids.shape)
    assert char_cnn.char_cnn_implementation(encoder, on_gpu) == "windows"  # training on a GPU
    with torch.no_grad():
        assert char_cnn.char_cnn_implementation(encoder, ids) != "windows"  # the CPU keeps its own kernels
        assert char_cnn.char_cnn_implementation(encoder, on_gpu) == "windows"  # inference on a GPU


def test_distinct_rows_by_hashing_equal_torch_unique():
    """The distinct tokens of a batch found by hashing rows: the same set of rows as `torch.unique(dim=0)`, and an
    inverse that rebuilds the batch, with many repeats and rows that differ in one position only."""
    ids = random_char_ids([40], seed=7)[0]
    ids = torch.cat([ids, ids[::3], ids[5:9]])  # repeats
    ids[-1, 20] = 7  # differs from its twin in one padding position
    distinct, inverse = char_cnn._distinct_rows(ids)
    expected = torch.unique(ids, dim=0)
    assert torch.equal(distinct[inverse], ids)
    assert distinct.shape == expected.shape and torch.equal(torch.unique(distinct, dim=0), expected)


@pytest.mark.numerics
def test_stream_training_encodes_both_streams_in_one_pass(monkeypatch):
    """Stream training feeds the backward LM its own stream: both streams go through the character CNN together,
    a word they share once, with the outputs and gradients of encoding each stream on its own."""
    model = tiny_model()
    ids, backward = random_char_ids([6, 4, 6], seed=1), random_char_ids([6, 4, 6], seed=2)
    backward[0, :2] = ids[1, :2]  # words both streams hold
    encoded_rows = count_encoded_rows(monkeypatch)
    together = modeling.ElmoModel._embed_streams

    def one_by_one(self, streams, mask):
        return [together(self, [stream], mask)[0] for stream in streams]

    results = {}
    for name, embed in (("one by one", one_by_one), ("together", together)):
        monkeypatch.setattr(modeling.ElmoModel, "_embed_streams", embed)
        model.zero_grad(set_to_none=True)
        out = model(ids, backward_input_ids=backward, use_cache=True, output_hidden_states=True)
        out.last_hidden_state.square().sum().backward()
        results[name] = out, {n: p.grad.clone() for n, p in model.named_parameters()}
    tokens = torch.cat([ids[ids.abs().sum(-1) > 0], backward[backward.abs().sum(-1) > 0]])
    assert encoded_rows[2:] == [torch.unique(tokens, dim=0).shape[0]] and len(encoded_rows) == 3
    assert_outputs_close(results["together"][0], results["one by one"][0])
    assert_gradients_close(results["together"][1], results["one by one"][1])


def test_loop_is_used_only_without_gradients():
    model = tiny_model()
    layer = model.bilm.layers[0]
    x = torch.zeros(2, 3, 2, model.config.projection_dim)
    state = (torch.zeros(2, 2, 16), torch.zeros(2, 2, 32))
    with torch.no_grad():
        assert layer.implementation(x, state) == "loop"
    assert layer.implementation(x, state) == "training"  # parameters require grad: the written-out backward
    model.config.lstm_implementation = "reference"
    with torch.no_grad():
        assert layer.implementation(x, state) == "reference"


@pytest.mark.numerics
def test_layer_rows_that_never_run_keep_their_state(matmul_path):
    """At the layer level rows past `batch_sizes[0]` (length 0) keep their state, in every implementation, all
    called through the one dispatch table with its one signature."""
    model = tiny_model()
    layer = model.bilm.layers[0]
    generator = torch.Generator().manual_seed(1)
    batch_sizes = [3, 3, 2, 1]  # rows 3 and 4 have no step
    x = torch.randn(2, sum(batch_sizes), 16, generator=generator)  # packed
    state = (torch.randn(2, 5, 16, generator=generator), torch.randn(2, 5, 32, generator=generator))
    with torch.no_grad():
        out_ref, (h_ref, c_ref) = ALL_LSTM_FUNCTIONS["reference"](layer, x, batch_sizes, state)
        out, (h, c) = ALL_LSTM_FUNCTIONS["loop"](layer, x, batch_sizes, state)
    for name, got, expected in (("outputs", out, out_ref), ("h", h, h_ref), ("c", c, c_ref)):
        assert_close(got, expected, REORDERED, what=name)
    assert torch.equal(h[:, 3:], state[0][:, 3:]) and torch.equal(c[:, 3:], state[1][:, 3:])


def test_implementation_is_a_query_without_side_effects():
    """Asking which implementation runs changes nothing: the packed inference weights stay."""
    model = tiny_model()
    layer = model.bilm.layers[0]
    with torch.no_grad():
        model(random_char_ids([3, 2], seed=2))  # builds the packed copies (where oneDNN is used)
    before = layer._inference_weights.value
    x = torch.zeros(2, 3, 16)
    state = (torch.zeros(2, 2, 16), torch.zeros(2, 2, 32))
    assert layer.implementation(x, state) == "training"  # parameters require grad
    assert layer._inference_weights.value is before


def assert_batch_invariant(model: ElmoModel, lengths=(7, 3, 9, 1, 5), seed: int = 4) -> None:
    """Every layer of each sentence alone equals its row of the padded batch (within `REORDERED`)."""
    ids = random_char_ids(list(lengths), seed=seed)
    with torch.no_grad():
        full = model(ids, output_hidden_states=True).hidden_states
        for row, n in enumerate(lengths):
            alone = model(ids[row : row + 1, :n], output_hidden_states=True).hidden_states
            for layer, (a, b) in enumerate(zip(alone, full)):
                assert_close(a[0], b[row, :n], REORDERED, what=f"sentence {row}, layer {layer}")


@pytest.mark.numerics
def test_loop_batch_invariance():
    assert_batch_invariant(tiny_model())


@pytest.mark.numerics
@pytest.mark.parametrize("overrides", [dict(cell_clip=None, proj_clip=None), dict(cell_size=16, cell_clip=None)])
def test_fused_equals_reference_without_clipping(overrides):
    model = tiny_model(**overrides)
    ids = random_char_ids([6, 2, 8, 4], seed=5)
    state = random_state(model, 4, seed=2)
    reference = run(model, "reference", ids, state)
    fused = run(model, "fused", ids, state)
    assert_outputs_close(fused, reference)
    # gradients too: the fused kernel trains the same parameters (views of them, nothing copied); eval mode keeps
    # dropout out of the comparison
    grads = {}
    for implementation in ("reference", "fused"):
        model.zero_grad()
        out = run(model, implementation, ids, state, grad=True)
        sum(h.pow(2).mean() for h in out.hidden_states).backward()
        grads[implementation] = {n: p.grad.clone() for n, p in model.named_parameters()}
    assert_gradients_close(grads["fused"], grads["reference"])


def test_auto_uses_fused_only_where_exact_and_faster():
    """"auto" takes the fused kernel for unclipped models on CUDA (cuDNN) and for training; CPU inference runs the
    (faster) loop, and clipped models never take the kernel."""
    clipped = tiny_model()
    unclipped = tiny_model(cell_clip=None, proj_clip=None)
    x = torch.zeros(2, 3, 2, 16)
    state = (torch.zeros(2, 2, 16), torch.zeros(2, 2, 32))
    assert unclipped.bilm.layers[0].implementation(x, state) == "fused"  # training
    assert clipped.bilm.layers[0].implementation(x, state) == "training"
    with torch.no_grad():
        assert unclipped.bilm.layers[0].implementation(x, state) == "loop"  # CPU inference: the oneDNN loop
        assert clipped.bilm.layers[0].implementation(x, state) == "loop"
    cuda_input = SimpleNamespace(device=torch.device("cuda"), requires_grad=False)  # all the choice looks at
    assert unclipped.bilm.layers[0].implementation(cuda_input, state) == "fused"  # training on CUDA: cuDNN
    with torch.no_grad():
        assert unclipped.bilm.layers[0].implementation(cuda_input, state) == "fused"
        assert clipped.bilm.layers[0].implementation(cuda_input, state) == "loop"  # float32 (bfloat16: test_lstm_graph)


def test_fused_refuses_clipping():
    with pytest.raises(ValueError, match="lstm_implementation='fused' needs a model without clipping"):
        ElmoConfig.from_preset("tiny", lstm_implementation="fused")
    with pytest.raises(ValueError, match="lstm_implementation"):
        ElmoConfig.from_preset("tiny", lstm_implementation="cudnn")
    model = tiny_model()
    model.config.lstm_implementation = "fused"  # set behind the validation's back
    with pytest.raises(ValueError, match="without clipping"):
        model(random_char_ids([3]))


def test_every_lstm_kernel_a_configuration_may_name_is_registered():
    """The registry declares the built-in choices (so that the configuration checks a name without importing a
    kernel); the model's files register a function under each of them."""
    assert set(ALL_LSTM_FUNCTIONS.choices) <= set(ALL_LSTM_FUNCTIONS)


@pytest.mark.numerics
def test_a_registered_lstm_kernel_is_a_configuration_choice(monkeypatch):
    """A new kernel is a function and one `register` call: the configuration accepts its name, and the biLM runs it
    for every layer. "training" is registered but not a configuration's choice."""
    monkeypatch.setattr(ALL_LSTM_FUNCTIONS, "_functions", dict(ALL_LSTM_FUNCTIONS._functions))
    monkeypatch.setattr(ALL_LSTM_FUNCTIONS, "_choices", list(ALL_LSTM_FUNCTIONS._choices))
    assert set(ALL_LSTM_FUNCTIONS.choices) == {"reference", "loop", "fused", "int8", "graph"}
    assert "training" in ALL_LSTM_FUNCTIONS
    with pytest.raises(ValueError, match="lstm_implementation must be one of .* got 'training'"):
        ElmoConfig.from_preset("tiny", lstm_implementation="training")
    with pytest.raises(ValueError, match="got 'counted'"):
        ElmoConfig.from_preset("tiny", lstm_implementation="counted")
    calls = []

    def counted(layer, inputs, batch_sizes, state):
        calls.append(layer)
        return ALL_LSTM_FUNCTIONS["reference"](layer, inputs, batch_sizes, state)

    ALL_LSTM_FUNCTIONS.register("counted", counted)
    model = tiny_model(lstm_implementation="counted")
    ids = random_char_ids([5, 3])
    out = model(ids).last_hidden_state
    assert calls == list(model.bilm.layers)
    model.config.lstm_implementation = "reference"
    # Not bit for bit: "reference" also takes the plain character CNN, while any other name, "counted" too,
    # takes training's CNN over the batch's distinct tokens (gradients are on): the same arithmetic by another
    # route.
    assert_close(out, model(ids).last_hidden_state, REORDERED, what="registered kernel against the reference")


@pytest.fixture(params=["onednn", "plain"])
def bfloat16_matmul(request, monkeypatch):
    """bfloat16 through oneDNN's packed weights (CPUs with AVX-512 or AVX-NE-CONVERT), and through plain torch, the
    path an AVX2-only CPU takes (forced here, so both are tested on every machine that has the first)."""
    if request.param == "plain":
        monkeypatch.setitem(matmul._ONEDNN, torch.bfloat16, False)
    elif not matmul.use_onednn(torch.device("cpu"), torch.bfloat16):
        pytest.skip("oneDNN's bfloat16 linear needs AVX-512 or AVX-NE-CONVERT; this CPU has neither")
    return request.param


@pytest.mark.numerics
def test_bfloat16_autocast_fast_path_matches_reference_autocast(bfloat16_matmul):
    model = tiny_model()
    ids = random_char_ids([5, 3], seed=6)
    outputs = {}
    for implementation in ("reference", "loop"):
        model.config.lstm_implementation = implementation
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            outputs[implementation] = model(ids, use_cache=True)
    reference, fast = outputs["reference"], outputs["loop"]
    assert fast.last_hidden_state.dtype == reference.last_hidden_state.dtype
    fast, reference = fast.last_hidden_state.float(), reference.last_hidden_state.float()
    assert (fast - reference).abs().max() < BFLOAT16_ROUTES
    with torch.no_grad():
        exact = run(model, "reference", ids).last_hidden_state
    assert (fast - exact).abs().max() < BFLOAT16_FROM_FLOAT32
    real = ids.abs().sum(-1) > 0
    assert torch.nn.functional.cosine_similarity(fast[real], exact[real], dim=-1).min() >= BFLOAT16_COSINE


def test_torch_compile_of_fast_path_matches_eager():
    model = tiny_model()
    ids = random_char_ids([4, 2], seed=7)
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        expected = run(model, "reference", ids).last_hidden_state
        model.config.lstm_implementation = "auto"
        assert_close(compiled(ids).last_hidden_state, expected, REORDERED, what="compiled fast path")


def test_inference_caches_do_not_travel():
    """Packed weights and the token cache live outside the state dict, and copies of the model start without them."""
    model = tiny_model()
    model.enable_token_cache(100)
    keys = set(model.state_dict())
    ids = random_char_ids([4, 2], seed=8)
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    assert set(model.state_dict()) == keys
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        with torch.no_grad():
            assert torch.equal(clone(ids).last_hidden_state, expected)


def test_packed_weights_follow_weight_changes():
    model = tiny_model()
    ids = random_char_ids([5, 3], seed=9)
    with torch.no_grad():
        model(ids)  # builds the packed copies
        model.bilm.layers[0].weight_hh.mul_(0.5)
        model.char_encoder.highways[0].transform.weight.add_(0.1)
        fast = run(model, "loop", ids).last_hidden_state
        reference = run(model, "reference", ids).last_hidden_state
    assert_close(fast, reference, REORDERED, what="after the weights changed")


# --------------------------------------------------------------------------------------------------
# Token cache
# --------------------------------------------------------------------------------------------------


def repeated_words_batch() -> torch.Tensor:
    ids = random_char_ids([9, 6, 8, 3], seed=10)
    ids[1, 1:4] = ids[0, 2:5]  # words repeated within the batch
    ids[3, 1] = ids[2, 5]
    return ids


@pytest.mark.numerics
def test_token_cache_equals_plain_path_and_counts_hits():
    model = tiny_model()
    ids = repeated_words_batch()
    with torch.no_grad():
        plain = model(ids, output_hidden_states=True).hidden_states
        model.enable_token_cache(1000)
        first = model(ids, output_hidden_states=True).hidden_states
        info = model.token_cache_info()
        tokens = int((ids > 0).any(-1).sum())
        assert info["misses"] == info["size"] < tokens  # repeats within the batch were encoded once
        assert info["hits"] == tokens - info["misses"]
        second = model(ids, output_hidden_states=True).hidden_states
        assert model.token_cache_info()["hits"] == info["hits"] + tokens  # everything cached now
        assert model.token_cache_info()["misses"] == info["misses"]
    for layer, (a, b, c) in enumerate(zip(plain, first, second)):
        assert_close(b, a, REORDERED, what=f"layer {layer}, filling the cache")
        assert_close(c, a, REORDERED, what=f"layer {layer}, from the cache")


def test_token_cache_is_bounded_lru():
    model = tiny_model()
    model.enable_token_cache(5)
    with torch.no_grad():
        model(random_char_ids([8, 8], seed=11))
    assert model.token_cache_info()["size"] == 5
    model.disable_token_cache()
    assert model.token_cache_info() is None
    with pytest.raises(ValueError, match="positive integer"):
        model.enable_token_cache(0)


def test_build_token_cache_from_words():
    from elmo_hf.tokenization import ElmoTokenizer

    model = tiny_model()
    tokenizer = ElmoTokenizer()
    words = ["the", "cat", "sat", "on", "mat", "<S>", "</S>"]
    assert model.build_token_cache(words, tokenizer=tokenizer) == len(words)
    batch = tokenizer(["the cat sat on the mat"], return_tensors="pt")
    before = model.token_cache_info()["misses"]
    with torch.no_grad():
        cached = model(**batch).last_hidden_state
        assert model.token_cache_info()["misses"] == before  # every token came from the cache
        model.disable_token_cache()
        assert_close(cached, model(**batch).last_hidden_state, REORDERED, what="cached words")
    with pytest.raises(ValueError, match="tokenizer"):
        model.build_token_cache(words)


def test_token_cache_never_serves_stale_vectors():
    """Optimizer steps (even fused ones, which leave no version trace), loading weights and training forwards all
    empty the cache; gradients still reach the character encoder while training with the cache on."""
    model = tiny_model()
    ids = repeated_words_batch()
    model.enable_token_cache(1000)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
    model.train()
    loss = model(ids).last_hidden_state.pow(2).sum()  # training forward: the cache is not used
    assert model.token_cache_info()["size"] == 0
    loss.backward()
    assert model.char_encoder.char_embedding.weight.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        model(ids)  # fills the cache with the current weights
        assert model.token_cache_info()["size"] > 0
    optimizer.step()  # the fused step changes the weights without bumping version counters
    with torch.no_grad():
        cached = model(ids).last_hidden_state
        expected = run(model, "reference", ids).last_hidden_state
    # Stale vectors would be off by the step's size (~1e-2), thousands of times the bound; rounding alone is
    # the fast path against the reference on the new weights.
    assert_close(cached, expected, REORDERED, what="after a fused optimizer step")
    other = tiny_model()
    other.char_encoder.highways[0].carry.bias.data.add_(1.0)
    model.load_state_dict(other.state_dict())
    with torch.no_grad():
        model.config.lstm_implementation = "auto"
        cached = model(ids).last_hidden_state
        expected = run(other, "reference", ids).last_hidden_state
    assert_close(cached, expected, REORDERED, what="after load_state_dict")


# --------------------------------------------------------------------------------------------------
# Training of clipped layers: the written-out backward pass ("training") against the autograd reference
# --------------------------------------------------------------------------------------------------


def layer_gradients(layer, implementation, x, batch_sizes, state, seed=1):
    """Outputs, final state and the gradients of every input and parameter of one layer under a random loss that
    reaches the outputs and both final states."""
    inputs = [t.clone().requires_grad_() for t in (x, *state)]
    layer.zero_grad(set_to_none=True)
    out, (h, c) = ALL_LSTM_FUNCTIONS[implementation](layer, inputs[0], batch_sizes, tuple(inputs[1:]))
    generator = torch.Generator().manual_seed(seed)
    weights = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in (out, h, c)]
    sum((t * w).sum() for t, w in zip((out, h, c), weights)).backward()
    return [out, h, c, *(t.grad for t in inputs), *(p.grad for p in layer.parameters())]


@pytest.mark.parametrize("dtype", [torch.float64, FLOAT32_NUMERICS])
@pytest.mark.parametrize("overrides", [dict(), dict(cell_size=16, char_cnn_filters=[[1, 8], [2, 8]]),
                                       dict(proj_clip=None), dict(cell_clip=None)])
def test_training_layer_equals_reference_with_clipping_padding_and_state(overrides, dtype):
    """Variable lengths (rows that stop early, rows that never run), both directions, a state carried in and out,
    and large weights and inputs so that both clips and saturated gates happen. float64 runs the batched `bmm`
    multiplies (to 1e-12); float32 on the CPU runs them through oneDNN (to float32 rounding)."""
    layer = tiny_model(**overrides).bilm.layers[0].to(dtype)
    if layer.proj_clip is not None:
        layer.proj_clip = 1.0  # the tiny layer's outputs stay below 3
    batch_sizes, rows = [6, 6, 5, 4, 4, 2, 1], 7  # row 6 never runs: it keeps (and passes back) its state
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, sum(batch_sizes), 16, generator=generator, dtype=dtype) * 3
    state = (torch.randn(2, rows, 16, generator=generator, dtype=dtype),
             torch.randn(2, rows, layer.cell_size, generator=generator, dtype=dtype) * 3)
    assert matmul.training_onednn(x, layer.weight_ih) == (
        dtype == torch.float32 and matmul.use_onednn(x.device, dtype))
    reference = layer_gradients(layer, "reference", x, batch_sizes, state)
    fast = layer_gradients(layer, "training", x, batch_sizes, state)
    names = ["outputs", "h", "c", "gradient of x", "gradient of h0", "gradient of c0",
             *(f"gradient of {name}" for name, _ in layer.named_parameters())]
    for index, (name, a, b) in enumerate(zip(names, reference, fast)):
        bound = FLOAT64 if dtype == torch.float64 else REORDERED if index < 3 else GRADIENT
        assert_close(b, a, bound, what=name)
    if layer.cell_clip is not None:  # the clip is active: some final cell states sit on it
        assert (reference[2].abs() == layer.cell_clip).any()
    if layer.proj_clip is not None:
        assert (reference[0].abs() == layer.proj_clip).any()


@pytest.mark.numerics
@pytest.mark.parametrize("shape", [(7, 24), (3, 5, 24)])
@pytest.mark.parametrize("bias", [True, False])
def test_training_linear_equals_f_linear_with_gradients(shape, bias):
    """`training_linear` (oneDNN's multiplies for training on the CPU) against `F.linear` in float64: the output and
    the gradients of the input, the weight (both orientations of `mm_tn`: wider inputs or wider outputs) and the
    bias."""
    generator = torch.Generator().manual_seed(0)
    for out_features in (40, 9):
        tensors = [torch.randn(shape, generator=generator), torch.randn(out_features, 24, generator=generator),
                   torch.randn(out_features, generator=generator) if bias else None]
        results = []
        for linear, dtype in ((torch.nn.functional.linear, torch.float64), (matmul.training_linear, torch.float32)):
            inputs = [t.to(dtype).requires_grad_() if t is not None else None for t in tensors]
            out = linear(*inputs)
            (out * torch.arange(out.numel(), dtype=dtype).view_as(out).cos()).sum().backward()
            results.append([out, *(t.grad for t in inputs if t is not None)])
        names = ["outputs", "gradient of the input", "gradient of the weight", "gradient of the bias"]
        for name, reference, fast in zip(names, *results):
            assert fast.shape == reference.shape
            # float32 against float64: one float32 rounding of each sum (of 24 terms, or of the 7 or 15 rows)
            assert_close(fast, reference, REORDERED, what=f"{name}, {out_features} outputs")


@pytest.mark.numerics
def test_full_softmax_loss_and_gradients_equal_cross_entropy():
    """The full softmax's training loss (`_FullSoftmaxNll` on the CPU in float32: softmax in place, oneDNN multiplies)
    against `cross_entropy` of the logits in float64: the loss and the gradients of the hidden states, the weight and
    the bias, with repeated targets."""
    generator = torch.Generator().manual_seed(0)
    tensors = [torch.randn(13, 8, generator=generator), torch.randn(50, 8, generator=generator) * 2,
               torch.randn(50, generator=generator)]
    targets = torch.randint(0, 50, (13,), generator=generator)
    targets[3] = targets[4]
    results = []
    for dtype in (torch.float64, torch.float32):
        inputs = [t.to(dtype).requires_grad_() for t in tensors]
        loss = softmax.full_softmax_nll(*inputs, targets)
        (loss * 0.7).backward()
        results.append([loss, *(t.grad for t in inputs)])
    if matmul.use_onednn(torch.device("cpu"), torch.float32):
        assert results[1][0].grad_fn.name().startswith("_FullSoftmaxNll")
    for index, (name, reference, fast) in enumerate(zip(["loss", "hidden", "weight", "bias"], *results)):
        # float32 against float64: the loss is a sum of 13 log-sums of 50 exponentials, the gradients sums
        # over the 13 positions or the 50 words, in float32
        assert_close(fast, reference, REORDERED if index == 0 else GRADIENT, what=name)


def test_training_function_passes_gradcheck():
    layer = tiny_model(cell_size=8, projection_dim=4, char_cnn_filters=[[1, 2], [2, 2]]).bilm.layers[0].double()
    layer.cell_clip, layer.proj_clip = 0.6, 0.5  # low clips, so that some values sit beyond them
    generator = torch.Generator().manual_seed(0)
    batch_sizes = [3, 2, 1]
    tensors = [torch.randn(2, 6, 4, generator=generator, dtype=torch.float64),
               torch.randn(2, 4, 4, generator=generator, dtype=torch.float64) * 0.3,
               torch.randn(2, 4, 8, generator=generator, dtype=torch.float64) * 0.3]
    tensors += [p.detach().clone() * 0.5 for p in (layer.weight_ih, layer.weight_hh, layer.bias, layer.weight_hr)]
    tensors = [t.requires_grad_() for t in tensors]

    def function(*args):
        return lstm_training._LstmTrainingFunction.apply(*args, batch_sizes, layer.cell_clip, layer.proj_clip)

    assert torch.autograd.gradcheck(function, tensors)


@pytest.mark.numerics
def test_stream_training_state_and_gradients_equal_reference():
    """Stream mode: the backward LM's own input order and the LSTM state carried in from the previous batch and out
    to the next; outputs, final states and every parameter's gradient as with the reference."""
    model = tiny_model()
    ids, backward = random_char_ids([6, 4, 6], seed=1), random_char_ids([6, 4, 6], seed=2)
    state = random_state(model, 3, seed=3)
    results = {}
    for implementation in ("reference", "auto"):
        model.zero_grad(set_to_none=True)
        model.config.lstm_implementation = implementation
        out = model(ids, backward_input_ids=backward, state=state, use_cache=True, output_hidden_states=True)
        (out.last_hidden_state.square().sum() + out.state[0].sum() + out.state[1].square().sum()).backward()
        results[implementation] = out, {n: p.grad.clone() for n, p in model.named_parameters()}
    assert_outputs_close(results["auto"][0], results["reference"][0])
    assert_gradients_close(results["auto"][1], results["reference"][1])


def test_training_losses_equal_reference_over_20_steps():
    """20 optimizer steps of the biLM objective (clipped model, large weights, padded batches): the same losses as
    the reference. (At a learning rate of 1e-2, Adam amplifies float32 rounding to 2e-4 by step 10, alike for any
    change of summation order; in float64 the losses are equal there too.)"""
    from elmo_hf.modeling_elmo import ElmoForPreTraining

    losses = {}
    for implementation in ("reference", "auto"):
        torch.manual_seed(0)
        model = ElmoForPreTraining(ElmoConfig.from_preset("tiny", vocab_size=30, dropout=0.0,
                                                         lstm_implementation=implementation))
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "bilm" in name:
                    parameter.mul_(3.0)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        generator = torch.Generator().manual_seed(1)
        losses[implementation] = []
        for step in range(20):
            lengths = [7, 5, 7, 2]
            ids = random_char_ids(lengths, seed=step)
            labels = torch.randint(0, 30, (4, 7), generator=generator)
            labels[ids.abs().sum(-1) == 0] = -100
            loss = model(ids, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[implementation].append(loss.item())
        assert model.elmo.bilm.layers[0].implementation(torch.zeros(2, 1, 16), (torch.zeros(2, 1, 16),)) == (
            "reference" if implementation == "reference" else "training")
    # No named bound fits a loss after Adam steps (each step's weights carry the earlier steps' gradient
    # rounding, which Adam's normalised steps do not shrink): GRADIENT's 84 EPS (1e-5), absolute, on losses
    # of about ln 30 = 3.4, is 42 float32 steps of the loss. Measured: 2 steps (4.8e-7), on AVX2 and older
    # kernels, 1 and 2 threads.
    assert max(abs(a - b) for a, b in zip(losses["reference"], losses["auto"])) <= 84 * EPS
