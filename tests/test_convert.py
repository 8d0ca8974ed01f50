"""The converter of the original ELMo weights (bilm-tf / AllenNLP `options.json` + hdf5).

(a) parity with outputs of the original TensorFlow code (the trained fixtures kept beside the checkout: these tests
    skip without them), of the fixture converted by `convert` (what the command runs: (f) checks that its folder
    holds the same tensors);
(b) parity for every model of the family (no skip connections, no projections, tanh, 261 characters,
    bilm-tf's defaults) against an independent NumPy implementation of the bilm-tf equations, itself
    checked against the TensorFlow fixture;
(c) the published sizes: parameter counts and the converter's peak memory;
(d) bad inputs: clear errors, and never a half-written output folder;
(e) the converted folder loads through remote code in a process that cannot import this project;
(f) the command: vocabularies as bilm-tf reads them, the word split, the model card, quiet output, and SIGINT /
    SIGTERM in the middle of a conversion (both converters).
(b) to (f) run on random weights in the original layout (`original_layout.py`), the fixture's size for (d) to (f).

Bounds (tests/tolerances.py): (a) PARITY, 1e-5 absolute, on the trained fixture; (b) PARITY_SCALED, 1e-5 of the
largest value, between our float32 model and the float64 NumPy reference on random weights; (e) REORDERED between the
remote-code copy and the local model (the same float32 arithmetic in another process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, SHARED_DATA, clean_env, run_cli, run_isolated, shared_file
from numpy.lib.stride_tricks import sliding_window_view
from original_layout import FIXTURE_SIZED, options_for, write_original_layout
from tolerances import PARITY, PARITY_SCALED, REORDERED, assert_close

h5py = pytest.importorskip("h5py", reason="the converter needs h5py: pip install 'elmo-hf[convert]'")

from elmo_hf.modeling_elmo import ElmoModel  # noqa: E402
from elmo_hf.tokenization import ElmoTokenizer  # noqa: E402
from elmo_hf.tools.conversion.convert_allennlp_elmo import (  # noqa: E402
    ConversionError,
    config_from_options,
    convert,
    load_hdf5_weights,
    read_hdf5_softmax,
)

FIXTURES = "elmo-fixtures/allennlp"


def fixture(name: str) -> Path:
    return shared_file(f"{FIXTURES}/{name}")


def encode(sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Character ids (B, T, 50) with <S>/</S> added, and the attention mask, from the project's tokenizer."""
    batch = ElmoTokenizer()(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    return batch["input_ids"], batch["attention_mask"]


def run_converter(*args: str) -> subprocess.CompletedProcess:
    """`elmo-convert ...` through its own frame, in this process, from the repository root."""
    return run_cli("elmo-convert", args, cwd=REPO)


@pytest.fixture(scope="module")
def converted_fixture(tmp_path_factory) -> Path:
    """The bilm-tf fixture converted, with its vocabulary, by `convert` in this process: the parity tests are
    `numerics` tests, quick and without a command (the command's output is checked in (f))."""
    options, weights = fixture("options.json"), fixture("lm_weights.hdf5")
    # vocab_test.txt holds <S>, </S>, <UNK> in the middle; vocabulary files start with them.
    words = fixture("vocab_test.txt").read_text(encoding="utf-8").split("\n")
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    specials = ["<S>", "</S>", "<UNK>"]
    vocab.write_text("\n".join(specials + [w for w in words if w not in specials]) + "\n", encoding="utf-8")
    return convert(options, weights, tmp_path_factory.mktemp("converted") / "elmo-fixture", vocab_file=vocab)


@pytest.fixture(scope="module")
def converted_random(tmp_path_factory) -> Path:
    """Random weights of the fixture's size in the original layout (`../../original/` from it), converted with a
    vocabulary, in a folder of its own: what the tests that need no trained values convert."""
    root = tmp_path_factory.mktemp("random")
    options, weights = write_original_layout(root / "original", FIXTURE_SIZED, seed=5)
    vocab = root / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\nbank\n,\n", encoding="utf-8")
    return convert(options, weights, root / "converted" / "elmo-random", vocab_file=vocab)


# --------------------------------------------------------------------------------------------------
# An independent implementation of bilm-tf's inference (docs/original_model.md, "Character encoder" and
# "biLSTM"), in float64 NumPy, written from the equations and reading the hdf5 datasets in their original
# layout. Sentence by sentence, step by step; no code is shared with the model or the converter.
# --------------------------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


class NumpyBilm:
    def __init__(self, weight_file: Path, options: dict):
        self.w: dict[str, np.ndarray] = {}
        with h5py.File(weight_file, "r") as handle:
            handle.visititems(
                lambda name, obj: (
                    self.w.__setitem__(name, obj[()].astype(np.float64))
                    if isinstance(obj, h5py.Dataset)
                    else None
                )
            )
        lstm, cnn = options["lstm"], options["char_cnn"]
        self.num_layers = lstm.get("n_layers", 1)
        self.cell_clip = lstm.get("cell_clip")  # bilm-tf: `.get`, clipping when not None
        self.proj_clip = lstm.get("proj_clip")
        self.skip = bool(lstm.get("use_skip_connections"))
        self.filters = cnn["filters"]
        self.n_highway = cnn.get("n_highway") or 0
        self.activation = np.tanh if cnn["activation"] == "tanh" else _relu
        self.clip_hits = 0  # how often a clip changed a value: the variants must exercise the clips

    def _clip(self, x: np.ndarray, bound: float | None) -> np.ndarray:
        if bound is None:
            return x
        self.clip_hits += int((np.abs(x) > bound).sum())
        return np.clip(x, -bound, bound)

    def token_embedding(self, ids: np.ndarray) -> np.ndarray:
        """(N, 50) character ids -> (N, P)."""
        table = np.concatenate(
            [np.zeros((1, self.w["char_embed"].shape[1])), self.w["char_embed"]]
        )  # (262, d)
        chars = table[ids]  # (N, 50, d)
        features = []
        for i, (width, _) in enumerate(self.filters):
            kernel = self.w[f"CNN/W_cnn_{i}"][0]  # (w, d, n)
            windows = sliding_window_view(chars, width, axis=1)  # (N, 50 - w + 1, d, w)
            conv = np.einsum("ntdw,wdk->ntk", windows, kernel) + self.w[f"CNN/b_cnn_{i}"]
            features.append(self.activation(conv.max(axis=1)))
        x = np.concatenate(features, axis=-1)  # (N, F)
        for k in range(self.n_highway):
            g = f"CNN_high_{k}/"
            gate = _sigmoid(x @ self.w[g + "W_carry"] + self.w[g + "b_carry"])
            x = gate * _relu(x @ self.w[g + "W_transform"] + self.w[g + "b_transform"]) + (1.0 - gate) * x
        if "CNN_proj/W_proj" in self.w:
            x = x @ self.w["CNN_proj/W_proj"] + self.w["CNN_proj/b_proj"]
        return x

    def _step(self, prefix: str, x, h, c):
        z = np.concatenate([x, h]) @ self.w[prefix + "W_0"] + self.w[prefix + "B"]
        i, j, f, o = np.split(z, 4)  # TF's gate order
        c = self._clip(_sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j), self.cell_clip)
        h = _sigmoid(o) * np.tanh(c)
        if prefix + "W_P_0" in self.w:  # TF's LSTMCell clips the projection only when there is one
            h = self._clip(h @ self.w[prefix + "W_P_0"], self.proj_clip)
        return h, c

    def sentence(self, ids: np.ndarray, state: dict | None = None) -> tuple[list[np.ndarray], dict]:
        """One sentence with its boundaries, (n + 2, 50) -> L + 1 layers of (n + 2, 2P), and the final state."""
        state = dict(state or {})
        tokens = self.token_embedding(ids)
        outputs = {}
        for direction in (0, 1):
            x = tokens if direction == 0 else tokens[::-1]
            for layer in range(self.num_layers):
                prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
                cell = self.w[prefix + "B"].shape[0] // 4
                h, c = state.get((direction, layer), (np.zeros(x.shape[1]), np.zeros(cell)))
                out = []
                for x_t in x:
                    h, c = self._step(prefix, x_t, h, c)
                    out.append(h + x_t if self.skip and layer > 0 else h)
                state[(direction, layer)] = (h, c)
                x = np.stack(out)
                outputs[(direction, layer)] = x if direction == 0 else x[::-1]
        layers = [np.concatenate([tokens, tokens], -1)]
        layers += [np.concatenate([outputs[(0, k)], outputs[(1, k)]], -1) for k in range(self.num_layers)]
        return layers, state


