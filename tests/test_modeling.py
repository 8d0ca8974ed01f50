"""ElmoConfig and ElmoModel: configuration, invariances, state, saving, remote code, bad input."""

from __future__ import annotations

import json
import re

import pytest
import torch
from conftest import random_char_ids, run_isolated, tiny_model
from test_fast_paths import BFLOAT16_FROM_FLOAT32
from tolerances import REORDERED, assert_close
from transformers import AutoConfig, AutoModel

from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel

# --------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, cell, proj, highway",
    [("small", 1024, 128, 1), ("medium", 2048, 256, 1), ("original", 4096, 512, 2)],
)
def test_presets_have_published_sizes(name, cell, proj, highway):
    config = ElmoConfig.from_preset(name)
    assert (config.cell_size, config.projection_dim, config.num_highway_layers) == (cell, proj, highway)
    assert config.num_char_filters == 2048
    assert (config.cell_clip, config.proj_clip, config.use_skip_connections) == (3.0, 3.0, True)
    assert config.hidden_size == 2 * proj


def test_config_round_trip(tmp_path):
    config = ElmoConfig.from_preset("tiny", cell_clip=None, use_skip_connections=False, char_cnn_activation="tanh")
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, ElmoConfig)
    ignore = {"_name_or_path"}
    assert {k: v for k, v in loaded.to_dict().items() if k not in ignore} == {
        k: v for k, v in config.to_dict().items() if k not in ignore
    }
    assert loaded.cell_clip is None and loaded.use_skip_connections is False


@pytest.mark.parametrize(
    "field, value",
    [
        ("cell_size", 0),
        ("projection_dim", -4),
        ("num_layers", 0),
        ("char_embedding_dim", 2.5),
        ("char_cnn_filters", []),
        ("char_cnn_filters", [[0, 4]]),
        ("char_cnn_filters", [[3, -1]]),
        ("char_cnn_activation", "gelu"),
        ("cell_clip", 0),
        ("proj_clip", -1.0),
        ("dropout", 1.5),
        ("softmax_type", "hierarchical"),
    ],
)
def test_config_validation_names_field_and_value(field, value):
    with pytest.raises(ValueError) as error:
        ElmoConfig.from_preset("tiny", **{field: value})
    assert field in str(error.value) and repr(value) in str(error.value)


def test_the_documented_task_names_are_the_loaders():
    """docs/models.md names the `task` values `load_elmo` accepts."""
    from conftest import REPO

    from elmo_hf.tools.loading import TASKS

    page = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    sentence = page[page.index("`task` picks the class:"):].split(". ")[0]
    named = re.findall(r'`"([^"`]+)"`', sentence)
    assert len(named) == 3 and set(named) <= set(TASKS), named


def test_unknown_preset():
    with pytest.raises(ValueError, match="huge"):
        ElmoConfig.from_preset("huge")


# --------------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------------


def test_output_shapes_and_layer_zero():
    model = tiny_model()
    ids = random_char_ids([5, 3])
    out = model(ids, output_hidden_states=True, use_cache=True)
    p, c, layers = model.config.projection_dim, model.config.cell_size, model.config.num_layers
    assert out.last_hidden_state.shape == (2, 5, 2 * p)
    assert len(out.hidden_states) == layers + 1
    assert all(h.shape == (2, 5, 2 * p) for h in out.hidden_states)
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    layer0 = out.hidden_states[0]
    assert torch.equal(layer0[..., :p], layer0[..., p:])  # duplicated token embedding
    assert out.state[0].shape == (layers, 2, 2, p) and out.state[1].shape == (layers, 2, 2, c)
    for layer in out.hidden_states:  # padding positions are zeros in every layer
        assert layer[1, 3:].abs().max() == 0


