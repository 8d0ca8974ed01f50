"""The ONNX graph and the runtime backends (tools/export/export_module.py, onnx_export.py, backends.py,
backend_choice.py): the export-friendly module against the reference at every length and batch, the graph exported
once and checked at lengths other than its example's, `elmo-export`, `elmo-embed --backend`, and `auto`.

The module's tests are fast (no export). Every test that exports (10-30 s for a tiny model: the exporter's own work)
or runs a command is `slow`; the module-scoped fixtures export the tiny model once, into a cache of the test's own.
"""

from __future__ import annotations

import json
import logging

import h5py
import numpy as np
import pytest
import torch
from conftest import cli, run_cli, tiny_config
from tolerances import PARITY_SCALED, REORDERED, assert_close

from elmo_hf.modeling_elmo import ElmoModel
from elmo_hf.tools.export.export_module import ExportableElmo

pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")

# Clips small enough that both bind at random weights (asserted below): the exported loop must clip as the model does.
CLIPPED = dict(cell_clip=0.3, proj_clip=0.05, lstm_implementation="reference")


def clipped_model(**overrides) -> ElmoModel:
    torch.manual_seed(0)
    return ElmoModel(tiny_config(**{**CLIPPED, **overrides})).eval()


def padded_batch(batch: int, length: int, seed: int = 0):
    """Row 0 of `length` tokens, the others of random lengths (padding), every token random characters."""
    from elmo_hf.tools.export.onnx_export import random_batch

    return random_batch(tiny_config(), batch, length, seed=seed)


