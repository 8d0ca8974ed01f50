"""Tests of `ElmoTokenizerFast` (issue 54, item 4): a `PreTrainedTokenizerFast` whose every output equals
`ElmoTokenizer`'s on the texts of tests/test_tokenizer.py (Chinese, emoji and the odd cases included), on pairs, with
truncation and with windows as `run_qa.py` asks for them; `run_qa.py`'s own preprocessing runs on it, its
`isinstance` check included; it loads as remote code through `AutoTokenizer(use_fast=True, trust_remote_code=True)`.
"""

from __future__ import annotations

import copy
import json
import pickle
import threading

import numpy as np
import pytest
import torch
from conftest import run_isolated, tiny_config
from test_tokenizer import CHINESE_SAMPLE, GRAPHEMES, OFFSET_TEXTS, SPLITS, expected_sentence
from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast, default_data_collator

from elmo_hf.modeling_elmo import ElmoForQuestionAnswering
from elmo_hf.tokenization import WORD_SPLITTERS, ElmoTokenizer, ElmoTokenizerFast

# Every text of tests/test_tokenizer.py's tables, and its odd inputs: blank text, long and cut words, control
# characters, lone surrogates.
TEXTS = [
    *(text for text, _ in SPLITS),
    *OFFSET_TEXTS,
    *GRAPHEMES,
    *CHINESE_SAMPLE,
    "我爱北京天安门，天安门上太阳升。伟大领袖毛主席，指引我们向前进。" * 3,
    "The cat sat on the mat.",
    "Hi",
    "",
    "A much longer sentence, with commas, numbers 12.5 and more!",
    "   ",
    "\t\n\r\x0b\x0c\u2003",
    "x" * 10_000,
    "😀" * 13 + " " + "a" + "é" * 30,
    "a\x00b I ❤\ufe0f 👨\u200d👩\u200d👧!",
    "x\udfffy \ud800",
]
# Lone surrogates cannot reach the `tokenizers` library: the fast tokenizer's offsets count the characters without
# them, where ElmoTokenizer gives such words empty offsets (with a warning). Every other output is the same.
SURROGATE_TEXTS = {text for text in TEXTS if any("\ud800" <= ch <= "\udfff" for ch in text)}


@pytest.fixture(scope="module")
def slow() -> ElmoTokenizer:
    return ElmoTokenizer()


@pytest.fixture(scope="module")
def fast() -> ElmoTokenizerFast:
    return ElmoTokenizerFast()


@pytest.fixture(scope="module")
def every_call_on_tokenizers() -> ElmoTokenizerFast:
    """Plain calls too go through the `tokenizers` encodings (as calls with truncation, windows or offsets do)."""
    tokenizer = ElmoTokenizerFast()
    tokenizer._plain_calls = False
    return tokenizer


@pytest.fixture(params=["plain calls on ElmoTokenizer's path", "every call on tokenizers"])
def fast_path(request, fast, every_call_on_tokenizers) -> ElmoTokenizerFast:
    """Both ways a call is encoded: the equality tests hold for each."""
    return fast if request.param.startswith("plain") else every_call_on_tokenizers


def assert_same(expected, got, skip: tuple[str, ...] = ()) -> None:
    """The same keys in the same order, the same values (and tensor types), and the same alignment of every row."""
    assert list(got) == list(expected)
    for key in expected:
        if key in skip:
            continue
        a, b = expected[key], got[key]
        if isinstance(a, (torch.Tensor, np.ndarray)):
            assert type(b) is type(a) and b.dtype == a.dtype and b.shape == a.shape, key
            assert (a == b).all(), key
        else:
            assert b == a, key
    for i in range(len(got.encodings)):
        assert got.word_ids(i) == expected.word_ids(i)
        assert got.sequence_ids(i) == expected.sequence_ids(i)
        assert got.tokens(i) == expected.tokens(i)


