"""Task heads: the scalar mix, ElmoForSequenceClassification, ElmoForTokenClassification (Peters et al. 2018 3.3)."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from conftest import random_char_ids, run_isolated, tiny_config
from tolerances import REORDERED, STATISTIC, assert_close
from transformers import (
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    Trainer,
    TrainingArguments,
)

from elmo_hf.modeling_elmo import (
    ElmoConfig,
    ElmoForPreTraining,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoScalarMix,
)
from elmo_hf.modeling_elmo.downstream_elmo import sentence_boundary_mask
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.train.tasks.common_collators import (
    ElmoDataCollatorForSequenceClassification,
    ElmoDataCollatorForTokenClassification,
)

BOS_ROW = [259, 257, 260] + [261] * 47
EOS_ROW = [259, 258, 260] + [261] * 47


pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")


def head_config(**overrides) -> ElmoConfig:
    return tiny_config(**{"num_labels": 3, **overrides})


def with_boundaries(ids: torch.Tensor) -> torch.Tensor:
    """Random word ids (B, T, 50), right-padded -> the same rows framed by <S> ... </S>."""
    lengths = (ids > 0).any(-1).sum(1)
    out = torch.zeros(ids.shape[0], ids.shape[1] + 2, ids.shape[2], dtype=ids.dtype)
    for row, n in enumerate(lengths.tolist()):
        out[row, 0] = torch.tensor(BOS_ROW)
        out[row, 1 : n + 1] = ids[row, :n]
        out[row, n + 1] = torch.tensor(EOS_ROW)
    return out


def layers_and_mask(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    layers = [torch.randn(3, 5, 4, generator=generator) * (k + 1) + k for k in range(3)]
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    return layers, mask


# --------------------------------------------------------------------------------------------------
# Scalar mix (docs/original_model.md, "Scalar mix")
# --------------------------------------------------------------------------------------------------


@pytest.mark.numerics
def test_scalar_mix_is_gamma_times_softmax_weighted_sum():
    layers, _ = layers_and_mask()
    mix = ElmoScalarMix(3)
    assert torch.equal(mix.scalar_parameters.detach(), torch.zeros(3)) and float(mix.gamma.detach()) == 1.0
    assert_close(mix(layers), sum(layers) / 3, REORDERED, what="zeros: equal weights")
    with torch.no_grad():
        mix.scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.7)
    s = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0)
    assert_close(mix.normalized_weights(), s, STATISTIC, what="softmax of the scalars")
    expected = 1.7 * (s[0] * layers[0] + s[1] * layers[1] + s[2] * layers[2])
    assert_close(mix(layers), expected, REORDERED, what="mix")


@pytest.mark.numerics
def test_scalar_mix_layer_norm_uses_each_sentences_unmasked_elements_only():
    layers, mask = layers_and_mask()
    mix = ElmoScalarMix(3, do_layer_norm=True)
    out = mix(layers, mask)
    for row in range(3):
        expected = 0
        for layer in layers:
            values = layer[row][mask[row]]  # (N, D): this sentence's unmasked elements, not per token
            mean, var = values.mean(), values.var(unbiased=False)
            expected = expected + (layer[row] - mean) / torch.sqrt(var + 1e-12) / 3
        assert_close(out[row][mask[row]], expected[mask[row]], REORDERED, what=f"sentence {row}")
    # garbage at masked positions, and other sentences, do not move a sentence's unmasked outputs
    noisy = [layer.masked_fill(~mask.unsqueeze(-1), 1e4) for layer in layers]
    assert_close(mix(noisy, mask)[mask], out[mask], REORDERED, what="garbage at masked positions")
    alone = mix([layer[1:2, :3] for layer in layers], mask[1:2, :3])
    assert_close(alone[0], out[1, :3], REORDERED, what="a sentence alone")
    # a single selected layer comes out with mean 0 and variance 1 over each sentence's unmasked elements
    top = ElmoScalarMix(3, do_layer_norm=True, initial_scalar_parameters=[-9e10, -9e10, 1.0], trainable=False)
    normalised = top(layers, mask)
    for row in range(3):
        values = normalised[row][mask[row]]
        assert_close(values.mean(), 0.0, STATISTIC, what=f"mean, sentence {row}")
        assert_close(values.var(unbiased=False), 1.0, STATISTIC, what=f"variance, sentence {row}")


@pytest.mark.numerics
def test_fixed_mixes_select_exactly_and_are_not_trained():
    layers, _ = layers_and_mask()
    select_one = ElmoScalarMix(3, initial_scalar_parameters=[-9e10, 1.0, -9e10], trainable=False)
    assert torch.equal(select_one(layers), layers[1])
    assert list(select_one.parameters()) == []  # buffers, saved with the model, never optimised
    assert float(select_one.l2_penalty(0.5)) == 0.0
    for kind, expected in (("top", layers[2]), ("average", sum(layers) / 3)):
        model = ElmoForSequenceClassification(head_config(scalar_mix=kind))
        mix = model.scalar_mixes[0]
        assert not mix.trainable and float(mix.gamma.detach()) == 1.0
        assert_close(mix(layers), expected, REORDERED, what=kind)
    fixed = ElmoForSequenceClassification(head_config(scalar_mix="fixed", scalar_mix_parameters=[1.0, -9e10, -9e10]))
    assert torch.equal(fixed.scalar_mixes[0](layers), layers[0])


@pytest.mark.numerics
def test_l2_penalty_on_mix_weights_is_added_to_the_loss_in_training_only():
    model = ElmoForSequenceClassification(head_config(representation_dropout=0.0, scalar_mix_l2_coef=0.25))
    with torch.no_grad():
        model.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([1.0, -2.0, 0.5]))
    assert_close(model.mix_l2_penalty(), 0.25 * (1 + 4 + 0.25), REORDERED, what="penalty")
    ids, labels = random_char_ids([4, 3]), torch.tensor([0, 2])
    eval_loss = model.eval()(ids, labels=labels).loss
    train_loss = model.train()(ids, labels=labels).loss  # no dropout anywhere: frozen biLM, dropout 0
    assert_close(train_loss - eval_loss, 0.25 * 5.25, REORDERED, what="training loss less evaluation loss")
    assert model.scalar_mixes[0].scalar_parameters.grad is None
    train_loss.backward()
    assert model.scalar_mixes[0].scalar_parameters.grad is not None


@pytest.mark.numerics
def test_several_output_representations_from_one_bilm_run():
    model = ElmoForSequenceClassification(head_config(num_output_representations=2)).eval()
    with torch.no_grad():
        model.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([-9e10, -9e10, 1.0]))
    ids = with_boundaries(random_char_ids([4, 2]))
    out = model.get_elmo_representations(ids)
    assert len(out.elmo_representations) == 2
    average = sum(out.hidden_states) / 3
    assert_close(out.elmo_representations[0], average, REORDERED, what="mix of equal weights")
    assert torch.equal(out.elmo_representations[1], out.hidden_states[-1])
    assert out.word_mask.sum(1).tolist() == [4, 2] and out.mask.sum(1).tolist() == [6, 4]


# --------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("scalar_mix", "sum"),
        ("scalar_mix_parameters", [0.0, 1.0, 2.0]),  # only with scalar_mix="fixed"
        ("classifier_pooling", "cls"),
        ("token_classifier_encoder", "crf"),
        ("representation_dropout", 1.0),
        ("scalar_mix_l2_coef", -0.1),
        ("num_output_representations", 0),
        ("word_embedding_dim", -1),
        ("word_embedding_buckets", 1),
        ("head_hidden_size", 0),
        ("freeze_bilm", "yes"),
    ],
)
def test_bad_task_fields_are_rejected(field, value):
    with pytest.raises(ValueError, match=field):
        ElmoConfig.from_preset("tiny", **{field: value})


@pytest.mark.parametrize(
    "field, value",
    [("num_labels", 0), ("num_labels", -1), ("num_labels", "3"), ("num_labels", True),
     ("scalar_mix_l2_coef", float("nan")), ("scalar_mix_l2_coef", float("inf")), ("problem_type", "foo")],
)
def test_bad_label_fields_are_one_line_naming_the_value(field, value):
    with pytest.raises(ValueError) as error:
        ElmoConfig.from_preset("tiny", **{field: value})
    message = str(error.value)
    assert f"ElmoConfig.{field}" in message and message.endswith(repr(value)) and "\n" not in message


def test_labels_emptied_or_problem_type_changed_after_construction_are_refused():
    config = head_config()
    config.id2label = {}
    with pytest.raises(ValueError, match="num_labels must be a positive integer, got 0"):
        config.validate()
    model = ElmoForSequenceClassification(head_config())
    model.config.problem_type = "foo"  # past validation: the loss refuses it, never falls back to multi-label
    with pytest.raises(ValueError, match="problem_type .* got 'foo'"):
        model(random_char_ids([2]), labels=torch.tensor([[1.0, 0.0, 0.0]]))


def test_fixed_mix_needs_one_weight_per_layer():
    with pytest.raises(ValueError, match="num_layers \\+ 1 = 3"):
        ElmoConfig.from_preset("tiny", scalar_mix="fixed", scalar_mix_parameters=[1.0, 2.0])


def test_defaults_follow_the_paper_and_allennlp():
    config = ElmoConfig()
    assert config.freeze_bilm is True and config.scalar_mix == "learned" and config.scalar_mix_l2_coef == 0.001
    assert config.representation_dropout == 0.5 and config.num_output_representations == 1
    assert config.scalar_mix_layer_norm is False and config.word_embedding_dim == 0


# --------------------------------------------------------------------------------------------------
# Heads: shapes, boundaries, padding, losses
# --------------------------------------------------------------------------------------------------


def test_boundary_tokens_are_detected_from_character_ids():
    ids = with_boundaries(random_char_ids([3, 1]))
    assert sentence_boundary_mask(ids).tolist() == [
        [True, False, False, False, True],
        [True, False, True, False, False],
    ]


@pytest.mark.numerics
@pytest.mark.parametrize("keep", [False, True])
def test_mean_pooling_covers_the_words_and_boundaries_only_on_request(keep):
    model = ElmoForSequenceClassification(head_config(keep_sentence_boundaries=keep)).eval()
    ids = with_boundaries(random_char_ids([4, 2]))
    mixed = model.get_elmo_representations(ids).elmo_representations[0]
    for row, n in enumerate([4, 2]):
        span = slice(0, n + 2) if keep else slice(1, n + 1)
        expected = model.classifier(mixed[row, span].mean(0))
        assert_close(model(ids).logits[row], expected, REORDERED, what=f"sentence {row}")


def distinct_mix_weights(model) -> None:
    """Unequal mix weights and gamma, so that a layer normalised with the wrong statistics shows."""
    with torch.no_grad():
        model.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([0.3, -0.4, 0.9]))
        model.scalar_mixes[0].gamma.fill_(1.3)


@pytest.mark.numerics
@pytest.mark.parametrize("pooling", ["mean", "max", "lstm", "attention"])
def test_sequence_logits_do_not_depend_on_the_batch(pooling):
    """Each sentence alone gives its logits in a padded batch of three, layer norm on (statistics per sentence)."""
    model = ElmoForSequenceClassification(
        head_config(classifier_pooling=pooling, scalar_mix_layer_norm=True, word_embedding_dim=4,
                    word_embedding_buckets=50)
    ).eval()
    distinct_mix_weights(model)
    ids = with_boundaries(random_char_ids([6, 3, 1], seed=3))
    batch = model(ids).logits
    assert batch.shape == (3, 3)
    for row, n in enumerate([6, 3, 1]):
        alone = model(ids[row : row + 1, : n + 2]).logits
        assert_close(alone, batch[row : row + 1], REORDERED, what=f"{pooling} pooling, sentence {row}")


@pytest.mark.numerics
@pytest.mark.parametrize("encoder", ["none", "lstm"])
def test_token_logits_do_not_depend_on_the_batch(encoder):
    model = ElmoForTokenClassification(head_config(token_classifier_encoder=encoder, scalar_mix_layer_norm=True)).eval()
    distinct_mix_weights(model)
    ids = with_boundaries(random_char_ids([5, 2, 1], seed=4))
    batch = model(ids).logits
    for row, n in enumerate([5, 2, 1]):
        alone = model(ids[row : row + 1, : n + 2]).logits
        assert_close(alone[0], batch[row, : n + 2], REORDERED, what=f"{encoder} encoder, sentence {row}")


@pytest.mark.numerics
@pytest.mark.parametrize("encoder", ["none", "lstm"])
def test_token_logits_cover_every_position_and_ignore_minus_100(encoder):
    model = ElmoForTokenClassification(head_config(num_labels=5, token_classifier_encoder=encoder)).eval()
    ids = with_boundaries(random_char_ids([4, 2], seed=1))
    out = model(ids)
    assert out.logits.shape == (2, 6, 5)
    assert_close(model(ids[1:, :4]).logits, out.logits[1:, :4], REORDERED, what="padding invariance")
    labels = torch.full((2, 6), -100)
    labels[0, 1:5] = torch.tensor([0, 1, 2, 3])
    labels[1, 1:3] = torch.tensor([4, 0])
    loss = model(ids, labels=labels).loss
    keep = labels != -100
    expected = torch.nn.functional.cross_entropy(out.logits[keep], labels[keep])
    assert_close(loss, expected, REORDERED, what="loss")
    with pytest.raises(ValueError, match="labels must have shape"):
        model(ids, labels=labels[:, :4])


@pytest.mark.numerics
def test_problem_types_like_bert():
    ids = random_char_ids([3, 2])
    regression = ElmoForSequenceClassification(head_config(num_labels=1)).eval()
    out = regression(ids, labels=torch.tensor([0.5, -1.0]))
    assert regression.config.problem_type == "regression"
    expected = torch.nn.functional.mse_loss(out.logits.squeeze(-1), torch.tensor([0.5, -1.0]))
    assert_close(out.loss, expected, REORDERED, what="regression loss")
    multi = ElmoForSequenceClassification(head_config(num_labels=3)).eval()
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    out = multi(ids, labels=targets)
    assert multi.config.problem_type == "multi_label_classification"
    expected = torch.nn.functional.binary_cross_entropy_with_logits(out.logits, targets)
    assert_close(out.loss, expected, REORDERED, what="multi-label loss")
    single = ElmoForSequenceClassification(head_config(num_labels=3)).eval()
    out = single(ids, labels=torch.tensor([2, 0]), output_hidden_states=True)
    assert single.config.problem_type == "single_label_classification"
    assert len(out.hidden_states) == 3 and out.hidden_states[0].shape == (2, 3, 32)
    assert isinstance(single(ids, return_dict=False), tuple)


def test_hashed_word_embedding_gives_each_word_one_row():
    model = ElmoForTokenClassification(head_config(word_embedding_dim=6, word_embedding_buckets=1000))
    assert model.representation_dim == 32 + 6
    tokenizer = ElmoTokenizer()
    enc = tokenizer([["the", "cat", "the"], ["cat"]], is_split_into_words=True, padding=True, return_tensors="pt")
    buckets = model.word_embedding.bucket_ids(enc["input_ids"])
    assert buckets[0, 1] == buckets[0, 3] and buckets[0, 2] == buckets[1, 1]  # same word, same row
    assert buckets[0, 1] != buckets[0, 2] and buckets[0, 0] != buckets[0, 4]  # <S> and </S> differ
    assert (buckets[1, 3:] == 0).all() and (buckets[0] > 0).all()  # padding -> row 0
    assert torch.equal(model.word_embedding.weight[0], torch.zeros(6))


# --------------------------------------------------------------------------------------------------
# Freezing, saving, loading, registration
# --------------------------------------------------------------------------------------------------


def test_frozen_bilm_has_no_gradients_and_no_dropout():
    model = ElmoForSequenceClassification(head_config(dropout=0.5)).train()
    assert not any(p.requires_grad for p in model.elmo.parameters())
    assert not model.elmo.training and model.training
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"scalar_mixes.0.scalar_parameters", "scalar_mixes.0.scale", "classifier.weight",
                         "classifier.bias"}
    tuned = ElmoForSequenceClassification(head_config(freeze_bilm=False)).train()
    assert all(p.requires_grad for p in tuned.elmo.parameters()) and tuned.elmo.training
    model.set_bilm_frozen(False)
    assert all(p.requires_grad for p in model.elmo.parameters()) and model.elmo.training
    model.set_bilm_frozen(True)
    assert not any(p.requires_grad for p in model.elmo.parameters()) and not model.elmo.training


HEAD_VARIANTS = [
    (ElmoForSequenceClassification, dict(classifier_pooling="lstm", word_embedding_dim=4, word_embedding_buckets=64)),
    (ElmoForSequenceClassification, dict(classifier_pooling="attention", scalar_mix_layer_norm=True)),
    (ElmoForSequenceClassification, dict(scalar_mix="fixed", scalar_mix_parameters=[0.0, 1.0, 2.0])),
    (ElmoForTokenClassification,
     dict(token_classifier_encoder="lstm", word_embedding_dim=3, word_embedding_buckets=32)),
]


@pytest.mark.parametrize("cls, overrides", HEAD_VARIANTS)
def test_save_and_load_reproduce_outputs_exactly(tmp_path, cls, overrides):
    model = cls(head_config(**overrides)).eval()
    with torch.no_grad():  # move everything away from its initial value
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    ids = with_boundaries(random_char_ids([5, 3]))
    expected = model(ids).logits
    model.save_pretrained(tmp_path)
    auto = (AutoModelForSequenceClassification if cls is ElmoForSequenceClassification
            else AutoModelForTokenClassification)
    loaded = auto.from_pretrained(tmp_path).eval()
    assert type(loaded) is cls
    assert torch.equal(loaded(ids).logits, expected)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name
    assert not any(p.requires_grad for p in loaded.elmo.parameters())


@pytest.mark.parametrize("source", ["model", "pretraining"])
def test_heads_load_from_a_bilm_folder(tmp_path, source):
    config = ElmoConfig.from_preset("tiny", vocab_size=20)
    bilm = ElmoModel(config) if source == "model" else ElmoForPreTraining(config)
    bilm.save_pretrained(tmp_path)
    reference = bilm if source == "model" else bilm.elmo
    for auto in (AutoModelForSequenceClassification, AutoModelForTokenClassification):
        head = auto.from_pretrained(tmp_path, num_labels=4)
        for (name, a), (_, b) in zip(reference.state_dict().items(), head.elmo.state_dict().items()):
            assert torch.equal(a, b), name
        mix = head.scalar_mixes[0]
        assert torch.equal(mix.scalar_parameters.detach(), torch.zeros(3)) and float(mix.gamma.detach()) == 1.0
        assert torch.isfinite(head.classifier.weight).all() and float(head.classifier.weight.detach().abs().max()) < 1.0
        assert head.num_labels == 4


def test_auto_map_lists_every_head():
    auto_map = head_config().auto_map
    assert auto_map["AutoModelForSequenceClassification"] == "modeling_elmo_heads.ElmoForSequenceClassification"
    assert auto_map["AutoModelForTokenClassification"] == "modeling_elmo_heads.ElmoForTokenClassification"
    assert auto_map["AutoModelForMultipleChoice"] == "modeling_elmo_multiple_choice.ElmoForMultipleChoice"


def test_two_rows_of_one_auto_class_are_refused_and_a_row_may_have_none():
    """A duplicate Auto class would replace the first head's registration silently: refused at import (the table is
    checked by `auto_classes` when configuration_elmo is imported). A row without an Auto class is in `auto_map`
    under its class's name."""
    from elmo_hf.modeling_elmo.configuration_elmo import AUTO_MAP, ELMO_CLASSES, ElmoClass, auto_classes

    twice = (*ELMO_CLASSES, ElmoClass("AutoModelForTokenClassification", "modeling_elmo_x.ElmoForTagging", "tagging"))
    with pytest.raises(ValueError, match="modeling_elmo_heads.ElmoForTokenClassification and modeling_elmo_x."
                                         "ElmoForTagging both claim AutoModelForTokenClassification"):
        auto_classes(twice)
    alone = ElmoClass(None, "modeling_elmo_x.ElmoForCoreference", "coreference")
    assert alone.auto_map_key == "ElmoForCoreference"
    assert auto_classes((*ELMO_CLASSES, alone)) == auto_classes(ELMO_CLASSES)
    for row in ELMO_CLASSES:
        assert AUTO_MAP[row.auto_map_key] == row.path and head_config().auto_map[row.auto_map_key] == row.path


