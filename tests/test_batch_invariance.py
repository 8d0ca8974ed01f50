"""Every path `--backend auto` / `--dtype auto` may choose (tools/core/backend_registry.py's `automatic_dtypes`) gives a
sentence the same vectors alone and inside a padded batch of longer sentences, to float32's reordering; and the
automatic choice, whose cosine is measured on one batch and cannot see batch dependence, never picks another path.

The torch paths run in-process on the tiny model (fast). The runtimes' paths export the tiny model's graph once (10-30
s: the exporter's own work) and are `slow`; each is skipped, naming what is missing, where its runtime is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_config
from tolerances import REORDERED, assert_close

from elmo_hf.tools.core.backend_registry import AUTO, BACKENDS, DEFAULT

pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")

AUTOMATIC_PATHS = [(row.name, dtype) for row in BACKENDS if row.automatic for dtype in row.automatic_dtypes]
# Offered by name only, because their vectors move with the batch (docs/embedding.md).
NAMED_ONLY = [(row.name, dtype) for row in BACKENDS for dtype in row.dtypes
              if (row.name, dtype) not in AUTOMATIC_PATHS and dtype != "float16"]

ALONE = ["the", "bank", "raised", "its", "rates", "."]


def batch_around(sentence: list[str]) -> list[list[str]]:
    """`sentence` among longer ones (so it is padded) whose words are long and varied (so their activations differ
    from its own: a batch-wide activation scale would move it)."""
    rng = np.random.default_rng(0)
    letters = list("etaoinshrdlucmfwypvbgkjqxzETAOIN0123456789")

    def words(n: int) -> list[str]:
        return ["".join(rng.choice(letters, size=int(rng.integers(1, 30)))) for _ in range(n)]

    return [words(40), sentence, words(23), words(61)]


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    torch.manual_seed(0)
    return ElmoModel(tiny_config()).eval(), ElmoTokenizer()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of this module's own ($ELMO_HF_CACHE): the tiny model's graph, exported once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ELMO_HF_CACHE", str(tmp_path_factory.mktemp("elmo-cache")))
        yield


def alone_and_batched(backend: str, dtype: str, model, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The sentence's hidden states (L + 1, T, 2P) run alone and run as row 1 of `batch_around`, its real positions."""
    from elmo_hf.tools.export.backends import runner_for, unavailable_reason

    reason = unavailable_reason(backend, dtype)
    if reason is not None:
        pytest.skip(f"{backend} {dtype} cannot run here: {reason}")
    run = runner_for(backend, dtype, model, None, 1).run
    results = []
    for sentences, row in (([ALONE], 0), (batch_around(ALONE), 1)):
        encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="np")
        hidden = run(encoded["input_ids"].astype(np.int64), encoded["attention_mask"].astype(np.int64))
        results.append(hidden[row, :, : len(ALONE) + 2])  # with <S> and </S>
    assert results[1].shape[1] < hidden.shape[2], "the sentence must be padded in its batch"
    return results[0], results[1]


def torch_reason(dtype: str) -> str | None:
    return None if dtype in ("float32", "bfloat16", "int8") else f"{dtype} is CUDA's"


def test_the_automatic_dtypes_are_offered_dtypes_and_auto_considers_no_other():
    from elmo_hf.tools.export import backend_choice

    for row in BACKENDS:
        assert set(row.automatic_dtypes) <= set(row.dtypes), row.name
    # Whatever can run here, auto measures only the invariant paths, with a dtype named or not.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backend_choice, "unavailable_reason", lambda *args, **kwargs: None)
        assert set(backend_choice.candidates(AUTO, AUTO, torch_reason)) == set(AUTOMATIC_PATHS)
        for backend, dtype in NAMED_ONLY:
            assert (backend, dtype) not in backend_choice.candidates(AUTO, dtype, torch_reason)
            assert (backend, dtype) not in backend_choice.candidates(backend, AUTO, torch_reason)
        assert backend_choice.candidates(AUTO, "int8", torch_reason) == [(DEFAULT, "int8")]
        assert backend_choice.candidates(AUTO, "bfloat16", torch_reason) == []


