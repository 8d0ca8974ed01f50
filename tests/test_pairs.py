"""Sentence pairs (GLUE's pair tasks, SNLI, zero-shot classification): the tokenizer's pairs, the sequence head that
reads each sentence of a pair on its own, and the transformers pipelines on top of them."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from conftest import run_isolated, tiny_config
from tolerances import REORDERED, STATISTIC, assert_close
from transformers import AutoModelForSequenceClassification

from elmo_hf.modeling_elmo import ElmoForSequenceClassification
from elmo_hf.tokenization import ElmoTokenizer

BOS_ROW = [259, 257, 260] + [261] * 47
EOS_ROW = [259, 258, 260] + [261] * 47


PREMISES = ["A man sleeps on a bench in the park.", "Two dogs run.", "It rains"]
HYPOTHESES = ["A person rests.", "Some animals are running fast outside today.", "The weather is wet and grey."]


@pytest.fixture(scope="module")
def tok() -> ElmoTokenizer:
    return ElmoTokenizer()


pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")


def pair_model(**overrides) -> ElmoForSequenceClassification:
    """A tiny pair classifier in eval mode, its mix and head weights moved off their initial values."""
    config = tiny_config(**{"num_labels": 3, "pair_combination": "concat_diff_product", **overrides})
    model = ElmoForSequenceClassification(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if not name.startswith("elmo."):
                parameter.add_(0.1 * torch.randn_like(parameter))
    return model


def pooled_alone(model, tokenizer, text: str) -> torch.Tensor:
    """The head's parts run by hand on one sentence alone: its pooled vector (1, D)."""
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    x, _, word_mask, _ = model._task_inputs(ids, None)
    return model.pool(x, word_mask)


# --------------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------------


def test_a_pair_is_both_sentences_each_framed_with_token_types_and_alignment(tok):
    pair = tok("A man sleeps.", "A person rests.")
    first, second = tok("A man sleeps."), tok("A person rests.")
    assert pair["input_ids"] == first["input_ids"] + second["input_ids"]
    assert pair["input_ids"][5] == EOS_ROW and pair["input_ids"][6] == BOS_ROW
    assert pair["token_type_ids"] == [0] * 6 + [1] * 6
    assert pair["attention_mask"] == [1] * 12
    assert pair.tokens() == ["<S>", "A", "man", "sleeps", ".", "</S>", "<S>", "A", "person", "rests", ".", "</S>"]
    assert pair.word_ids() == [None, 0, 1, 2, 3, None, None, 0, 1, 2, 3, None]
    assert pair.sequence_ids() == [None, 0, 0, 0, 0, None, None, 1, 1, 1, 1, None]
    assert tok.encode("A man sleeps.", "A person rests.") == pair["input_ids"]
    without = tok("a b", "c", add_special_tokens=False, return_special_tokens_mask=True)
    assert without.tokens() == ["a", "b", "c"] and without["token_type_ids"] == [0, 0, 1]
    assert without["special_tokens_mask"] == [0, 0, 0]


def test_batches_of_pairs_in_every_form_pad_as_single_sentences(tok):
    firsts, seconds = ["a b c", "d"], ["x", "y z w v"]
    batch = tok(firsts, seconds, padding=True, return_tensors="pt", return_special_tokens_mask=True)
    assert batch["input_ids"].shape == (2, 9, 50)
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1] * 8 + [0], [1] * 9]
    assert batch["special_tokens_mask"].tolist() == [[1, 0, 0, 0, 1, 1, 0, 1, 1], [1, 0, 1, 1, 0, 0, 0, 0, 1]]
    assert batch.word_ids(1) == [None, 0, None, None, 0, 1, 2, 3, None]
    assert batch.sequence_ids(0) == [None, 0, 0, 0, None, None, 1, None, None]
    assert batch["input_ids"][0, 8].abs().sum() == 0  # padding is a row of zeros
    for i in range(2):  # each row holds the pair as encoded alone
        alone = tok(firsts[i], seconds[i])["input_ids"]
        assert batch["input_ids"][i, : len(alone)].tolist() == alone
    listed = tok([[a, b] for a, b in zip(firsts, seconds)], padding=True, return_tensors="pt")  # the zero-shot form
    words = tok([f.split() for f in firsts], [s.split() for s in seconds], is_split_into_words=True, padding=True,
                return_tensors="pt")
    for other in (listed, words):
        assert torch.equal(other["input_ids"], batch["input_ids"])
        assert torch.equal(other["token_type_ids"], batch["token_type_ids"])
    one = tok(["a", "b"], ["c"], is_split_into_words=True)
    assert one.tokens() == ["<S>", "a", "b", "</S>", "<S>", "c", "</S>"] and one["token_type_ids"] == [0] * 4 + [1] * 3
    padded = tok.pad([tok("a", "b c"), tok("d e f", "g")], return_tensors="pt")
    assert padded["token_type_ids"].tolist() == [[0, 0, 0, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 1]]


