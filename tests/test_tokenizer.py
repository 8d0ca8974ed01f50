"""Tests of the ELMo character tokenizer (issue 3).

Expected character ids are computed here from the rule of docs/architecture.md ("Character ids"), independently of
the tokenizer:
`[259] + [b + 1 for b in word.encode("utf-8", "ignore")[:48]] + [260]`, padded with 261 to 50 slots;
`<S>` = `[259, 257, 260, 261 x 47]`, `</S>` = `[259, 258, 260, 261 x 47]`, padding = 50 zeros.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_isolated, shared_file
from transformers import AutoTokenizer, DataCollatorForTokenClassification, DataCollatorWithPadding

from elmo_hf import modeling_elmo  # noqa: F401  (registers the tokenizers with AutoTokenizer)
from elmo_hf.tokenization import (
    LABEL_PAD_ID,
    WORD_SPLITTERS,
    ElmoTokenizer,
    ElmoTokenizerFast,
    build_vocab,
    check_word_split,
    pad_character_batch,
    split_name,
    split_words,
    write_vocab,
)

VOCAB_TEST = "elmo-fixtures/allennlp/vocab_test.txt"
BILM_VOCAB = "elmo-fixtures/bilm-tf-train/vocab.txt"
BILM_DATA = "elmo-fixtures/bilm-tf-train/data.txt"

BOS_ROW = [259, 257, 260] + [261] * 47
EOS_ROW = [259, 258, 260] + [261] * 47
PAD_ROW = [0] * 50


def expected_row(word: str) -> list[int]:
    if word == "<S>":
        return BOS_ROW
    if word == "</S>":
        return EOS_ROW
    data = word.encode("utf-8", "ignore")[:48]
    row = [259] + [b + 1 for b in data] + [260]
    return row + [261] * (50 - len(row))


def expected_sentence(words: list[str], special: bool = True) -> list[list[int]]:
    rows = [expected_row(w) for w in words]
    return [BOS_ROW, *rows, EOS_ROW] if special else rows


@pytest.fixture(scope="module")
def tok() -> ElmoTokenizer:
    return ElmoTokenizer()


@pytest.fixture()
def vocab_file(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.txt"
    path.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\n.\n", encoding="utf-8")
    return path


# ----- character ids --------------------------------------------------------------------------------------------
def test_known_words_have_the_original_ids(tok):
    assert expected_row("a") == [259, 98, 260] + [261] * 47  # the spec's own example
    enc = tok(["a", "<S>", "</S>", "Hello", "é"], is_split_into_words=True, add_special_tokens=False)
    assert enc["input_ids"] == [
        [259, 98, 260] + [261] * 47,
        BOS_ROW,
        EOS_ROW,
        [259, 73, 102, 109, 109, 112, 260] + [261] * 43,
        [259, 0xC3 + 1, 0xA9 + 1, 260] + [261] * 46,
    ]
    assert tok.convert_tokens_to_char_ids("a") == expected_row("a")


def test_every_line_of_the_allennlp_vocab_fixture():
    lines = shared_file(VOCAB_TEST).read_text(encoding="utf-8").splitlines()
    assert {"<S>", "</S>", "<UNK>"} <= set(lines)
    tok = ElmoTokenizer()
    ids = tok(lines, is_split_into_words=True, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(lines) == 458  # 457 newlines, the last line has none
    for word, row in zip(lines, ids, strict=True):
        assert row == expected_row(word), word
    assert ids[lines.index("<S>")] == BOS_ROW
    assert ids[lines.index("</S>")] == EOS_ROW
    assert ids[lines.index("<UNK>")] == [259, 61, 86, 79, 76, 63, 260] + [261] * 43  # an ordinary word
    tensor = tok([lines], is_split_into_words=True, add_special_tokens=False, return_tensors="pt")[
        "input_ids"
    ]
    assert tensor.tolist() == [ids]


def test_boundaries_added_by_default_and_special_tokens_mask(tok):
    enc = tok("the cat", return_special_tokens_mask=True)
    assert enc["input_ids"] == expected_sentence(["the", "cat"])
    assert enc["attention_mask"] == [1, 1, 1, 1]
    assert enc["special_tokens_mask"] == [1, 0, 0, 1]
    bare = tok("the cat", add_special_tokens=False, return_special_tokens_mask=True)
    assert bare["input_ids"] == expected_sentence(["the", "cat"], special=False)
    assert bare["special_tokens_mask"] == [0, 0]
    # A literal "<S>" typed in the input gets the boundary row (like the originals) but is a word, not an added token.
    literal = tok(["<S> hi", "x"], padding=True, return_tensors="pt", return_special_tokens_mask=True)
    assert literal["input_ids"][0, 1].tolist() == BOS_ROW
    assert literal["special_tokens_mask"].tolist() == [[1, 0, 0, 1], [1, 0, 1, 1]]
    assert literal.word_ids(0) == [None, 0, 1, None]


def test_scalar_vocabulary_is_the_character_table(tok):
    assert len(tok) == tok.vocab_size == 262
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 257, 258)
    vocab = tok.get_vocab()
    assert (
        vocab["<0x61>"] == 98
        and vocab["<bow>"] == 259
        and vocab["<eow>"] == 260
        and vocab["<char_pad>"] == 261
    )
    assert tok.convert_ids_to_tokens(98) == "<0x61>"
    with pytest.raises(ValueError, match="convert_tokens_to_char_ids"):
        tok.convert_tokens_to_ids("hello")
    assert tok.add_tokens(["[NEW]"]) == 0 and len(tok) == 262  # every word is read from its bytes: nothing to add
    assert tok([["[NEW]"]], is_split_into_words=True)["input_ids"][0] == [tok.convert_tokens_to_char_ids(w)
                                                                      for w in ("<S>", "[NEW]", "</S>")]


def test_decode_round_trip(tok):
    enc = tok(["Hello, world!", "naïve 😀"], padding=True, return_tensors="pt")
    assert tok.decode(enc["input_ids"], skip_special_tokens=True) == ["Hello , world !", "naïve 😀"]
    assert tok.decode(enc["input_ids"][1]) == "<S> naïve 😀 </S>"
    assert tok.convert_ids_to_tokens(enc["input_ids"][1].tolist()) == ["<S>", "naïve", "😀", "</S>", "<pad>", "<pad>"]
    assert tok.convert_ids_to_tokens(enc["input_ids"][1], skip_special_tokens=True) == ["naïve", "😀"]
    assert tok.batch_decode(enc["input_ids"].numpy(), skip_special_tokens=True)[0] == "Hello , world !"


# ----- splitting raw text ---------------------------------------------------------------------------------------
SPLITS = [
    (
        "Don't stop: it's 3.14, not 1,000!",
        ["Do", "n't", "stop", ":", "it", "'s", "3.14", ",", "not", "1,000", "!"],
    ),
    (
        "The U.S. Centers (e.g. CDC) said...",
        ["The", "U.S.", "Centers", "(", "e.g.", "CDC", ")", "said", "..."],
    ),
    ("O'Neill's bio-identical -- \"Talk\"", ["O'Neill", "'s", "bio-identical", "--", '"', "Talk", '"']),
    (
        "I can't, they're y'all. Ms. Smith",
        ["I", "ca", "n't", ",", "they", "'re", "y'all", ".", "Ms", ".", "Smith"],
    ),
    ("``quoted'' students' It’s", ["``", "quoted", "''", "students", "'", "It", "’s"]),
    ("<S> a <unk> </S>", ["<S>", "a", "<unk>", "</S>"]),
    ("$5 50% café 中文 😀", ["$", "5", "50", "%", "café", "中", "文", "😀"]),
    # CJK (issue 13): one token per ideograph, Latin words, numbers and punctuation keep their rules.
    ("我爱北京天安门，天安门上太阳升。", list("我爱北京天安门，天安门上太阳升。")),
    ("我在Google工作了3年。", ["我", "在", "Google", "工", "作", "了", "3", "年", "。"]),
    ("ELMo很好用!", ["ELMo", "很", "好", "用", "!"]),
    ("「你好」《三国》、：；！？…", list("「你好」《三国》、：；！？…")),
    ("U.S.中国 it's 3.14元", ["U.S.", "中", "国", "it", "'s", "3.14", "元"]),
    # Extensions A, B, C, G, H, I and both compatibility blocks (H and I are newer than some Pythons' Unicode).
    (
        "a\u3400\U00020000\U0002a700\U00030000\U00031350\U0002ebf0\uf900\U0002f800b",
        ["a", *"\u3400\U00020000\U0002a700\U00030000\U00031350\U0002ebf0\uf900\U0002f800", "b"],
    ),
    # Kana too (Japanese has no spaces); hangul and full-width Latin keep the word rule.
    ("日本語のテキスト 한국어 문장 ＡＢＣ１２３", [*"日本語のテキスト", "한국어", "문장", "ＡＢＣ１２３"]),
    ("ab\x01cd\tef\x1fgh", ["ab", "\x01", "cd", "ef", "gh"]),  # control chars split off; \x1f is whitespace
    ("a\ud800b", ["ab"]),  # lone surrogates are dropped, as encode('utf-8', 'ignore') does
    (" \t\n ", []),
]


@pytest.mark.parametrize(("text", "words"), SPLITS)
def test_punctuation_split_rule(text, words):
    assert split_words(text) == words
    assert split_words(" ".join(words)) == words  # splitting its own output again changes nothing


def test_whitespace_split_and_tokenize():
    line = " consumers may want to move their telephones a little closer to the tv set \n"
    assert split_words(line, "whitespace") == line.split()
    assert split_words("it's U.S.", "whitespace") == ["it's", "U.S."]
    tok = ElmoTokenizer(word_split="whitespace")
    assert tok.tokenize("don't  stop") == ["don't", "stop"]
    assert tok.tokenize("a b", add_special_tokens=True) == ["<S>", "a", "b", "</S>"]


def test_chinese_text_is_never_cut_into_pseudo_words(tok):
    text = "我爱北京天安门，天安门上太阳升。伟大领袖毛主席，指引我们向前进。" * 3
    words = split_words(text)
    assert words == list(text) and all(len(w.encode()) <= 48 for w in words)
    enc = tok(["我在Google工作了3年。", "ELMo很好用!"], padding=True, return_tensors="pt")
    expected = [
        expected_sentence(split_words("我在Google工作了3年。")),
        expected_sentence(["ELMo", "很", "好", "用", "!"]),
    ]
    assert enc["input_ids"][0].tolist() == expected[0]
    assert enc["input_ids"][1, :7].tolist() == expected[1] and (enc["input_ids"][1, 7:] == 0).all()
    assert enc.tokens(1)[:7] == ["<S>", "ELMo", "很", "好", "用", "!", "</S>"]
    assert tok("我爱北京天安门。")["input_ids"] == expected_sentence(list("我爱北京天安门。"))


def test_whitespace_rule_and_pre_split_words_keep_chinese_words():
    """ "whitespace" means the text is already tokenized: Chinese segmented with spaces keeps its words."""
    assert split_words("我 爱 北京 天安门 。", "whitespace") == ["我", "爱", "北京", "天安门", "。"]
    tok = ElmoTokenizer(word_split="whitespace")
    assert tok("我 爱 北京")["input_ids"] == expected_sentence(["我", "爱", "北京"])
    words = [["我", "爱", "北京天安门"], ["ELMo", "很好用"]]
    enc = ElmoTokenizer()(words, is_split_into_words=True)
    assert enc["input_ids"] == [expected_sentence(w) for w in words]
    assert enc.word_ids(0) == [None, 0, 1, 2, None]


def test_unsegmented_chinese_cut_at_48_bytes_is_reported_once(caplog):
    tok = ElmoTokenizer(word_split="whitespace")  # the user says the text is already split: it is not
    text = "我爱北京天安门，天安门上太阳升。伟大领袖"
    with caplog.at_level("WARNING", logger="elmo_hf.tokenization.tokenization_elmo"):
        assert tok(text)["input_ids"][1] == expected_row(text)  # cut at 48 bytes, as the original models do
        tok([text + "毛主席", "x" * 60])
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "60 bytes; its character ids keep the first 48" in warnings[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="elmo_hf.tokenization.tokenization_elmo"):
        ElmoTokenizer()(text + " " + "x" * 60)  # per character: nothing cut but the Latin word, no warning
    assert caplog.records == []


def test_word_split_function():
    def segment(text: str) -> list[str]:  # a toy segmenter: words between "|", spaces kept as tokens
        return [piece for part in text.split("|") for piece in (part, " ")]

    assert split_words("北京|天安门|ELMo", segment) == ["北京", "天安门", "ELMo"]  # whitespace tokens dropped
    tok = ElmoTokenizer(word_split=segment)
    assert tok.word_split is segment and tok.tokenize("我|爱北京") == ["我", "爱北京"]
    assert tok(["我|爱北京"])["input_ids"] == [expected_sentence(["我", "爱北京"])]
    assert build_vocab(["北京|天安门", "北京"], split=segment)[3:] == ["北京", "天安门"]
    assert ElmoTokenizer.from_corpus(["北京|天安门"], word_split=segment).word_vocab[3:] == ["北京", "天安门"]
    with pytest.raises(TypeError, match="must return a list of str"):
        split_words("a b", lambda text: 3)
    with pytest.raises(TypeError, match="must return a list of str, got a int"):
        split_words("a b", lambda text: [1, 2])
    with pytest.raises(ValueError, match="word_split must be one of"):
        ElmoTokenizer(word_split="bpe")


def test_jieba_word_split():
    pytest.importorskip("jieba", reason="jieba (the optional extra elmo-hf[zh]) is not installed")
    assert split_words("我在Google工作了3年。", "jieba") == [
        "我",
        "在",
        "Google",
        "工作",
        "了",
        "3",
        "年",
        "。",
    ]
    assert split_words("don't stop, 3.14 U.S.", "jieba") == split_words(
        "don't stop, 3.14 U.S."
    )  # Latin unchanged
    tok = ElmoTokenizer(word_split="jieba")
    assert tok.tokenize("我爱北京天安门") == ["我", "爱", "北京", "天安门"]
    assert build_vocab(["我爱北京天安门"], split="jieba")[3:] == ["北京", "天安门", "我", "爱"]


def test_jieba_missing_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "jieba", None)  # as if it were not installed
    # A tokenizer saved with jieba loads anywhere (pre-split words need no segmenter); raw text is refused.
    tok = ElmoTokenizer(word_split="jieba")
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.word_split == "jieba"
    assert loaded([["我", "爱"]], is_split_into_words=True)["input_ids"] == tok([["我", "爱"]],
                                                                              is_split_into_words=True)["input_ids"]
    with pytest.raises(
        ImportError, match=r"word_split='jieba' needs the jieba package: pip install 'elmo-hf\[zh\]'"
    ):
        loaded("我爱北京")
    with pytest.raises(ImportError, match="elmo-hf"):
        split_words("我爱北京", "jieba")
    # What commands call to validate an option: a one-line ValueError (also an ImportError) naming the extra.
    with pytest.raises(ValueError, match=r"pip install 'elmo-hf\[zh\]'"):
        check_word_split("jieba")
    with pytest.raises(ImportError, match="elmo-hf"):
        build_vocab(["我爱北京"], split="jieba")


def _bars(text: str) -> list[str]:  # a registered toy segmenter: words between "|", spaces kept as tokens
    return [piece for part in text.split("|") for piece in (part, " ")]


def test_word_splitters_registry(tmp_path, vocab_file, monkeypatch):
    for registry in ("_functions", "_requirements"):  # the splits registered here are the test's own
        monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
    assert {"punctuation", "whitespace", "jieba"} <= set(WORD_SPLITTERS)
    assert WORD_SPLITTERS["whitespace"]("a  b") == ["a", "b"]
    with pytest.raises(ValueError, match=r"--split must be one of \(.*'punctuation'.*\) .*got 'bars'"):
        check_word_split("bars", option="--split")
    with pytest.raises(ValueError, match="word_split must be one of"):
        ElmoTokenizer(word_split="bars")
    WORD_SPLITTERS.register("bars", _bars)
    check_word_split("bars")
    assert split_words("北京|天安门|ELMo", "bars") == ["北京", "天安门", "ELMo"]  # whitespace tokens dropped
    assert build_vocab(["北京|天安门", "北京"], split="bars")[3:] == ["北京", "天安门"]
    tok = ElmoTokenizer(vocab_file=str(vocab_file), word_split="bars")
    assert tok.tokenize("我|爱北京") == ["我", "爱北京"]
    tok.save_pretrained(tmp_path / "bars")
    assert json.loads((tmp_path / "bars" / "tokenizer_config.json").read_text())["word_split"] == "bars"
    loaded = AutoTokenizer.from_pretrained(tmp_path / "bars")
    assert loaded.word_split == "bars" and loaded("我|爱北京")["input_ids"] == tok("我|爱北京")["input_ids"]
    with pytest.raises(ValueError, match="custom:"):
        WORD_SPLITTERS.register("custom:x", _bars)
    with pytest.raises(TypeError, match="function"):
        WORD_SPLITTERS.register("x", "not a function")


# ----- batches, padding, truncation -----------------------------------------------------------------------------
def test_batch_equals_sentences_one_by_one(tok):
    texts = [
        "The cat sat on the mat.",
        "Hi",
        "",
        "A much longer sentence, with commas, numbers 12.5 and more!",
    ]
    batch = tok(texts, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (4, 15, 50) and batch["input_ids"].dtype == torch.int64
    for i, text in enumerate(texts):
        single = tok(text)
        n = len(single["input_ids"])
        assert (
            batch["input_ids"][i, :n].tolist() == single["input_ids"] == expected_sentence(split_words(text))
        )
        assert (batch["input_ids"][i, n:] == 0).all()
        assert batch["attention_mask"][i].tolist() == [1] * n + [0] * (15 - n)
    lists = tok(texts)  # no padding: ragged nested lists, as datasets.map stores them
    assert [len(x) for x in lists["input_ids"]] == [9, 3, 2, 15]
    assert lists["input_ids"][1] == tok("Hi")["input_ids"]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"add_special_tokens": False},
        {"truncation": True, "max_length": 4},
        {"padding": "max_length", "max_length": 12, "pad_to_multiple_of": 8},
    ],
)
def test_lists_and_tensors_give_the_same_outputs(vocab_file, options):
    """One builder for every output besides input_ids: lists padded to the batch are the tensors' rows."""
    tok = ElmoTokenizer(vocab_file=str(vocab_file))
    texts = ["the cat sat .", "", "the dog sat on the mat ."]
    extras = dict(
        return_vocab_ids=True, return_special_tokens_mask=True, return_token_type_ids=True, return_length=True
    )
    padding = options.pop("padding", True)
    tensors = tok(texts, padding=padding, return_tensors="pt", **extras, **options)
    lists = tok(texts, padding=padding, **extras, **options)
    assert list(tensors) == list(lists)
    for key in tensors:
        assert tensors[key].tolist() == lists[key], key
    ragged = tok(texts, **extras, **options)  # not padded: each list as long as its sentence
    for key in ("attention_mask", "special_tokens_mask", "token_type_ids", "vocab_ids"):
        assert [len(row) for row in ragged[key]] == ragged["length"], key
        assert [row[:n] for row, n in zip(lists[key], ragged["length"])] == ragged[key], key