def _tf_expected(k: int, i: int) -> np.ndarray:
    with h5py.File(fixture(f"lm_embeddings_{k}.hdf5"), "r") as handle:
        data = handle[str(i)][()]  # (2, n, P): forward, backward of the top layer, boundaries removed
    return np.concatenate([data[0], data[1]], axis=-1)


def _fixture_batches() -> list[list[list[str]]]:
    sentences = json.loads(fixture("sentences.json").read_text(encoding="utf-8"))
    return [[sentences[k][i].split() for k in range(3)] for i in range(10)]


# --------------------------------------------------------------------------------------------------
# (a) parity with the TensorFlow outputs
# --------------------------------------------------------------------------------------------------


@pytest.mark.numerics
def test_top_layer_matches_bilm_tf_statefully(converted_fixture):
    """The 10 fixture batches, state carried from batch to batch by row as bilm-tf does
    (docs/original_model.md, "Statefulness" and "Parity recipe")."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(converted_fixture, trust_remote_code=True).eval()
    state = None
    with torch.no_grad():
        for i, batch in enumerate(_fixture_batches()):
            ids, mask = encode(batch)
            out = model(
                input_ids=ids, attention_mask=mask, state=state, use_cache=True, output_hidden_states=True
            )
            state = out.state
            assert len(out.hidden_states) == model.config.num_layers + 1
            for k, words in enumerate(batch):
                n = len(words)
                got = out.last_hidden_state[k, 1 : n + 1]  # boundaries removed
                assert_close(got, _tf_expected(k, i), PARITY, what=f"top layer, batch {i}, sentence {k}")


@pytest.mark.numerics
def test_token_encoder_matches_bilm_tf(converted_fixture):
    """Layer 0 for the 458 lines of vocab_test.txt (with <S>, </S>, <UNK>) against bilm-tf's dump."""
    model = ElmoModel.from_pretrained(converted_fixture).eval()
    words = fixture("vocab_test.txt").read_text(encoding="utf-8").split("\n")
    assert len(words) == 458 and {"<S>", "</S>", "<UNK>"} <= set(words)
    with h5py.File(fixture("elmo_token_embeddings.hdf5"), "r") as handle:
        expected = handle["embedding"][()]
    ids, mask = encode([[w] for w in words])  # row r: <S> word </S>
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[0]
    got = got[:, 1, : model.config.projection_dim]  # (458, P)
    assert_close(got, expected, PARITY, what="char CNN, 458 words")