def test_single_sentences_get_token_types_only_when_asked(tok):
    assert "token_type_ids" in tok.model_input_names  # pipelines pass exactly these keys
    assert "token_type_ids" not in tok("a b")
    assert tok("a b", return_token_type_ids=True)["token_type_ids"] == [0, 0, 0, 0]
    assert "token_type_ids" not in tok("a", "b", return_token_type_ids=False)
    assert tok("a b").sequence_ids() == [None, 0, 0, None]


# first sentence of 5 words, second of 2: 11 tokens with the four <S>/</S>
TRUNCATIONS = [
    ("longest_first", 8, ["a", "b"], ["x", "y"]),  # 3 words from the longer until both are 2 long
    (True, 9, ["a", "b", "c"], ["x", "y"]),
    ("longest_first", 7, ["a", "b"], ["x"]),  # as long: then the second loses first
    ("only_first", 8, ["a", "b"], ["x", "y"]),
    ("only_second", 10, ["a", "b", "c", "d", "e"], ["x"]),
    ("do_not_truncate", 6, ["a", "b", "c", "d", "e"], ["x", "y"]),
    (False, 6, ["a", "b", "c", "d", "e"], ["x", "y"]),
]


@pytest.mark.parametrize("truncation, max_length, first, second", TRUNCATIONS)
def test_pair_truncation_strategies(tok, truncation, max_length, first, second):
    encoded = tok("a b c d e", "x y", truncation=truncation, max_length=max_length)
    assert encoded.tokens() == ["<S>", *first, "</S>", "<S>", *second, "</S>"]
    assert encoded["token_type_ids"] == [0] * (len(first) + 2) + [1] * (len(second) + 2)
    assert encoded.word_ids() == [None, *range(len(first)), None, None, *range(len(second)), None]


def test_pair_truncation_keeps_the_side_it_is_told_and_says_when_it_cannot(tok):
    tok_left = ElmoTokenizer(truncation_side="left")
    assert tok_left("a b c d e", "x y", truncation=True, max_length=8).tokens() == [
        "<S>", "d", "e", "</S>", "<S>", "x", "y", "</S>"]
    assert tok_left("a b c d e", "x y", truncation=True, max_length=8).word_ids()[1:3] == [3, 4]
    with pytest.raises(ValueError, match="too short for truncation='only_first'.*second sentence of pair 0 alone"):
        tok("a", "x y z w", truncation="only_first", max_length=6)
    with pytest.raises(ValueError, match="too short for truncation='only_second'"):
        tok("a b c d", "x", truncation="only_second", max_length=6)
    with pytest.raises(ValueError, match="max_length >= 4"):
        tok("a", "b", truncation=True, max_length=3)
    with pytest.raises(ValueError, match="needs a pair"):
        tok("a b c", truncation="only_second", max_length=3)
    batch = tok(["a b c d e", "a b"], ["x y", "w v u t s"], truncation=True, max_length=8, padding="max_length")
    assert [batch.tokens(i)[:8] for i in range(2)] == [
        ["<S>", "a", "b", "</S>", "<S>", "x", "y", "</S>"], ["<S>", "a", "b", "</S>", "<S>", "w", "v", "</S>"]]