def test_tensor_shapes_and_padding_options(tok):
    texts = ["a b c", "d"]
    enc = tok(texts, padding="max_length", max_length=8, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 8, 50) and enc["attention_mask"].shape == (2, 8)
    assert (enc["input_ids"][1, 3:] == 0).all() and enc["attention_mask"][1].tolist() == [
        1,
        1,
        1,
        0,
        0,
        0,
        0,
        0,
    ]
    assert tok(texts, padding=True, pad_to_multiple_of=4, return_tensors="pt")["input_ids"].shape == (
        2,
        8,
        50,
    )
    as_np = tok(texts, padding="longest", return_tensors="np")
    assert as_np["input_ids"].shape == (2, 5, 50) and as_np["input_ids"].dtype == np.int64
    single = tok("a b", return_tensors="pt")
    assert single["input_ids"].shape == (1, 4, 50) and single["attention_mask"].shape == (1, 4)
    assert tok(["a", "b"], return_tensors="pt")["input_ids"].shape == (
        2,
        3,
        50,
    )  # equal lengths need no padding
    with pytest.raises(ValueError, match="padding=True"):
        tok(texts, return_tensors="pt")
    with pytest.raises(ValueError, match="truncation=True"):
        tok(texts, padding="max_length", max_length=3, truncation=False, return_tensors="pt")
    padded_lists = tok(texts, padding=True)
    assert padded_lists["input_ids"][1][3] == PAD_ROW and padded_lists["attention_mask"][1] == [1, 1, 1, 0, 0]
    extras = tok(texts, padding=True, return_length=True, return_token_type_ids=True, return_tensors="pt")
    assert extras["length"].tolist() == [5, 3] and extras["token_type_ids"].shape == (2, 5)
    empty = tok(["", " "], add_special_tokens=False, return_tensors="pt")
    assert empty["input_ids"].shape == (2, 0, 50) and empty["attention_mask"].shape == (2, 0)