@pytest.mark.numerics
def test_numpy_reference_matches_bilm_tf():
    """Trust the reference of (b): it reproduces the TensorFlow fixture (stateful, top layer and layer 0)."""
    options = json.loads(fixture("options.json").read_text(encoding="utf-8"))
    reference = NumpyBilm(fixture("lm_weights.hdf5"), options)
    states: dict[int, dict] = {}
    for i, batch in enumerate(_fixture_batches()):
        ids, mask = encode(batch)
        for k, words in enumerate(batch):
            n = len(words)
            layers, states[k] = reference.sentence(ids[k, : n + 2].numpy(), states.get(k))
            assert_close(layers[-1][1 : n + 1], _tf_expected(k, i), PARITY,
                         what=f"NumPy reference, top layer, batch {i}, sentence {k}")
    with h5py.File(fixture("elmo_token_embeddings.hdf5"), "r") as handle:
        expected = handle["embedding"][:50]
    words = fixture("vocab_test.txt").read_text(encoding="utf-8").split("\n")[:50]
    ids, _ = encode([[w] for w in words])
    assert_close(reference.token_embedding(ids[:, 1].numpy()), expected, PARITY, what="NumPy reference, char CNN")


def test_config_from_fixture_options():
    options = json.loads(fixture("options.json").read_text(encoding="utf-8"))
    config = config_from_options(options)
    assert (config.cell_size, config.projection_dim, config.num_layers) == (64, 16, 2)
    assert (config.cell_clip, config.proj_clip, config.use_skip_connections) == (3.0, 3.0, True)
    assert config.char_cnn_filters == [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]]
    assert (config.char_embedding_dim, config.num_highway_layers, config.char_vocab_size) == (4, 2, 262)
    assert (config.char_cnn_activation, config.max_characters_per_token) == ("relu", 50)


def test_softmax_is_read_separately_and_ignored_by_convert(tmp_path):
    """bilm-tf's dump_weights leaves the softmax out; a file that has one still converts, and
    `read_hdf5_softmax` returns it for the pretraining head."""
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    assert read_hdf5_softmax(weight_file) is None
    if (SHARED_DATA / FIXTURES / "lm_weights.hdf5").is_file():  # and so does the trained fixture
        assert read_hdf5_softmax(fixture("lm_weights.hdf5")) is None
    rng = np.random.default_rng(0)
    weight, bias = (
        rng.standard_normal((458, 16)).astype(np.float32),
        rng.standard_normal(458).astype(np.float32),
    )
    with h5py.File(weight_file, "a") as handle:
        handle["softmax/W"], handle["softmax/b"] = weight, bias
    got_weight, got_bias = read_hdf5_softmax(weight_file)
    assert got_weight.dtype == torch.float32 and torch.equal(got_weight, torch.from_numpy(weight))
    assert torch.equal(got_bias, torch.from_numpy(bias))
    out = convert(options_file, weight_file, tmp_path / "converted")
    assert not any("softmax" in key for key in ElmoModel.from_pretrained(out).state_dict())


# --------------------------------------------------------------------------------------------------
# (b) every model of the family, against the NumPy reference
# --------------------------------------------------------------------------------------------------


def _options(dim, proj, filters, char_dim, **lstm_and_cnn) -> dict:
    lstm = {"dim": dim, "projection_dim": proj}
    cnn = {"embedding": {"dim": char_dim}, "filters": filters, "max_characters_per_token": 50}
    for key, value in lstm_and_cnn.items():
        (cnn if key in ("activation", "n_highway", "n_characters") else lstm)[key] = value
    cnn.setdefault("activation", "relu")
    return {"lstm": lstm, "char_cnn": cnn}