def test_every_class_says_what_it_reads_learns_from_and_exports():
    """The tools and the common tests handle every class by what it says (no class names): its inputs, its labels,
    how its logits are exported."""
    from elmo_hf import modeling_elmo
    from elmo_hf.modeling_elmo.configuration_elmo import ELMO_CLASSES

    for row in ELMO_CLASSES:
        model_class = getattr(modeling_elmo, row.path.rsplit(".", 1)[1])
        assert model_class.input_layout in ("tokens", "choices", "question-passage", "predicate", "sentences"), \
            row.path
        assert model_class.label_layout in (None, "sentence", "token", "choice", "vocabulary", "mentions"), row.path
        if row.task:
            assert model_class.onnx_logits in (None, "sentence", "token"), row.path
    choices = modeling_elmo.ElmoForMultipleChoice(head_config())
    assert choices.onnx_unexportable_reason() == ("ElmoForMultipleChoice is not exported (sentence and token "
                                                  "classification are)")
    assert ElmoForTokenClassification(head_config(token_classifier_encoder="none")).onnx_unexportable_reason() is None


def test_auto_map_of_an_older_folder_names_the_files_written_now():
    """A config.json saved when the heads lived in modeling_elmo.py names that file; saved again, the folder holds
    modeling_elmo_heads.py, so the entry must follow. Another repository's code (`owner/repo--...`) is kept."""
    old = {"AutoModelForSequenceClassification": "modeling_elmo.ElmoForSequenceClassification",
           "AutoModelForTokenClassification": "owner/repo--modeling_elmo.ElmoForTokenClassification",
           "AutoModelForMaskedLM": "my_heads.MyElmoMasked"}
    auto_map = head_config(auto_map=old).auto_map
    assert auto_map["AutoModelForSequenceClassification"] == "modeling_elmo_heads.ElmoForSequenceClassification"
    assert auto_map["AutoModelForTokenClassification"] == old["AutoModelForTokenClassification"]
    assert auto_map["AutoModelForMaskedLM"] == "my_heads.MyElmoMasked"  # not a head of the table: kept
    assert type(AutoModelForTokenClassification.from_config(head_config())) is ElmoForTokenClassification