def test_truncation_counts_tokens_and_keeps_the_end_of_sentence(tok):
    words = "one two three four five six".split()
    enc = tok(" ".join(words), truncation=True, max_length=4)
    assert enc["input_ids"] == expected_sentence(words[:2])
    assert enc.word_ids() == [None, 0, 1, None]
    assert (
        tok(" ".join(words), max_length=4)["input_ids"] == enc["input_ids"]
    )  # max_length alone truncates too
    batch = tok(
        ["one two three", "a b c d e f g"], truncation=True, max_length=5, padding=True, return_tensors="pt"
    )
    assert batch["input_ids"].shape == (2, 5, 50)
    assert batch["input_ids"][1, 4].tolist() == EOS_ROW and batch["input_ids"][0, 4].tolist() == EOS_ROW
    assert tok(words, is_split_into_words=True, truncation=True, max_length=2)["input_ids"] == [
        BOS_ROW,
        EOS_ROW,
    ]
    bare = tok(words, is_split_into_words=True, add_special_tokens=False, truncation=True, max_length=3)
    assert bare["input_ids"] == expected_sentence(words[:3], special=False)
    left = ElmoTokenizer(truncation_side="left")
    enc = left(words, is_split_into_words=True, truncation=True, max_length=4)
    assert enc["input_ids"] == expected_sentence(words[-2:]) and enc.word_ids() == [None, 4, 5, None]
    with pytest.raises(ValueError, match="max_length=1"):
        tok("a b", truncation=True, max_length=1)
    untruncated = tok(" ".join(words), truncation=False)
    assert len(untruncated["input_ids"]) == 8


# ----- word alignment -------------------------------------------------------------------------------------------
def test_word_ids_align_tokens_with_input_words(tok):
    words = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    tags = [[3, 0, 7, 0], [1, 2]]
    enc = tok(words, is_split_into_words=True, padding=True, return_tensors="pt")
    assert enc.word_ids(0) == [None, 0, 1, 2, 3, None]
    assert enc.word_ids(1) == [None, 0, 1, None, None, None]
    assert enc.tokens(1) == ["<S>", "Peter", "Blackburn", "</S>", "<pad>", "<pad>"]
    assert enc.sequence_ids(1) == [None, 0, 0, None, None, None]
    labels = [[-100 if w is None else tags[i][w] for w in enc.word_ids(i)] for i in range(2)]
    assert labels == [[-100, 3, 0, 7, 0, -100], [-100, 1, 2, -100, -100, -100]]
    raw = tok("Hello, world")
    assert raw.word_ids() == [None, 0, 1, 2, None] and raw.tokens() == ["<S>", "Hello", ",", "world", "</S>"]
    restored = pickle.loads(pickle.dumps(enc))
    assert restored.word_ids(1) == enc.word_ids(1)
    with pytest.raises(ValueError, match="word_ids"):
        tok.pad([{"input_ids": [BOS_ROW]}]).word_ids(0)