def test_it_is_a_fast_tokenizer_with_the_character_vocabulary(slow, fast):
    assert isinstance(fast, PreTrainedTokenizerFast) and fast.is_fast
    assert fast.get_vocab() == slow.get_vocab() and len(fast) == fast.vocab_size == 262
    assert (fast.pad_token_id, fast.bos_token_id, fast.eos_token_id) == (0, 257, 258)
    assert fast.tokenize("Don't stop") == slow.tokenize("Don't stop") == ["Do", "n't", "stop"]
    assert fast("a")["input_ids"] == expected_sentence(["a"])


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_each_text_alone_gives_the_same_outputs(slow, fast_path, text):
    options = dict(return_offsets_mapping=True, return_special_tokens_mask=True, return_length=True,
                   return_token_type_ids=True)
    skip = ("offset_mapping",) if text in SURROGATE_TEXTS else ()
    assert_same(slow(text, **options), fast_path(text, **options), skip)
    assert_same(slow(text, add_special_tokens=False), fast_path(text, add_special_tokens=False))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"padding": True, "return_tensors": "pt"},
        {"padding": "longest", "return_tensors": "np"},
        {"add_special_tokens": False, "padding": True, "return_tensors": "pt", "return_special_tokens_mask": True},
        {"truncation": True, "max_length": 4, "return_offsets_mapping": True},
        {"max_length": 5},  # max_length alone truncates too
        {"padding": "max_length", "max_length": 16, "truncation": True, "pad_to_multiple_of": 8,
         "return_tensors": "pt", "return_length": True, "return_token_type_ids": True},
        {"padding": True, "return_offsets_mapping": True, "return_special_tokens_mask": True, "return_length": True},
    ],
    ids=lambda options: ",".join(options) or "defaults",
)
def test_a_batch_of_every_text_gives_the_same_outputs(slow, fast_path, options):
    texts = [text for text in TEXTS if text not in SURROGATE_TEXTS]
    assert_same(slow(texts, **options), fast_path(texts, **options))


def test_truncation_side_left_and_windows_of_single_sentences(fast):
    words = "one two three four five six seven".split()
    for side in ("right", "left"):
        slow, quick = ElmoTokenizer(truncation_side=side), ElmoTokenizerFast(truncation_side=side)
        for options in ({"truncation": True, "max_length": 4},
                        {"truncation": True, "max_length": 5, "stride": 1, "return_overflowing_tokens": True},
                        {"truncation": True, "max_length": 5, "stride": 2, "return_overflowing_tokens": True,
                         "padding": "max_length", "return_offsets_mapping": True, "return_tensors": "pt"}):
            assert_same(slow(" ".join(words), **options), quick(" ".join(words), **options))
            assert_same(slow([words, words[:2]], is_split_into_words=True, **options),
                        quick([words, words[:2]], is_split_into_words=True, **options))
    windows = fast(" ".join(words), truncation=True, max_length=5, stride=1, return_overflowing_tokens=True)
    assert windows["overflow_to_sample_mapping"] == [0, 0, 0]
    assert [windows.tokens(i)[1:-1] for i in range(3)] == [words[0:3], words[2:5], words[4:7]]


@pytest.mark.parametrize("split", ["whitespace", "jieba", "bars"])
def test_other_word_splits(split, monkeypatch):
    if split == "jieba":
        pytest.importorskip("jieba")
    if split == "bars":  # a registered function, run as the custom pre-tokenizer
        for registry in ("_functions", "_requirements"):
            monkeypatch.setattr(WORD_SPLITTERS, registry, dict(getattr(WORD_SPLITTERS, registry)))
        WORD_SPLITTERS.register("bars", lambda text: text.split("|"))
    texts = [*CHINESE_SAMPLE, "北京|天安门 a\x1fb", " consumers may  want\u2003to\x1cmove ", "我 爱 北京 天安门 。"]
    options = dict(padding=True, return_offsets_mapping=True, return_tensors="pt")
    assert_same(ElmoTokenizer(word_split=split)(texts, **options),
                ElmoTokenizerFast(word_split=split)(texts, **options))


def test_the_whitespace_split_splits_on_what_str_isspace_accepts():
    from elmo_hf.tokenization.tokenization_elmo_fast import _PYTHON_SPACES

    assert _PYTHON_SPACES == "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def test_a_split_that_changes_the_words_is_refused_in_one_line():
    lower = ElmoTokenizerFast(word_split=lambda text: [w.lower() for w in text.split()])
    with pytest.raises(ValueError, match="changed some words of the text; .* use ElmoTokenizer") as caught:
        lower("John lives in Paris")
    assert "\n" not in str(caught.value)
    assert lower("john lives")["input_ids"] == expected_sentence(["john", "lives"])