@pytest.mark.slow
def test_heads_open_as_remote_code_in_fresh_python(tmp_path):
    ids = with_boundaries(random_char_ids([4, 2]))
    torch.save(ids, tmp_path / "ids.pt")
    expected = {}
    for name, model in (
        ("seq", ElmoForSequenceClassification(head_config(classifier_pooling="lstm", word_embedding_dim=4,
                                                          word_embedding_buckets=64))),
        ("tok", ElmoForTokenClassification(head_config(token_classifier_encoder="lstm"))),
    ):
        model.eval().save_pretrained(tmp_path / name)
        expected[name] = model(ids).logits
    saved = json.loads((tmp_path / "seq" / "config.json").read_text())
    assert {"AutoModel", "AutoModelForSequenceClassification",
            "AutoModelForTokenClassification"} <= set(saved["auto_map"])
    code = f"""
import torch
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification
ids = torch.load({str(tmp_path / "ids.pt")!r})
out = {{}}
for name, auto in (("seq", AutoModelForSequenceClassification), ("tok", AutoModelForTokenClassification)):
    model = auto.from_pretrained({str(tmp_path)!r} + "/" + name, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    out[name] = model(ids).logits
# a folder saved from the token head also opens as a sequence head (the auto_map lists every class)
other = AutoModelForSequenceClassification.from_pretrained({str(tmp_path / "tok")!r}, trust_remote_code=True)
assert type(other).__name__ == "ElmoForSequenceClassification"
torch.save(out, {str(tmp_path / "out.pt")!r})
"""
    run_isolated(code, cwd=tmp_path)
    got = torch.load(tmp_path / "out.pt")
    for name in ("seq", "tok"):
        assert_close(got[name], expected[name], REORDERED, what=f"{name}: remote code in a fresh interpreter")