# ----- character offsets ------------------------------------------------------------------------------------
OFFSET_TEXTS = [
    "John Smith works for Google in Paris.",
    "It's 3.14, isn't it?  Dr. O'Neill said so...",
    "我在Google工作了3年。",
    "café\u0301 👨‍👩‍👧 👍🏽 🇫🇷 done",
    "  leading and trailing spaces  ",
]


@pytest.mark.parametrize("text", OFFSET_TEXTS)
def test_offsets_slice_the_text_to_each_token(tok, text):
    enc = tok(text, return_offsets_mapping=True)
    tokens = enc.tokens()
    for position, (start, end) in enumerate(enc["offset_mapping"]):
        if enc.word_ids()[position] is None:
            assert (start, end) == (0, 0), tokens[position]
        else:
            assert text[start:end] == tokens[position]
            assert enc.token_to_chars(position) == (start, end)
            assert enc.char_to_token(start) == enc.char_to_token(end - 1) == position
            assert enc.word_to_chars(enc.word_ids()[position]) == (start, end)
    between = [i for i, ch in enumerate(text) if ch.isspace()]
    assert all(enc.char_to_word(i) is None for i in between)


def test_offsets_of_batches_pairs_truncation_and_pre_split_words(tok):
    batch = tok(OFFSET_TEXTS[:2], padding=True, return_offsets_mapping=True, return_tensors="pt")
    assert batch["offset_mapping"].shape == (*batch["attention_mask"].shape, 2)
    for i, text in enumerate(OFFSET_TEXTS[:2]):  # the same offsets as each sentence alone, padding (0, 0)
        alone = tok(text, return_offsets_mapping=True)["offset_mapping"]
        assert batch["offset_mapping"][i].tolist() == [list(o) for o in alone] + [[0, 0]] * (
            batch["offset_mapping"].shape[1] - len(alone))
    question, passage = "Where does John work?", "John Smith works for Google in Paris."
    pair = tok(question, passage, return_offsets_mapping=True)
    for position, (start, end) in enumerate(pair["offset_mapping"]):  # each position's offsets are in its sentence
        sentence = {0: question, 1: passage}.get(pair.sequence_ids()[position])
        assert (start, end) == (0, 0) if sentence is None else sentence[start:end] == pair.tokens()[position]
    assert pair.char_to_token(21, sequence_index=1) == pair.tokens().index("Google")
    assert pair.word_to_tokens(4, sequence_index=1).start == pair.tokens().index("Google")
    for side, kept in (("right", "John Smith"), ("left", "in Paris")):
        cut = ElmoTokenizer(truncation_side=side)("John Smith works in Paris", truncation=True, max_length=4,
                                                    return_offsets_mapping=True)
        spans = [o for o, w in zip(cut["offset_mapping"], cut.word_ids()) if w is not None]
        assert " ".join("John Smith works in Paris"[a:b] for a, b in spans) == kept
    words = tok([["EU", "rejects"], ["Blackburn"]], is_split_into_words=True, return_offsets_mapping=True)
    assert words["offset_mapping"] == [[(0, 0), (0, 2), (0, 7), (0, 0)], [(0, 0), (0, 9), (0, 0)]]


def test_a_split_that_changes_words_gets_empty_offsets_for_them(caplog):
    lower = ElmoTokenizer(word_split=lambda text: [w.lower() if w == "Paris" else w for w in text.split()])
    with caplog.at_level(logging.WARNING):
        enc = lower("John lives in Paris now", return_offsets_mapping=True)
    assert enc["offset_mapping"][1:-1] == [(0, 4), (5, 10), (11, 13), (13, 13), (20, 23)]
    assert "character offsets are empty" in caplog.text


# ----- collators and datasets -----------------------------------------------------------------------------------
def test_pad_in_data_collators(tok):
    features = [dict(tok(t)) for t in ["a b c", "d", "e f"]]
    for feature, label in zip(features, [1, 0, 1], strict=True):
        feature["label"] = label
    batch = DataCollatorWithPadding(tok)(features)
    assert batch["input_ids"].shape == (3, 5, 50) and batch["attention_mask"].shape == (3, 5)
    assert batch["labels"].tolist() == [1, 0, 1]
    assert (batch["input_ids"][1, 3:] == 0).all() and batch["attention_mask"][1].tolist() == [1, 1, 1, 0, 0]
    assert (
        batch["input_ids"].tolist()
        == tok(["a b c", "d", "e f"], padding=True, return_tensors="pt")["input_ids"].tolist()
    )

    # Token-level labels: padded with -100 by pad() itself, and by DataCollatorForTokenClassification.
    token_features = []
    for words, tags in ((["EU", "rejects"], [3, 0]), (["Peter"], [1])):
        enc = tok(words, is_split_into_words=True)
        token_features.append({**enc, "labels": [-100 if w is None else tags[w] for w in enc.word_ids()]})
    padded = tok.pad(token_features, return_tensors="pt")
    assert padded["labels"].tolist() == [[-100, 3, 0, -100], [-100, 1, -100, -100]]
    collated = DataCollatorForTokenClassification(tok)(token_features)
    assert collated["labels"].tolist() == padded["labels"].tolist()
    assert collated["input_ids"].tolist() == padded["input_ids"].tolist()

    # A custom collator: tensors in, extra keys kept, strings passed through as a list.
    tensor_features = [
        {"input_ids": torch.tensor(tok(t)["input_ids"]), "text": t, "weight": 0.5} for t in ["x y", "z"]
    ]
    out = tok.pad(tensor_features)
    assert out["input_ids"].shape == (2, 4, 50) and out["attention_mask"].tolist() == [
        [1, 1, 1, 1],
        [1, 1, 1, 0],
    ]
    assert out["text"] == ["x y", "z"] and out["weight"].tolist() == [0.5, 0.5]
    # One example, and a dict of lists.
    one = tok.pad(dict(tok("x")), padding="max_length", max_length=5)
    assert len(one["input_ids"]) == 5 and one["attention_mask"] == [1, 1, 1, 0, 0]
    as_dict = tok.pad(dict(tok(["x y", "z"])), return_tensors="pt")
    assert as_dict["input_ids"].shape == (2, 4, 50)
    with pytest.raises(ValueError, match="empty list"):
        tok.pad([])
    with pytest.raises(ValueError, match="rows of 50"):
        tok.pad([{"input_ids": [1, 2, 3]}])


def test_pad_character_batch_is_the_padding_of_pad_and_the_collators(tok):
    from elmo_hf.train.tasks.common_collators import LABEL_PAD_ID as collator_pad_id
    from elmo_hf.train.tasks.common_collators import ElmoDataCollatorForTokenClassification

    assert collator_pad_id == LABEL_PAD_ID == -100
    sentences = [tok(t)["input_ids"] for t in ["a b c", "d"]]
    labels = [[-100, 1, 2, 3, -100], [-100, 4, -100]]
    padded = pad_character_batch(sentences, 50, 6, {"attention_mask": [[1] * 5, [1] * 3], "labels": labels})
    assert padded["input_ids"].shape == (2, 6, 50) and padded["input_ids"].dtype == torch.int64
    assert padded["input_ids"][1, :3].tolist() == sentences[1] and padded["input_ids"][1, 3:].eq(0).all()
    assert padded["attention_mask"].tolist() == [[1] * 5 + [0], [1] * 3 + [0] * 3]
    assert padded["labels"].tolist() == [labels[0] + [-100], labels[1] + [-100] * 3]
    as_lists = pad_character_batch(sentences, 50, None, {"labels": labels}, return_tensors=False)
    assert as_lists == {"input_ids": sentences, "labels": labels}  # no length: nothing padded
    features = [{"input_ids": s, "labels": x} for s, x in zip(sentences, labels, strict=True)]
    collated = ElmoDataCollatorForTokenClassification(pad_to_multiple_of=6)(features)
    from_pad = tok.pad(features, padding="max_length", max_length=6, return_tensors="pt")
    for key in ("input_ids", "attention_mask", "labels"):
        assert torch.equal(collated[key], padded[key]) and torch.equal(from_pad[key], padded[key]), key
    with pytest.raises(ValueError, match="labels of example 1 must have one value per token"):
        pad_character_batch(sentences, 50, 6, {"labels": [labels[0], [1]]})