def reference_layers(model, input_ids, attention_mask) -> torch.Tensor:
    with torch.no_grad():
        out = model(input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return torch.stack(out.hidden_states, dim=1)


# --------------------------------------------------------------------------------------------------
# The export-friendly module (no export: fast)
# --------------------------------------------------------------------------------------------------


@pytest.mark.numerics
@pytest.mark.parametrize("batch", [1, 3, 64])
@pytest.mark.parametrize("length", [1, 2, 7, 50, 300])
def test_padded_masked_loop_equals_the_reference(batch, length):
    model = clipped_model()
    module = ExportableElmo(model)
    input_ids, attention_mask = padded_batch(batch, length, seed=length + batch)
    with torch.no_grad():
        got = module(input_ids, attention_mask)
    expected = reference_layers(model, input_ids, attention_mask)
    assert_close(got, expected, REORDERED, f"batch {batch}, length {length}")
    assert torch.all(got[~attention_mask.bool().unsqueeze(1).expand(-1, got.shape[1], -1)] == 0)  # padding: zeros
    if length >= 7:  # the projection clip binds: layer 1 (no skip connection) reaches +-proj_clip
        assert float(got[:, 1].abs().max()) == pytest.approx(CLIPPED["proj_clip"], rel=1e-6)
    if (batch, length) == (3, 50):  # the cell clip binds: without it the vectors move
        with torch.no_grad():
            unclipped = ExportableElmo(clipped_model(cell_clip=None))(input_ids, attention_mask)
        assert float((unclipped - got).abs().max()) > 1e-3


@pytest.mark.numerics
def test_padded_masked_loop_without_projection_skips_and_with_word_and_char_layer_0():
    """C == P (no projection, so no projection clip), no skip connections; and ELMoForManyLangs' layer 0 (a word
    embedding beside the CNN, rows of 51 ids)."""
    for overrides in (dict(cell_size=16, use_skip_connections=False),
                      dict(token_encoder="word_char", word_input_vocab_size=30, word_input_embedding_dim=8)):
        model = clipped_model(**overrides)
        from elmo_hf.tools.export.onnx_export import random_batch

        input_ids, attention_mask = random_batch(model.config, 3, 9, seed=1)
        with torch.no_grad():
            got = ExportableElmo(model)(input_ids, attention_mask)
        assert_close(got, reference_layers(model, input_ids, attention_mask), REORDERED, str(overrides))


# --------------------------------------------------------------------------------------------------
# The graph (exported once per module)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of this module's own ($ELMO_HF_CACHE): the graphs and the remembered measurements."""
    folder = tmp_path_factory.mktemp("elmo-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ELMO_HF_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def clipped_dir(tmp_path_factory, cache):
    """A saved tiny model whose clips bind, with its tokenizer, and its graph written by `elmo-export` beside it."""
    pytest.importorskip("onnxruntime", reason="the ONNX tests need the onnx extra: pip install 'elmo-hf[onnx]'")
    from elmo_hf.tokenization import ElmoTokenizer

    folder = tmp_path_factory.mktemp("onnx") / "clipped"
    clipped_model(lstm_implementation="auto").save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    assert cli("elmo-export", [folder]) == 0
    return folder


@pytest.mark.slow
@pytest.mark.numerics
@pytest.mark.own_kernels
def test_exported_graph_at_every_length_and_batch(clipped_dir):
    """The graph was traced at one shape (3 x 7): it must hold at every other, in ONNX Runtime and OpenVINO."""
    from elmo_hf.tools.export.backends import OnnxRuntimeRunner, OpenVinoRunner, unavailable_reason
    from elmo_hf.tools.export.onnx_export import beside_model
    from elmo_hf.tools.loading import load_elmo

    model, _ = load_elmo(clipped_dir)
    graph = beside_model(clipped_dir)
    runners = [OnnxRuntimeRunner(graph, "float32", 1)]
    if unavailable_reason("openvino", "float32") is None:
        runners.append(OpenVinoRunner(graph, "float32", 1))
    for batch in (1, 3, 64):
        for length in (1, 2, 7, 50, 300):
            input_ids, attention_mask = padded_batch(batch, length, seed=batch * length)
            expected = reference_layers(model, input_ids, attention_mask)
            for runner in runners:
                got = runner.run(input_ids.numpy(), attention_mask.numpy())
                assert_close(got, expected, PARITY_SCALED, f"{runner.backend}, batch {batch}, length {length}")


@pytest.mark.slow
def test_elmo_export_command_metadata_up_to_date_and_refusals(clipped_dir, tmp_path, caplog):
    from elmo_hf.tools.export.onnx_export import beside_model, graph_metadata, model_digest
    from elmo_hf.tools.loading import load_elmo

    meta = graph_metadata(beside_model(clipped_dir))
    model, _ = load_elmo(clipped_dir)
    assert meta["digest"] == model_digest(model) and meta["opset"] == "18" and meta["outputs"] == "hidden_states"
    assert meta["onnxruntime_version"] and meta["torch_version"] == torch.__version__
    caplog.set_level(logging.INFO)
    caplog.clear()
    assert cli("elmo-export", [clipped_dir]) == 0 and "up to date" in caplog.text  # same weights: nothing to do
    assert "not checked again" in caplog.text and "checked against PyTorch" not in caplog.text  # nothing was run
    caplog.clear()
    target = tmp_path / "elmo.onnx"
    target.write_text("not a graph")
    assert cli("elmo-export", [clipped_dir, "--output", target]) == 2 and "--overwrite" in caplog.text
    assert cli("elmo-export", [clipped_dir, "--output", tmp_path / "elmo.txt"]) == 2 and ".onnx" in caplog.text
    assert cli("elmo-export", [tmp_path / "nothing-here"]) == 2
    assert target.read_text() == "not a graph"  # refused: nothing written


@pytest.mark.slow
@pytest.mark.numerics
@pytest.mark.own_kernels
def test_heads_export_their_mix_and_logits_or_say_why_not(tmp_path, cache):
    pytest.importorskip("onnxruntime", reason="the ONNX tests need the onnx extra: pip install 'elmo-hf[onnx]'")
    import onnxruntime

    from elmo_hf.modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.export.onnx_export import random_batch, reference_outputs

    torch.manual_seed(0)
    head = ElmoForSequenceClassification(tiny_config(classifier_pooling="mean", num_labels=3,
                                                     scalar_mix_layer_norm=True)).eval()
    head.save_pretrained(tmp_path / "classifier")
    ElmoTokenizer().save_pretrained(tmp_path / "classifier")
    assert cli("elmo-export", [tmp_path / "classifier"]) == 0
    session = onnxruntime.InferenceSession(str(tmp_path / "classifier" / "onnx" / "model.onnx"))
    input_ids, attention_mask = random_batch(head.config, 5, 12, seed=3)
    got = session.run(["hidden_states", "mixed", "logits"],
                      {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
    for name, value in zip(("hidden_states", "mixed", "logits"), got):
        assert_close(value, reference_outputs(head, input_ids, attention_mask)[name], PARITY_SCALED, name)

    # A head that cannot be exported keeps the biLM's layers and its mix, and says why (no export needed to see it).
    from elmo_hf.tools.export.onnx_export import exportable

    tagger = ElmoForTokenClassification(tiny_config(num_labels=3, use_crf=True, token_classifier_encoder="none"))
    module, outputs, reason = exportable(tagger.eval())
    assert outputs == ["hidden_states", "mixed"] and reason.startswith("a CRF's logits are max-marginals")
    with torch.no_grad():
        layers, mixed = module(input_ids, attention_mask)
    expected = reference_outputs(tagger, input_ids, attention_mask)
    assert_close(mixed, expected["mixed"], REORDERED, "the tagger's mix")
    assert_close(layers, expected["hidden_states"], REORDERED, "the tagger's layers")
    pairs = ElmoForSequenceClassification(tiny_config(pair_combination="concat_diff_product", num_labels=2))
    assert "pairs" in exportable(pairs.eval())[2]


# --------------------------------------------------------------------------------------------------
# elmo-embed --backend, --dtype auto
# --------------------------------------------------------------------------------------------------


def embed(*args) -> int:
    """`elmo-embed` in this process through its frame, on one thread (`run_cli` puts the thread count back)."""
    return cli("elmo-embed", [*args, "--threads", "1", "--quiet", "--overwrite"])


def read(path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as handle:
        return {key: handle[key][()] for key in handle}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Lines of 0 to 60 words (an empty line among them): every length the batches cut."""
    rng = np.random.default_rng(0)
    lines = [" ".join(f"w{rng.integers(40)}" for _ in range(n)) for n in [0, 1, 2, 5, 60, *rng.integers(1, 30, 25)]]
    path = tmp_path_factory.mktemp("corpus") / "lines.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.numerics
@pytest.mark.own_kernels
def test_embed_backends_equal_torch_in_float32_and_measure_their_low_precision(clipped_dir, corpus, tmp_path):
    from elmo_hf.tools.export.backend_choice import min_cosine
    from elmo_hf.tools.export.backends import unavailable_reason

    assert embed(corpus, tmp_path / "torch.hdf5", "--model", clipped_dir, "--backend", "torch") == 0
    expected = read(tmp_path / "torch.hdf5")
    for backend, dtype, floor in (("onnxruntime", "float32", None), ("openvino", "float32", None),
                                  ("onnxruntime", "int8", 0.99), ("openvino", "bfloat16", 0.99)):
        if unavailable_reason(backend, dtype) is not None:
            continue  # OpenVINO's bfloat16 needs a CPU with bfloat16 instructions
        out = tmp_path / f"{backend}-{dtype}.hdf5"
        done = run_cli("elmo-embed", [corpus, out, "--model", clipped_dir, "--backend", backend, "--dtype", dtype,
                                      "--threads", "1", "--quiet", "--overwrite"])
        assert done.returncode == 0, done.stderr
        assert "WARNING" not in done.stderr, done.stderr  # e.g. the int8 quantizer's advice: not the user's to act on
        got = read(out)
        assert got.keys() == expected.keys()
        with h5py.File(out) as handle:
            assert json.loads(handle.attrs["settings"])["backend"] == backend
        for key in expected:
            if floor is None:
                assert_close(got[key], expected[key], PARITY_SCALED, f"{backend} line {key}")
            elif expected[key].size:
                mask = np.ones((1, expected[key].shape[1]), dtype=bool)
                cosine = min_cosine(got[key][None], expected[key][None], mask)
                assert floor <= cosine < 1.0, (backend, dtype, key, cosine)  # lossy, but close


@pytest.mark.slow
def test_auto_measures_once_remembers_and_the_default_follows(clipped_dir, corpus, tmp_path, cache, caplog,
                                                              monkeypatch):
    from elmo_hf.tools.export import backend_choice

    caplog.set_level(logging.INFO)
    assert embed(corpus, tmp_path / "auto.hdf5", "--model", clipped_dir, "--backend", "auto", "--dtype", "auto") == 0
    line = next(r.message for r in caplog.records if r.message.startswith("--backend/--dtype auto"))
    assert "the alternative:" in line and "tokens/s" in line
    memory = json.loads(backend_choice.memory_path().read_text())
    (entry,) = memory.values()
    measured = {(m["backend"], m["dtype"]): m for m in entry["measurements"]}
    assert measured[("torch", "float32")]["cosine_min"] == pytest.approx(1.0, abs=1e-9)
    assert ("onnxruntime", "float32") in measured.keys()
    assert ("onnxruntime", "int8") not in measured.keys()  # its vectors move with the batch: never chosen
    chosen = max((m for m in measured.values() if m["cosine_min"] >= 0.9999), key=lambda m: m["tokens_per_s"])
    assert line.startswith(f"--backend/--dtype auto: {chosen['backend']} {chosen['dtype']} (")
    with h5py.File(tmp_path / "auto.hdf5") as handle:
        settings = json.loads(handle.attrs["settings"])
        assert (settings.get("backend", "torch"), settings["dtype"]) == (chosen["backend"], chosen["dtype"])

    # Remembered: a second run measures nothing and takes the same path.
    monkeypatch.setattr(backend_choice, "measure", lambda *a, **k: pytest.fail("measured twice"))
    caplog.clear()
    assert embed(corpus, tmp_path / "again.hdf5", "--model", clipped_dir, "--dtype", "auto", "--backend", "auto") == 0
    assert f"auto: {chosen['backend']} {chosen['dtype']}" in caplog.text

    # The default: float32 on the backend remembered as fastest (here made ONNX Runtime), named in one line; torch's
    # float32 when torch was measured fastest.
    for fastest in ("onnxruntime", "torch"):
        for m in entry["measurements"]:
            if m["dtype"] == "float32":
                m["tokens_per_s"] = 1000.0 if m["backend"] == fastest else 10.0
        backend_choice.memory_path().write_text(json.dumps(memory))
        caplog.clear()
        out = tmp_path / f"default-{fastest}.hdf5"
        assert embed(corpus, out, "--model", clipped_dir) == 0
        named = [r.message for r in caplog.records if r.message.startswith("float32 on ")]
        assert named == ([] if fastest == "torch" else ["float32 on onnxruntime: measured 100.00x torch's float32 "
                                                        f"speed on this CPU ({backend_choice.memory_path()}); "
                                                        "--backend torch runs PyTorch"])
    on_runtime, on_torch = read(tmp_path / "default-onnxruntime.hdf5"), read(tmp_path / "default-torch.hdf5")
    for key in on_torch:
        assert_close(on_runtime[key], on_torch[key], PARITY_SCALED, key)


@pytest.mark.slow
def test_backends_refuse_in_one_line(clipped_dir, corpus, tmp_path, caplog, monkeypatch):
    from elmo_hf.tools.export import backends

    caplog.set_level(logging.INFO)
    assert embed(corpus, tmp_path / "x.hdf5", "--model", clipped_dir, "--backend", "onnxruntime",
                 "--dtype", "bfloat16") == 2
    assert "--backend onnxruntime has no bfloat16" in caplog.text
    monkeypatch.setattr(backends, "missing_packages", lambda backend: ["openvino"])
    caplog.clear()
    assert embed(corpus, tmp_path / "x.hdf5", "--model", clipped_dir, "--backend", "openvino") == 2
    errors = [r.message for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == ["--backend openvino needs openvino: pip install 'elmo-hf[onnx]'"]
    assert not (tmp_path / "x.hdf5").exists() and not (tmp_path / "x.hdf5.partial").exists()



def test_openvino_bfloat16_is_refused_under_a_onednn_cap_below_bfloat16(monkeypatch):
    """Under ONEDNN_MAX_CPU_ISA=AVX2 (what `make test`'s numerics run sets) OpenVINO still lists BF16, and its
    bfloat16 graph returned no vectors: refused in one line naming the variable."""
    from elmo_hf.tools.export import backends

    monkeypatch.setattr(backends, "missing_packages", lambda backend: [])
    monkeypatch.setattr(backends, "openvino_capabilities", lambda: ["FP32", "BF16"])
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in backends.unavailable_reason("openvino", "bfloat16")
    assert backends.unavailable_reason("openvino", "float32") is None
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert backends.unavailable_reason("openvino", "bfloat16") is None


def test_a_runtime_that_returns_no_vectors_is_an_error_not_an_empty_result():
    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.core.errors import RunFailed
    from elmo_hf.tools.export.backends import GraphEmbedder, GraphRunner

    class Empty(GraphRunner):  # what OpenVINO's bfloat16 graph gave under a oneDNN cap: a batch of none
        backend = "openvino"

        def run(self, input_ids, attention_mask):
            return np.zeros((0, 3, input_ids.shape[1], 8), dtype=np.float32)

    embedder = GraphEmbedder(Empty("model.onnx", "bfloat16", 1), ElmoTokenizer(), "all")
    with pytest.raises(RunFailed, match=r"--backend openvino --dtype bfloat16 returned vectors of shape \(0, 4\)"):
        embedder([["a", "b"], ["c"]])

# --------------------------------------------------------------------------------------------------
# Serving: the app, transformers' pipeline, and a deployment without torch
# --------------------------------------------------------------------------------------------------


def test_standalone_character_ids_equal_the_tokenizer():
    """The torch-free encoder of `onnx_standalone.py` gives ElmoTokenizer's ids and mask (long, non-ASCII, empty)."""
    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.export.onnx_standalone import encode

    sentences = [["The", "bank"], ["naïve", "東京", "x" * 70, ""], [], ["a"] * 9]
    expected = ElmoTokenizer()(sentences, is_split_into_words=True, padding=True, return_tensors="np")
    ids, mask = encode(sentences)
    np.testing.assert_array_equal(ids, expected["input_ids"])
    np.testing.assert_array_equal(mask, expected["attention_mask"])


@pytest.mark.slow
def test_app_and_pipeline_run_on_a_runtime_backend(clipped_dir):
    from transformers import pipeline

    from elmo_hf.tools.app.session import embed_sentences, load_session
    from elmo_hf.tools.export.runtime_model import ElmoRuntimeModel, on_backend
    from elmo_hf.tools.loading import load_elmo

    sentences = [["the", "bank", "raised", "its", "rates"], ["we", "sat"]]
    on_torch = embed_sentences(load_session(str(clipped_dir)), sentences)
    session = load_session(str(clipped_dir), backend="onnxruntime")
    assert isinstance(session.model, ElmoRuntimeModel)
    for got, expected in zip(embed_sentences(session, sentences), on_torch):
        assert_close(got, expected, PARITY_SCALED, "app")
    model, tokenizer = load_elmo(clipped_dir)
    text = "The bank raised its rates ."
    expected = np.array(pipeline("feature-extraction", model=model, tokenizer=tokenizer)(text))
    runtime = on_backend(model, "onnxruntime", folder=clipped_dir)
    got = np.array(pipeline("feature-extraction", model=runtime, tokenizer=tokenizer)(text))
    assert_close(got, expected, PARITY_SCALED, "pipeline")


@pytest.mark.slow
def test_a_deployment_without_torch_gives_the_same_vectors(clipped_dir, tmp_path):
    """The graph, tokenizer_config.json, word_splits_elmo.py and onnx_standalone.py copied to a folder, read by a
    fresh interpreter in which torch cannot be imported."""
    import shutil
    import subprocess
    import sys

    import elmo_hf.tools.export.onnx_standalone as standalone
    from elmo_hf.tools.loading import load_elmo

    deploy = tmp_path / "deploy"
    (deploy / "onnx").mkdir(parents=True)
    shutil.copy(clipped_dir / "onnx" / "model.onnx", deploy / "onnx")
    for name in ("tokenizer_config.json", "word_splits_elmo.py"):
        shutil.copy(clipped_dir / name, deploy)
    shutil.copy(standalone.__file__, deploy)
    text = ["The bank raised its rates, didn't it?", "We sat on the river bank ."]
    code = (
        "import sys, json; sys.modules['torch'] = None; sys.path.insert(0, sys.argv[1])\n"
        "from onnx_standalone import ElmoOnnx\n"
        "vectors = ElmoOnnx(sys.argv[1]).embed(json.loads(sys.argv[2]))\n"
        "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
        "print(json.dumps([v.tolist() for v in vectors]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(deploy), json.dumps(text)], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    got = [np.array(v, dtype=np.float32) for v in json.loads(result.stdout)]
    model, tokenizer = load_elmo(clipped_dir)
    for sentence, vectors in zip(text, got):
        batch = tokenizer([sentence], return_tensors="pt")
        expected = reference_layers(model, batch["input_ids"], batch["attention_mask"])[0, :, 1:-1]
        assert_close(vectors, expected, PARITY_SCALED, sentence)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["export", "int8"])
def test_an_interrupted_export_leaves_nothing(where, tmp_path, clipped_dir, monkeypatch):
    """Ctrl-C during `elmo-export` (issue 55): while the graph is made (a new model folder), or while its int8 graph
    is made (the module's model, its graph up to date). The model folder is as it was: no empty onnx/ folder (the
    default output's), no partial file; exit status 130."""
    import signal
    from pathlib import Path

    import onnxruntime.quantization

    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.core.interrupts import Interrupted

    def interrupt(*args, **kwargs):
        if where == "int8":  # the quantizer has begun writing its graph
            Path(args[1]).write_bytes(b"half a graph")
        raise Interrupted(signal.SIGINT)

    if where == "export":  # a model without a graph yet: the default output's folder onnx/ is made for it
        folder = tmp_path / "model"
        clipped_model().save_pretrained(folder)
        ElmoTokenizer().save_pretrained(folder)
        monkeypatch.setattr(torch.onnx, "export", interrupt)
    else:  # the module's model, without the int8 graph an earlier test may have written (a cache, made on demand)
        folder = clipped_dir
        for graph in folder.rglob("model.int8.onnx*"):
            graph.unlink()
        monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", interrupt)
    before = sorted(path.relative_to(folder) for path in folder.rglob("*"))
    assert cli("elmo-export", [folder, *(["--int8"] if where == "int8" else [])]) == 130
    assert sorted(path.relative_to(folder) for path in folder.rglob("*")) == before