def test_pre_split_words_are_used_as_they_are(slow, fast_path):
    words = [["EU", "rejects", "German", "call"], ["", "\ud800", " ", "New York", "<S>", "😀" * 13], ["Blackburn"]]
    for options in ({}, {"padding": True, "return_tensors": "pt", "return_offsets_mapping": True,
                         "return_special_tokens_mask": True}):
        assert_same(slow(words, is_split_into_words=True, **options),
                    fast_path(words, is_split_into_words=True, **options))
    assert_same(slow(words[0], is_split_into_words=True), fast_path(words[0], is_split_into_words=True))
    assert fast_path(words, is_split_into_words=True).word_ids(1) == [None, 0, 1, 2, 3, 4, 5, None]


def test_a_plain_call_makes_its_tokenizers_encodings_when_first_asked_for(fast, every_call_on_tokenizers):
    texts = ["John lives in New York.", "", "我爱北京 😀!"]
    plain = fast(texts, padding=True, return_tensors="pt")
    assert plain._pending is not None and plain.is_fast  # nothing encoded by `tokenizers` yet
    full = every_call_on_tokenizers(texts, padding=True, return_tensors="pt")
    assert [e.offsets for e in plain.encodings] == [e.offsets for e in full.encodings]
    assert plain._pending is None and len(plain.encodings) == 3
    assert plain.char_to_token(2, 5) == full.char_to_token(2, 5) == 5
    assert plain.tokens(2) == full.tokens(2) == ["<S>", "我", "爱", "北", "京", "😀", "!", "</S>"]
    again = pickle.loads(pickle.dumps(fast(texts)))
    assert again.word_ids(0) == full.word_ids(0) and again.tokens(2) == full.tokens(2)
    assert again["input_ids"] == fast(texts)["input_ids"]
    words = [["a", "b"]]
    later = fast(words, is_split_into_words=True)
    words[0].append("c")  # the caller reuses its list before asking for word_ids()
    assert later.word_ids(0) == [None, 0, 1, None] and later.tokens(0) == ["<S>", "a", "b", "</S>"]


QUESTION, PASSAGE = "Where does John work?", "John Smith works for Google in Paris. He likes it there, they say."


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"return_offsets_mapping": True, "return_special_tokens_mask": True, "padding": "max_length",
         "max_length": 40, "return_tensors": "pt"},
        {"truncation": "only_second", "max_length": 12, "return_offsets_mapping": True},
        {"truncation": "only_first", "max_length": 22},
        {"truncation": "longest_first", "max_length": 14},  # an even cut: both rules agree
        # run_qa.py's call: windows of the passage sharing `stride` words, each row with its sample
        {"truncation": "only_second", "max_length": 14, "stride": 3, "return_overflowing_tokens": True,
         "return_offsets_mapping": True, "padding": "max_length"},
        {"truncation": "only_second", "max_length": 14, "stride": 3, "return_overflowing_tokens": True,
         "return_offsets_mapping": True, "padding": True, "return_tensors": "pt"},
        {"truncation": "longest_first", "max_length": 11, "stride": 1, "return_overflowing_tokens": True},
    ],
    ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()) or "defaults",
)
def test_pairs_give_the_same_outputs(slow, fast_path, options):
    questions, passages = [QUESTION, "Who?", "我在哪里？"], [PASSAGE, "Nobody is here at all today.", CHINESE_SAMPLE[1]]
    assert_same(slow(questions, passages, **options), fast_path(questions, passages, **options))
    assert_same(slow(QUESTION, PASSAGE, **options), fast_path(QUESTION, PASSAGE, **options))
    assert_same(slow(list(zip(questions, passages)), **options),
                fast_path(list(zip(questions, passages)), **options))


def test_an_odd_longest_first_cut_follows_the_tokenizers_library(slow, fast):
    """Where a pair's two sentences lose an odd number of words under `longest_first`, transformers' slow rule
    (`truncate_sequences`) and the `tokenizers` library's give the odd word to different sentences: the fast
    tokenizer follows its library, as every fast tokenizer of transformers does, and ElmoTokenizer does too once it
    gives windows."""
    first, second = "a b c d e", "v w x y z"
    cut = fast(first, second, truncation="longest_first", max_length=11)
    assert cut.tokens() == ["<S>", "a", "b", "c", "</S>", "<S>", "v", "w", "x", "y", "</S>"]
    assert slow(first, second, truncation="longest_first", max_length=11).tokens()[1:5] == ["a", "b", "c", "d"]
    windows = slow(first, second, truncation="longest_first", max_length=11, return_overflowing_tokens=True)
    assert windows["input_ids"][0] == cut["input_ids"]
    # `only_first` where the first sentence would lose all its words: ElmoTokenizer keeps none of them, the
    # `tokenizers` library refuses (a one-line error here)
    assert slow(first, second, truncation="only_first", max_length=9).tokens()[:2] == ["<S>", "</S>"]
    with pytest.raises(ValueError, match="Sequence to truncate too short"):
        fast(first, second, truncation="only_first", max_length=9)