@pytest.mark.parametrize("side", ["right", "left"])
def test_pair_truncation_keeps_what_transformers_own_rule_keeps_and_says_nothing(side):
    """Every length of both sentences and every max_length: the words kept are those transformers'
    `truncate_sequences` keeps of the word lists (a sentence too short for only_first/only_second is refused instead),
    and transformers' notice that slow tokenizers return no overflowing tokens is not logged for every pair."""
    import logging

    tok = ElmoTokenizer(truncation_side=side)
    cases = []  # (first, second, max_length, strategy, the words kept or None where refused)
    for a, b, max_length in itertools.product(range(5), range(5), range(4, 13)):
        first, second = [f"a{i}" for i in range(a)], [f"b{i}" for i in range(b)]
        over = max(0, a + b + 4 - max_length)
        for strategy in ("longest_first", "only_first", "only_second"):
            cut = {"only_first": a, "only_second": b}.get(strategy)
            expected = (tok.truncate_sequences(first, second, num_tokens_to_remove=over,
                                               truncation_strategy=strategy)[:2]
                        if over else (first, second))
            cases.append((first, second, max_length, strategy, None if cut is not None and cut < over else expected))
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("transformers").addHandler(handler)
    try:
        for first, second, max_length, strategy, expected in cases:
            arguments = {"is_split_into_words": True, "truncation": strategy, "max_length": max_length}
            if expected is None:
                with pytest.raises(ValueError, match="too short"):
                    tok([first], [second], **arguments)
            else:
                kept = tok([first], [second], **arguments).tokens(0)
                assert kept == ["<S>", *expected[0], "</S>", "<S>", *(expected[1] or []), "</S>"]
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    assert [r.getMessage() for r in records] == []


def test_pairs_of_mismatched_forms_are_refused_in_one_line(tok):
    with pytest.raises(ValueError, match="text is a batch of 2 and text_pair a batch of 1"):
        tok(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="text is one sentence and text_pair a batch of 1"):
        tok("a", ["c"])
    with pytest.raises(ValueError, match="text_target"):
        tok("a", text_target="b")


def test_special_token_helpers_of_pairs(tok):
    a, b = tok.convert_tokens_to_char_ids(["a"]), tok.convert_tokens_to_char_ids(["b", "c"])
    assert tok.num_special_tokens_to_add(pair=True) == 4 and tok.num_special_tokens_to_add() == 2
    built = tok.build_inputs_with_special_tokens(a, b)
    assert built == tok("a", "b c")["input_ids"]
    assert tok.create_token_type_ids_from_sequences(a, b) == [0, 0, 0, 1, 1, 1, 1]
    assert tok.get_special_tokens_mask(a, b) == [1, 0, 1, 1, 0, 0, 1]
    assert tok.get_special_tokens_mask(built, already_has_special_tokens=True) == [1, 0, 1, 1, 0, 0, 1]


def test_pairs_give_vocabulary_ids_of_both_sentences():
    tokenizer = ElmoTokenizer(word_vocab=["<S>", "</S>", "<UNK>", "a", "b"])
    encoded = tokenizer("a c", "b", return_vocab_ids=True)
    assert encoded["vocab_ids"] == [0, 3, 2, 1, 0, 4, 1]


# --------------------------------------------------------------------------------------------------
# The pair head of ElmoForSequenceClassification
# --------------------------------------------------------------------------------------------------


@pytest.mark.numerics
@pytest.mark.parametrize("overrides", [
    dict(classifier_pooling="mean", scalar_mix_layer_norm=True, word_embedding_dim=4, word_embedding_buckets=50),
    dict(classifier_pooling="max"),
    dict(classifier_pooling="lstm"),
    dict(classifier_pooling="attention", pair_combination="concat"),
])
def test_pair_logits_are_the_head_run_on_each_sentence_alone(tok, overrides):
    model = pair_model(**overrides)
    batch = tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    logits = model(**batch).logits
    assert logits.shape == (3, 3)
    for row, (premise, hypothesis) in enumerate(zip(PREMISES, HYPOTHESES)):
        u, v = pooled_alone(model, tok, premise), pooled_alone(model, tok, hypothesis)
        combined = torch.cat([u, v] if model.config.pair_combination == "concat" else [u, v, (u - v).abs(), u * v], -1)
        assert_close(logits[row : row + 1], model.classifier(combined), REORDERED, what=f"pair {row}")