def test_tuple_and_dataclass_outputs_agree():
    model = tiny_model()
    ids = random_char_ids([4, 2])
    out = model(ids, output_hidden_states=True, use_cache=True)
    last, hidden, state = model(ids, output_hidden_states=True, use_cache=True, return_dict=False)
    assert torch.equal(last, out.last_hidden_state)
    assert all(torch.equal(a, b) for a, b in zip(hidden, out.hidden_states))
    assert torch.equal(state[0], out.state[0]) and torch.equal(state[1], out.state[1])
    (only_last,) = model(ids, return_dict=False)
    assert torch.equal(only_last, out.last_hidden_state)


def test_attention_mask_derived_from_ids():
    model = tiny_model()
    ids = random_char_ids([6, 2, 4])
    mask = (ids > 0).any(-1).long()
    assert torch.equal(model(ids).last_hidden_state, model(ids, attention_mask=mask).last_hidden_state)


def test_every_parameter_gets_a_gradient():
    model = tiny_model(dropout=0.0).train()
    ids = random_char_ids([5, 3])
    out = model(ids, output_hidden_states=True)
    loss = sum(h.pow(2).sum() for h in out.hidden_states)
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing, f"no gradient for {missing}"


# --------------------------------------------------------------------------------------------------
# Statelessness, batch and padding invariance, direction causality, carried state
# --------------------------------------------------------------------------------------------------


@pytest.mark.numerics
def test_batch_row_and_padding_invariance():
    model = tiny_model()
    batch = random_char_ids([7, 3, 9, 1, 5], seed=3)
    full = model(batch, output_hidden_states=True).hidden_states
    for row, n in enumerate([7, 3, 9, 1, 5]):
        alone = model(batch[row : row + 1, :n], output_hidden_states=True).hidden_states
        for layer, (layer_alone, layer_full) in enumerate(zip(alone, full)):
            what = f"sentence {row}, layer {layer}"
            assert_close(layer_alone[0], layer_full[row, :n], REORDERED, what=what)
    # the same sentence in another row, with more padding, is unchanged
    moved = torch.zeros(3, 12, 50, dtype=torch.long)
    moved[2, :3] = batch[1, :3]
    moved[0, :12] = random_char_ids([12], seed=9)[0]
    moved[1, :2] = batch[3, :1].expand(2, 50)
    out = model(moved).last_hidden_state
    assert_close(out[2, :3], full[-1][1, :3], REORDERED, what="moved to another row")


def test_no_memory_between_calls():
    model = tiny_model()
    ids = random_char_ids([4, 6])
    first = model(ids).last_hidden_state
    model(random_char_ids([8, 8, 8], seed=5))
    assert torch.equal(model(ids).last_hidden_state, first)


def test_direction_causality():
    model = tiny_model()
    p = model.config.projection_dim
    ids = random_char_ids([8], seed=1)
    changed = ids.clone()
    changed[0, 5:] = random_char_ids([3], seed=2)[0]
    a = model(ids, output_hidden_states=True).hidden_states
    b = model(changed, output_hidden_states=True).hidden_states
    for layer_a, layer_b in zip(a[1:], b[1:]):
        # forward half before the change is unchanged; the backward half there has seen it
        assert torch.equal(layer_a[0, :5, :p], layer_b[0, :5, :p])
        assert not torch.allclose(layer_a[0, :5, p:], layer_b[0, :5, p:])
    changed = ids.clone()
    changed[0, :3] = random_char_ids([3], seed=4)[0]
    b = model(changed, output_hidden_states=True).hidden_states
    for layer_a, layer_b in zip(a[1:], b[1:]):
        assert torch.equal(layer_a[0, 3:, p:], layer_b[0, 3:, p:])
        assert not torch.allclose(layer_a[0, 3:, :p], layer_b[0, 3:, :p])


