"""`return_overflowing_tokens` with `stride`: ElmoTokenizer's windows are those of transformers' fast tokenizers.

The reference is a fast tokenizer built here from a word-level vocabulary (the `tokenizers` library, nothing
downloaded): one token per word and `<S> ... </S>` around each sentence, as ELMo's tokenizer has. Both get the same
texts, strategies, lengths, strides and truncation sides; every row must hold the same tokens, word ids, sequence ids,
character offsets and sample, in the same order.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from elmo_hf.tokenization import ElmoTokenizer

WORDS = [f"w{i}" for i in range(12)]
FIRSTS = [" ".join(WORDS[:n]) for n in (1, 3, 5)]
SECONDS = [" ".join(WORDS[k:k + n]) for k, n in ((2, 2), (0, 7), (1, 11))]


def fast_reference(side: str) -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<unk>": 1, "<S>": 2, "</S>": 3, **{word: i + 4 for i, word in enumerate(WORDS)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(
        single="<S> $A </S>", pair="<S> $A:0 </S>:0 <S>:1 $B:1 </S>:1", special_tokens=[("<S>", 2), ("</S>", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", truncation_side=side)


def rows(encoding) -> list[tuple]:
    count = len(encoding["input_ids"])
    return [(encoding.tokens(i), encoding.word_ids(i), encoding.sequence_ids(i),
             [tuple(span) for span in encoding["offset_mapping"][i]], encoding["overflow_to_sample_mapping"][i])
            for i in range(count)]


def either(call):
    """The call's rows, or "refused" when it raises (the fast tokenizer panics in Rust on a stride too long)."""
    try:
        return rows(call())
    except BaseException as error:  # noqa: BLE001 (pyo3's PanicException derives from BaseException)
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return "refused"


@pytest.mark.parametrize("side", ["right", "left"])
def test_windows_are_transformers_fast_tokenizers_windows(side):
    ours, fast = ElmoTokenizer(word_split="whitespace", truncation_side=side), fast_reference(side)
    compared = 0
    for strategy, max_length, stride in itertools.product(["only_second", "only_first", "longest_first"],
                                                          range(6, 15, 2), [0, 1, 2]):
        arguments = dict(truncation=strategy, max_length=max_length, stride=stride, return_overflowing_tokens=True,
                         return_offsets_mapping=True)
        for pairs in ([FIRSTS, SECONDS], [FIRSTS[::-1], SECONDS]):
            expected = either(lambda: fast(*pairs, **arguments))  # noqa: B023
            got = either(lambda: ours(*pairs, **arguments))  # noqa: B023
            assert got == expected, (strategy, max_length, stride, pairs)
            compared += expected != "refused"
        if strategy != "only_second":
            assert either(lambda: ours(SECONDS, **arguments)) == either(lambda: fast(SECONDS, **arguments))  # noqa: B023
    assert compared > 30  # most of the grid gives windows, not refusals


def test_windows_with_tensors_padding_and_one_text():
    tok = ElmoTokenizer()
    text = "The bank of England rose sharply in the spring of that year ."
    one = tok(text, truncation=True, max_length=6, stride=1, return_overflowing_tokens=True, padding="max_length",
              return_offsets_mapping=True, return_tensors="pt")
    assert one["input_ids"].shape == (4, 6, 50) and one["overflow_to_sample_mapping"].tolist() == [0] * 4
    # windows of 4 words sharing 1, never cutting a word; offsets point into the text
    assert [one.tokens(i)[1:5] for i in range(4)] == [["The", "bank", "of", "England"],
                                                     ["England", "rose", "sharply", "in"],
                                                     ["in", "the", "spring", "of"],
                                                     ["of", "that", "year", "."]][:4]
    for i in range(4):
        for (start, end), token in zip(one["offset_mapping"][i].tolist(), one.tokens(i)):
            assert text[start:end] == ("" if token in ("<S>", "</S>", "<pad>") else token)
    alone = tok(text, truncation=True, max_length=6, stride=1)  # no overflowing tokens asked: the first window
    assert alone.tokens() == one.tokens(0) and torch.equal(torch.tensor(alone["input_ids"]), one["input_ids"][0])
    whole = tok([text, "Hi"], return_overflowing_tokens=True)  # nothing to cut: one row per text
    assert whole["overflow_to_sample_mapping"] == [0, 1] and whole.tokens(0) == tok(text).tokens()


def test_windows_refuse_what_cannot_be_cut_in_one_line():
    tok = ElmoTokenizer()
    with pytest.raises(ValueError, match="stride=3 must be less than the 3 words"):
        tok("a b c d e f", truncation=True, max_length=5, stride=3, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="too short for truncation='only_second' with windows"):
        tok("a b c d", "e f g", truncation="only_second", max_length=8, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="needs a pair"):
        tok("a b c", truncation="only_second", max_length=4, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="stride must be a non-negative integer"):
        tok("a b c d e f", truncation=True, max_length=4, stride=-1, return_overflowing_tokens=True)