def test_errors_are_one_line_like_the_slow_tokenizers(slow, fast):
    for call, error, message in (
        (lambda tok: tok(None), TypeError, "got None"),
        (lambda tok: tok(["fine", 3]), TypeError, r"text\[1\] must be a str, got int"),
        (lambda tok: tok([]), ValueError, "empty list"),
        (lambda tok: tok("a", text_target="b"), ValueError, "text_target"),
        (lambda tok: tok(["a"], padding=True, padding_side="left"), ValueError, "right"),
        (lambda tok: tok("a", return_tensors="mlx"), ValueError, "'pt' or 'np'"),
        (lambda tok: tok(["a b c", "d"], return_tensors="pt"), ValueError, "padding=True"),
        (lambda tok: tok(["a b c", "d"], padding="max_length", max_length=3, truncation=False,
                         return_tensors="pt"), ValueError, "truncation=True"),
        (lambda tok: tok("a b", truncation=True, max_length=1), ValueError, "max_length=1"),
        (lambda tok: tok("a b c d e", truncation=True, max_length=4, stride=2, return_overflowing_tokens=True),
         ValueError, "stride=2 must be less than the 2 words"),
        (lambda tok: tok("a", return_vocab_ids=True), ValueError, "word vocabulary"),
    ):
        for tok in (slow, fast):
            with pytest.raises(error, match=message) as caught:
                call(tok)
            assert "\n" not in str(caught.value), type(tok).__name__
    with pytest.raises(ValueError, match="right"):
        ElmoTokenizerFast(padding_side="left")
    with pytest.raises(ValueError, match="stride") as caught:  # a window of a pair: the `tokenizers` library refuses
        fast(QUESTION, PASSAGE, truncation="only_second", max_length=12, stride=4, return_overflowing_tokens=True)
    assert "\n" not in str(caught.value)


def test_vocab_ids_decoding_and_padding_are_the_slow_tokenizers(tmp_path):
    vocab = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "."]
    slow, fast = ElmoTokenizer(word_vocab=vocab), ElmoTokenizerFast(word_vocab=vocab)
    texts = ["the cat sat .", "", "the dog sat on the mat ."]
    for options in ({}, {"padding": True, "return_tensors": "pt"}):
        assert_same(slow(texts, return_vocab_ids=True, **options), fast(texts, return_vocab_ids=True, **options))
    enc = fast(["Hello, world!", "naïve 😀"], padding=True, return_tensors="pt")
    assert fast.decode(enc["input_ids"], skip_special_tokens=True) == ["Hello , world !", "naïve 😀"]
    assert fast.convert_ids_to_tokens(enc["input_ids"][1].tolist()) == ["<S>", "naïve", "😀", "</S>", "<pad>", "<pad>"]
    features = [{"input_ids": ids, "attention_mask": mask} for ids, mask in zip(*fast(texts).values(), strict=True)]
    padded = DataCollatorWithPadding(fast)(features)
    assert torch.equal(padded["input_ids"], slow(texts, padding=True, return_tensors="pt")["input_ids"])