def test_datasets_map_and_fingerprint():
    datasets = pytest.importorskip("datasets")
    tok = ElmoTokenizer()
    fingerprint = datasets.fingerprint.Hasher.hash(tok)
    ds = datasets.Dataset.from_dict({"text": ["a b c", "hello", ""], "label": [0, 1, 0]})
    mapped = ds.map(lambda b: tok(b["text"]), batched=True)
    assert mapped[0]["input_ids"] == expected_sentence(["a", "b", "c"]) and mapped[2]["attention_mask"] == [
        1,
        1,
    ]
    assert datasets.fingerprint.Hasher.hash(tok) == fingerprint  # the word cache does not leak into the hash
    collated = DataCollatorWithPadding(tok)([mapped.remove_columns("text")[i] for i in range(3)])
    assert collated["input_ids"].shape == (3, 5, 50)
    mapped.set_format("torch", columns=["input_ids", "attention_mask"])
    assert tok.pad([mapped[i] for i in range(3)])["input_ids"].shape == (3, 5, 50)


def test_datasets_before_4_7_fingerprinting_leaves_the_tokenizer_working():
    """datasets 3.x - 4.6 fingerprint a tokenizer with `state = tok.__dict__; state["cache"] = {}` (no copy: the live
    tokenizer's attribute named `cache` is replaced), then `Dataset.map` runs the tokenizer (issue 54: `KeyError:
    'rows'` when the rows lived there). The cache lives elsewhere, and hashes as nothing in either version."""
    datasets = pytest.importorskip("datasets")
    tok = ElmoTokenizer()
    state = tok.__dict__  # what datasets 3.6's reducer of tokenizers does, to the letter
    if "cache" in state and isinstance(state["cache"], dict):
        state["cache"] = {}
    assert tok("a b c")["input_ids"] == expected_sentence(["a", "b", "c"])
    fingerprint = datasets.fingerprint.Hasher.hash(tok)
    tok("words never seen before fill the cache")
    assert len(tok._encoding_state().rows) >= 9 and datasets.fingerprint.Hasher.hash(tok) == fingerprint
    assert datasets.fingerprint.Hasher.hash(ElmoTokenizer()) == fingerprint  # a fresh one: the same fingerprint


# ----- word vocabulary ------------------------------------------------------------------------------------------
def test_vocab_ids(vocab_file):
    tok = ElmoTokenizer(vocab_file=str(vocab_file))
    assert tok.word_vocab_size == 7 and tok.word_vocab[:3] == ["<S>", "</S>", "<UNK>"] and len(tok) == 262
    enc = tok(["the cat sat .", "the dog"], padding=True, return_vocab_ids=True, return_tensors="pt")
    assert enc["vocab_ids"].tolist() == [[0, 3, 4, 5, 6, 1], [0, 3, 2, 1, -100, -100]]
    lists = tok("the dog", return_vocab_ids=True)
    assert lists["vocab_ids"] == [0, 3, 2, 1]
    assert tok(["the"], is_split_into_words=True, add_special_tokens=False, return_vocab_ids=True)[
        "vocab_ids"
    ] == [3]
    assert tok.convert_tokens_to_vocab_ids(["<S>", "cat", "zebra", "</S>"]) == [0, 4, 2, 1]
    assert tok.convert_tokens_to_vocab_ids("sat") == 5 and tok.convert_vocab_ids_to_tokens([3, 4]) == [
        "the",
        "cat",
    ]
    assert "vocab_ids" not in tok("the cat")
    padded = tok.pad([dict(tok(t, return_vocab_ids=True)) for t in ["the cat", "sat"]], return_tensors="pt")
    assert padded["vocab_ids"].tolist() == [[0, 3, 4, 1], [0, 5, 1, -100]]
    with pytest.raises(ValueError, match="word vocabulary"):
        ElmoTokenizer()("the cat", return_vocab_ids=True)
    assert ElmoTokenizer().word_vocab is None and ElmoTokenizer().word_vocab_size == 0


def test_special_tokens_in_the_order_of_the_released_vocabulary(tmp_path):
    """The 1B Word Benchmark vocabulary of the published models begins with </S>, <S>, <UNK>."""
    path = tmp_path / "released_order.txt"
    path.write_text("</S>\n<S>\n<UNK>\nthe\ncat\n", encoding="utf-8")
    tok = ElmoTokenizer(vocab_file=str(path), word_split="whitespace")
    assert tok.unk_word_id == 2
    assert tok("the dog", return_vocab_ids=True)["vocab_ids"] == [1, 3, 2, 0]


def test_bad_vocab_files(tmp_path):
    for name, content in (("no_unk", "</S>\n<S>\nthe\n"), ("missing", "the\ncat\n"), ("empty", "")):
        path = tmp_path / f"{name}.txt"
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=f"{name}.txt.*lacks"):
            ElmoTokenizer(vocab_file=str(path))
    with pytest.raises(FileNotFoundError):
        ElmoTokenizer(vocab_file=str(tmp_path / "absent.txt"))
    with pytest.raises(ValueError, match=r"\['<UNK>'\] is missing"):
        ElmoTokenizer(word_vocab=["the", "<S>", "</S>"])


def test_special_tokens_anywhere_in_the_vocabulary_file(tmp_path):
    """Issue 12: <S>, </S>, <UNK> are looked up by name; every id follows the file's order."""
    lines = ["the", "cat", "<UNK>", "sat", "</S>", ".", "<S>", "mat"]
    path = tmp_path / "middle.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = ElmoTokenizer(vocab_file=str(path), word_split="whitespace")
    assert tok.word_vocab == lines and tok.unk_word_id == 2
    enc = tok(["the cat sat on the mat .", "cat"], padding=True, return_vocab_ids=True, return_tensors="pt")
    assert enc["vocab_ids"].tolist() == [
        [6, 0, 1, 3, 2, 0, 7, 5, 4],
        [6, 1, 4, -100, -100, -100, -100, -100, -100],
    ]
    assert tok.convert_vocab_ids_to_tokens([6, 4, 2]) == ["<S>", "</S>", "<UNK>"]
    assert ElmoTokenizer(word_vocab=lines).convert_tokens_to_vocab_ids(["<S>", "zebra", "</S>"]) == [6, 2, 4]
    # Saved and reloaded, the file keeps its order.
    tok.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "vocab.txt").read_text(encoding="utf-8").split() == lines
    assert ElmoTokenizer.from_pretrained(tmp_path / "saved").word_vocab == lines


def test_the_allennlp_vocab_fixture_is_a_vocabulary_file():
    """AllenNLP's own vocab_test.txt has <S>, <UNK>, </S> on lines 21, 118 and 225 (it was refused before)."""
    path = shared_file(VOCAB_TEST)
    lines = path.read_text(encoding="utf-8").split()
    tok = ElmoTokenizer(vocab_file=str(path), word_split="whitespace")
    assert tok.word_vocab == lines and len(lines) == 458
    bos, unk, eos = tok.convert_tokens_to_vocab_ids(["<S>", "<UNK>", "</S>"])
    assert (
        (bos, unk, eos) == (20, 117, 224) == (lines.index("<S>"), lines.index("<UNK>"), lines.index("</S>"))
    )
    words = [lines[3], lines[300], "not-a-word-of-the-fixture", lines[-1]]
    assert tok(" ".join(words), return_vocab_ids=True)["vocab_ids"] == [bos, 3, 300, unk, 457, eos]