VARIANTS = {
    # Three layers, no residuals, active clips.
    "no_skip_connections": _options(
        12,
        8,
        [[1, 4], [2, 6], [3, 6]],
        3,
        n_layers=3,
        cell_clip=0.5,
        proj_clip=0.4,
        use_skip_connections=False,
        n_highway=2,
        n_characters=262,
    ),
    # F == P (no CNN_proj), C == P (no W_P_0: bilm-tf then ignores proj_clip), tanh, training options' 261.
    "no_projections_tanh_261_chars": _options(
        8,
        8,
        [[1, 4], [3, 4]],
        3,
        n_layers=2,
        cell_clip=0.5,
        proj_clip=0.3,
        use_skip_connections=True,
        activation="tanh",
        n_highway=1,
        n_characters=261,
    ),
    # A training options file: bilm-tf's defaults for missing keys (1 layer, no highway, no clipping,
    # no skip connections), extra training keys to ignore.
    "bilm_tf_defaults_training_options": {
        **_options(10, 6, [[1, 4], [2, 4], [4, 8]], 4, n_characters=261),
        "bidirectional": True,
        "dropout": 0.1,
        "n_epochs": 10,
        "batch_size": 128,
        "unroll_steps": 20,
        "n_tokens_vocab": 793471,
        "n_train_tokens": 768648884,
        "all_clip_norm_val": 10.0,
        "n_negative_samples_batch": 8192,
    },
}


def write_pair(folder: Path, options: dict, seed: int = 0) -> tuple[Path, Path]:
    return write_original_layout(folder, options, seed)


BATCHES = [
    [["Hello", "world", "!"], ["a"], ["Ünïcödé", "naïve", "café", "x" * 60, "end", "."]],
    [["Second", "batch", "carries", "state"], ["b", "c"], ["one"]],
]


@pytest.mark.numerics
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_matches_numpy_reference(variant, tmp_path):
    options = VARIANTS[variant]
    options_file, weight_file = write_pair(tmp_path / "original", options, seed=len(variant))
    out = convert(options_file, weight_file, tmp_path / "converted")
    model = ElmoModel.from_pretrained(out).eval()
    config = model.config
    f_equals_p = config.num_char_filters == config.projection_dim
    assert (model.char_encoder.projection is None) == f_equals_p
    assert (model.bilm.layers[0].weight_hr is None) == (config.cell_size == config.projection_dim)
    assert config.char_vocab_size == 262

    reference = NumpyBilm(weight_file, options)
    states: dict[int, dict] = {}
    state = None
    with torch.no_grad():
        for b, batch in enumerate(BATCHES):  # padded rows of different lengths; the state carried by row
            ids, mask = encode(batch)
            out = model(
                input_ids=ids, attention_mask=mask, state=state, use_cache=True, output_hidden_states=True
            )
            state = out.state
            for k, words in enumerate(batch):
                n = len(words) + 2
                expected, states[k] = reference.sentence(ids[k, :n].numpy(), states.get(k))
                assert len(out.hidden_states) == len(expected)
                for layer, want in enumerate(expected):
                    assert_close(out.hidden_states[layer][k, :n], want, PARITY_SCALED,
                                 what=f"{variant}, batch {b}, sentence {k}, layer {layer}")
                assert not out.last_hidden_state[k, n:].any()  # padding positions are zero
    if options["lstm"].get("cell_clip"):
        assert reference.clip_hits > 0, "the weights never reached the clips; the clips are untested"


def test_options_mapping_logs_and_defaults(caplog):
    with caplog.at_level("INFO", logger="elmo_hf.tools.conversion.convert_allennlp_elmo"):
        config = config_from_options({**VARIANTS["bilm_tf_defaults_training_options"], "surprise": 1})
    assert (config.num_layers, config.num_highway_layers, config.char_vocab_size) == (1, 0, 262)
    assert (config.cell_clip, config.proj_clip, config.use_skip_connections) == (None, None, False)
    text = caplog.text
    assert "ignoring training-time options: all_clip_norm_val, batch_size, bidirectional, dropout" in text
    assert "surprise" in text and "n_characters is 261" in text and "use_skip_connections" in text

    zero_clip = _options(8, 4, [[1, 4], [2, 4]], 3, cell_clip=0, proj_clip=3, use_skip_connections=True)
    assert config_from_options(zero_clip).cell_clip is None  # allennlp's reading of 0
    same = _options(8, 8, [[1, 4], [2, 4]], 3, cell_clip=3, proj_clip=0.5, use_skip_connections=True)
    assert config_from_options(same).proj_clip is None  # no projection: TF never applies proj_clip


# --------------------------------------------------------------------------------------------------
# (c) the published sizes
# --------------------------------------------------------------------------------------------------


def _stored_floats(options: dict) -> int:
    """Floats in a bilm-tf weight file for these options (docs/weight_layout.md, "hdf5 datasets")."""
    lstm, cnn = options["lstm"], options["char_cnn"]
    d, cell, proj, layers = cnn["embedding"]["dim"], lstm["dim"], lstm["projection_dim"], lstm["n_layers"]
    width = sum(n for _, n in cnn["filters"])
    total = 261 * d + sum(w * d * n + n for w, n in cnn["filters"])
    total += cnn["n_highway"] * 2 * (width * width + width)
    total += (width * proj + proj) if width != proj else 0
    total += 2 * layers * (2 * proj * 4 * cell + 4 * cell + (cell * proj if cell != proj else 0))
    return total


