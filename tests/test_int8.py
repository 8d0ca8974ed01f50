"""int8 inference (`quantize_int8`, `lstm_implementation="int8"`, `elmo-embed --dtype int8`) against float32.

The tolerance: every vector of every layer (the character CNN's and each biLSTM layer's, real tokens only) at cosine
>= 0.999 to float32's, 0.9995 on average. Measured here: tiny random 0.9998 minimum, small random 0.9997, the
trained bilm-tf fixture 0.999; 8-bit weights per channel and 7-bit activations per row leave about 1% noise in each
product, which the LSTM's gates squash more than they grow (benchmarks/results_int8.md has the original size on
real text). Random weights here are `_init_weights`' (small, unclipped), so the trained fixture is the test of
saturated gates and clipping.

Activations are quantized per row (a sentence at a step, a token) and fbgemm accumulates in int32, exactly: a
sentence's int8 vectors are the same bits alone or in any batch, which the tests hold to equality.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch
from conftest import cli, random_char_ids, run_isolated, shared_file, tiny_config, tiny_model
from tolerances import REORDERED, assert_close

from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel, quantization_elmo
from elmo_hf.tokenization import ElmoTokenizer

pytestmark = pytest.mark.skipif(
    quantization_elmo.int8_unavailable_reason() is not None,
    reason=f"int8 inference is not available here: {quantization_elmo.int8_unavailable_reason()}",
)

LENGTHS = [7, 3, 9, 1, 5]

# int8 is lossy: its bounds are cosines to float32's vectors, stated here (test_cpu_branches uses them too).
# 7-bit activations and 8-bit weights round each product by up to 2**-7 (0.8%) of its size, and the error
# passes through 4 sums in sequence (CNN, highway, two LSTM layers): a few percent of a vector's length. A
# cosine of 0.999 allows an error of sqrt(2 * 0.001) = 4.5% of the length, 0.9995 on average 3.2%. Measured:
# 0.9997 (tiny and small, random weights).
INT8_COSINE_MIN, INT8_COSINE_MEAN = 0.999, 0.9995
# Trained weights saturate gates and clip cells, where one rounding can tip a gate: 10% and 4.5%. Measured:
# 0.999.
INT8_TRAINED_COSINE_MIN, INT8_TRAINED_COSINE_MEAN = 0.995, 0.999


def layers(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Every layer's vectors at the real positions: (L + 1, tokens, 2P)."""
    with torch.no_grad():
        out = model(ids, attention_mask=mask, output_hidden_states=True)
    return torch.stack(out.hidden_states)[:, mask.bool()]


def batch(lengths=LENGTHS, seed=0):
    ids = random_char_ids(lengths, seed=seed)
    return ids, (ids != 0).any(-1).long()


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


def assert_close_to_float32(exact: torch.Tensor, int8: torch.Tensor, minimum=INT8_COSINE_MIN,
                            mean=INT8_COSINE_MEAN) -> None:
    cos = cosines(exact, int8)
    assert (exact - int8).abs().max() > 0  # int8 did run
    assert cos.min() >= minimum and cos.mean() >= mean, (cos.min().item(), cos.mean().item())


@pytest.mark.parametrize(
    "model_factory",
    [
        pytest.param(lambda: tiny_model(), id="tiny"),
        pytest.param(lambda: tiny_model(char_cnn_activation="tanh"), id="tiny-tanh"),  # signed highway inputs
        pytest.param(lambda: ElmoModel(ElmoConfig.from_preset("small")).eval(), id="small"),
    ],
)
def test_int8_is_close_to_float32(model_factory):
    torch.manual_seed(0)
    model = model_factory()
    ids, mask = batch()
    exact = layers(model, ids, mask)
    assert model.quantize_int8() is model and model.config.lstm_implementation == "int8"
    assert model.bilm.layers[0].implementation(ids.float(), (ids, ids)) == "int8"
    assert_close_to_float32(exact, layers(model, ids, mask))