def test_bilm_tf_vocabulary_file():
    vocab_path = shared_file(BILM_VOCAB)
    tok = ElmoTokenizer(vocab_file=str(vocab_path), word_split="whitespace")
    lines = vocab_path.read_text(encoding="utf-8").split()
    assert tok.word_vocab == lines
    first = shared_file(BILM_DATA).read_text(encoding="utf-8").splitlines()[0]
    enc = tok(first, return_vocab_ids=True)
    assert enc["vocab_ids"] == [0] + [lines.index(w) if w in lines else 2 for w in first.split()] + [1]


def test_build_vocab(tmp_path):
    texts = ["the cat sat on the mat .", "the dog sat .", "a cat !"]
    vocab = build_vocab(texts)
    assert vocab[:3] == ["<S>", "</S>", "<UNK>"]
    assert vocab[3:8] == [
        "the",
        ".",
        "cat",
        "sat",
        "!",
    ]  # by count (3, 2, 2, 2), then ties in code-point order
    assert len(vocab) == 3 + 9
    assert build_vocab(texts, max_size=5) == ["<S>", "</S>", "<UNK>", "the", "."]
    assert build_vocab(texts, min_count=2) == ["<S>", "</S>", "<UNK>", "the", ".", "cat", "sat"]
    assert build_vocab(["<S> x </S> <UNK> x"]) == ["<S>", "</S>", "<UNK>", "x"]  # specials are not counted
    assert build_vocab(["don't stop"]) == ["<S>", "</S>", "<UNK>", "do", "n't", "stop"]
    assert build_vocab(["don't stop"], split="whitespace")[3:] == ["don't", "stop"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("b a\na\n", encoding="utf-8")
    assert build_vocab([corpus, "c"])[3:] == ["a", "b", "c"]
    with pytest.raises(TypeError, match="wrap it in a list"):
        build_vocab("the cat")
    with pytest.raises(TypeError, match="item 0"):
        build_vocab([3])
    with pytest.raises(ValueError, match="max_size"):
        build_vocab(texts, max_size=2)
    with pytest.raises(ValueError, match="min_count"):
        build_vocab(texts, min_count=0)
    path = write_vocab(vocab, tmp_path / "vocab.txt")
    tok = ElmoTokenizer(vocab_file=path)
    assert tok.word_vocab == vocab
    assert ElmoTokenizer.from_corpus(texts, max_size=6).word_vocab == vocab[:6]


# ----- save / load ----------------------------------------------------------------------------------------------
SAMPLE = ["The cat sat on the mat.", "Peter Blackburn", "naïve café 😀 " + "x" * 60]


def test_save_and_load_round_trip(tmp_path, vocab_file):
    tok = ElmoTokenizer(vocab_file=str(vocab_file), word_split="whitespace", truncation_side="left")
    files = tok.save_pretrained(tmp_path / "tok")
    names = sorted(os.listdir(tmp_path / "tok"))
    assert names == [
        "batch_encoding_elmo.py", "character_ids.py", "padding_elmo.py", "row_cache_elmo.py", "text_inputs_elmo.py",
        "tokenization_elmo.py", "tokenizer_config.json", "truncation_elmo.py", "vocab.txt", "word_splits_elmo.py",
        "word_vocab_elmo.py",
    ], files
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "ElmoTokenizer"
    assert config["auto_map"] == {"AutoTokenizer": ["tokenization_elmo.ElmoTokenizer", None]}
    assert config["word_split"] == "whitespace" and "word_vocab" not in config
    for cls, loaded in (
        (ElmoTokenizer, ElmoTokenizer.from_pretrained(tmp_path / "tok")),
        # in-library registration, no trust_remote_code needed; the fast class is AutoTokenizer's default
        (ElmoTokenizerFast, AutoTokenizer.from_pretrained(tmp_path / "tok")),
    ):
        assert type(loaded) is cls
        assert loaded.word_vocab == tok.word_vocab and loaded.word_split == "whitespace"
        assert loaded.truncation_side == "left"
        a = tok(SAMPLE, padding=True, return_tensors="pt", return_vocab_ids=True)
        b = loaded(SAMPLE, padding=True, return_tensors="pt", return_vocab_ids=True)
        assert all(torch.equal(a[k], b[k]) for k in a)
    plain = ElmoTokenizer()
    plain.save_pretrained(tmp_path / "plain")
    assert not (tmp_path / "plain" / "vocab.txt").exists()
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "plain")
    assert reloaded.word_vocab is None and reloaded("a b")["input_ids"] == plain("a b")["input_ids"]


def test_auto_tokenizer_with_a_model_config(tmp_path):
    from elmo_hf.modeling_elmo.configuration_elmo import ElmoConfig

    ElmoConfig.from_preset("tiny").save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is ElmoTokenizerFast and loaded("a")["input_ids"] == expected_sentence(["a"])
    assert type(AutoTokenizer.from_pretrained(tmp_path, use_fast=True)) is ElmoTokenizerFast


REMOTE_CODE = """
import json, os, sys
os.environ["HF_MODULES_CACHE"] = {modules!r}
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained({folder!r}, trust_remote_code=True)
enc = tok({sample!r}, padding=True, return_tensors="pt", return_vocab_ids=True)
leaked = sorted(m for m in sys.modules if m.split(".")[0] == "elmo_hf")
print(json.dumps({{
    "module": type(tok).__module__, "leaked": leaked, "input_ids": enc["input_ids"].tolist(),
    "attention_mask": enc["attention_mask"].tolist(), "vocab_ids": enc["vocab_ids"].tolist(),
    "word_ids": enc.word_ids(1),
}}))
"""


@pytest.mark.slow
def test_remote_code_loads_in_a_fresh_process_without_the_project(tmp_path, vocab_file):
    tok = ElmoTokenizer(vocab_file=str(vocab_file))
    folder = tmp_path / "hub-folder"
    tok.save_pretrained(folder)
    code = REMOTE_CODE.format(modules=str(tmp_path / "modules"), folder=str(folder), sample=SAMPLE)
    result = run_isolated(code, cwd=tmp_path, timeout=120)
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert remote["module"].startswith("transformers_modules.") and remote["leaked"] == []
    local = tok(SAMPLE, padding=True, return_tensors="pt", return_vocab_ids=True)
    assert remote["input_ids"] == local["input_ids"].tolist()
    assert remote["attention_mask"] == local["attention_mask"].tolist()
    assert remote["vocab_ids"] == local["vocab_ids"].tolist()
    assert remote["word_ids"] == local.word_ids(1)


REMOTE_FINGERPRINT = """
import importlib, json, os
os.environ["HF_MODULES_CACHE"] = {modules!r}
from datasets.utils._dill import dumps
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained({folder!r}, trust_remote_code=True)
cls, found = type(tok), importlib.import_module(type(tok).__module__.split(".")[0])
for part in cls.__module__.split(".")[1:] + [cls.__qualname__]:
    found = getattr(found, part, None)
print(json.dumps({{"found": found is cls, "by_value": b"_encoding_state" in dumps(tok)}}))
"""


@pytest.mark.slow
def test_remote_code_tokenizer_is_hashed_by_name(tmp_path):
    """datasets hashes a tokenizer with dill, which pickles a class it cannot reach as `package.module.Class` by value,
    with the globals of its module (`cannot pickle '_thread._local'` for one holding a thread-local; fingerprints that
    depend on the classes loaded). transformers imports remote code without binding the module to its package; the
    tokenizer's modules bind themselves, so the class is pickled by name as when the project is installed."""
    pytest.importorskip("datasets")
    ElmoTokenizer().save_pretrained(tmp_path / "folder")
    code = REMOTE_FINGERPRINT.format(modules=str(tmp_path / "modules"), folder=str(tmp_path / "folder"))
    result = run_isolated(code, cwd=tmp_path, timeout=120)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"found": True, "by_value": False}