# The model holds one row more than the file: the all-zero padding row of the character table
# (docs/weight_layout.md, "Character embedding"),
# i.e. char_cnn.embedding.dim (16) more parameters.
@pytest.mark.parametrize(("size", "millions"), [("small", 13.6), ("medium", 28.0), ("original", 93.6)])
def test_published_sizes_parameter_counts(size, millions):
    options = options_for(size)
    config = config_from_options(options)
    with torch.device("meta"):
        model = ElmoModel(config)
    count = sum(p.numel() for p in model.parameters())
    assert count == _stored_floats(options) + config.char_embedding_dim
    assert round(count / 1e6, 1) == millions
    if size == "original":
        assert count == 93_600_848 + 16


_MEMORY_PROBE = """
import json, sys
import h5py, safetensors.torch, torch, transformers
from elmo_hf import tokenization
from elmo_hf.cli import run
from elmo_hf.tools.conversion import convert_allennlp_elmo
def peak_kib():
    # VmHWM: this process's own peak RSS. ru_maxrss would also do on Linux, except that it is kept across
    # exec and so starts at the parent's peak (pytest's, the benchmark's).
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
before = peak_kib()
code = run("elmo-convert", sys.argv[1:])
after = peak_kib()
print(json.dumps({"rc": code, "before_kib": before, "after_kib": after}))
"""


@pytest.mark.slow
def test_small_size_converts_within_memory_and_runs(tmp_path):
    """Peak RSS growth of the converter, in its own process, stays under twice the weight file.

    The probe imports everything the converter uses first, then reads its peak RSS (VmHWM) before and after
    the command: the difference is what the conversion itself costs.
    """
    if not Path("/proc/self/status").exists():
        pytest.skip("peak RSS is read from /proc/self/status (Linux)")
    original = tmp_path / "small"
    write_original_layout(original, "small")
    weight_file, out = original / "weights.hdf5", tmp_path / "converted"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEMORY_PROBE,
            "--options_file",
            str(original / "options.json"),
            "--weight_file",
            str(weight_file),
            "--output_dir",
            str(out),
        ],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["rc"] == 0, result.stderr
    growth = (probe["after_kib"] - probe["before_kib"]) * 1024
    file_size = weight_file.stat().st_size
    assert growth < 2 * file_size, (
        f"conversion grew RSS by {growth / 2**20:.0f} MiB for a {file_size / 2**20:.0f} MiB file"
    )

    with h5py.File(weight_file, "r") as handle:
        stored = []
        handle.visititems(lambda _, obj: stored.append(obj.size) if isinstance(obj, h5py.Dataset) else None)
    model = ElmoModel.from_pretrained(out).eval()
    count = sum(p.numel() for p in model.parameters())
    assert count == sum(stored) + model.config.char_embedding_dim == 13_593_296 + 16
    ids, mask = encode([["A", "short", "batch", "."], ["Two"]])
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert hidden.shape == (2, 6, 256) and torch.isfinite(hidden).all()


# --------------------------------------------------------------------------------------------------
# (d) bad inputs
# --------------------------------------------------------------------------------------------------


def _copy_fixture(folder: Path) -> tuple[Path, Path]:
    """A pair of the bilm-tf fixture's size (random weights: the errors quote its shapes, not its values)."""
    return write_original_layout(folder, FIXTURE_SIZED)


def _delete_dataset(options_file: Path, weight_file: Path) -> None:
    with h5py.File(weight_file, "a") as handle:
        del handle["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"]


def _wrong_shape(options_file: Path, weight_file: Path) -> None:
    with h5py.File(weight_file, "a") as handle:
        del handle["CNN/W_cnn_2"]
        handle["CNN/W_cnn_2"] = np.zeros((1, 3, 4, 15), np.float32)


def _edit_options(**changes):
    def edit(options_file: Path, weight_file: Path) -> None:
        options = json.loads(options_file.read_text(encoding="utf-8"))
        for dotted, value in changes.items():
            section, key = dotted.split(".")
            options[section][key] = value
        options_file.write_text(json.dumps(options), encoding="utf-8")

    return edit