@pytest.mark.numerics
def test_a_pair_does_not_depend_on_the_other_rows_or_on_padding(tok):
    model = pair_model(classifier_pooling="lstm", scalar_mix_layer_norm=True)
    batch = model(**tok(PREMISES, HYPOTHESES, padding="max_length", max_length=40, return_tensors="pt")).logits
    for row in range(3):
        alone = model(**tok(PREMISES[row], HYPOTHESES[row], return_tensors="pt")).logits
        assert_close(alone, batch[row : row + 1], REORDERED, what=f"pair {row} alone against in a padded batch")
    # a partner of another length, in the row beside it, moves nothing either
    other = model(**tok([PREMISES[0], "x"], [HYPOTHESES[0], "y y y y y y y y y y y y"], padding=True,
                        return_tensors="pt")).logits
    assert_close(other[:1], batch[:1], REORDERED, what="pair 0 beside another pair")


@pytest.mark.numerics
@pytest.mark.parametrize("combination", ["concat_diff_product", "concat"])
def test_swapping_partners_swaps_u_and_v(tok, combination):
    """[u; v; |u - v|; u * v] of (b, a) is [v; u; ...]: the classifier with its u and v blocks swapped gives, on
    (a, b), what it gives on (b, a)."""
    model = pair_model(pair_combination=combination)
    forward = model(**tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")).logits
    swapped_text = model(**tok(HYPOTHESES, PREMISES, padding=True, return_tensors="pt")).logits
    assert (forward - swapped_text).abs().max() > 1e-3  # the order of a pair matters to the classifier
    width = model.classifier.in_features // (4 if combination == "concat_diff_product" else 2)
    with torch.no_grad():
        weight = model.classifier.weight
        weight[:, : 2 * width] = torch.cat([weight[:, width : 2 * width], weight[:, :width]], dim=1)
    swapped_weights = model(**tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")).logits
    assert_close(swapped_weights, swapped_text, REORDERED, what="swapped partners")


@pytest.mark.numerics
def test_hidden_states_of_a_pair_are_each_sentence_read_alone_at_its_positions(tok):
    model = pair_model()
    batch = tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    hidden = model(**batch, output_hidden_states=True).hidden_states
    assert len(hidden) == 3 and hidden[0].shape == (*batch["attention_mask"].shape, 32)
    for row in range(3):
        types = batch["token_type_ids"][row][batch["attention_mask"][row].bool()]
        for side, text in enumerate((PREMISES[row], HYPOTHESES[row])):
            alone = model.elmo(**tok(text, return_tensors="pt"), output_hidden_states=True).hidden_states
            positions = (types == side).nonzero().flatten()
            for k in range(3):
                assert_close(hidden[k][row, positions], alone[k][0], REORDERED, what=f"row {row} side {side} layer {k}")
    padding = ~batch["attention_mask"].bool()
    assert all((layer[padding] == 0).all() for layer in hidden)


def test_single_sentences_are_untouched_by_token_types_of_zeros(tok):
    model = ElmoForSequenceClassification(tiny_config(num_labels=2)).eval()
    assert model.classifier.in_features == 32  # no pair combination: the single-sentence head of before
    batch = tok(PREMISES, padding=True, return_tensors="pt", return_token_type_ids=True)
    assert torch.equal(model(**batch).logits, model(batch["input_ids"], batch["attention_mask"]).logits)


def test_a_head_without_pair_combination_reads_a_pair_as_one_sequence(tok):
    """transformers' GLUE recipe builds the head without pair_combination: each row, both sentences with their <S>
    and </S>, is read by the biLM as one sequence and its words pooled; the biLM carries each sentence into its
    reading of the other. Checked here: the token types change nothing, a pair's logits do not depend on its batch
    and differ from those of its premise alone (the hypothesis alone is not checked), and the loss falls on a batch."""
    model = ElmoForSequenceClassification(tiny_config(num_labels=2, classifier_pooling="max")).eval()
    with torch.no_grad():
        model.classifier.weight.normal_()
    pairs = tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    read = model(**pairs).logits
    # the same rows with their token types dropped: one sequence either way
    assert torch.equal(read, model(pairs["input_ids"], pairs["attention_mask"]).logits)
    for i, (premise, hypothesis) in enumerate(zip(PREMISES, HYPOTHESES)):
        alone = model(**tok(premise, hypothesis, return_tensors="pt")).logits[0]
        assert_close(read[i], alone, REORDERED)  # a pair's logits do not depend on its batch
        assert not torch.allclose(alone, model(**tok(premise, return_tensors="pt")).logits[0])
    # and it trains: the loss goes down on one batch
    model.train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    labels = torch.tensor([0, 1, 0])
    losses = []
    for _ in range(5):
        loss = model(**pairs, labels=labels).loss
        losses.append(float(loss))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < losses[0]


def test_pairs_and_heads_that_do_not_fit_are_refused_in_one_line(tok):
    pairs = pair_model()
    with pytest.raises(ValueError, match="classifies sentence pairs"):
        pairs(**tok("a b", return_tensors="pt"))
    batch = tok(["a", "b"], ["c", "d"], padding=True, return_tensors="pt")
    batch["token_type_ids"][1] = 0
    with pytest.raises(ValueError, match="row 1 of a batch of sentence pairs has no second sentence"):
        pairs(**batch)
    with pytest.raises(ValueError, match="pair_combination must be one of"):
        tiny_config(pair_combination="cross_attention")


@pytest.mark.numerics
def test_pair_regression_is_mse_like_bert(tok):
    model = pair_model(num_labels=1, problem_type="regression")
    batch = tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    scores = torch.tensor([4.5, 1.0, 2.5])
    out = model(**batch, labels=scores)
    assert out.logits.shape == (3, 1)
    expected = torch.nn.functional.mse_loss(out.logits.squeeze(-1), scores)
    assert_close(out.loss, expected, REORDERED, what="regression loss")
    out.loss.backward()
    assert model.classifier.weight.grad is not None and model.elmo.char_encoder.char_embedding.weight.grad is None


def test_a_pair_head_saves_and_loads_exactly(tmp_path, tok):
    model = pair_model(classifier_pooling="attention")
    batch = tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")
    expected = model(**batch).logits
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["pair_combination"] == "concat_diff_product"
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is ElmoForSequenceClassification and loaded.config.pair_combination == "concat_diff_product"
    assert torch.equal(loaded(**batch).logits, expected)


@pytest.mark.slow
def test_a_pair_head_opens_as_remote_code_in_fresh_python(tmp_path, tok):
    model = pair_model(classifier_pooling="lstm")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    expected = model(**tok(PREMISES, HYPOTHESES, padding=True, return_tensors="pt")).logits
    code = f"""
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
folder = {str(tmp_path)!r}
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
batch = tokenizer({PREMISES!r}, {HYPOTHESES!r}, padding=True, return_tensors="pt")
assert batch["token_type_ids"].sum() > 0
torch.save(model(**batch).logits, folder + "/logits.pt")
"""
    run_isolated(code, cwd=tmp_path)
    assert_close(torch.load(tmp_path / "logits.pt"), expected, REORDERED, what="remote code in a fresh interpreter")


# --------------------------------------------------------------------------------------------------
# Pipelines
# --------------------------------------------------------------------------------------------------

NLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


@pytest.fixture(scope="module")
def nli_folder(tmp_path_factory):
    """A tiny NLI model (labels entailment/neutral/contradiction) saved with its tokenizer."""
    folder = tmp_path_factory.mktemp("nli")
    torch.manual_seed(0)
    pair_model(id2label=NLI_LABELS, label2id={v: k for k, v in NLI_LABELS.items()}).save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def test_text_classification_pipeline_takes_a_pair(nli_folder, tok):
    from transformers import pipeline

    classifier = pipeline("text-classification", model=str(nli_folder), top_k=None)
    got = classifier({"text": PREMISES[0], "text_pair": HYPOTHESES[0]})
    model = AutoModelForSequenceClassification.from_pretrained(nli_folder).eval()
    with torch.no_grad():
        probabilities = torch.softmax(model(**tok(PREMISES[0], HYPOTHESES[0], return_tensors="pt")).logits[0], -1)
    assert {item["label"] for item in got} == set(NLI_LABELS.values())
    for item in got:
        label_id = model.config.label2id[item["label"]]
        assert_close(item["score"], probabilities[label_id], STATISTIC, what=item["label"])


@pytest.mark.parametrize("multi_label", [False, True])
def test_zero_shot_pipeline_scores_are_the_models_entailment_logits(nli_folder, tok, multi_label):
    from transformers import pipeline

    classifier = pipeline("zero-shot-classification", model=str(nli_folder))
    assert classifier.entailment_id == 0  # found by the name of the label
    labels = ["sleep", "sports", "weather"]
    got = classifier(PREMISES[0], candidate_labels=labels, multi_label=multi_label)
    model = AutoModelForSequenceClassification.from_pretrained(nli_folder).eval()
    hypotheses = [f"This example is {label}." for label in labels]
    with torch.no_grad():  # each (premise, hypothesis) pair alone, as the pipeline runs them
        logits = torch.cat([model(**tok(PREMISES[0], h, return_tensors="pt")).logits for h in hypotheses])
    entailment, contradiction = logits[:, 0], logits[:, 2]
    if multi_label:  # entailment against contradiction, for each label on its own
        expected = torch.softmax(torch.stack([contradiction, entailment], -1), -1)[:, 1]
    else:  # the entailment logits, softmaxed over the candidate labels
        expected = torch.softmax(entailment, -1)
    assert got["sequence"] == PREMISES[0] and sorted(got["labels"]) == labels
    scores = torch.tensor([got["scores"][got["labels"].index(label)] for label in labels])
    assert_close(scores, expected, STATISTIC, what=f"multi_label={multi_label}")


# --------------------------------------------------------------------------------------------------
# Fine-tuning on pairs: elmo-finetune-classification
# --------------------------------------------------------------------------------------------------


def test_the_reader_finds_the_columns_of_pairs(tmp_path):
    from elmo_hf.train.tasks.common_data import read_classification_file, read_texts_file

    glue = tmp_path / "rte.tsv"
    glue.write_text("index\tsentence1\tsentence2\tlabel\n0\tA man sleeps .\tA person rests .\tentailment\n")
    assert read_classification_file(glue) == [
        {"text": "A man sleeps .", "text_pair": "A person rests .", "label": "entailment"}]
    qnli = tmp_path / "qnli.jsonl"
    qnli.write_text('{"question": "Who sleeps?", "sentence": "A man sleeps.", "label": "entailment"}\n')
    assert read_classification_file(qnli)[0]["text_pair"] == "A man sleeps."
    named = tmp_path / "named.csv"
    named.write_text("a,b,y\nfirst,second,1\n")
    assert read_classification_file(named, "a", "y", pair_column="b") == [
        {"text": "first", "text_pair": "second", "label": "1"}]
    with pytest.raises(ValueError, match="no text_pair column 'c'"):
        read_classification_file(named, "a", "y", pair_column="c")
    single = tmp_path / "sst.tsv"
    single.write_text("label\tsentence\n1\tgood .\n")
    assert read_classification_file(single) == [{"text": "good .", "label": "1"}]
    assert read_texts_file(glue) == [("A man sleeps .", "A person rests .")]


def test_scores_are_read_as_a_regression_and_integer_labels_as_classes():
    from elmo_hf.train.tasks.sequence_classification import is_regression

    assert is_regression(["3.8", "0.0", "5"], None)
    assert not is_regression(["0", "1", "1"], None) and not is_regression(["pos", "1.5"], None)
    assert is_regression(["0", "1"], "regression") and not is_regression(["0.5"], "single_label_classification")
    with pytest.raises(ValueError, match="example 2: --problem_type regression needs a number, got 'pos'"):
        is_regression(["1", "pos"], "regression")


@pytest.mark.parametrize("scipy", [True, False])
def test_pearson_and_spearman(monkeypatch, scipy):
    import sys

    import numpy as np

    from elmo_hf.train.tasks.common_data import pearson, ranks, spearman

    if not scipy:
        monkeypatch.setitem(sys.modules, "scipy.stats", None)  # the numpy ranks, as without scipy
    x, y = [1.0, 2.0, 2.0, 5.0, 3.0], [0.5, 1.0, 3.0, 4.0, 2.0]
    assert ranks(x).tolist() == [1.0, 2.5, 2.5, 5.0, 4.0]
    assert_close(pearson(x, y), np.corrcoef(x, y)[0, 1], STATISTIC, what="pearson")
    assert_close(spearman(x, y), np.corrcoef(ranks(x), ranks(y))[0, 1], STATISTIC, what="spearman")
    assert_close(spearman(x, [v ** 3 for v in x]), 1.0, STATISTIC, what="a monotone function")
    assert np.isnan(spearman([1.0, 1.0], [1.0, 2.0])) and np.isnan(pearson([1.0, 1.0], [1.0, 2.0]))


NLI_ROWS = [("A man sleeps on a bench.", "A man rests.", "entailment"),
            ("A man sleeps.", "A man runs.", "contradiction"),
            ("Two dogs play.", "Animals play.", "entailment"), ("Two dogs play.", "Two cats sleep.", "contradiction"),
            ("It rains.", "The street is wet.", "neutral"), ("It rains.", "It is sunny.", "contradiction"),
            ("A girl sings.", "Someone sings.", "entailment"), ("A girl sings.", "A girl is quiet.", "contradiction"),
            ("The cat eats.", "The cat is hungry.", "neutral"), ("The cat eats.", "An animal eats.", "entailment"),
            ("He reads.", "He reads a novel.", "neutral"), ("He reads.", "He sleeps.", "contradiction")]


def write_pair_files(folder, regression: bool):
    """A 12-line training file of pairs (a GLUE TSV of NLI labels, or JSON lines of STS-B-like scores) and a test
    file of the same pairs without labels."""
    if regression:
        lines = [json.dumps({"text": a, "text_pair": b, "score": {"entailment": 4.5, "neutral": 2.5}.get(label, 0.4)})
                 for a, b, label in NLI_ROWS]
        (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
        train = folder / "train.jsonl"
    else:
        rows = [f"{i}\t{a}\t{b}\t{label}" for i, (a, b, label) in enumerate(NLI_ROWS)]
        (folder / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n")
        train = folder / "train.tsv"
    test = [f"{a}\t{b}" for a, b, _ in NLI_ROWS[:5]]
    (folder / "test.tsv").write_text("premise\thypothesis\n" + "\n".join(test) + "\n")
    return train, folder / "test.tsv"


@pytest.mark.slow
@pytest.mark.parametrize("regression", [False, True])
def test_finetune_classification_trains_a_pair_head(tmp_path, tiny_model_dir, regression):
    from conftest import REPO, run_cli

    train, test = write_pair_files(tmp_path, regression)
    out = tmp_path / "out"
    args = ["--model_name_or_path", tiny_model_dir, "--use_cpu", "--report_to", "none", "--save_strategy", "no",
            "--disable_tqdm", "true", "--num_train_epochs", "2", "--per_device_train_batch_size", "4", "--train_file",
            train, "--validation_file", train, "--do_predict", "--test_file", test, "--output_dir", out]
    result = run_cli("elmo-finetune-classification", args, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Traceback" not in result.stderr and "WARNING" not in result.stderr, result.stderr[-3000:]
    saved = json.loads((out / "config.json").read_text())
    assert saved["pair_combination"] == "concat_diff_product"
    metrics = json.loads((out / "eval_results.json").read_text())
    predictions = (out / "predictions.txt").read_text().splitlines()
    assert len(predictions) == 5
    if regression:
        assert saved["problem_type"] == "regression" and saved["id2label"] == {"0": "score"}
        assert {"eval_pearson", "eval_spearmanr", "eval_mse"} <= set(metrics), metrics
        assert all(-1.0 <= metrics[k] <= 1.0 for k in ("eval_pearson", "eval_spearmanr")), metrics
        [float(line) for line in predictions]  # scores, one a pair
    else:
        assert set(saved["label2id"]) == {"contradiction", "entailment", "neutral"}
        assert 0.0 <= metrics["eval_accuracy"] <= 1.0
        assert set(predictions) <= {"contradiction", "entailment", "neutral"}
    # the folder classifies pairs as trained, through the pipeline too
    from transformers import pipeline

    got = pipeline("text-classification", model=str(out))({"text": NLI_ROWS[0][0], "text_pair": NLI_ROWS[0][1]})
    assert (got[0] if isinstance(got, list) else got)["label"] in set(saved["label2id"])