def test_save_load_pickle_copy_and_datasets_fingerprint(tmp_path, fast):
    datasets_fingerprint = pytest.importorskip("datasets.fingerprint")
    vocab = ["<S>", "</S>", "<UNK>", "the", "cat"]
    ElmoTokenizer(word_vocab=vocab, word_split="whitespace").save_pretrained(tmp_path / "slow")
    from_slow = ElmoTokenizerFast.from_pretrained(tmp_path / "slow")
    assert from_slow.word_split == "whitespace" and from_slow.word_vocab == vocab
    from_slow.save_pretrained(tmp_path / "fast")
    assert not (tmp_path / "fast" / "tokenizer.json").exists()  # rebuilt from word_split, never read from a file
    config = json.loads((tmp_path / "fast" / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"] == ["tokenization_elmo.ElmoTokenizer",
                                                   "tokenization_elmo_fast.ElmoTokenizerFast"]
    back = ElmoTokenizer.from_pretrained(tmp_path / "fast")
    line = "the cat  sat"
    assert_same(back(line, return_vocab_ids=True), from_slow(line, return_vocab_ids=True))
    for clone in (pickle.loads(pickle.dumps(from_slow)), copy.deepcopy(from_slow)):
        assert clone.word_split == "whitespace"
        assert_same(from_slow([line, "a"], padding=True), clone([line, "a"], padding=True))
    before = datasets_fingerprint.Hasher.hash(fast)
    fast(["new words fill the cache"] * 3, truncation=True, max_length=4, padding=True)
    assert datasets_fingerprint.Hasher.hash(fast) == before  # Dataset.map finds its cache again


def test_datasets_before_4_7_fingerprinting_leaves_the_fast_tokenizer_working(fast):
    """datasets 3.x - 4.6 replace the live tokenizer's attribute named `cache` with `{}` when they fingerprint it
    (test_tokenizer.py does it to ElmoTokenizer): the fast tokenizer's state is not there, and hashes as nothing."""
    datasets_fingerprint = pytest.importorskip("datasets.fingerprint")
    expected = fast(["the bank", "a b c"], padding=True)
    before = datasets_fingerprint.Hasher.hash(fast)
    state = fast.__dict__  # what datasets 3.6's reducer of tokenizers does, to the letter
    if "cache" in state and isinstance(state["cache"], dict):
        state["cache"] = {}
    assert_same(fast(["the bank", "a b c"], padding=True), expected)
    assert datasets_fingerprint.Hasher.hash(fast) == before


def test_threads_with_different_settings_get_their_own_outputs(slow):
    """The backend's truncation and padding are set for each call: calls from threads must not mix them."""
    fast = ElmoTokenizerFast(cache_size=50)
    sentences = [" ".join(f"t{i}w{j}" for j in range(30)) for i in range(40)]
    errors = []

    def work(offset: int) -> None:
        for k in range(15):
            i, length = (offset + k) % len(sentences), 4 + (offset + k) % 9
            options = {"truncation": True, "max_length": length, "padding": "max_length"}
            if fast(sentences[i : i + 2], **options)["input_ids"] != slow(sentences[i : i + 2], **options)["input_ids"]:
                errors.append((i, length))

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# --------------------------------------------------------------------------------------------------
# transformers' example scripts: run_qa.py's preprocessing, run_ner.py's label alignment
# --------------------------------------------------------------------------------------------------
def prepare_train_features(examples, tokenizer, max_seq_length: int, doc_stride: int):
    """`prepare_train_features` of transformers' examples/pytorch/question-answering/run_qa.py, as the script writes
    it (question first, `pad_to_max_length` on)."""
    pad_on_right = tokenizer.padding_side == "right"
    examples["question"] = [q.lstrip() for q in examples["question"]]
    tokenized_examples = tokenizer(
        examples["question" if pad_on_right else "context"],
        examples["context" if pad_on_right else "question"],
        truncation="only_second" if pad_on_right else "only_first",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    sample_mapping = tokenized_examples.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized_examples.pop("offset_mapping")
    tokenized_examples["start_positions"] = []
    tokenized_examples["end_positions"] = []
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized_examples["input_ids"][i]
        if tokenizer.cls_token_id in input_ids:
            cls_index = input_ids.index(tokenizer.cls_token_id)
        elif tokenizer.bos_token_id in input_ids:
            cls_index = input_ids.index(tokenizer.bos_token_id)
        else:
            cls_index = 0
        sequence_ids = tokenized_examples.sequence_ids(i)
        sample_index = sample_mapping[i]
        answers = examples["answers"][sample_index]
        if len(answers["answer_start"]) == 0:
            tokenized_examples["start_positions"].append(cls_index)
            tokenized_examples["end_positions"].append(cls_index)
        else:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start_index = 0
            while sequence_ids[token_start_index] != (1 if pad_on_right else 0):
                token_start_index += 1
            token_end_index = len(input_ids) - 1
            while sequence_ids[token_end_index] != (1 if pad_on_right else 0):
                token_end_index -= 1
            if not (offsets[token_start_index][0] <= start_char and offsets[token_end_index][1] >= end_char):
                tokenized_examples["start_positions"].append(cls_index)
                tokenized_examples["end_positions"].append(cls_index)
            else:
                while token_start_index < len(offsets) and offsets[token_start_index][0] <= start_char:
                    token_start_index += 1
                tokenized_examples["start_positions"].append(token_start_index - 1)
                while offsets[token_end_index][1] >= end_char:
                    token_end_index -= 1
                tokenized_examples["end_positions"].append(token_end_index + 1)
    return tokenized_examples


SQUAD = [
    {"id": "a", "question": "  Where was Ada born?",
     "context": "Ada was born in Lisbon in 1990. Boris was born in Oslo.",
     "answers": {"text": ["Lisbon"], "answer_start": [16]}},
    {"id": "b", "question": "Where was Boris born?",
     "context": "Ada was born in Lisbon in 1990. Boris was born in Oslo.",
     "answers": {"text": ["Oslo"], "answer_start": [50]}},
    {"id": "c", "question": "Who was born in 京都?", "context": "陈 was born in 京都 in 1950 🎉. Nobody else was.",
     "answers": {"text": ["陈"], "answer_start": [0]}},
    {"id": "d", "question": "Is there an answer?", "context": "No, there is none in this passage at all.",
     "answers": {"text": [], "answer_start": []}},
]


def test_run_qa_preprocessing_runs_on_it_and_trains_the_tiny_model(slow, fast):
    datasets = pytest.importorskip("datasets")
    # run_qa.py's own check
    if not isinstance(fast, PreTrainedTokenizerFast):
        raise ValueError("This example script only works for models that have a fast tokenizer.")
    raw = datasets.Dataset.from_list(SQUAD)
    features = raw.map(lambda examples: prepare_train_features(examples, fast, 16, 4), batched=True,
                       remove_columns=raw.column_names)
    assert len(features) > len(raw)  # the long passages gave several windows
    answers = {"Lisbon": 0, "Oslo": 0, "陈": 0}
    for feature in features:
        start, end = feature["start_positions"], feature["end_positions"]
        # (an answer that ends a window gets start > end: the script's own edge case, for every tokenizer)
        if 0 < start <= end:  # the answer's words, read back from the rows
            answer = fast.decode(feature["input_ids"][start : end + 1])
            answers[answer] += 1
    assert all(answers.values()), answers  # every answer is found in some window
    expected = prepare_train_features({k: [e[k] for e in SQUAD] for k in SQUAD[0]}, slow, 16, 4)
    assert {k: features[k] for k in expected} == dict(expected)  # what ElmoTokenizer gives for the same calls
    batch = default_data_collator([features[i] for i in range(len(features))])
    assert batch["input_ids"].shape == (len(features), 16, 50)
    torch.manual_seed(0)
    model = ElmoForQuestionAnswering(tiny_config()).train()
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss) and model.similarity.weight.grad.abs().sum() > 0


def test_run_ner_label_alignment_runs_on_it(slow, fast):
    """`tokenize_and_align_labels` of run_ner.py: labels of the first token of each word, -100 elsewhere."""
    words, tags = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]], [[3, 0, 7, 0], [1, 2]]
    for tok in (slow, fast):
        enc = tok(words, truncation=True, max_length=5, is_split_into_words=True, padding="max_length")
        labels = []
        for i, label in enumerate(tags):
            previous, ids = None, []
            for word in enc.word_ids(batch_index=i):
                ids.append(-100 if word is None or word == previous else label[word])
                previous = word
            labels.append(ids)
        assert labels == [[-100, 3, 0, 7, -100], [-100, 1, 2, -100, -100]]