def test_trained_fixture_is_close_to_float32():
    """The bilm-tf fixture: trained weights (saturated gates, clipped cells) on its own real sentences."""
    from elmo_hf.tools.conversion.convert_allennlp_elmo import (
        config_from_options,
        load_hdf5_weights,
        read_options,
    )

    options, weights = (shared_file("elmo-fixtures/allennlp/options.json"),
                        shared_file("elmo-fixtures/allennlp/lm_weights.hdf5"))
    config = config_from_options(read_options(options))
    model = ElmoModel(config).eval()
    model.load_state_dict(load_hdf5_weights(weights, config))
    groups = json.loads(shared_file("elmo-fixtures/allennlp/sentences.json").read_text())  # lists of sentences
    sentences = [sentence for group in groups for sentence in group][:4]
    encoded = ElmoTokenizer()([s.split() for s in sentences], is_split_into_words=True, padding=True,
                              return_tensors="pt")
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    exact = layers(model, ids, mask)
    model.quantize_int8()
    int8 = layers(model, ids, mask)
    assert_close_to_float32(exact, int8, INT8_TRAINED_COSINE_MIN, INT8_TRAINED_COSINE_MEAN)


@pytest.mark.numerics
def test_int8_vectors_do_not_depend_on_batch_row_or_padding():
    model = tiny_model().quantize_int8()
    ids, mask = batch()
    together = layers(model, ids, mask).split([n for n in LENGTHS], dim=1)  # per sentence, in batch order
    for row, n in enumerate(LENGTHS):
        alone = layers(model, ids[row : row + 1, :n], mask[row : row + 1, :n])
        assert torch.equal(alone, together[row]), row
    padded = torch.cat([ids[2:3], torch.zeros(1, 4, 50, dtype=ids.dtype)], dim=1)  # more padding, another batch size
    assert torch.equal(layers(model, padded, (padded != 0).any(-1).long()), together[2])


def test_save_and_reload_keep_int8_and_auto_goes_back_to_float32(tmp_path):
    torch.manual_seed(0)
    model = tiny_model()
    ids, mask = batch()
    exact = layers(model, ids, mask)
    int8 = layers(model.quantize_int8(), ids, mask)
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["lstm_implementation"] == "int8"
    assert (tmp_path / "quantization_elmo.py").is_file()  # travels with the remote code
    reloaded = ElmoModel.from_pretrained(tmp_path).eval()
    assert torch.equal(layers(reloaded, ids, mask), int8)
    reloaded.config.lstm_implementation = "auto"
    assert_close(layers(reloaded, ids, mask), exact, REORDERED, what="reloaded, float32")
    loaded_as_int8 = ElmoModel.from_pretrained(tmp_path, lstm_implementation="int8").eval()  # the kwarg way
    assert torch.equal(layers(loaded_as_int8, ids, mask), int8)


_REMOTE_CODE = """
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained({folder!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
assert model.config.lstm_implementation == "int8", model.config.lstm_implementation
ids, mask = torch.load({inputs!r})
with torch.no_grad():
    out = model(ids, attention_mask=mask, output_hidden_states=True)
torch.save(torch.stack(out.hidden_states)[:, mask.bool()], {output!r})
"""


@pytest.mark.slow
def test_saved_int8_model_runs_int8_as_remote_code(tmp_path):
    """A fresh interpreter that cannot import this project opens the saved folder with its own copy of the code
    (quantization_elmo.py among the files) and gives the same bits."""
    torch.manual_seed(0)
    model = tiny_model().quantize_int8()
    ids, mask = batch()
    model.save_pretrained(tmp_path / "model")
    assert (tmp_path / "model" / "quantization_elmo.py").is_file()
    torch.save((ids, mask), tmp_path / "inputs.pt")
    code = _REMOTE_CODE.format(folder=str(tmp_path / "model"), inputs=str(tmp_path / "inputs.pt"),
                               output=str(tmp_path / "out.pt"))
    run_isolated(code, cwd=tmp_path)
    assert torch.equal(torch.load(tmp_path / "out.pt"), layers(model, ids, mask))


def test_token_cache_serves_int8_vectors_after_a_switch():
    torch.manual_seed(0)
    model = tiny_model()
    ids, mask = batch()
    expected = layers(tiny_model_copy(model).quantize_int8(), ids, mask)
    model.enable_token_cache(100)
    layers(model, ids, mask)  # fills the cache with float32 vectors
    model.config.lstm_implementation = "int8"  # switched on the live model, the cache not emptied by hand
    assert torch.equal(layers(model, ids, mask), expected)


def tiny_model_copy(model):
    copy = ElmoModel(tiny_config()).eval()
    copy.load_state_dict(model.state_dict())
    return copy