@pytest.mark.numerics
def test_forward_state_carried_over_chunks_equals_whole():
    """Two chunks with the forward state carried equal the whole sequence, for the forward direction.

    The backward direction reads each chunk from its own end, so it is the mirror: carry its state from the
    second chunk into the first.
    """
    model = tiny_model()
    p = model.config.projection_dim
    ids = random_char_ids([9, 9], seed=6)
    whole = model(ids, use_cache=True)
    first = model(ids[:, :4], use_cache=True)
    second = model(ids[:, 4:], state=first.state, use_cache=True)
    chunked_forward = torch.cat([first.last_hidden_state, second.last_hidden_state], 1)[..., :p]
    assert_close(chunked_forward, whole.last_hidden_state[..., :p], REORDERED, what="forward, in two chunks")
    # final forward state equals the whole run's
    assert_close(second.state[0][:, 0], whole.state[0][:, 0], REORDERED, what="final forward h")
    assert_close(second.state[1][:, 0], whole.state[1][:, 0], REORDERED, what="final forward c")
    # backward mirror: the second chunk first, then the first chunk from its state
    back_second = model(ids[:, 4:], use_cache=True)
    back_first = model(ids[:, :4], state=back_second.state)
    chunked_backward = torch.cat([back_first.last_hidden_state, back_second.last_hidden_state], 1)[..., p:]
    assert_close(chunked_backward, whole.last_hidden_state[..., p:], REORDERED, what="backward, two chunks")


def test_return_state_is_use_cache_under_a_clearer_name():
    model = tiny_model()
    ids = random_char_ids([5, 3], seed=7)
    with torch.no_grad():
        by_alias, by_name, neither = model(ids, use_cache=True), model(ids, return_state=True), model(ids)
    assert neither.state is None
    for a, b in zip(by_alias.state, by_name.state):
        assert torch.equal(a, b)


@pytest.mark.numerics
def test_state_of_ragged_rows_is_each_rows_own():
    """A row's final state is the state after its own last token, not after the padding."""
    model = tiny_model()
    ids = random_char_ids([6, 3], seed=8)
    batch_state = model(ids, use_cache=True).state
    alone_state = model(ids[1:, :3], use_cache=True).state
    assert_close(batch_state[0][:, :, 1], alone_state[0][:, :, 0], REORDERED, what="h")
    assert_close(batch_state[1][:, :, 1], alone_state[1][:, :, 0], REORDERED, what="c")


@pytest.mark.numerics
@pytest.mark.parametrize(
    "overrides",
    [
        dict(use_skip_connections=False),
        dict(cell_clip=None, proj_clip=None),
        dict(char_cnn_activation="tanh", num_highway_layers=0),
        dict(cell_size=16, char_cnn_filters=[[1, 8], [2, 8]]),  # C == P and F == P: no projections
        dict(num_layers=3),
    ],
)
def test_variants_run_and_stay_batch_invariant(overrides):
    model = tiny_model(**overrides)
    ids = random_char_ids([5, 2])
    out = model(ids).last_hidden_state
    alone = model(ids[1:, :2]).last_hidden_state
    assert_close(out[1, :2], alone[0], REORDERED, what="alone against in a batch")


# --------------------------------------------------------------------------------------------------
# Saving, loading, Auto classes, remote code
# --------------------------------------------------------------------------------------------------


def test_save_load_reproduces_outputs(tmp_path):
    model = tiny_model()
    ids = random_char_ids([5, 3])
    expected = model(ids, output_hidden_states=True).hidden_states
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is ElmoModel
    for a, b in zip(expected, loaded(ids, output_hidden_states=True).hidden_states):
        assert torch.equal(a, b)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name


def test_save_with_a_bad_config_field_writes_nothing(tmp_path):
    model = tiny_model()
    model.config.lstm_implementation = "foo"  # set after construction: not validated until saving
    with pytest.raises(ValueError, match="lstm_implementation .* got 'foo'"):
        model.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