def test_run_glue_and_run_swag_preprocessing_give_the_same_features(slow, fast):
    """run_glue.py's `preprocess_function` (pairs, `truncation=True`) and run_swag.py's (every ending beside its
    context, flattened, then regrouped by four)."""
    first, second = ["The cat sat on the mat.", "Hi"], ["A cat was on a mat .", "Hello there, how are you today?"]
    for padding in ("max_length", False):
        assert_same(slow(first, second, padding=padding, max_length=12, truncation=True),
                    fast(first, second, padding=padding, max_length=12, truncation=True))
    contexts, starts = ["Members of the procession walk down the street holding small horn brass instruments."], ["A"]
    endings = [["drum line passes by walking down the street playing their instruments.", "member stands up.",
                "cat jumps.", "crowd watches them."]]
    first_sentences = [[context] * 4 for context in contexts]
    second_sentences = [[f"{start} {ending}" for ending in options] for start, options in zip(starts, endings)]
    first_sentences, second_sentences = sum(first_sentences, []), sum(second_sentences, [])
    for tok in (slow, fast):
        tokenized = tok(first_sentences, second_sentences, truncation=True, max_length=20, padding="max_length")
        grouped = {k: [v[i : i + 4] for i in range(0, len(v), 4)] for k, v in tokenized.items()}
        assert [len(choice) for choice in grouped["input_ids"][0]] == [20] * 4
        if tok is slow:
            expected = grouped
    assert grouped == expected


