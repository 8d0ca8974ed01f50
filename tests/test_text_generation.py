"""`pipeline("text-generation")` and `forward_perplexity` from the forward LM of an `ElmoForPreTraining` folder
(modeling_elmo/pipeline_text_generation_elmo.py): the LSTM state carried word by word equals reading the whole
text again, a small LM trained here writes its corpus back, and the pipeline runs from the saved folder in a fresh
interpreter that cannot import the project."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import run_isolated, tiny_model
from tolerances import REORDERED, assert_close
from transformers import pipeline

from elmo_hf.modeling_elmo import ElmoForPreTraining
from elmo_hf.modeling_elmo.pipeline_text_generation_elmo import (
    ElmoTextGenerationPipeline,
    forward_perplexity,
    generate_words,
)
from elmo_hf.tokenization import ElmoTokenizer

pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")

# A corpus with one continuation for every word but "the" (which is followed by "cat" once and "mat" once: the
# word before it decides, which only an LM that reads the sentence so far can know).
CORPUS = ["the cat sat on the mat .", "a dog ran to the park ."]
WORDS = sorted({w for line in CORPUS for w in line.split()})
VOCAB = ["<S>", "</S>", "<UNK>", *WORDS]


def lm_tokenizer() -> ElmoTokenizer:
    return ElmoTokenizer(word_vocab=VOCAB, word_split="whitespace")


def untrained_lm(seed: int = 0) -> ElmoForPreTraining:
    torch.manual_seed(seed)
    return tiny_model(ElmoForPreTraining, vocab_size=len(VOCAB), dropout=0.0)


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory):
    """A tiny LM trained here until it knows CORPUS by heart, saved with its tokenizer."""
    tok, model = lm_tokenizer(), untrained_lm(1).train()
    batch = tok(CORPUS, padding=True, return_tensors="pt", return_vocab_ids=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(80):  # loss 0.09: the floor, as the first word is "the" or "a"
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=batch["vocab_ids"]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    folder = tmp_path_factory.mktemp("lm")
    model.eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def reread_greedy(model, tok, prompt: str, steps: int) -> list[str]:
    """The reference: each step reads the prompt and the words so far from the start, no state carried."""
    words, half = [], model.config.projection_dim
    banned = [VOCAB.index("<S>"), VOCAB.index("<UNK>")]
    for _ in range(steps):
        ids = tok(" ".join([prompt, *words]), return_tensors="pt")["input_ids"][:, :-1]
        with torch.no_grad():
            top = model.elmo(ids).last_hidden_state[0, -1:, :half]
            log_probs = model.softmax.log_probs(top)[0]
        log_probs[banned] = -math.inf
        word = VOCAB[int(log_probs.argmax())]
        if word == "</S>":
            break
        words.append(word)
    return words


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_state_carried_word_by_word_equals_rereading_the_text(seed):
    tok, model = lm_tokenizer(), untrained_lm(seed)
    ids = tok("the dog", return_tensors="pt")["input_ids"][:, :-1]
    got = generate_words(model, tok, ids, 8, lambda log_probs: int(log_probs.argmax()))
    assert got == reread_greedy(model, tok, "the dog", 8)


def test_a_trained_lm_writes_its_corpus_and_knows_it_from_a_shuffle(trained_folder):
    generator = pipeline("text-generation", model=str(trained_folder), trust_remote_code=True)
    assert type(generator).__name__ == "ElmoTextGenerationPipeline"  # the copy that travels with the folder
    assert generator("the cat") == [{"generated_text": "the cat sat on the mat ."}]  # stops at </S>
    assert generator("a dog ran to", return_full_text=False) == [{"generated_text": "the park ."}]
    assert generator("the cat", max_new_tokens=2) == [{"generated_text": "the cat sat on"}]
    assert generator(["the cat sat", "a"], max_new_tokens=1) == [[{"generated_text": "the cat sat on"}],
                                                               [{"generated_text": "a dog"}]]
    model, tok = generator.model, generator.tokenizer
    seen, shuffled = forward_perplexity(model, tok, CORPUS[0]), forward_perplexity(model, tok, "mat the on sat cat .")
    assert seen < 1.5 < 5 < shuffled


def test_sampling_is_reproducible_with_a_seed_and_top_k_1_is_greedy(trained_folder):
    generator = pipeline("text-generation", model=str(trained_folder), trust_remote_code=True)
    draws = [generator("the", do_sample=True, temperature=3.0, seed=seed)[0]["generated_text"] for seed in range(6)]
    assert draws == [generator("the", do_sample=True, temperature=3.0, seed=s)[0]["generated_text"] for s in range(6)]
    assert len(set(draws)) > 1  # a hot temperature draws different words
    assert generator("the cat", do_sample=True, top_k=1, seed=3) == generator("the cat")


def test_perplexity_is_the_exp_of_the_mean_next_word_loss():
    tok, model = lm_tokenizer(), untrained_lm(4)
    text, half = "a dog sat on the mat", model.config.projection_dim
    encoded = tok(text, return_tensors="pt", return_vocab_ids=True)
    with torch.no_grad():
        log_probs = model.softmax.log_probs(model.elmo(encoded["input_ids"]).last_hidden_state[0, :-1, :half])
    targets = encoded["vocab_ids"][0, 1:]  # each word and </S>, given what comes before
    expected = math.exp(-float(log_probs[torch.arange(len(targets)), targets].mean()))
    assert_close(forward_perplexity(model, tok, text), expected, REORDERED, what="perplexity")


def test_what_cannot_generate_says_why_in_one_line(tiny_model_dir):
    model = untrained_lm()
    with pytest.raises(ValueError, match="word vocabulary"):
        ElmoTextGenerationPipeline(model=model, tokenizer=ElmoTokenizer())("the cat")
    with pytest.raises(ValueError, match="softmax of ElmoForPreTraining, not a ElmoModel"):
        ElmoTextGenerationPipeline(model=tiny_model(), tokenizer=lm_tokenizer())("the cat")
    generator = ElmoTextGenerationPipeline(model=model, tokenizer=lm_tokenizer())
    for bad, message in (({"max_new_tokens": -1}, "max_new_tokens"), ({"temperature": 0}, "temperature"),
                         ({"top_k": 0}, "top_k"), ({"beams": 2}, "beams")):
        with pytest.raises((ValueError, TypeError), match=message):
            generator("the cat", **bad)


@pytest.mark.slow
def test_the_folder_generates_in_a_fresh_interpreter_without_the_project(trained_folder, tmp_path):
    config = json.loads((trained_folder / "config.json").read_text())
    assert config["custom_pipelines"]["text-generation"]["impl"].startswith("pipeline_text_generation_elmo.")
    result = run_isolated(f"""
from transformers import pipeline
generator = pipeline("text-generation", model={str(trained_folder)!r}, trust_remote_code=True)
print(generator("a dog")[0]["generated_text"])
""", cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1] == "a dog ran to the park ."