@pytest.mark.parametrize("backend, dtype", [p for p in AUTOMATIC_PATHS if p[0] == DEFAULT])
def test_each_automatic_torch_path_is_batch_invariant(backend, dtype, model_and_tokenizer):
    alone, batched = alone_and_batched(backend, dtype, *model_and_tokenizer)
    assert_close(batched, alone, REORDERED, f"{backend} {dtype}: alone against in its batch")


@pytest.mark.slow
@pytest.mark.parametrize("backend, dtype", [p for p in AUTOMATIC_PATHS if p[0] != DEFAULT])
def test_each_automatic_runtime_path_is_batch_invariant(backend, dtype, model_and_tokenizer, cache):
    pytest.importorskip("onnxruntime", reason="the runtimes' paths need the onnx extra: pip install 'elmo-hf[onnx]'")
    alone, batched = alone_and_batched(backend, dtype, *model_and_tokenizer)
    assert_close(batched, alone, REORDERED, f"{backend} {dtype}: alone against in its batch")


@pytest.mark.slow
def test_the_batch_catches_a_batch_wide_activation_scale(model_and_tokenizer, cache):
    """The test above can fail: ONNX Runtime's int8 (one activation scale per multiply for the whole batch), which
    auto leaves out, moves the sentence by far more than the bound on the same batch."""
    pytest.importorskip("onnxruntime", reason="the runtimes' paths need the onnx extra: pip install 'elmo-hf[onnx]'")
    alone, batched = alone_and_batched("onnxruntime", "int8", *model_and_tokenizer)
    assert np.abs(batched - alone).max() > 100 * REORDERED.limit(torch.from_numpy(alone))


def test_auto_never_chooses_a_path_whose_vectors_depend_on_the_batch(model_and_tokenizer, tmp_path, monkeypatch):
    """The choice's own test (cosine to float32 on one batch) passes a batch-dependent path as readily as any: here
    each such path is measured perfect and fastest, and is still neither measured nor chosen."""
    from elmo_hf.tools.export import backend_choice
    from elmo_hf.tools.export.backend_choice import Measurement

    monkeypatch.setenv("ELMO_HF_CACHE", str(tmp_path))
    monkeypatch.setattr(backend_choice, "unavailable_reason", lambda *args, **kwargs: None)
    model, tokenizer = model_and_tokenizer
    speed = {path: 1000.0 + i for i, path in enumerate(NAMED_ONLY)} | {path: 10.0 + i for i, path in
                                                                       enumerate(AUTOMATIC_PATHS)}
    asked = []

    def measure(paths, *args, **kwargs):
        asked.extend(paths)
        return [Measurement(b, d, speed[(b, d)], 1.0) for b, d in paths]

    monkeypatch.setattr(backend_choice, "measure", measure)
    choice = backend_choice.choose_auto(AUTO, AUTO, model, tokenizer, None, 1, torch_reason)
    assert set(asked) == set(AUTOMATIC_PATHS)
    assert (choice.backend, choice.dtype) == max(AUTOMATIC_PATHS, key=speed.get)
    # A measurement remembered before this rule (the batch-dependent paths fastest in it) changes nothing.
    backend_choice.remember(model.config, 1, [Measurement(b, d, s, 1.0) for (b, d), s in speed.items()])
    again = backend_choice.choose_auto(AUTO, "int8", model, tokenizer, None, 1, torch_reason)
    assert (again.backend, again.dtype) == (DEFAULT, "int8")
    assert (backend_choice.choose_auto("openvino", AUTO, model, tokenizer, None, 1, torch_reason).dtype
            == "float32")


def test_auto_with_a_dtype_no_invariant_path_runs_is_refused_in_one_line(model_and_tokenizer):
    from elmo_hf.tools.export import backend_choice
    from elmo_hf.tools.export.backends import BackendError

    model, tokenizer = model_and_tokenizer
    with pytest.raises(BackendError) as refused:
        backend_choice.choose_auto(AUTO, "bfloat16", model, tokenizer, None, 1, torch_reason)
    message = str(refused.value)
    assert "\n" not in message and "--dtype bfloat16" in message and "--backend torch" in message, message