@pytest.mark.numerics
def test_character_cnn_without_onednn_gives_the_same_vectors(monkeypatch):
    model = tiny_model().quantize_int8()
    char_ids = random_char_ids([12])[0]
    with torch.no_grad():
        fast = model.char_encoder(char_ids)
        monkeypatch.setattr(quantization_elmo, "use_onednn", lambda *args: False)
        model.char_encoder._int8_weights.clear()
        plain = model.char_encoder(char_ids)
    assert model.char_encoder._int8_weights.value["convolutions"] is None  # the plain convolutions ran
    # The convolutions are float32 by two routes (oneDNN's, conv1d): REORDERED. The int8 highways then round
    # each token's activations to 7-bit levels, and a value within that rounding of a level's edge can land on
    # either level by the two routes: that token moves by one level of one activation (2**-7 of its row's
    # largest value), far above REORDERED, and keeps int8's cosine. Measured without AVX2: one token in 240,
    # so at most one of these 12.
    apart = (fast - plain).abs().amax(-1) > REORDERED.limit(plain)
    assert int(apart.sum()) <= 1, f"tokens {apart.nonzero().flatten().tolist()} differ by more than rounding"
    assert_close(fast[~apart], plain[~apart], REORDERED, what="tokens whose int8 levels agree")
    assert cosines(fast, plain).min() >= INT8_COSINE_MIN


def test_training_is_refused_in_one_line():
    model = tiny_model().quantize_int8().train()
    ids, mask = batch()
    with pytest.raises(ValueError, match=r"^lstm_implementation='int8' is for inference: [^\n]*$"):
        model(ids, attention_mask=mask)


@pytest.fixture
def no_fbgemm(monkeypatch):
    """A torch whose quantized engines lack fbgemm (an ARM build offers qnnpack only)."""
    monkeypatch.setattr(quantization_elmo, "_supported_engines", lambda: ["qnnpack"])
    quantization_elmo.int8_unavailable_reason.cache_clear()
    yield
    monkeypatch.undo()
    quantization_elmo.int8_unavailable_reason.cache_clear()


def test_missing_engine_is_refused_in_one_line(no_fbgemm, tiny_model_dir, tmp_path, caplog):
    one_line = (r"^int8 inference needs torch's fbgemm quantized engine \(x86 CPUs\); this torch offers "
                r"\['qnnpack'\][^\n]*$")
    model = tiny_model()
    with pytest.raises(RuntimeError, match=one_line):
        model.quantize_int8()
    assert model.config.lstm_implementation == "auto"  # left as it was
    model.config.lstm_implementation = "int8"  # as a saved config would say
    ids, mask = batch()
    with pytest.raises(RuntimeError, match=one_line):
        layers(model, ids, mask)
    corpus = tmp_path / "in.txt"
    corpus.write_text("a b c\n")
    out = tmp_path / "out.hdf5"
    code = cli("elmo-embed", [corpus, out, "--model", tiny_model_dir, "--dtype", "int8", "--quiet"])
    assert code == 2 and "--dtype int8: int8 inference needs torch's fbgemm quantized engine" in caplog.text
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()


@pytest.fixture
def threads_put_back():
    """This process's thread count, put back after a test that runs a command in it (`--threads` sets it)."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_elmo_embed_int8_equals_the_quantized_model_sentence_by_sentence(
    tiny_model_dir, tmp_path, threads_put_back
):
    lines = ["The cat sat on the mat .", "A longer line , with the words repeated : the the the .", "one"]
    corpus = tmp_path / "in.txt"
    corpus.write_text("".join(line + "\n" for line in lines))
    outputs = {}
    for dtype in ("float32", "int8"):
        outputs[dtype] = tmp_path / f"{dtype}.hdf5"
        argv = [str(corpus), str(outputs[dtype]), "--model", str(tiny_model_dir), "--dtype", dtype, "--threads", "1"]
        assert cli("elmo-embed", [*argv, "--quiet"]) == 0
    torch.set_num_threads(1)  # as the command ran (--threads 1): the same bits are the same computation
    model = ElmoModel.from_pretrained(tiny_model_dir).eval().quantize_int8()
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    with h5py.File(outputs["int8"]) as int8, h5py.File(outputs["float32"]) as exact:
        for key, line in enumerate(lines):
            encoded = tokenizer([line.split()], is_split_into_words=True, return_tensors="pt")
            expected = layers(model, encoded["input_ids"], encoded["attention_mask"])[:, 1:-1]  # no <S>, </S>
            np.testing.assert_array_equal(int8[str(key)][()], expected.numpy())
            assert_close_to_float32(torch.from_numpy(exact[str(key)][()]), torch.from_numpy(int8[str(key)][()]))