def _truncate(options_file: Path, weight_file: Path) -> None:
    data = weight_file.read_bytes()
    weight_file.write_bytes(data[: len(data) // 2])


def _not_hdf5(options_file: Path, weight_file: Path) -> None:
    weight_file.write_text("this is not an hdf5 file\n", encoding="utf-8")


def _no_weight_file(options_file: Path, weight_file: Path) -> None:
    weight_file.unlink()


def _bad_json(options_file: Path, weight_file: Path) -> None:
    options_file.write_text('{"lstm": {"dim": 64,', encoding="utf-8")


BAD_INPUTS = {
    "missing_dataset": (_delete_dataset, ["'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B'", "weights.hdf5"]),
    "wrong_shape": (
        _wrong_shape,
        ["'CNN/W_cnn_2'", "(1, 3, 4, 15)", "(1, 3, 4, 16)", "char_cnn.filters[2] count"],
    ),
    "projection_mismatch": (
        _edit_options(**{"lstm.projection_dim": 32}),
        ["lstm.projection_dim", "'CNN_proj/W_proj'"],
    ),
    "cell_mismatch": (_edit_options(**{"lstm.dim": 32}), ["lstm.dim", "(32, 256)"]),
    "fewer_highways_than_file": (
        _edit_options(**{"char_cnn.n_highway": 1}),
        ["CNN_high_1", "char_cnn.n_highway"],
    ),
    "fewer_layers_than_file": (_edit_options(**{"lstm.n_layers": 1}), ["Cell1", "lstm.n_layers"]),
    "bad_n_characters": (_edit_options(**{"char_cnn.n_characters": 300}), ["char_cnn.n_characters", "300"]),
    "truncated_hdf5": (_truncate, ["weights.hdf5", "HDF5"]),
    "not_hdf5": (_not_hdf5, ["weights.hdf5", "HDF5"]),
    "missing_weight_file": (_no_weight_file, ["weights.hdf5", "does not exist"]),
    "missing_options_file": (
        lambda options_file, _: options_file.unlink(),
        ["options.json", "does not exist"],
    ),
    "invalid_options_json": (_bad_json, ["options.json", "not valid JSON"]),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_reported_and_leaves_nothing(case, tmp_path):
    damage, fragments = BAD_INPUTS[case]
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    damage(options_file, weight_file)
    parent = tmp_path / "outputs"
    parent.mkdir()
    with pytest.raises(ConversionError) as error:
        convert(options_file, weight_file, parent / "elmo")
    for fragment in fragments:
        assert fragment in str(error.value)
    assert list(parent.iterdir()) == []  # no output folder, no temporary folder


def test_unusable_vocab_is_reported_and_leaves_nothing(tmp_path):
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    parent = tmp_path / "outputs"
    parent.mkdir()
    vocab = tmp_path / "latin1.txt"  # vocabulary files are UTF-8 by their format
    vocab.write_bytes("<S>\n</S>\n<UNK>\ncaf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConversionError, match="vocab file .*latin1.txt cannot be used: it is not UTF-8 text"):
        convert(options_file, weight_file, parent / "elmo", vocab_file=vocab)
    with pytest.raises(ConversionError, match="vocab file .*absent.txt does not exist"):
        convert(options_file, weight_file, parent / "elmo", vocab_file=tmp_path / "absent.txt")
    assert list(parent.iterdir()) == []


def test_load_hdf5_weights_names_the_dataset(tmp_path):
    options_file, weight_file = _copy_fixture(tmp_path)
    _delete_dataset(options_file, weight_file)
    config = config_from_options(json.loads(options_file.read_text(encoding="utf-8")))
    with pytest.raises(ConversionError, match="no dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B'"):
        load_hdf5_weights(weight_file, config)


def test_existing_output_is_kept_unless_overwrite(tmp_path, monkeypatch):
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    parent = tmp_path / "outputs"
    out = parent / "elmo"
    out.mkdir(parents=True)
    (out / "keep.txt").write_text("mine", encoding="utf-8")

    with pytest.raises(ConversionError, match="exists and is not empty; pass --overwrite"):
        convert(options_file, weight_file, out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]

    # A failure while writing leaves the existing folder as it was, and no temporary folder.
    import elmo_hf.tools.conversion.convert_common as module

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(module, "_write_tokenizer", broken)
    from elmo_hf.tools.core.errors import RunFailed

    with pytest.raises(RunFailed, match=f"could not write --output_dir {out}: disk full"):  # the output named
        convert(options_file, weight_file, out, overwrite=True)
    assert [p.name for p in parent.iterdir()] == ["elmo"] and [p.name for p in out.iterdir()] == ["keep.txt"]
    monkeypatch.undo()

    convert(options_file, weight_file, out, overwrite=True)
    names = {p.name for p in out.iterdir()}
    assert "keep.txt" not in names and {"config.json", "model.safetensors", "modeling_elmo.py"} <= names
    assert [p.name for p in parent.iterdir()] == ["elmo"]

    # --overwrite never deletes the inputs
    with pytest.raises(ConversionError, match="holds the input .*, which --overwrite would delete"):
        convert(options_file, weight_file, tmp_path / "original", overwrite=True)
    assert weight_file.is_file()

    empty = parent / "empty"
    empty.mkdir()
    convert(options_file, weight_file, empty)  # an existing empty folder is fine
    assert (empty / "config.json").is_file()


@pytest.mark.slow
def test_command_exits_2_on_existing_output(converted_random):
    before = sorted(p.name for p in converted_random.iterdir())
    result = run_converter(
        "--options_file",
        str(converted_random.parent.parent / "original" / "options.json"),
        "--weight_file",
        str(converted_random.parent.parent / "original" / "weights.hdf5"),
        "--output_dir",
        str(converted_random),
    )
    assert result.returncode == 2
    assert f"output_dir {converted_random} exists and is not empty" in result.stderr
    assert sorted(p.name for p in converted_random.iterdir()) == before
    assert sorted(p.name for p in converted_random.parent.iterdir()) == [converted_random.name]


# --------------------------------------------------------------------------------------------------
# (e) remote code, in a process that cannot import this project
# --------------------------------------------------------------------------------------------------

_REMOTE_SENTENCES = [["The", "first", "sentence", "."], ["Ünïcödé", "too"]]

_REMOTE_CODE = """
import json, torch
from transformers import AutoModel, AutoTokenizer
for name in ("elmo_hf.modeling_elmo", "elmo_hf.tokenization"):
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(name + " is importable")
folder = {folder!r}
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
batch = tokenizer({sentences!r}, is_split_into_words=True, padding=True, return_tensors="pt")
with torch.no_grad():
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
from transformers import PreTrainedTokenizerFast
print(json.dumps({{
    "module": type(model).__module__,
    "fast_tokenizer": isinstance(tokenizer, PreTrainedTokenizerFast),  # transformers' example scripts' check
    "ids": batch["input_ids"].tolist(),
    "top": out.last_hidden_state[:, :, :6].flatten().tolist(),
    "layer0": out.hidden_states[0][:, :, :6].flatten().tolist(),
    "sums": out.last_hidden_state.sum(dim=(1, 2)).tolist(),
}}))
"""


@pytest.mark.slow
def test_converted_folder_loads_as_remote_code(converted_random, tmp_path):
    config = json.loads((converted_random / "config.json").read_text(encoding="utf-8"))
    assert config["auto_map"]["AutoModel"] == "modeling_elmo.ElmoModel"
    assert config["auto_map"]["AutoConfig"] == "configuration_elmo.ElmoConfig"
    for name in ("configuration_elmo.py", "modeling_elmo.py", "model.safetensors", "tokenizer_config.json"):
        assert (converted_random / name).is_file(), name
    assert not (converted_random / "convert_allennlp_elmo.py").exists()  # the converter does not travel

    code = _REMOTE_CODE.format(folder=str(converted_random), sentences=_REMOTE_SENTENCES)
    remote = json.loads(run_isolated(code, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert remote["module"].startswith("transformers_modules")
    assert remote["fast_tokenizer"] is True  # run_qa.py's check passes on the folder as the converter wrote it

    from transformers import AutoModel

    model = AutoModel.from_pretrained(converted_random, trust_remote_code=True).eval()
    ids, mask = encode(_REMOTE_SENTENCES)
    assert remote["ids"] == ids.tolist()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    local = {
        "top": out.last_hidden_state[:, :, :6].flatten().tolist(),
        "layer0": out.hidden_states[0][:, :, :6].flatten().tolist(),
        "sums": out.last_hidden_state.sum(dim=(1, 2)).tolist(),
    }
    for key, values in local.items():
        assert_close(remote[key], values, REORDERED, what=f"remote code against local: {key}")


# --------------------------------------------------------------------------------------------------
# (f) the command: vocabularies, word split, card, quiet output, interrupts
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "missing"),
    [(["<S>", "</S>", "the", "bank", ","], ["<UNK>"]), (["the", "bank", ","], ["<S>", "</S>", "<UNK>"])],
    ids=["no-unk", "no-specials"],
)
def test_vocabulary_without_specials_is_accepted_as_bilm_tf_does(lines, missing, tmp_path, caplog):
    """bilm-tf's Vocabulary checks <S>, </S>, <UNK> only with validate_file=True: such a file converts, with one
    warning naming what is missing and the ids the tokenizer gives them (after the file's lines)."""
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        out = convert(options_file, weight_file, tmp_path / "out", vocab_file=vocab)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    ids = ", ".join(f"{special} {len(lines) + i}" for i, special in enumerate(missing))
    for fragment in (str(vocab), f"lacks {' '.join(missing)}:", "no row", "id -1", f"as word ids {ids}"):
        assert fragment in warnings[0], (fragment, warnings[0])
    tokenizer = ElmoTokenizer.from_pretrained(out)
    assert tokenizer.word_vocab == lines + missing
    assert tokenizer.unk_word_id == len(lines) + missing.index("<UNK>")
    assert tokenizer.convert_tokens_to_vocab_ids(["bank", "zebra"]) == [lines.index("bank"), tokenizer.unk_word_id]


def test_word_split_and_the_model_card_of_a_bilm_tf_model(tmp_path):
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    out = convert(options_file, weight_file, tmp_path / "out", word_split="whitespace")
    assert ElmoTokenizer.from_pretrained(out).tokenize("New York's bank.") == ["New", "York's", "bank."]
    card = (out / "README.md").read_text(encoding="utf-8")
    for fact in ("# input_ids: (batch, tokens, 50) character ids, <S> and </S> added around every sentence",
                 "split into words by `whitespace`", "its UTF-8 bytes (the first 48)",
                 "| Character embedding | 262 character ids (UTF-8 bytes and markers) × 4, 50 characters per word |",
                 "converted from the original weights"):
        assert fact in card, fact
    assert "ELMoForManyLangs" not in card and "dictionary" not in card and "{{" not in card
    with pytest.raises(ConversionError, match="--word_split must be one of .*got 'no-such-split'"):
        convert(options_file, weight_file, tmp_path / "bad", word_split="no-such-split")
    assert not (tmp_path / "bad").exists()


# A conversion paused in the middle of its work (the staged folder written but not yet in place), so that the signal
# reaches the real command at a known point; run() is elmo-convert's own frame.
_PAUSED_CONVERSION = """
import sys, time
from pathlib import Path
import elmo_hf.tools.conversion.convert_common as common
from elmo_hf.cli import run

write = common._write_tokenizer
def paused(folder, tokenizer):
    write(folder, tokenizer)
    Path({ready!r}).touch()
    time.sleep(300)
common._write_tokenizer = paused
sys.exit(run("elmo-convert", {argv!r}))
"""


def interrupt_conversion(argv: list[str], signum: int, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `elmo-convert argv` in a subprocess, send `signum` once it is in the middle of writing, and wait."""
    ready = tmp_path / "ready"
    code = _PAUSED_CONVERSION.format(ready=str(ready), argv=argv)
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=clean_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the conversion never reached the pause"
            time.sleep(0.05)
        os.kill(process.pid, signum)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def assert_one_interrupted_line(result: subprocess.CompletedProcess, signum: int, *fragments: str) -> str:
    assert result.returncode == 128 + signum, result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(("INFO", "WARNING", "ERROR"))]
    assert len(lines) == 1 and lines[0].startswith("WARNING"), result.stderr
    for fragment in (f"interrupted ({signal.Signals(signum).name})", *fragments):
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bilm-tf", "manylangs"])
def test_signal_in_the_middle_of_a_conversion_leaves_nothing_half_written(kind, tmp_path):
    """bilm-tf files, SIGTERM, over an existing folder with --overwrite: the folder stays as it was. ELMoForManyLangs,
    SIGINT, into a new folder: no folder. Neither leaves a temporary folder. (A command never makes the folders above
    --output_dir: a missing one is refused before any work, test_bad_inputs.py.)"""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    if kind == "bilm-tf":
        options_file, weight_file = _copy_fixture(tmp_path / "original")
        out, signum = outputs / "elmo", signal.SIGTERM
        out.mkdir()
        (out / "keep.txt").write_text("mine", encoding="utf-8")
        argv = ["--options_file", str(options_file), "--weight_file", str(weight_file), "--output_dir", str(out),
                "--overwrite"]
    else:
        pytest.importorskip("elmoformanylangs", reason="the ELMoForManyLangs fixture is written by the package")
        import manylangs_fixture

        theirs = manylangs_fixture.write_model(tmp_path / "theirs")
        out, signum = outputs / "zh", signal.SIGINT
        argv = ["--manylangs_dir", str(theirs), "--output_dir", str(out), "--word_split", "punctuation"]
    result = interrupt_conversion(argv, signum, tmp_path)
    if kind == "bilm-tf":
        assert_one_interrupted_line(result, signum, f"{out} was left as it was")
        assert [p.name for p in outputs.iterdir()] == ["elmo"] and [p.name for p in out.iterdir()] == ["keep.txt"]
    else:
        assert_one_interrupted_line(result, signum, f"{out} was not written", "run the same command again")
        assert list(outputs.iterdir()) == []


@pytest.mark.slow
def test_command_is_quiet_and_names_no_temporary_folder(tmp_path):
    """One line, where the model was written; --verbose says what was read. The command writes the tensors that
    `convert` writes (the parity tests of (a) convert in their own process)."""
    options_file, weight_file = _copy_fixture(tmp_path / "original")
    args = ["--options_file", str(options_file), "--weight_file", str(weight_file)]
    quiet = run_converter(*args, "--output_dir", str(tmp_path / "quiet"))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.splitlines() == [f"INFO elmo_hf.tools.conversion.convert: wrote {tmp_path / 'quiet'}"]
    from safetensors.torch import load_file

    by_command = load_file(tmp_path / "quiet" / "model.safetensors")
    in_process = load_file(convert(options_file, weight_file, tmp_path / "in-process") / "model.safetensors")
    assert by_command.keys() == in_process.keys()
    assert all(torch.equal(by_command[name], in_process[name]) for name in in_process)
    verbose = run_converter(*args, "--output_dir", str(tmp_path / "verbose"), "--verbose")
    assert verbose.returncode == 0, verbose.stderr
    assert "ELMo: 2 layers, cell 64, projection 16" in verbose.stderr and ".tmp-" not in verbose.stderr
    assert verbose.stderr.splitlines()[-1] == f"INFO elmo_hf.tools.conversion.convert: wrote {tmp_path / 'verbose'}"