CHINESE_SAMPLE = ["我爱北京天安门，天安门上太阳升。", "我在Google工作了3年。", "ELMo很好用!"]


def test_word_split_travels_with_the_saved_tokenizer(tmp_path, vocab_file):
    """The rule a tokenizer was saved with is the rule it splits with after from_pretrained (issue 13)."""
    segment = _bar_segmenter
    rules = ["punctuation", "whitespace", segment]
    if _has_jieba():
        rules.append("jieba")
    for rule in rules:
        tok = ElmoTokenizer(vocab_file=str(vocab_file), word_split=rule)
        folder = tmp_path / str(rules.index(rule))
        tok.save_pretrained(folder)
        saved = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))["word_split"]
        if callable(rule):
            # A function is saved as its import path, never imported from the file: the loaded tokenizer refuses
            # raw text until the function is registered (or passed again).
            assert saved == "test_tokenizer:_bar_segmenter"
            unregistered = ElmoTokenizer.from_pretrained(folder)
            with pytest.raises(ValueError, match=r"'test_tokenizer:_bar_segmenter' names a function that is not "
                                                 r"registered in this process: .*--word_split "
                                                 r"test_tokenizer:_bar_segmenter"):
                unregistered("北京|天安门")
            loaded = AutoTokenizer.from_pretrained(folder, word_split=segment)
            assert loaded.word_split is segment
        else:
            assert saved == rule
            loaded = AutoTokenizer.from_pretrained(folder)
            assert loaded.word_split == rule
        assert tok.word_split is rule  # saving does not change the tokenizer
        texts = [*CHINESE_SAMPLE, "北京|天安门"]
        a = tok(texts, padding=True, return_tensors="pt", return_vocab_ids=True)
        b = loaded(texts, padding=True, return_tensors="pt", return_vocab_ids=True)
        assert all(torch.equal(a[k], b[k]) for k in a)


def _bar_segmenter(text: str) -> list[str]:
    return text.split("|")


def test_word_split_import_path_is_imported_only_when_asked(tmp_path, vocab_file, monkeypatch):
    """`module:function` (a command's `--word_split`): imported and registered by check_word_split(allow_import=True);
    a tokenizer saved with it loads it by name once registered; a lambda is saved as a placeholder loading refuses."""
    for registry in ("_functions", "_requirements"):  # the registrations below end with the test
        monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
    path = "test_tokenizer:_bar_segmenter"
    with pytest.raises(ValueError, match="not registered in this process"):
        check_word_split(path, option="--split")  # a saved file's name is never imported
    assert path not in WORD_SPLITTERS
    for bad, message in (("no_such_package_xyz:split", r"cannot import no_such_package_xyz \(No module named"),
                         ("test_tokenizer:no_such_function", "test_tokenizer has no no_such_function"),
                         ("test_tokenizer:CHINESE_SAMPLE", "is a list, not a function")):
        with pytest.raises(ValueError, match=f"--split '{bad}': {message}") as caught:
            check_word_split(bad, option="--split", allow_import=True)
        assert "\n" not in str(caught.value)
    check_word_split(path, option="--split", allow_import=True)
    assert WORD_SPLITTERS[path] is _bar_segmenter and split_words("a|b c", path) == ["a", "b c"]
    tok = ElmoTokenizer(vocab_file=str(vocab_file), word_split=path)
    tok.save_pretrained(tmp_path / "by_path")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "by_path")
    assert loaded.word_split == path and loaded.tokenize("北京|天安门") == ["北京", "天安门"]
    # A registered function is saved under its name; a lambda cannot be imported again: a placeholder.
    assert split_name(_bar_segmenter) == path and split_name(WORD_SPLITTERS["jieba"]) == "jieba"
    ElmoTokenizer(word_split=lambda text: text.split("|")).save_pretrained(tmp_path / "lambda")
    saved = json.loads((tmp_path / "lambda" / "tokenizer_config.json").read_text())["word_split"]
    assert saved == "custom:test_tokenizer.test_word_split_import_path_is_imported_only_when_asked.<locals>.<lambda>"
    with pytest.raises(ValueError, match="cannot hold: pass it again"):
        ElmoTokenizer.from_pretrained(tmp_path / "lambda")


GRAPHEMES = {  # text -> words of the default split: a user-perceived character is one token, never cut
    "family 👨\u200d👩\u200d👧 ok": ["family", "👨\u200d👩\u200d👧", "ok"],
    "good👍🏽!": ["good", "👍🏽", "!"],
    "cafe\u0301 re\u0301sume\u0301s": ["cafe\u0301", "re\u0301sume\u0301s"],  # decomposed accents stay in the word
    "🇫🇷🇩🇪 1\ufe0f\u20e3": ["🇫🇷", "🇩🇪", "1\ufe0f\u20e3"],  # flags, a keycap
    "नमस्ते दुनिया": ["नमस्ते", "दुनिया"],  # vowel signs and viramas stay in their word
    "葛\U000E0100城": ["葛\U000E0100", "城"],  # an ideograph with its variation selector
    "x \u0301y": ["x", "\u0301", "y"],  # a mark carried by a space: the space still separates
}


def test_grapheme_clusters_are_one_unit():
    for text, words in GRAPHEMES.items():
        assert split_words(text) == words, text
        assert split_words(" ".join(words)) == words  # splitting the split text again gives the same words
    assert ElmoTokenizer().tokenize("I ❤\ufe0f 👨\u200d👩\u200d👧!") == ["I", "❤\ufe0f", "👨\u200d👩\u200d👧", "!"]
    if _has_jieba():
        assert split_words("我爱北京👍🏽。", "jieba") == ["我", "爱", "北京", "👍🏽", "。"]


def test_grapheme_clusters_change_nothing_in_ordinary_text():
    """English, Chinese, Japanese, Korean, accented Latin (precomposed) and single emoji split exactly as the rule
    does on code points: the clusters only matter where a character is followed by one that joins it."""
    from elmo_hf.tokenization.word_splits_elmo import _PUNCTUATION_SPLIT, _with_clitics_split

    texts = [
        "The cat sat on the mat. Don't stop: 3.14, 1,000 and U.S. e.g. <S> -- ... ``quoted''",
        *CHINESE_SAMPLE,
        "日本語のテキストです。カタカナ、ひらがな",
        "한국어 문장입니다. 서울에 갑니다!",
        "Ünïcödé wörds — naïve café über Zürich; emoji 🙂 too, ½ ² №",
        "Ελληνικά κείμενα, русский текст, עברית, العربية",
    ]
    for text in texts:
        assert split_words(text) == _with_clitics_split(text, _PUNCTUATION_SPLIT.findall(text)), text


def _has_jieba() -> bool:
    try:
        import jieba  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
def test_chinese_per_character_in_a_fresh_process_without_the_project(tmp_path, vocab_file):
    """Remote code in a fresh interpreter splits Chinese per ideograph, as the tokenizer that was saved."""
    tok = ElmoTokenizer(vocab_file=str(vocab_file))
    folder = tmp_path / "hub-folder"
    tok.save_pretrained(folder)
    code = REMOTE_CODE.format(modules=str(tmp_path / "modules"), folder=str(folder), sample=CHINESE_SAMPLE)
    remote = json.loads(run_isolated(code, cwd=tmp_path, timeout=120).stdout.strip().splitlines()[-1])
    local = tok(CHINESE_SAMPLE, padding=True, return_tensors="pt", return_vocab_ids=True)
    assert remote["module"].startswith("transformers_modules.")
    assert remote["input_ids"] == local["input_ids"].tolist()
    assert remote["input_ids"][0][1:17] == [expected_row(c) for c in CHINESE_SAMPLE[0]]
    assert (
        remote["word_ids"]
        == local.word_ids(1)
        == [None, *range(9), None, None, None, None, None, None, None, None]
    )