@pytest.mark.slow
def test_remote_code_loads_in_fresh_python_without_project(tmp_path):
    model = tiny_model()
    ids = random_char_ids([4, 2])
    expected = model(ids).last_hidden_state
    folder = tmp_path / "saved"
    model.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "modeling_elmo.ElmoModel"
    assert (folder / "modeling_elmo.py").exists() and (folder / "configuration_elmo.py").exists()
    torch.save(ids, tmp_path / "ids.pt")
    code = f"""
import json, torch
from transformers import AutoModel
model = AutoModel.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
out = model(torch.load({str(tmp_path / "ids.pt")!r})).last_hidden_state
print(json.dumps(out.flatten().tolist()))
"""
    result = run_isolated(code, cwd=tmp_path)
    got = torch.tensor(json.loads(result.stdout.strip().splitlines()[-1])).view_as(expected)
    assert_close(got, expected, REORDERED, what="remote code in a fresh interpreter")


# --------------------------------------------------------------------------------------------------
# Precision and compilation
# --------------------------------------------------------------------------------------------------


def test_bfloat16_autocast_on_cpu_is_close():
    model = tiny_model()
    ids = random_char_ids([5, 3])
    reference = model(ids).last_hidden_state
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model(ids, use_cache=True)
    assert low.last_hidden_state.shape == reference.shape
    assert torch.isfinite(low.last_hidden_state.float()).all()
    assert (low.last_hidden_state.float() - reference).abs().max() < BFLOAT16_FROM_FLOAT32


def test_torch_compile_forward_matches_eager():
    model = tiny_model()
    ids = random_char_ids([4, 2])
    compiled = torch.compile(model, backend="eager", fullgraph=False)
    assert_close(compiled(ids).last_hidden_state, model(ids).last_hidden_state, REORDERED, what="compiled")


# --------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: torch.zeros(2, 50, dtype=torch.long), "shape"),
        (lambda: torch.zeros(2, 3, 49, dtype=torch.long), "shape"),
        (lambda: random_char_ids([3]).float(), "integer"),
        (lambda: random_char_ids([3]) + 300, r"\[0, 262\)"),
        (lambda: random_char_ids([3]) - 1000, r"\[0, 262\)"),
        (lambda: torch.zeros(0, 3, 50, dtype=torch.long), "empty"),
        (lambda: torch.zeros(2, 0, 50, dtype=torch.long), "empty"),
        (lambda: torch.cat([random_char_ids([3]), torch.zeros(1, 3, 50, dtype=torch.long)]), "no tokens"),
        (lambda: [[1, 2, 3]], "torch.Tensor"),
    ],
)
def test_bad_input_ids(make, message):
    with pytest.raises(ValueError, match=message):
        tiny_model()(make())


def test_bad_attention_mask():
    model = tiny_model()
    ids = random_char_ids([3, 2])
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        model(ids, attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="right-padded"):
        model(ids, attention_mask=torch.tensor([[1, 1, 1], [0, 1, 1]]))
    with pytest.raises(ValueError, match="all 0"):
        model(ids, attention_mask=torch.ones(2, 3))


def test_bad_state():
    model = tiny_model()
    ids = random_char_ids([3, 2])
    state = model(ids, use_cache=True).state
    with pytest.raises(ValueError, match="state shapes"):
        model(random_char_ids([3]), state=state)
    with pytest.raises(ValueError, match="pair"):
        model(ids, state=state[0])


def test_fresh_model_has_the_documented_initialisation():
    """Every branch of `_init_weights` runs (transformers skips modules without parameters of their own in
    remote code unless told otherwise)."""
    model = ElmoModel(ElmoConfig.from_preset("tiny"))
    encoder = model.char_encoder
    table = encoder.char_embedding.weight
    assert table[0].abs().max() == 0 and table[1:].abs().max() <= 1.0 and table[1:].abs().mean() > 0.3
    for conv in encoder.convolutions:
        assert conv.weight.abs().max() <= 0.05 and conv.bias.abs().max() == 0
    for highway in encoder.highways:
        assert torch.all(highway.carry.bias == -2.0) and highway.transform.bias.abs().max() == 0
    cell = model.config.cell_size
    for layer in model.bilm.layers:
        assert torch.all(layer.bias[:, cell : 2 * cell] == 1.0)  # forget-gate bias
        assert layer.bias[:, :cell].abs().max() == 0