REMOTE_FAST = """
import json, os, sys
os.environ["HF_MODULES_CACHE"] = {modules!r}
from transformers import AutoTokenizer, PreTrainedTokenizerFast
tok = AutoTokenizer.from_pretrained({folder!r}, use_fast=True, trust_remote_code=True)
enc = tok({sample!r}, padding=True, return_tensors="pt", return_offsets_mapping=True)
print(json.dumps({{
    "module": type(tok).__module__, "fast": isinstance(tok, PreTrainedTokenizerFast),
    "leaked": sorted(m for m in sys.modules if m.split(".")[0] == "elmo_hf"),
    "input_ids": enc["input_ids"].tolist(), "offsets": enc["offset_mapping"].tolist(), "word_ids": enc.word_ids(1),
}}))
"""


@pytest.mark.slow
def test_auto_tokenizer_use_fast_loads_it_as_remote_code_in_a_fresh_process(tmp_path, slow):
    folder = tmp_path / "hub-folder"
    ElmoTokenizerFast().save_pretrained(folder)
    sample = [*CHINESE_SAMPLE, OFFSET_TEXTS[3]]
    code = REMOTE_FAST.format(modules=str(tmp_path / "modules"), folder=str(folder), sample=sample)
    remote = json.loads(run_isolated(code, cwd=tmp_path, timeout=120).stdout.strip().splitlines()[-1])
    assert remote["module"].startswith("transformers_modules.") and remote["module"].endswith("tokenization_elmo_fast")
    assert remote["fast"] is True and remote["leaked"] == []
    local = slow(sample, padding=True, return_tensors="pt", return_offsets_mapping=True)
    assert remote["input_ids"] == local["input_ids"].tolist()
    assert remote["offsets"] == local["offset_mapping"].tolist()
    assert remote["word_ids"] == local.word_ids(1)


def test_installed_auto_tokenizer_gives_it_and_the_pipelines_answer_on_it(tmp_path, slow):
    """With the project installed ElmoTokenizerFast is ElmoTokenizer's registered fast class: AutoTokenizer gives it
    (use_fast=True and by default) for a folder ElmoTokenizer saved, and the pipelines answer through it as through
    ElmoTokenizer, the NER pipeline's word aggregation (which reads the offsets) included."""
    from transformers import AutoTokenizer, pipeline

    from elmo_hf.modeling_elmo import ElmoForTokenClassification
    from elmo_hf.modeling_elmo.pipeline_token_classification_elmo import ElmoTokenClassificationPipeline

    folder = tmp_path / "tagger"
    torch.manual_seed(0)
    labels = {0: "O", 1: "B-LOC", 2: "I-LOC"}
    model = ElmoForTokenClassification(tiny_config(num_labels=3, id2label=labels,
                                                   label2id={v: k for k, v in labels.items()})).eval()
    model.save_pretrained(folder)
    slow.save_pretrained(folder)
    for options in ({}, {"use_fast": True}):
        assert type(AutoTokenizer.from_pretrained(folder, **options)) is ElmoTokenizerFast
    text = "John lives in New York, 我爱北京."
    tagged = {}
    for tokenizer in (AutoTokenizer.from_pretrained(folder), ElmoTokenizer.from_pretrained(folder)):
        tagger = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="simple",
                          pipeline_class=ElmoTokenClassificationPipeline)
        tagged[type(tokenizer)] = [(g["entity_group"], g["word"], g["start"], g["end"], round(float(g["score"]), 5))
                                   for g in tagger(text)]
        features = pipeline("feature-extraction", model=str(folder), tokenizer=tokenizer)(text)
        tagged[type(tokenizer), "features"] = np.asarray(features).round(5).tolist()
    assert tagged[ElmoTokenizerFast] == tagged[ElmoTokenizer] and tagged[ElmoTokenizer]
    assert tagged[ElmoTokenizerFast, "features"] == tagged[ElmoTokenizer, "features"]