# ----- bad and unusual input ------------------------------------------------------------------------------------
def test_invalid_input_types(tok):
    with pytest.raises(TypeError, match="got None"):
        tok(None)
    with pytest.raises(TypeError, match=r"text\[1\] must be a str, got int"):
        tok(["fine", 3])
    with pytest.raises(TypeError, match=r"text\[0\]\[1\] must be a str, got NoneType"):
        tok([["fine", None]], is_split_into_words=True)
    with pytest.raises(TypeError, match=r"text\[2\] must be a str, got float"):
        tok(["a", "b", 1.5], is_split_into_words=True)
    with pytest.raises(TypeError, match="is_split_into_words=True"):
        tok([["a", "b", "c"]])  # [["a", "b"]] is a pair of sentences, as in transformers
    with pytest.raises(TypeError, match="list of words"):
        tok("a b", is_split_into_words=True)
    with pytest.raises(TypeError, match="decode bytes"):
        tok(b"bytes")
    with pytest.raises(ValueError, match="empty list"):
        tok([])
    with pytest.raises(ValueError, match="empty list"):
        tok([], is_split_into_words=True)
    with pytest.raises(ValueError, match="text_target"):
        tok("a", text_target="b")
    with pytest.raises(ValueError, match="right"):
        tok(["a"], padding=True, padding_side="left")
    with pytest.raises(ValueError, match="right"):
        ElmoTokenizer(padding_side="left")
    with pytest.raises(ValueError, match="'pt' or 'np'"):
        tok("a", return_tensors="mlx")


def test_empty_and_whitespace_text(tok):
    for text in ("", "   ", "\t\n\r\x0b\x0c\u2003"):
        assert tok(text)["input_ids"] == [BOS_ROW, EOS_ROW]
        assert tok(text, add_special_tokens=False)["input_ids"] == []
        assert tok(text).word_ids() == [None, None]
    batch = tok(["", "a"], padding=True, return_tensors="pt")
    assert batch["input_ids"][0].tolist() == [BOS_ROW, EOS_ROW, PAD_ROW]
    assert tok([[]], is_split_into_words=True)["input_ids"] == [[BOS_ROW, EOS_ROW]]


def test_long_and_multibyte_tokens_are_cut_at_48_bytes(tok):
    long_word = "x" * 10_000
    row = tok([long_word], is_split_into_words=True, add_special_tokens=False)["input_ids"][0]
    assert row == [259] + [ord("x") + 1] * 48 + [260] == expected_row(long_word)
    emoji = "😀" * 13  # 52 bytes: 12 whole emoji fit
    assert tok.convert_tokens_to_char_ids(emoji) == [259] + [b + 1 for b in ("😀" * 12).encode()] + [260]
    cut = "a" + "é" * 30  # 61 bytes: the 48th byte is the first half of an "é"
    assert tok.convert_tokens_to_char_ids(cut) == expected_row(cut)
    assert tok.convert_tokens_to_char_ids(cut)[48] == 0xC3 + 1
    assert tok(long_word)["input_ids"][1] == expected_row(long_word)


def test_control_characters_surrogates_and_empty_words(tok):
    assert tok(["a\x00b"], is_split_into_words=True, add_special_tokens=False)["input_ids"] == [
        [259, 98, 1, 99, 260] + [261] * 45
    ]
    assert tok("a\x00b", add_special_tokens=False)["input_ids"] == expected_sentence(
        ["a", "\x00", "b"], False
    )
    assert tok("\ud800")["input_ids"] == [BOS_ROW, EOS_ROW]  # raw text: the surrogate is dropped
    assert tok("x\udfffy", add_special_tokens=False)["input_ids"] == [expected_row("xy")]
    # Pre-split words are never dropped (labels stay aligned): "" and "\ud800" give [BOW, EOW] like the originals.
    assert (
        tok(["", "\ud800"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
        == [[259, 260] + [261] * 48] * 2
    )
    assert tok([" "], is_split_into_words=True, add_special_tokens=False)["input_ids"] == [expected_row(" ")]


# ----- cache, copies, threads -----------------------------------------------------------------------------------
def test_cache_is_bounded_and_correct():
    tok = ElmoTokenizer(cache_size=10)
    words = [f"w{i}" for i in range(100)]
    first = tok(words, is_split_into_words=True)["input_ids"]
    assert first == expected_sentence(words)
    assert (
        tok(words, is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"][0].tolist()
        == first
    )
    tok(["a"], is_split_into_words=True)
    assert len(tok._encoding_state().rows) <= 10


def test_pickle_deepcopy_and_threads():
    tok = ElmoTokenizer(cache_size=50)
    tok("warm the cache")
    for clone in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok)):
        assert clone("warm the cache")["input_ids"] == tok("warm the cache")["input_ids"]
    sentences = [" ".join(f"t{i}w{j}" for j in range(30)) for i in range(40)]
    expected = [expected_sentence(s.split()) for s in sentences]
    errors = []

    def work(offset: int) -> None:
        for k in range(20):
            i = (offset + k) % len(sentences)
            out = tok(sentences[i : i + 1], padding=True, return_tensors="pt")["input_ids"][0].tolist()
            if out != expected[i]:
                errors.append(i)

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.slow
def test_tokenizer_package_does_not_import_the_model_package():
    """The packages depend one way, modeling_elmo -> tokenization: importing the tokenizer loads no model code, and
    `import elmo_hf.modeling_elmo` registers the tokenizer with AutoTokenizer."""
    code = (
        "import sys\nfrom elmo_hf import tokenization  # noqa: F401\n"
        "assert 'elmo_hf.modeling_elmo' not in sys.modules, sorted(sys.modules)\n"
        "from elmo_hf import modeling_elmo\n"
        "from transformers import AutoTokenizer\n"
        "from transformers.models.auto.tokenization_auto import tokenizer_class_from_name\n"
        "assert tokenizer_class_from_name('ElmoTokenizerFast') is tokenization.ElmoTokenizerFast\n"
        # transformers 5 maps a slow name to its registered fast class; 4.x keeps the slow one
        "assert tokenizer_class_from_name('ElmoTokenizer') in (tokenization.ElmoTokenizer, "
        "tokenization.ElmoTokenizerFast)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], check=True, timeout=300)


def test_jieba_is_quiet_unless_debugging():
    """jieba's "Building prefix dict ..." lines (its own logger and handler, at DEBUG) are emitted only when the
    tokenizer's logger shows DEBUG (the commands' --verbose). Records are caught by a handler of our own: jieba's
    handler writes to the stderr of the moment jieba was first imported, which a test cannot rely on."""
    jieba = pytest.importorskip("jieba", reason="jieba (the optional extra elmo-hf[zh]) is not installed")
    from elmo_hf.tokenization.word_splits_elmo import _require_jieba

    class Records(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.messages: list[str] = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    package_logger = logging.getLogger("elmo_hf.tokenization")
    level = package_logger.level
    caught = Records()
    jieba.default_logger.addHandler(caught)
    try:
        for debugging in (False, True):
            package_logger.setLevel(logging.DEBUG if debugging else logging.INFO)
            _require_jieba()
            caught.messages.clear()
            jieba.Tokenizer().initialize()  # a fresh dictionary: what the first split of a run builds
            assert any("Building prefix dict" in m for m in caught.messages) is debugging
    finally:
        jieba.default_logger.removeHandler(caught)
        package_logger.setLevel(level)
        _require_jieba()


def test_a_batch_of_pre_split_pairs_encodes_as_the_same_pairs_of_texts(tok):
    """transformers batches pre-split pairs as `[(words, words), ...]` with is_split_into_words=True; a batch of
    sentences of two words each stays a batch of sentences."""
    pairs = tok([(["the", "bank"], ["rose"]), (["we"], ["sat", "down"])], is_split_into_words=True)
    texts = tok([("the bank", "rose"), ("we", "sat down")])
    assert pairs["input_ids"] == texts["input_ids"] and pairs["token_type_ids"] == texts["token_type_ids"]
    assert pairs.word_ids(1) == [None, 0, None, None, 0, 1, None]
    sentences = tok([["the", "bank"], ["we", "sat"]], is_split_into_words=True)
    assert "token_type_ids" not in sentences and len(sentences["input_ids"]) == 2