# --------------------------------------------------------------------------------------------------
# Training with Trainer on generated data
# --------------------------------------------------------------------------------------------------

FILLER = "the a of movie film story plot actor scene time really quite some very just it was".split()
ENTITIES = {"PER": ["John", "Mary Smith", "Peter"], "LOC": ["Paris", "New York", "Berlin"], "ORG": ["Acme Corp", "IBM"]}
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def sentiment_sentences(count: int, seed: int) -> list[tuple[list[str], int]]:
    """Random filler words with one marker word, "great" (label 1) or "awful" (label 0), somewhere."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        label = rng.randint(0, 1)
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 7))]
        words.insert(rng.randrange(len(words) + 1), "great" if label else "awful")
        out.append((words, label))
    return out


def ner_sentences(count: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Filler words and entities from a fixed list, tagged in IOB2."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words, tags = [], []
        for _ in range(rng.randint(2, 6)):
            if rng.random() < 0.35:
                kind = rng.choice(sorted(ENTITIES))
                entity = rng.choice(ENTITIES[kind]).split()
                words += entity
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(entity) - 1)
            else:
                words.append(rng.choice(FILLER))
                tags.append("O")
        out.append((words, tags))
    return out


def random_features_(model) -> None:
    """Give the random biLM's character CNN unit scale, so that its layer 0 tells words apart (a trained biLM
    does; at the pretraining init the CNN outputs are tiny and nearly the same for every word)."""
    encoder = model.elmo.char_encoder
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        encoder.char_embedding.weight.uniform_(-1.0, 1.0, generator=generator)
        encoder.char_embedding.weight[0] = 0.0
        for conv in encoder.convolutions:
            conv.weight.normal_(std=1.0 / math.sqrt(conv.in_channels * conv.kernel_size[0]), generator=generator)
        if encoder.projection is not None:
            width = encoder.projection.in_features
            encoder.projection.weight.normal_(std=1.0 / math.sqrt(width), generator=generator)


def train_with_trainer(model, train_rows, collator, tmp_path, epochs=20, learning_rate=2e-2):
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"), use_cpu=True, report_to="none", save_strategy="no",
        logging_strategy="no", disable_tqdm=True, num_train_epochs=epochs, learning_rate=learning_rate,
        per_device_train_batch_size=16, per_device_eval_batch_size=64, seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=train_rows, data_collator=collator)
    trainer.train()
    return trainer


def encode_rows(tokenizer, sentences, labels_for) -> list[dict]:
    encoded = tokenizer([w for w, _ in sentences], is_split_into_words=True)
    return [
        {"input_ids": encoded["input_ids"][i], "attention_mask": encoded["attention_mask"][i],
         "labels": labels_for(encoded, i, sentences[i][1])}
        for i in range(len(sentences))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "max", "lstm", "attention"])
def test_sequence_classifier_learns_generated_task_and_frozen_bilm_stays_bit_identical(tmp_path, pooling):
    tokenizer = ElmoTokenizer()
    sentences = sentiment_sentences(300, seed=1)
    rows = encode_rows(tokenizer, sentences, lambda enc, i, label: label)
    torch.manual_seed(0)
    model = ElmoForSequenceClassification(
        head_config(num_labels=2, classifier_pooling=pooling, representation_dropout=0.1, id2label={0: "neg", 1: "pos"})
    )
    random_features_(model)
    before = {name: p.detach().clone() for name, p in model.elmo.named_parameters()}
    trainer = train_with_trainer(model, rows[:220], ElmoDataCollatorForSequenceClassification(tokenizer), tmp_path)
    prediction = trainer.predict(rows[220:])  # 80 held-back sentences
    accuracy = float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())
    assert accuracy >= 0.7, f"{pooling}: held-out accuracy {accuracy:.2f} (chance 0.5)"
    for name, p in model.elmo.named_parameters():
        assert torch.equal(p, before[name]), f"frozen biLM parameter {name} changed"
    assert not torch.equal(model.scalar_mixes[0].scalar_parameters.detach(), torch.zeros(3))  # the mix did train


@pytest.mark.slow
@pytest.mark.parametrize("encoder, word_dim", [("lstm", 0), ("none", 16)])
def test_token_classifier_learns_generated_ner(tmp_path, encoder, word_dim):
    tokenizer = ElmoTokenizer()
    tag2id = {tag: i for i, tag in enumerate(TAGS)}
    sentences = ner_sentences(300, seed=2)

    def align(enc, i, tags):  # word_ids(): None at <S> and </S> -> -100
        return [-100 if w is None else tag2id[tags[w]] for w in enc.word_ids(i)]

    rows = encode_rows(tokenizer, sentences, align)
    assert rows[0]["labels"][0] == -100 and rows[0]["labels"][-1] == -100
    torch.manual_seed(0)
    model = ElmoForTokenClassification(
        head_config(num_labels=len(TAGS), id2label=dict(enumerate(TAGS)), token_classifier_encoder=encoder,
                    word_embedding_dim=word_dim, word_embedding_buckets=512, representation_dropout=0.1)
    )
    random_features_(model)
    before = {name: p.detach().clone() for name, p in model.elmo.named_parameters()}
    trainer = train_with_trainer(model, rows[:220], ElmoDataCollatorForTokenClassification(tokenizer), tmp_path)
    prediction = trainer.predict(rows[220:])
    keep = prediction.label_ids != -100
    predicted, gold = prediction.predictions.argmax(-1)[keep], prediction.label_ids[keep]
    entity_tokens = gold != tag2id["O"]
    accuracy_on_entities = float((predicted[entity_tokens] == gold[entity_tokens]).mean())
    assert accuracy_on_entities >= 0.7, f"entity-token accuracy {accuracy_on_entities:.2f}"
    for name, p in model.elmo.named_parameters():
        assert torch.equal(p, before[name]), f"frozen biLM parameter {name} changed"


def test_fine_tuning_changes_the_bilm(tmp_path):
    tokenizer = ElmoTokenizer()
    rows = encode_rows(tokenizer, sentiment_sentences(32, seed=3), lambda enc, i, label: label)
    model = ElmoForSequenceClassification(head_config(num_labels=2, freeze_bilm=False))
    before = {name: p.detach().clone() for name, p in model.elmo.named_parameters()}
    train_with_trainer(model, rows, ElmoDataCollatorForSequenceClassification(tokenizer), tmp_path, epochs=1)
    changed = [name for name, p in model.elmo.named_parameters() if not torch.equal(p, before[name])]
    assert "char_encoder.char_embedding.weight" in changed and any(n.startswith("bilm.layers") for n in changed)


def test_a_checkpoint_of_older_weight_names_loads_its_scale_and_saves_todays_names(tmp_path):
    """Folders saved before the scalar mix's scale was named `scale` hold `scalar_mixes.0.gamma`: they load with their
    trained scale (transformers' `key_mapping`), and save it under today's name."""
    from safetensors.torch import load_file, save_file

    model = ElmoForSequenceClassification(tiny_config(num_labels=2))
    with torch.no_grad():
        model.scalar_mixes[0].scale.fill_(1.7)
    model.save_pretrained(tmp_path / "old")
    weights = load_file(tmp_path / "old" / "model.safetensors")
    weights["scalar_mixes.0.gamma"] = weights.pop("scalar_mixes.0.scale")
    save_file(weights, tmp_path / "old" / "model.safetensors", metadata={"format": "pt"})
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "old")
    assert float(loaded.scalar_mixes[0].gamma) == pytest.approx(1.7)
    loaded.save_pretrained(tmp_path / "new")
    names = set(load_file(tmp_path / "new" / "model.safetensors"))
    assert "scalar_mixes.0.scale" in names and not any("gamma" in name for name in names)
