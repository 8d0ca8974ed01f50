"""ElmoForPreTraining: the biLM objective with full, sampled and adaptive softmax."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import random_char_ids, tiny_model
from tolerances import REORDERED, STATISTIC, assert_close
from transformers import AutoModel, AutoModelForPreTraining

from elmo_hf.modeling_elmo import ElmoConfig, ElmoForPreTraining, ElmoModel

VOCAB = 40


def tiny_lm(**overrides) -> ElmoForPreTraining:
    return tiny_model(ElmoForPreTraining, vocab_size=VOCAB, dropout=0.0, **overrides)


@pytest.mark.numerics
def test_full_softmax_loss_is_mean_of_directions():
    model = tiny_lm()
    ids = random_char_ids([6, 4])
    labels = torch.randint(0, VOCAB, (2, 6))
    labels[1, 4:] = -100
    out = model(ids, labels=labels)
    p = model.config.projection_dim
    top = out.last_hidden_state
    # forward: position t predicts labels[t + 1]; backward: position t predicts labels[t - 1]
    fwd_h = torch.cat([top[0, :5, :p], top[1, :3, :p]])
    fwd_t = torch.cat([labels[0, 1:6], labels[1, 1:4]])
    bwd_h = torch.cat([top[0, 1:6, p:], top[1, 1:4, p:]])
    bwd_t = torch.cat([labels[0, :5], labels[1, :3]])
    logp_f = model.softmax.log_probs(fwd_h)
    logp_b = model.softmax.log_probs(bwd_h)
    expected_f = F.nll_loss(logp_f, fwd_t)
    expected_b = F.nll_loss(logp_b, bwd_t)
    assert_close(out.forward_loss, expected_f, REORDERED, what="forward loss")
    assert_close(out.backward_loss, expected_b, REORDERED, what="backward loss")
    assert_close(out.loss, (expected_f + expected_b) / 2, REORDERED, what="loss")
    assert int(out.forward_tokens) == 8 and int(out.backward_tokens) == 8


@pytest.mark.parametrize("softmax_type", ["full", "sampled", "adaptive"])
def test_each_softmax_trains(softmax_type):
    model = tiny_lm(softmax_type=softmax_type, num_sampled=16, adaptive_cutoffs=[8, 20]).train()
    ids = random_char_ids([6, 6, 5, 4], seed=2)
    labels = torch.randint(0, VOCAB, (4, 6), generator=torch.Generator().manual_seed(1))
    labels[2, 5:] = -100
    labels[3, 4:] = -100
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    model.eval()
    before = float(model(ids, labels=labels).loss.detach())
    model.train()
    for _ in range(40):
        optimizer.zero_grad()
        loss = model(ids, labels=labels).loss
        assert torch.isfinite(loss)
        loss.backward()
        optimizer.step()
    model.eval()
    after = float(model(ids, labels=labels).loss.detach())  # evaluation always uses the exact softmax
    assert after < 0.7 * before, (before, after)


@pytest.mark.numerics
def test_log_probs_are_normalised():
    for softmax_type in ("full", "adaptive"):
        model = tiny_lm(softmax_type=softmax_type, adaptive_cutoffs=[8, 20])
        logp = model.softmax.log_probs(torch.randn(5, model.config.projection_dim))
        assert_close(logp.exp().sum(-1), torch.ones(5), STATISTIC, what=f"{softmax_type}: probabilities")


@pytest.mark.numerics
def test_sampled_softmax_estimate_and_evaluation():
    model = tiny_lm(softmax_type="sampled", num_sampled=16).train()
    hidden = torch.randn(12, model.config.projection_dim)
    targets = torch.randint(0, VOCAB, (12,))
    sampled = model.softmax.nll(hidden, targets)
    assert torch.isfinite(sampled) and sampled > 0
    # accidental hits: targets drawn among the negatives are masked out, so the estimate never exceeds
    # the loss where the true logit competes with every other word including itself
    model.eval()
    exact = model.softmax.nll(hidden, targets)
    logits = F.linear(hidden, model.softmax.weight, model.softmax.bias)
    expected = F.cross_entropy(logits, targets, reduction="sum")
    assert_close(exact, expected, REORDERED, what="exact loss in evaluation")


@pytest.mark.numerics
def test_stream_windows_with_state_equal_the_whole_stream():
    """bilm-tf training: both directions read their own stream left to right with the state carried."""
    model = tiny_lm()
    forward_stream = random_char_ids([10, 10], seed=3)
    backward_stream = random_char_ids([10, 10], seed=4)
    labels_f = torch.randint(0, VOCAB, (2, 10))
    labels_b = torch.randint(0, VOCAB, (2, 10))
    whole = model(forward_stream, backward_input_ids=backward_stream, forward_labels=labels_f,
                  backward_labels=labels_b, use_cache=True)
    first = model(forward_stream[:, :6], backward_input_ids=backward_stream[:, :6], use_cache=True)
    second = model(forward_stream[:, 6:], backward_input_ids=backward_stream[:, 6:], state=first.state, use_cache=True)
    chunked = torch.cat([first.last_hidden_state, second.last_hidden_state], dim=1)
    assert_close(chunked, whole.last_hidden_state, REORDERED, what="two windows with the state carried")
    for name, a, b in zip(("h", "c"), second.state, whole.state):
        assert_close(a, b, REORDERED, what=f"final {name}")


def test_bad_labels():
    model = tiny_lm()
    ids = random_char_ids([4])
    with pytest.raises(ValueError, match=r"\[0, 40\)"):
        model(ids, labels=torch.tensor([[1, 2, 3, 99]]))
    with pytest.raises(ValueError, match="shape"):
        model(ids, labels=torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="vocab_size"):
        ElmoForPreTraining(ElmoConfig.from_preset("tiny"))


def test_feature_model_opens_as_pretraining_model_with_new_softmax(tmp_path):
    base = ElmoModel(ElmoConfig.from_preset("tiny")).eval()
    base.save_pretrained(tmp_path / "base")
    model = ElmoForPreTraining.from_pretrained(tmp_path / "base", vocab_size=VOCAB).eval()
    ids = random_char_ids([5, 2])
    assert torch.equal(model.elmo(ids).last_hidden_state, base(ids).last_hidden_state)
    words = random_char_ids([VOCAB], seed=7)[0]
    model.initialize_softmax_from_token_embeddings(words)
    with torch.no_grad():
        expected = base.char_encoder(words)
        assert_close(model.softmax.weight, expected, REORDERED, what="softmax from token embeddings")
    assert model.softmax.bias.abs().max() == 0
    # the pretraining folder opens as the feature model and as the pretraining model
    model.save_pretrained(tmp_path / "lm")
    assert type(AutoModel.from_pretrained(tmp_path / "lm")) is ElmoModel
    reloaded = AutoModelForPreTraining.from_pretrained(tmp_path / "lm").eval()
    labels = torch.randint(0, VOCAB, (2, 5))
    assert torch.equal(reloaded(ids, labels=labels).loss, model(ids, labels=labels).loss)
