"""Sentence pairs (GLUE's pair tasks, SNLI, zero-shot classification): the tokenizer's pairs, the sequence head that
reads each sentence of a pair on its own, and the transformers pipelines on top of them."""

from __future__ import annotations

import pytest
import torch

from tokenization import ElmoTokenizer

BOS_ROW = [259, 257, 260] + [261] * 47
EOS_ROW = [259, 258, 260] + [261] * 47


@pytest.fixture(scope="module")
def tok() -> ElmoTokenizer:
    return ElmoTokenizer()


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
