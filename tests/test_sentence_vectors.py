"""Sentence vectors (TF Hub's `default`): the pooled vector against a by-hand computation, batch invariance, the
layer choices and the ELMo mix; and sentence-transformers loading a saved folder, in-library and as remote code
(a fresh interpreter where the project cannot be imported), giving the same vectors.

Every comparison is of one model's float32 arithmetic by two routes (a batch against one sentence, our pooling against
sentence-transformers'), to REORDERED (tests/tolerances.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_isolated
from tolerances import REORDERED, assert_close

from elmo_hf.modeling_elmo import ElmoModel, ElmoScalarMix
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.tools.embedding.sentence_vectors import (
    mean_pool,
    save_for_sentence_transformers,
    sentence_vectors,
)

SENTENCES = [
    "The bank raised its rates.",
    "We sat on the river bank and watched the water for a long, long time.",
    "",
    "Hello",
    "Don't stop: it's 3.14 , not 1,000 !",
]


@pytest.fixture(scope="module")
def saved(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="module")
def model_and_tokenizer(saved):
    return ElmoModel.from_pretrained(saved).eval(), ElmoTokenizer.from_pretrained(saved)


def by_hand(model, tokenizer, sentence: str, layer_weights: list[float]) -> torch.Tensor:
    """One sentence alone: the weighted layers at the word positions 1..n (never <S>, </S>), averaged."""
    words = tokenizer.tokenize(sentence)
    if not words:
        return torch.zeros(2 * model.config.projection_dim)
    with torch.no_grad():
        hidden = model(**tokenizer([sentence], return_tensors="pt"), output_hidden_states=True).hidden_states
    mixed = sum(w * layer[0, 1 : len(words) + 1].double() for w, layer in zip(layer_weights, hidden))
    return mixed.mean(0).float()


@pytest.mark.numerics
def test_pooled_vector_is_the_mean_over_words_of_the_layer_average(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    vectors = sentence_vectors(model, tokenizer, SENTENCES)
    assert vectors.shape == (len(SENTENCES), 32) and vectors.dtype == torch.float32
    for sentence, vector in zip(SENTENCES, vectors):
        assert_close(vector, by_hand(model, tokenizer, sentence, [1 / 3] * 3), REORDERED, what=repr(sentence))
    assert torch.equal(vectors[2], torch.zeros(32))  # no words: zeros


@pytest.mark.numerics
def test_pooled_vectors_do_not_depend_on_the_batch(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    together = sentence_vectors(model, tokenizer, SENTENCES)
    alone = torch.cat([sentence_vectors(model, tokenizer, [s]) for s in SENTENCES])
    pairs = sentence_vectors(model, tokenizer, SENTENCES[::-1], batch_size=2).flip(0)
    assert_close(together, alone, REORDERED, what="one batch against each sentence alone")
    assert_close(together, pairs, REORDERED, what="one batch against batches of 2, reversed")
    pre_split = sentence_vectors(model, tokenizer, [tokenizer.tokenize(s) for s in SENTENCES])
    assert_close(together, pre_split, REORDERED, what="text against pre-split words")


@pytest.mark.numerics
def test_layer_choices_and_the_elmo_mix(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    sentence = SENTENCES[1]
    top = sentence_vectors(model, tokenizer, [sentence], layers="top")[0]
    assert_close(top, by_hand(model, tokenizer, sentence, [0, 0, 1]), REORDERED, what="layers='top'")
    layer0 = sentence_vectors(model, tokenizer, [sentence], layers=0)[0]
    assert_close(layer0, by_hand(model, tokenizer, sentence, [1, 0, 0]), REORDERED, what="layers=0")
    # TF Hub's `default` with a trained `elmo` mix: the mean over words of ElmoScalarMix's output
    mix = ElmoScalarMix(3, initial_scalar_parameters=[0.5, -1.0, 2.0], trainable=False)
    batch = tokenizer([sentence], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch, output_hidden_states=True).hidden_states
        mixed = mix(hidden)[0, 1:-1].mean(0)
    weights = (mix.gamma * mix.normalized_weights()).tolist()
    pooled = mean_pool(hidden, batch["input_ids"], batch["attention_mask"], layers=weights)[0]
    assert_close(pooled, mixed, REORDERED, what="mean_pool with the mix's weights against ElmoScalarMix")
    for bad in ("bottom", 3, [1.0, 2.0]):
        with pytest.raises(ValueError, match="layer"):
            sentence_vectors(model, tokenizer, [sentence], layers=bad)


def test_save_for_sentence_transformers_checks_the_folder(saved, tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        save_for_sentence_transformers(tmp_path)
    with pytest.raises(ValueError, match="layers"):
        save_for_sentence_transformers(saved, layers="bottom")
    assert not (saved / "modules.json").exists()


def _st_folder(saved: Path, tmp_path: Path, layers) -> Path:
    import shutil

    folder = tmp_path / "st"
    shutil.copytree(saved, folder)
    save_for_sentence_transformers(folder, layers=layers)
    return folder


@pytest.mark.parametrize("layers", ["average", "top"])
def test_sentence_transformers_encode_gives_the_pooled_vector(saved, model_and_tokenizer, tmp_path, layers):
    st = pytest.importorskip("sentence_transformers", reason="the sentence-transformers extra is not installed")
    folder = _st_folder(saved, tmp_path, layers)
    # the version the files need, which an older sentence-transformers names in a warning before it fails
    recorded = json.loads((folder / "config_sentence_transformers.json").read_text())["__version__"]
    assert recorded == {"sentence_transformers": "5.4.0"}
    model = st.SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    assert model.get_embedding_dimension() == 32
    encoded = model.encode(SENTENCES, batch_size=2)  # sorted by length and batched by sentence-transformers
    expected = sentence_vectors(*model_and_tokenizer, SENTENCES, layers=layers)
    assert_close(encoded, expected, REORDERED, what=f"SentenceTransformer from the saved folder, layers={layers}")


def test_sentence_transformer_built_in_library(saved, model_and_tokenizer):
    pytest.importorskip("sentence_transformers", reason="the sentence-transformers extra is not installed")
    from elmo_hf.tools.embedding.sentence_vectors import sentence_transformer

    model = sentence_transformer(saved, layers=[0.2, 0.3, 0.5], device="cpu")  # no files written, no remote code
    assert not (saved / "modules.json").exists()
    expected = sentence_vectors(*model_and_tokenizer, SENTENCES, layers=[0.2, 0.3, 0.5])
    assert_close(model.encode(SENTENCES), expected, REORDERED, what="sentence_transformer() in the library")


@pytest.mark.slow
def test_sentence_transformers_as_remote_code(saved, model_and_tokenizer, tmp_path):
    pytest.importorskip("sentence_transformers", reason="the sentence-transformers extra is not installed")
    folder = _st_folder(saved, tmp_path, "average")
    (tmp_path / "sentences.json").write_text(json.dumps(SENTENCES))
    run_isolated(
        f"""
import json, numpy
from sentence_transformers import SentenceTransformer
model = SentenceTransformer({str(folder)!r}, device="cpu", trust_remote_code=True)
assert type(model[0].auto_model).__module__.startswith("transformers_modules"), type(model[0].auto_model).__module__
sentences = json.load(open("sentences.json"))
numpy.save("encoded.npy", model.encode(sentences, batch_size=3))
""",
        cwd=tmp_path,
        timeout=600,
    )
    expected = sentence_vectors(*model_and_tokenizer, SENTENCES)
    assert_close(np.load(tmp_path / "encoded.npy"), expected, REORDERED, what="SentenceTransformer as remote code")
