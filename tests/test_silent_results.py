"""Inputs that gave a wrong result with exit status 0 (issue 46): each now gives the right result, checked against the
run that wrote it, or one line and exit status 2 with the folder as it was.

The commands run in this process through their console scripts' own frame (`conftest.run_cli`: the exit status,
the one ERROR line), on the `tiny` preset for a step or two: what is tested is what they read and write, not
the process. Three of the refusals are rows of tests/test_bad_inputs.py's table too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import run_cli

CLASSIFY, TAG, ANSWER = "sequence-classification", "token-classification", "question-answering"
ONE_STEP = ["--model_name_or_path", "tiny", "--use_cpu", "--report_to", "none", "--save_strategy", "no",
            "--disable_tqdm", "true", "--max_steps", "1", "--per_device_train_batch_size", "2", "--seed", "0"]
PAIRS = "label\ttext\ttext_pair\n1\tA man sleeps .\tA man rests .\n0\tA man sleeps .\tA man runs .\n"
SENTENCES = "label\ttext\n1\tthe bank raised its rates\n0\twe sat on the river bank\n"


def folder_state(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


COMMANDS = {CLASSIFY: "elmo-finetune-classification", TAG: "elmo-finetune-ner", ANSWER: "elmo-finetune-qa"}


def command(task: str, args: list) -> tuple[int, list[str], str]:
    """The console script of `task` on `args`, in this process through its frame: its exit status, its ERROR lines
    and its stderr."""
    result = run_cli(COMMANDS[task], args)
    errors = [line for line in result.stderr.splitlines() if re.match(r"(\S+ \S+ )?ERROR ", line)]
    return result.returncode, errors, result.stderr


def refused(task: str, args: list, folder: Path, says: str) -> str:
    """The command refuses `args` in one line (exit status 2) that says `says`, and leaves `folder` as it was."""
    before = folder_state(folder)
    status, errors, stderr = command(task, args)
    assert status == 2 and len(errors) == 1 and says in errors[0], stderr[-3000:]
    assert stderr.rstrip().endswith(errors[0]), stderr[-3000:]  # the last line
    assert "Traceback" not in stderr and folder_state(folder) == before, stderr[-3000:]
    return errors[0]


def write(folder: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = folder / name
    path.write_bytes(text.encode(encoding))
    return path


# --------------------------------------------------------------------------------------------------
# Labels and rows
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case, train, says", [
    ("empty label", "label\ttext\n1\tgood film\n\tno label here\n",
     "train.tsv: line 3: the label (column 'label') is empty; every example needs one (an empty label would train "
     "a class named '')"),
    ("empty second sentence", "label\ttext\ttext_pair\n1\tA man sleeps .\tA man rests .\n0\tA man sleeps .\t\n",
     "train.tsv: line 3: the second sentence (column 'text_pair') is empty"),
    ("headerless (Quora's layout)", "1\tHow do I learn Python ?\tHow can I learn Python fast ?\t11\n"
                                    "0\tWhat is AI ?\tWho is Ada ?\t12\n",
     "the first line ('1', 'How do I learn Python ?', 'How can I learn Python fast ?', '11') looks like data, not a "
     "header of column names: give the columns' names in order with --column_names"),
    ("a field more than the header (a tab in the text)", "label\ttext\n1\tgood film\n0\tbad\tfilm\n",
     "train.tsv: line 3 has 3 tab-separated fields, the header line names 2 ('label', 'text'): the fields beyond "
     "would be dropped ('film'); write the tab inside a text as a space, or name the extra column in the header "
     "line"),
    # issue 55, case 7: a hint that, followed, dropped the first example or the second sentence
    ("headerless, short label and text", "pos\tgood film\nneg\tbad film\npos\tfine film\n",
     "train.tsv: the first line ('pos', 'good film') is an example, not column names: its 'pos' is also a value of "
     "that column at line 3; name the columns in order with --column_names (e.g. --column_names label,text)"),
    ("two text columns the readers do not know", "query\ttitle\tlabel\nhow old is Ada\tAda's age\t1\n"
                                                 "where is Rome\tAda's home\t0\n",
     "2 columns hold text ('query', 'title'): for sentence pairs give both, --text_column query --text_pair_column "
     "title; for single sentences, --text_column query"),
])
def test_rows_that_trained_silently_are_refused_naming_their_line(tmp_path, case, train, says):
    path = write(tmp_path, "train.tsv", train)
    refused(CLASSIFY, [*ONE_STEP, "--train_file", path, "--output_dir", tmp_path / "out"], tmp_path, says)


def test_a_column_named_by_a_value_of_the_first_line_is_refused_not_a_row_dropped(tmp_path):
    """--label_column pos on a file without a header line would take its first example for the header (47 of 48
    rows trained, without a word): refused, with the --column_names that reads every row."""
    path = write(tmp_path, "train.tsv", "pos\tgood film\nneg\tbad film\npos\tfine film\n")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", path, "--label_column", "pos", "--output_dir", tmp_path / "out"],
            tmp_path, "--label_column pos would take it for the header and leave that example out; name the columns "
                      "in order with --column_names in place of --label_column pos (e.g. --column_names label,text)")


def test_a_label_only_the_validation_file_has_is_refused_and_a_tag_too(tmp_path):
    """A new head's labels are the training file's: a label seen only in validation would be an output never
    trained (eval_accuracy 0 on it, without a word)."""
    train, dev = write(tmp_path, "train.tsv", SENTENCES), write(tmp_path, "dev.tsv", "label\ttext\n1\tok\n2\tnew\n")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--validation_file", dev, "--output_dir", tmp_path / "out"],
            tmp_path, f"--validation_file {dev}: line 3 has the label '2', which no example of --train_file "
                              f"{train} has (the head's labels: ['0', '1'])")
    train = write(tmp_path, "train.conll", "EU B-ORG\nrejects O\n\nPeter B-PER\n")
    dev = write(tmp_path, "dev.conll", "EU B-ORG\n\nin O\nParis B-LOC\n")
    refused(TAG, [*ONE_STEP, "--train_file", train, "--validation_file", dev, "--output_dir", tmp_path / "out"],
            tmp_path, "line 3 has the tag 'B-LOC', which no example of --train_file")


def test_a_headerless_file_trains_with_column_names_as_a_headed_one_does(tmp_path):
    """--column_names reads every line as an example: the same head, labels and metrics as the file with a header
    line (nothing dropped)."""
    rows = "1\tHow do I learn Python ?\tHow can I learn Python fast ?\t11\n0\tWhat is AI ?\tWho is Ada ?\t12\n" * 2
    headerless = write(tmp_path, "quora.tsv", rows)
    headed = write(tmp_path, "headed.tsv", "label\tquestion1\tquestion2\tid\n" + rows)
    common = [*ONE_STEP, "--validation_file"]
    assert command(CLASSIFY, [*common, headerless, "--train_file", headerless, "--column_names",
                              "label,question1,question2,id", "--output_dir", tmp_path / "a"])[0] == 0
    assert command(CLASSIFY, [*common, headed, "--train_file", headed, "--output_dir", tmp_path / "b"])[0] == 0
    results = [json.loads((tmp_path / name / "all_results.json").read_text()) for name in ("a", "b")]
    assert results[0]["train_samples"] == results[1]["train_samples"] == 4 and results[0]["eval_samples"] == 4
    assert results[0]["eval_accuracy"] == results[1]["eval_accuracy"]
    configs = [json.loads((tmp_path / name / "config.json").read_text()) for name in ("a", "b")]
    assert configs[0]["pair_combination"] == "concat_diff_product" and configs[0]["id2label"] == configs[1]["id2label"]


def test_a_label_map_edited_on_one_side_is_refused_wherever_the_folder_is_read(tmp_path):
    """Issue 68, case 1: a classifier whose config.json `id2label` was edited by hand (label2id left as it was)
    trained and scored through label2id and wrote its predictions through id2label, every one another label, with
    exit status 0. The configuration refuses the two maps that disagree, in the command (one line, the folder as it
    was) and in transformers' own loading alike."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    train, test = write(tmp_path, "train.tsv", SENTENCES), write(tmp_path, "test.txt", "the bank raised its rates\n")
    model = tmp_path / "classifier"
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", model])
    assert status == 0, stderr[-3000:]
    config = json.loads((model / "config.json").read_text())
    assert config["label2id"] == {"0": 0, "1": 1}
    config["id2label"] = {"0": "1", "1": "0"}  # the names swapped on one side only
    (model / "config.json").write_text(json.dumps(config))
    predict = [arg if arg != "tiny" else str(model) for arg in ONE_STEP]
    said = refused(CLASSIFY, [*predict, "--test_file", test, "--output_dir", tmp_path / "predictions"], tmp_path,
                   "id2label and label2id disagree (id 0 is '1' in id2label, '0' in label2id; id 1 is '0' in "
                   "id2label, '1' in label2id)")
    assert "edit both in config.json" in said
    for load in (AutoConfig.from_pretrained, AutoModelForSequenceClassification.from_pretrained):
        with pytest.raises(ValueError, match="id2label and label2id disagree"):
            load(model)


def test_a_training_file_of_one_label_is_refused_for_a_new_classifier(tmp_path):
    """Issue 68, case 12: a training file whose examples all have one label trained a one-label classifier (which
    transformers trains as a regression towards 0) with exit status 0."""
    train = write(tmp_path, "train.tsv", "label\ttext\npos\ta fine film\npos\ta good film\n")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"], tmp_path,
            f"--train_file {train}: every example has the label 'pos': a classifier learns to tell two labels or more "
            "apart")


def test_a_pair_head_given_single_sentences_to_predict_is_one_line_before_training(tmp_path):
    pairs, single = write(tmp_path, "pairs.tsv", PAIRS), write(tmp_path, "single.txt", "A man sleeps .\n")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", pairs, "--test_file", single, "--output_dir", tmp_path / "out"],
            tmp_path, f"--test_file {single}: the head classifies pairs of sentences, the file holds single "
                              "sentences")


def test_a_pair_head_trained_in_the_run_is_told_to_name_the_test_files_column_as_the_training_files(tmp_path):
    """--text_pair_column names the column in every file of a run: hinted for a test file whose second column has
    another name, it refused the training file ('no text_pair column'); the hint names the header instead."""
    pairs = write(tmp_path, "pairs.tsv", PAIRS)
    test = write(tmp_path, "test.tsv", "text\tsecond\nA man sleeps .\tA man rests .\n")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", pairs, "--test_file", test, "--output_dir", tmp_path / "out"],
            tmp_path, "the head classifies pairs of sentences, the file holds single sentences; give a file of pairs "
                      "of sentences (its second sentence's column named as a pair's second column is in --train_file: "
                      "text_pair, sentence2")


@pytest.mark.parametrize("task, data, length, says", [
    # below the least any task runs with (<S>, a word, </S>): refused as the command line is parsed
    (CLASSIFY, SENTENCES, 0, "--max_seq_length: must be 3 or more, got 0"),
    (CLASSIFY, SENTENCES, 2, "--max_seq_length: must be 3 or more, got 2"),
    # what the examples need besides: said once they are read
    (CLASSIFY, PAIRS, 4, "--max_seq_length 4 leaves no room for words: <S> and </S> take 4 tokens (two of each for a "
                         "pair); give at least 6"),
    (ANSWER, None, 6, "--max_seq_length 6 leaves no room for the passage beside question 'q1' (5 words, and 4 "
                      "<S>/</S>): give at least 42 (with --doc_stride 32)"),
], ids=["0", "2", "pairs-4", "question-6"])
def test_a_max_seq_length_without_room_for_words_is_one_line(tmp_path, task, data, length, says):
    train = write(tmp_path, "train.tsv", data) if task == CLASSIFY else squad_file(tmp_path)
    refused(task, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out", "--max_seq_length", length],
            tmp_path, says)


def test_examples_cut_at_max_seq_length_are_said_in_one_warning(tmp_path):
    train = write(tmp_path, "train.tsv", "label\ttext\n1\t" + "word " * 20 + "\n0\tshort one\n")
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out",
                                           "--max_seq_length", "8"])
    assert status == 0
    assert (f"1 of 2 examples have more words than --max_seq_length leaves room for (6): each is cut to its first 6 "
            f"words (the longest, {train} line 2, has 20 words)") in stderr, stderr[-3000:]


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_a_tagger_is_scored_on_every_word_of_a_validation_sentence_training_would_cut(tmp_path):
    """A validation sentence longer than --max_seq_length was scored on its first words only (eval_f1 over 3 of its
    6 entities) while --do_predict tagged it whole (issue 68, case 6): both read it whole now; training still cuts,
    said in its warning."""
    sentence = [("Paris", "B-LOC"), ("is", "O"), ("far", "O"), ("from", "O"), ("Rome", "B-LOC"), ("and", "O"),
                ("Oslo", "B-LOC"), ("too", "O")] * 3
    conll = "\n".join(f"{word} {tag}" for word, tag in sentence) + "\n"
    train = write(tmp_path, "train.conll", conll)
    valid = write(tmp_path, "valid.conll", conll)
    out = tmp_path / "out"
    status, _, stderr = command(TAG, [*ONE_STEP, "--train_file", train, "--validation_file", valid, "--test_file",
                                      valid, "--test_format", "conll", "--do_predict", "--output_dir", out,
                                      "--max_seq_length", "10"])
    assert status == 0, stderr[-3000:]
    assert "1 of 1 examples have more words than --max_seq_length leaves room for (8)" in stderr  # training's
    assert stderr.count("more words than --max_seq_length") == 1, stderr[-3000:]
    predicted = [line.split()[-1] for line in (out / "predictions.txt").read_text().splitlines() if line]
    assert len(predicted) == len(sentence)
    from elmo_hf.train.tasks.common_data import entity_scores

    expected = entity_scores([[tag for _, tag in sentence]], [predicted])
    scores = json.loads((out / "eval_results.json").read_text())
    assert scores["eval_f1"] == pytest.approx(expected["f1"]), (scores, expected)
    assert scores["eval_accuracy"] == pytest.approx(expected["accuracy"]), (scores, expected)


@pytest.mark.parametrize("task, name, text, says", [
    # datasets' ner_tags are ids: read as names, "0" (O) would be an entity type and the F1 meaningless
    (TAG, "train.jsonl", json.dumps({"tokens": ["EU", "rejects"], "ner_tags": [3, 0]}),
     "line 1: the tags are numbers ([3, 0]), ids of tag names the file does not give"),
    # word NER POS: the last column (POS) would be trained as the tags
    (TAG, "train.conll", "EU B-ORG NNP\nrejects O VBZ\n\nPeter B-PER NNP\n",
     "the tags are the last column, but no value of it is an entity tag (['NNP', 'VBZ']) while column 2 holds them"),
    # a string and a number where datasets' SQuAD has lists: list("Lisbon") would be six answers of one letter
    (ANSWER, "train.jsonl", json.dumps({"id": "q1", "question": "Where ?", "context": "Ada was born in Lisbon .",
                                        "answers": {"text": "Lisbon", "answer_start": 16}}),
     "question q1 (line 1): answers' text and answer_start must be lists"),
    # a list of answer texts: AttributeError ('str' object has no attribute 'get'), exit 1; one not in the context
    (ANSWER, "train.jsonl", json.dumps({"id": "q1", "question": "Where ?", "context": "Ada was born in Lisbon .",
                                        "answers": ["Paris"]}),
     "question q1 (line 1): the answer 'Paris' is not in the context: give each answer as text the context holds, "
     "or as {\"text\", \"answer_start\"}"),
])
def test_columns_and_fields_of_another_shape_are_one_line(tmp_path, task, name, text, says):
    train = write(tmp_path, name, text + "\n")
    refused(task, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"], tmp_path,
            f"--train_file {train}: {says}")


def test_an_output_folder_under_a_file_is_said_so(tmp_path):
    train, file = write(tmp_path, "train.tsv", SENTENCES), write(tmp_path, "notadir", "")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", file / "out"], tmp_path,
            f"--output_dir {file / 'out'}: {file} is a file, not a folder")


# --------------------------------------------------------------------------------------------------
# Encodings
# --------------------------------------------------------------------------------------------------


def test_latin_1_text_is_hinted_as_cp1252_and_the_hint_trains_on_the_right_words(tmp_path):
    """The hint used to be cp1250, which reads "crème brûlée" as "crčme brűlée" and trains on it."""
    train = write(tmp_path, "train.tsv", "label\ttext\n1\tune crème brûlée\n0\tun café naïf\n", "latin-1")
    line = refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"], tmp_path,
                   "is not valid utf-8; the file reads as cp1252: --encoding cp1252")
    assert line.endswith("--encoding cp1252")
    from elmo_hf.train.tasks.sequence_classification import PARTS, SequenceClassificationDataArguments

    texts = [e["text"]
             for e in PARTS.read_file(str(train), "cp1252", SequenceClassificationDataArguments(train_file=str(train)))]
    assert texts == ["une crème brûlée", "un café naïf"]


GREEK = "Άθήνα είναι η πρωτεύουσα\nτης Ελλάδας\n"
MIXED = "un café\nle thé\n".encode() + "une crème brûlée\n".encode("latin-1") + "ça va\n".encode()


@pytest.mark.parametrize("case, data, says", [  # issue 55, case 7: hints that misread the rest of the file
    ("UTF-8 with one Latin-1 line", MIXED,
     "line 3, byte 7 of the line (0xe8) is not valid utf-8; the file is UTF-8 but for line 3 (it reads as cp1252: "
     "'crème brûlée'): another --encoding would misread its 3 UTF-8 lines beyond ASCII; write that line in UTF-8, or "
     "leave it out with --encoding_errors skip"),
    ("ISO-8859-7 Greek (its Ά is cp1253's ¶)", GREEK.encode("iso8859_7"),
     "is not valid utf-8; the file reads as iso8859_7: --encoding iso8859_7"),
    ("UTF-16 with its byte-order mark", "the bank\nraised rates\n".encode("utf-16"),
     "is UTF-16 text (it starts with its byte-order mark), which is not read line by line: convert it to UTF-8 first, "
     "for example: iconv -f utf-16 -t utf-8"),
])
def test_an_encoding_hint_names_what_the_bytes_are(tmp_path, case, data, says):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(data)
    before = folder_state(tmp_path)
    result = run_cli("elmo-embed", [corpus, tmp_path / "out.h5", "--model", "tiny", "--quiet"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert says in result.stderr.splitlines()[-1] and folder_state(tmp_path) == before, result.stderr[-3000:]


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
@pytest.mark.parametrize("text", ["label\ttext\n1\tthe bank\n0\tthe river\n", "label\ttext\n1\t北京\n0\t上海\n"])
def test_a_utf_16_training_file_is_told_as_utf_16_not_as_a_chinese_encoding(tmp_path, text):
    """Notepad's "Unicode" (UTF-16 with its byte-order mark) got the hint naming gb18030 and big5, which do not
    decode it either (issue 68, case 20): its byte-order mark names it, with the conversion."""
    train = tmp_path / "train.tsv"
    train.write_bytes(text.encode("utf-16"))
    refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"], tmp_path,
            f"{train} is UTF-16 text (it starts with its byte-order mark), which is not read line by line: convert it "
            f"to UTF-8 first, for example: iconv -f utf-16 -t utf-8 {train} > {train}.utf8")


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_big5_given_as_gb18030_is_refused_naming_big5_and_the_hint_trains(tmp_path):
    """Big5 decodes as gb18030 without an error, into rare characters, and trained on them (issue 68, case 20): the
    start of a file in a legacy CJK encoding must read as text in it when another encoding reads it so."""
    rows = ["我們在銀行存錢", "他們在河邊散步", "老師在學校看書", "今天天氣很好"]
    text = "label\ttext\n" + "".join(f"{i % 2}\t{row}\n" for i, row in enumerate(rows * 3))
    train = tmp_path / "train.tsv"
    train.write_bytes(text.encode("big5"))
    said = refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--encoding", "gb18030", "--output_dir",
                              tmp_path / "out"], tmp_path, f"{train} reads as big5 text (")
    assert "which gb18030 misreads (as " in said and said.endswith(": --encoding big5"), said
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", train, "--encoding", "big5", "--output_dir",
                                           tmp_path / "out"])
    assert status == 0, stderr[-3000:]
    simplified = tmp_path / "gbk.tsv"  # the encoding it names, of text written in it: read as it is
    simplified_rows = ["我们在银行存钱", "他们在河边散步", "老师在学校看书", "今天天气很好"]
    simplified.write_bytes(("label\ttext\n" + "".join(f"{i % 2}\t{row}\n" for i, row in
                                                     enumerate(simplified_rows * 3))).encode("gb18030"))
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", simplified, "--encoding", "gb18030",
                                           "--output_dir", tmp_path / "gbk"])
    assert status == 0, stderr[-3000:]


def test_utf_8_sig_is_an_encoding_and_reads_the_file(tmp_path):
    """--encoding utf-8-sig was refused as not read line by line (its encoder writes a byte-order mark first)."""
    from elmo_hf.tools.core.text_files import checked_encoding, iter_lines

    corpus = tmp_path / "bom.txt"
    corpus.write_bytes("\ufeffun café\nle thé\n".encode())
    assert list(iter_lines(corpus, checked_encoding("utf-8-sig"))) == ["un café", "le thé"]


def test_each_file_of_a_run_has_its_own_encoding(tmp_path):
    """A GBK training file with a UTF-8 validation file: --encoding gbk alone is refused for the validation file, with
    the per-file option in the hint; --validation_encoding reads each right, and the words of a GBK test file come
    back in predictions.txt as written."""
    sentences = [["鲁", "迅", "在", "绍", "兴"], ["北", "京", "是", "首", "都"]]
    tags = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-LOC", "I-LOC", "O", "O", "O"]]
    conll = "\n\n".join("\n".join(f"{w} {t}" for w, t in zip(s, ts)) for s, ts in zip(sentences, tags)) + "\n"
    train, dev = write(tmp_path, "train.conll", conll, "gbk"), write(tmp_path, "dev.conll", conll)
    test = write(tmp_path, "test.txt", "鲁迅在北京\n", "gbk")
    args = [*ONE_STEP, "--train_file", train, "--validation_file", dev, "--test_file", test, "--output_dir",
            tmp_path / "out"]
    refused(TAG, [*args, "--encoding", "gbk"], tmp_path,
            f"--validation_file {dev}: line 1, byte 3 of the line (0x81) is not valid gbk; the file reads as utf-8: "
            "--validation_encoding utf-8")
    status, _, stderr = command(TAG, [*args, "--encoding", "gbk", "--validation_encoding", "utf-8"])
    assert status == 0, stderr[-3000:]
    written = (tmp_path / "out" / "predictions.txt").read_text(encoding="utf-8").split("\n")
    assert [line.split(" ")[0] for line in written if line] == list("鲁迅在北京")


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_files_of_one_encoding_get_one_hint_that_reads_them_all(tmp_path):
    """A GBK training and validation file: the hint named --train_encoding, and the rerun was refused for the
    validation file with --validation_encoding (two reruns, issue 68, case 20). Where the encoding the hint names
    reads every file of the run, it names --encoding, and one rerun reads them all."""
    # characters whose GBK bytes are not UTF-8 by chance (鲁's are: the hint would say "UTF-8 but for line 3")
    sentences = [["我", "在", "绍", "兴"], ["北", "京", "是", "首", "都"]]
    tags = [["O", "O", "B-LOC", "I-LOC"], ["B-LOC", "I-LOC", "O", "O", "O"]]
    conll = "\n\n".join("\n".join(f"{w} {t}" for w, t in zip(s, ts)) for s, ts in zip(sentences, tags)) + "\n"
    train, dev = write(tmp_path, "train.conll", conll, "gbk"), write(tmp_path, "dev.conll", conll, "gbk")
    args = [*ONE_STEP, "--train_file", train, "--validation_file", dev, "--output_dir", tmp_path / "out"]
    said = refused(TAG, args, tmp_path, f"--train_file {train}: line 1, byte 1 of the line")
    assert said.endswith(": --encoding gb18030"), said
    status, _, stderr = command(TAG, [*args, "--encoding", "gb18030"])
    assert status == 0, stderr[-3000:]


# --------------------------------------------------------------------------------------------------
# The tagger's test files and word split
# --------------------------------------------------------------------------------------------------

CHARACTERS = [("鲁迅出生在绍兴。", ["B-PER", "I-PER", "O", "O", "O", "B-LOC", "I-LOC", "O"]),
              ("北京是首都。", ["B-LOC", "I-LOC", "O", "O", "O", "O"])]


def character_conll(folder: Path) -> Path:
    """Character-level Chinese NER, as MSRA's and Weibo's files are: a character a line."""
    return write(folder, "chars.conll", "\n\n".join("\n".join(f"{c} {t}" for c, t in zip(text, tags))
                                                    for text, tags in CHARACTERS * 3) + "\n")


def expected_tags(folder: Path, sentences: list[list[str]]) -> list[list[str]]:
    """The saved tagger's argmax tag of each word, computed here from its own forward."""
    from elmo_hf.tools.loading import load_elmo

    tagger, tokenizer = load_elmo(folder, TAG)
    tags = []
    for words in sentences:
        with torch.no_grad():
            logits = tagger(**tokenizer([words], is_split_into_words=True, return_tensors="pt")).logits[0, 1:-1]
        tags.append([tagger.config.id2label[int(i)] for i in logits.argmax(-1)])
    return tags


def test_chinese_sentences_with_a_blank_line_are_tagged_word_by_word_with_the_words(tmp_path):
    """Read as CoNLL columns, each sentence was one "word" with one tag (exit 0). Now the layout is told and said,
    and predictions.txt holds each character beside its tag, a blank line after each sentence."""
    test = write(tmp_path, "new.txt", "鲁迅出生在绍兴。\n\n北京是首都。\n")
    out = tmp_path / "out"
    status, _, stderr = command(TAG, [*ONE_STEP, "--train_file", character_conll(tmp_path), "--test_file", test,
                                      "--output_dir", out])
    assert status == 0, stderr[-3000:]
    assert f"--test_file {test}: read as sentences, one a line (a sentence a line" in stderr, stderr[-3000:]
    sentences = [list("鲁迅出生在绍兴。"), [], list("北京是首都。")]
    tags = expected_tags(out, [s for s in sentences if s])
    expected = [*(f"{w} {t}" for w, t in zip(sentences[0], tags[0])), "", "",
                *(f"{w} {t}" for w, t in zip(sentences[2], tags[1])), ""]
    assert (out / "predictions.txt").read_text(encoding="utf-8").split("\n") == [*expected, ""]
    assert "Wrote the predictions of 2 sentences" in stderr


@pytest.mark.parametrize("text, layout", [
    ("the cat sat\n\nwe saw it\n", "sentences, one a line"),  # the same number of words on every line
    ("EU NNP B-NP\nrejects VBZ B-VP\n\nPeter NNP B-NP\n", "CoNLL columns"),  # codes after the word
    ("EU B-ORG\nrejects O\n\nPeter B-PER\n", "CoNLL columns"),  # the tagger's tags
    ("EU\nrejects\n\nPeter\n", "CoNLL columns"),  # a word a line
])
def test_the_layout_of_a_test_file_is_told_from_the_words_and_tags(tmp_path, text, layout, caplog):
    from types import SimpleNamespace

    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.train.tasks.token_classification import PARTS, TokenClassificationDataArguments

    path = write(tmp_path, "test.txt", text)
    data_args = TokenClassificationDataArguments(test_file=str(path))
    model = SimpleNamespace(config=SimpleNamespace(label2id={"O": 0, "B-ORG": 1, "B-PER": 2}))
    with caplog.at_level("INFO"):
        kind, _ = PARTS.prepare_test(model, ElmoTokenizer(), PARTS.read_test_file(str(path), "utf-8", data_args),
                                     data_args)
    assert kind == ("lines" if layout.startswith("sentences") else "conll")
    assert f"read as {layout}" in caplog.text


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_an_msra_file_with_a_full_width_space_line_is_still_columns_and_the_line_refused(tmp_path):
    """One `\u3000 O` line (the MSRA files have them) made the columns look uneven: every `字 TAG` line of the test
    file was read as a sentence of two words, the tag tagged as a word (issue 68, case 17). The layout is told from
    spaces and tabs; the line, which has no word, is refused naming it, as in a training file."""
    msra = "鲁 B-PER\n迅 I-PER\n说 O\n\u3000 O\n\n北 B-LOC\n京 I-LOC\n"
    test = write(tmp_path, "msra-test.txt", msra)
    train = character_conll(tmp_path)
    refused(TAG, [*ONE_STEP, "--train_file", train, "--test_file", test, "--do_predict", "--output_dir",
                  tmp_path / "out"], tmp_path,
            f"--test_file {test}: line 4: the word is a space (U+3000 IDEOGRAPHIC SPACE), not a word: delete such "
            "lines first")
    write(tmp_path, "train-msra.txt", msra)
    refused(TAG, [*ONE_STEP, "--train_file", tmp_path / "train-msra.txt", "--output_dir", tmp_path / "out"],
            tmp_path, "train-msra.txt:4: the word is a space (U+3000 IDEOGRAPHIC SPACE)")
    cleaned = write(tmp_path, "msra-clean.txt", msra.replace("\u3000 O\n", ""))
    status, _, stderr = command(TAG, [*ONE_STEP, "--train_file", train, "--test_file", cleaned, "--do_predict",
                                      "--output_dir", tmp_path / "out"])
    assert status == 0 and f"--test_file {cleaned}: read as CoNLL columns" in stderr, stderr[-3000:]


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_predicting_with_another_word_split_than_the_head_learned_is_warned_of(tmp_path):
    """A tagger of characters given --word_split jieba at prediction tagged units it never saw without a word (issue
    68, case 19); refused only when training. Any split other than the saved one is said at prediction."""
    out = tmp_path / "tagger"
    status, _, stderr = command(TAG, [*ONE_STEP, "--train_file", character_conll(tmp_path), "--output_dir", out])
    assert status == 0, stderr[-3000:]
    test = write(tmp_path, "new.txt", "鲁迅 出生 在 绍兴 。\n")
    status, _, stderr = command(TAG, ["--model", out, "--do_predict", "--test_file", test, "--output_dir",
                                      tmp_path / "predicted", "--word_split", "whitespace", "--use_cpu"])
    assert status == 0, stderr[-3000:]
    assert ("--word_split whitespace: the fine-tuned head was trained on the words of its tokenizer's split "
            "punctuation, and now reads the units of another split") in stderr, stderr[-3000:]


def test_a_word_split_that_cuts_other_units_than_the_training_words_is_refused(tmp_path):
    """Characters trained with --word_split jieba: the tagger learned characters and would tag jieba's words."""
    train = character_conll(tmp_path)
    line = refused(TAG, [*ONE_STEP, "--train_file", train, "--word_split", "jieba", "--output_dir", tmp_path / "out"],
                   tmp_path, f"--word_split jieba: --train_file {train}: the word split jieba cuts the training "
                                     "sentences into")
    assert "into ['鲁迅', '出生'" in line and line.endswith("; --word_split punctuation cuts text as the file does")


# --------------------------------------------------------------------------------------------------
# SQuAD files and question answering
# --------------------------------------------------------------------------------------------------


def squad_file(folder: Path, qas: list | None = None, version: str = "1.1", name: str = "train.json") -> Path:
    context = "Ada was born in Lisbon in 1990 . Boris was born in Oslo in 1985 ."
    qas = qas if qas is not None else [
        {"id": "q1", "question": "Where was Ada born ?", "answers": [{"text": "Lisbon", "answer_start": 16}]},
        {"id": "q2", "question": "Where was Boris born ?", "answers": [{"text": "Oslo", "answer_start": 51}]}]
    data = {"version": version, "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    return write(folder, name, json.dumps(data))


@pytest.mark.parametrize("case, qas, says", [
    ("v1.1 question without answers", [{"id": "q1", "question": "Where was Ada born ?"}],
     "question q1 (article 1, paragraph 1, question 1) has no answers: a SQuAD v1.1 file needs one for every "
     "question; give its answers, or --version_2_with_negative true"),
    ("duplicate ids", [{"id": "q1", "question": "Where was Ada born ?", "answers": [{"text": "Lisbon",
                                                                                      "answer_start": 16}]}] * 2,
     "the question id 'q1' is at article 1, paragraph 1, question 1 and again at article 1, paragraph 1, question 2"),
    ("answer_start a string", [{"id": "q1", "question": "Where was Ada born ?",
                                "answers": [{"text": "Lisbon", "answer_start": "16"}]}],
     "question q1 (article 1, paragraph 1, question 1): the answer 'Lisbon': answer_start must be a whole number of "
     "characters, got '16' (a string)"),
])
def test_squad_files_that_trained_silently_are_refused_naming_the_question(tmp_path, case, qas, says):
    train = squad_file(tmp_path, qas)
    refused(ANSWER, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"], tmp_path, says)


def test_a_v2_file_and_the_option_read_questions_without_answers_as_unanswerable(tmp_path):
    from elmo_hf.train.tasks.squad_data import read_squad_file

    qas = [{"id": "q1", "question": "Where was Ada born ?", "answers": [], "is_impossible": True},
           {"id": "q2", "question": "Where was Boris born ?", "answers": [{"text": "Oslo", "answer_start": 51}],
            "is_impossible": False}]
    v2 = read_squad_file(squad_file(tmp_path, qas, version="v2.0", name="v2.json"))
    assert [e["answers"]["text"] for e in v2] == [[], ["Oslo"]]
    v1 = squad_file(tmp_path, [{"id": "q1", "question": "Where was Ada born ?", "answers": []}], name="v1.json")
    assert read_squad_file(v1, version_2_with_negative=True)[0]["answers"]["text"] == []
    with pytest.raises(ValueError, match="has no answers: --version_2_with_negative false"):
        read_squad_file(squad_file(tmp_path, qas, version="v2.0", name="v2.json"), version_2_with_negative=False)
    assert read_squad_file(v1, answers_needed=False)[0]["id"] == "q1"  # a file to predict needs no answers


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_qa_answers_inside_a_word_and_unanswerable_questions_a_head_never_learned_are_warned_of(tmp_path):
    """"1990" in "1990s" was widened to the whole word without a word, and a head trained without unanswerable
    questions scored a validation file with them at EM 0 on them without a word (issue 68, case 7)."""
    context = "Ada was born in Lisbon in the 1990s . Boris was born in Oslo ."
    inside = [{"id": "decade", "question": "When was Ada born ?", "answers": [{"text": "1990", "answer_start": 30}]},
              {"id": "q2", "question": "Where was Boris born ?", "answers": [{"text": "Oslo", "answer_start": 56}]}]
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": inside}]}]}
    train = write(tmp_path, "train.json", json.dumps(data))
    unanswerable = [{"id": "none", "question": "Where was Cleo born ?", "answers": [], "is_impossible": True},
                    {"id": "q2", "question": "Where was Boris born ?", "is_impossible": False,
                     "answers": [{"text": "Oslo", "answer_start": 51}]}]
    valid = squad_file(tmp_path, unanswerable, version="v2.0", name="valid.json")
    status, _, stderr = command(ANSWER, [*ONE_STEP, "--train_file", train, "--validation_file", valid,
                                         "--output_dir", tmp_path / "out"])
    assert status == 0, stderr[-3000:]
    assert ("1 of 2 answers start or end inside a word of the word split punctuation: the head answers whole words, "
            "so these can never be matched exactly (questions 'decade'; '1990' is inside ['1990s'])") in stderr, \
        stderr[-3000:]
    assert ("1 of 2 validation questions have no answer (questions 'none'), but the head was trained without "
            "unanswerable questions") in stderr, stderr[-3000:]


def test_qa_predictions_over_batches_of_different_widths_are_those_of_one_batch(tmp_path, tiny_model_dir):
    """Nine short questions and a long one: batches of 8 windows padded to different widths crashed the prediction
    (exit 1, an empty folder). Their answers are those of one batch of all, and of the pipeline."""
    short = "Ada was born in Lisbon ."
    long = " ".join(["Boris was born in Oslo in 1985 ."] * 12)
    records = [{"id": f"q{i}", "question": "Where was Ada born ?", "context": short} for i in range(9)]
    records.append({"id": "long", "question": "Where was Boris born ?", "context": long})
    test = write(tmp_path, "test.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    model = tmp_path / "qa"
    assert command(ANSWER, [*[str(tiny_model_dir) if a == "tiny" else a for a in ONE_STEP],
                            "--train_file", squad_file(tmp_path), "--output_dir", model])[0] == 0
    answers = []
    for batch in (8, 64):
        out = tmp_path / f"batch-{batch}"
        status, _, stderr = command(ANSWER, ["--model", model, "--do_predict", "--test_file", test, "--output_dir",
                                             out, "--per_device_eval_batch_size", batch, "--use_cpu"])
        assert status == 0, stderr[-3000:]
        assert "Wrote the predictions of 10 questions" in stderr and "0 training and 0 validation" not in stderr
        answers.append(json.loads((out / "predictions.json").read_text()))
    assert answers[0] == answers[1] and sorted(answers[0]) == sorted(r["id"] for r in records)
    from transformers import pipeline

    from elmo_hf.modeling_elmo.pipeline_question_answering_elmo import ElmoQuestionAnsweringPipeline

    qa = pipeline("question-answering", model=str(model), pipeline_class=ElmoQuestionAnsweringPipeline)
    assert qa(question=records[-1]["question"], context=long)["answer"] == answers[0]["long"]
    for value, says in ((None, "`context` cannot be None"), ("", "`context` cannot be empty"),
                        (7, "`context` must be a string, got int")):
        with pytest.raises(ValueError, match=says):
            qa(question="Where ?", context=value)
    with pytest.raises(KeyError, match="You need to provide a dictionary with keys"):
        qa({"question": "Where ?"})
    with pytest.raises(ValueError, match=r"max_answer_len parameter should be >= 1 \(got 0\)"):
        qa(question="Where ?", context=short, max_answer_len=0)


def test_chinese_answers_are_scored_on_characters_and_the_results_say_so(tmp_path):
    """F1 on words is 0 for "深圳市" against "广东省深圳市龙岗区" (no spaces: one word each); CMRC 2018 scores
    characters, and drops Chinese punctuation too. The run's eval_f1 is that of its own predictions.json, on
    characters."""
    from elmo_hf.train.tasks.squad_metrics import character_exact_match, character_f1, f1, squad_scores

    assert (f1("深圳市", "广东省深圳市龙岗区") == 0.0
            and character_f1("深圳市", "广东省深圳市龙岗区") == pytest.approx(0.5))
    assert character_exact_match("北京。", "北京") == 1.0 and character_exact_match("“北京”", "北京") == 1.0
    assert character_f1("2018年NBA总决赛", "NBA总决赛") == pytest.approx(2 * (4 / 6) / (4 / 6 + 1))
    # as cmrc2018_evaluate.py scores them (issue 68, case 21): "." and "," are kept, a number is one unit, and its
    # exact match compares the texts, spaces included
    assert character_f1("3", "3.5") == 0.0 and character_f1("1,000", "1000") == 0.0
    assert character_f1("北京.", "北京") == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))  # "." is a unit of its own
    assert character_exact_match("北京.", "北京") == 0.0 and character_exact_match("NBA 总决赛", "NBA总决赛") == 0.0
    assert character_f1("NBA 总决赛", "NBA总决赛") == 1.0 and character_exact_match("a-b", "ab") == 1.0
    context = "鲁迅出生在浙江省绍兴市。北京是中国的首都。"
    qas = [{"id": "z1", "question": "鲁迅出生在哪里？", "answers": [{"text": "浙江省绍兴市", "answer_start": 5}]},
           {"id": "z2", "question": "中国的首都是哪里？", "answers": [{"text": "北京", "answer_start": 12}]}]
    data = write(tmp_path, "cmrc.json", json.dumps({"version": "v1.0", "data": [
        {"paragraphs": [{"context": context, "qas": qas}]}]}, ensure_ascii=False))
    out = tmp_path / "out"
    status, _, stderr = command(ANSWER, [*ONE_STEP, "--train_file", data, "--validation_file", data, "--do_predict",
                                         "--test_file", data, "--output_dir", out])
    assert status == 0, stderr[-3000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_scoring"] == "characters (CMRC 2018)" and "scored on characters (CMRC 2018)" in stderr
    assert results["eval_samples"] == 2 and "eval_windows" not in results  # one window a question
    predicted = json.loads((out / "predictions.json").read_text())
    scores = squad_scores(predicted, {q["id"]: [q["answers"][0]["text"]] for q in qas}, "characters")
    assert (results["eval_exact_match"], results["eval_f1"]) == pytest.approx((scores["exact_match"], scores["f1"]))


def test_lines_elmo_analyze_cuts_at_max_tokens_are_said_with_their_line(tmp_path, caplog):
    from elmo_hf.tools.analysis import count_words

    path = write(tmp_path, "corpus.txt", "a short line\n\none two three four five six\nx y\n")
    with caplog.at_level("WARNING"):
        counts, sentences = count_words(path, "whitespace", 3)
    assert sentences == 3 and counts["four"] == 0 and counts["three"] == 1
    assert ("1 line(s) have more than --max_tokens 3 words: each is cut to its first 3 (the longest, line 3, has 6 "
            "words; the first is line 3)") in caplog.text


# --------------------------------------------------------------------------------------------------
# Line endings
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_old_mac_windows_and_unix_line_endings_read_as_the_same_lines(tmp_path, ending):
    """A file of \\r-ended lines (old Mac) was one line: elmo-embed wrote one key holding every sentence run
    together, elmo-pretrain trained on one sentence, elmo-analyze counted 1 sentence."""
    from elmo_hf.tools.analysis import count_words
    from elmo_hf.tools.embedding.embed_io import Counts, count_lines, read_text_lines
    from elmo_hf.train.data import read_sentences

    sentences = ["the bank raised its rates .", "we sat on the river bank .", "", "it rained ."]
    path = write(tmp_path, "corpus.txt", ending.join(sentences) + ending)
    assert [row["text"] for row in read_sentences([str(path)])] == [s for s in sentences if s]
    assert count_words(path, "whitespace", 100)[1] == 3
    assert count_lines(path, "utf-8") == 4
    assert [text for _, text in read_text_lines(path, 1000, "utf-8", "strict", Counts())] == sentences


def test_lowercase_iob_tags_are_scored_as_their_uppercase(tmp_path):
    """`b-per i-per o`: "o" was read as an entity type of its own (7 entities counted where there are 4)."""
    from elmo_hf.train.tasks.common_data import entity_scores

    upper = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "O", "B-MISC"]]
    lower = [[tag.lower() for tag in sentence] for sentence in upper]
    assert entity_scores(lower, lower)["num_entities"] == 4
    predicted = [["B-PER", "I-PER", "O", "O"], ["O", "B-ORG", "B-ORG", "B-MISC"]]
    expected = entity_scores(upper, predicted)
    scores = entity_scores(lower, [[tag.lower() for tag in sentence] for sentence in predicted])
    assert {k: v for k, v in scores.items() if not k.endswith("_f1")} == {
        k: v for k, v in expected.items() if not k.endswith("_f1")}
    assert scores["per_f1"] == expected["PER_f1"] and "o_f1" not in scores


def test_labels_that_differ_only_in_case_or_spaces_are_warned_of_with_their_counts(tmp_path):
    train = write(tmp_path, "train.tsv", "label\ttext\npos\tgood film\nneg\tbad film\nPos\tfine film\npos\tnice one\n")
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"])
    assert status == 0
    assert (f"{train}: the labels 'pos' (2 examples, first at line 2), 'Pos' (1 example, first at line 4) differ "
            "only in case or spaces: they are trained as 2 classes") in stderr, stderr[-3000:]
    assert "'neg' (" not in stderr


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
@pytest.mark.parametrize("name, text", [
    ("train.tsv", "label\ttext\n1\tgood film\n0\tbad film\n1.0\tfine film\n0.0\tawful one\n1\tnice one\n"),
    ("train.jsonl", "".join(json.dumps({"text": text, "label": label}) + "\n" for text, label in [
        ("good film", 1), ("bad film", 0), ("fine film", 1.0), ("awful one", 0.0), ("nice one", 1)])),
])
def test_labels_that_are_one_number_are_one_class(tmp_path, name, text):
    """`1` and `1.0` (`0` and `0.0`) were four classes, a 4-class head from a 2-class file (issue 68, case 5)."""
    train = write(tmp_path, name, text)
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out"])
    assert status == 0, stderr[-3000:]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["label2id"] == {"0": 0, "1": 1}
    header = int(name.endswith(".tsv"))  # the lines below count from the first example's
    assert (f"{train}: the labels '1' (2 examples, first at line {1 + header}), '1.0' (1 example, first at line "
            f"{3 + header}) are one number: read as the class '1'") in stderr, stderr[-3000:]
    assert (f"'0' (1 example, first at line {2 + header}), '0.0' (1 example, first at line {4 + header}) are one "
            "number") in stderr


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_numbers_written_one_way_keep_their_spelling_and_a_head_of_scores_is_not_continued_on_classes(tmp_path):
    from elmo_hf.train.tasks.common_data import example_at
    from elmo_hf.train.tasks.sequence_classification import one_spelling_per_number

    examples = [example_at({"label": label}, "f.tsv", line, line) for line, label in
                enumerate(["01", "02", "1.5", "1.50", "7", "07", "7.0"], start=2)]
    one_spelling_per_number(examples, "f.tsv")
    # "01" and "02" alone stay codes; fractions are left as written; 7 is one class
    assert [example["label"] for example in examples] == ["01", "02", "1.5", "1.50", "7", "7", "7"]
    scores = write(tmp_path, "scores.tsv", "label\ttext\n0.5\tgood film\n1.5\tbad film\n")
    status, _, stderr = command(CLASSIFY, [*ONE_STEP, "--train_file", scores, "--output_dir", tmp_path / "sts"])
    assert status == 0, stderr[-3000:]
    classes = write(tmp_path, "classes.tsv", SENTENCES.replace("\n1\t", "\npos\t").replace("\n0\t", "\nneg\t"))
    refused(CLASSIFY, [*ONE_STEP, "--model_name_or_path", tmp_path / "sts", "--train_file", classes, "--output_dir",
                       tmp_path / "out"], tmp_path,
            "holds a sequence-classification head of scores (a regression), and the training file has classes "
            "(labels): fine-tune the biLM folder it was made from")


@pytest.mark.slow  # commands on the tiny model: make test, not the inner loop
def test_a_validation_label_that_differs_only_in_case_is_refused_saying_so(tmp_path):
    train = write(tmp_path, "train.tsv", "label\ttext\nVery Positive\tgood film\nnegative\tbad film\n")
    dev = write(tmp_path, "dev.tsv", "label\ttext\nvery positive\tgood film\n")
    refused(CLASSIFY, [*ONE_STEP, "--train_file", train, "--validation_file", dev, "--output_dir",
                       tmp_path / "out"], tmp_path,
            "the label 'very positive' (the head's 'Very Positive' differs from it only in case or spaces: write "
            "them alike)")


def test_answers_given_as_a_list_of_texts_are_found_in_the_context(tmp_path):
    """`"answers": ["Lisbon"]` failed with an AttributeError (exit 1), in training and with --do_predict."""
    from elmo_hf.train.tasks.squad_data import read_squad_file

    record = {"id": "q1", "question": "Where was Ada born ?", "context": "Lisbon ? Ada was born in Lisbon .",
              "answers": ["Lisbon", "in Lisbon"]}
    path = write(tmp_path, "train.jsonl", json.dumps(record) + "\n")
    for needed in (True, False):
        answers = read_squad_file(path, answers_needed=needed)[0]["answers"]
        assert answers == {"text": ["Lisbon", "in Lisbon"], "answer_start": [0, 22]}


def test_questions_longer_than_max_question_length_are_said_with_their_id(tmp_path):
    qas = [{"id": "long-one", "question": "Where " + "was " * 9 + "Ada born ?",
            "answers": [{"text": "Lisbon", "answer_start": 16}]},
           {"id": "q2", "question": "Where was Boris born ?", "answers": [{"text": "Oslo", "answer_start": 51}]}]
    train = squad_file(tmp_path, qas)
    status, _, stderr = command(ANSWER, [*ONE_STEP, "--train_file", train, "--output_dir", tmp_path / "out",
                                         "--max_question_length", "8"])
    assert status == 0, stderr[-3000:]
    assert ("1 of 2 questions have more than --max_question_length 8 words: each is read as its first 8 (questions "
            "'long-one'; the longest, 'long-one', has 13 words)") in stderr, stderr[-3000:]


# --------------------------------------------------------------------------------------------------
# Chinese text without spaces (issue 55, cases 8 and 9)
# --------------------------------------------------------------------------------------------------
PRETRAIN_STEP = ["--preset", "tiny", "--per_device_batch_size", "2", "--unroll_steps", "8", "--max_steps", "1",
                 "--disable_tqdm", "--report_to", "none", "--seed", "0"]


def test_pretraining_on_chinese_without_spaces_splits_per_character_and_says_so(tmp_path):
    """The default split of elmo-pretrain was whitespace, which made each unsegmented Chinese sentence one word of
    the vocabulary: without --word_split, text mostly CJK without spaces is split per character, in one line."""
    train = write(tmp_path, "train.txt",
                  "\n".join(["我们在银行存钱。", "他们在河边散步了。", "老师在学校看书呢。"] * 4))
    out = tmp_path / "out"
    result = run_cli("elmo-pretrain", ["--train_file", train, "--output_dir", out, *PRETRAIN_STEP])
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "tokenizer_config.json").read_text())["word_split"] == "punctuation"
    vocab = set((out / "vocab.txt").read_text(encoding="utf-8").split("\n"))
    assert {"银", "行", "。"} <= vocab and not any(len(word) > 1 and "\u4e00" <= word[0] for word in vocab)
    assert re.search(r"--word_split punctuation: \d+% of the characters of the corpus's first lines are CJK, written "
                     "without spaces", result.stderr), result.stderr[-3000:]


@pytest.mark.parametrize("given, lines, split", [
    (None, ["我们在银行存钱。", "他们在河边散步了。"], "punctuation"),
    (None, ["we sat on the river bank .", "the bank raised its rates ."], "whitespace"),
    (None, ["我们 在 银行 存钱 。", "他们 在 河边 散步 。"], "whitespace"),  # already segmented: its words
    (None, ["我们在银行存钱。 we sat on the river bank and watched the boats go by ."], "whitespace"),  # mostly Latin
    # issue 68, case 18: a chat corpus of short lines, and lines with Latin product names (a quarter CJK)
    (None, ["你好吗", "我很好", "今天下雨", "明天见"] * 3, "punctuation"),
    (None, ["我买了 iPhone 15 Pro Max 手机", "Galaxy S24 Ultra 比较便宜"] * 3, "punctuation"),
    ("whitespace", ["我们在银行存钱。", "他们在河边散步了。"], "whitespace"),  # asked for: kept (and warned of)
    ("jieba", ["我们在银行存钱。"], "jieba"),
])
def test_the_default_word_split_is_chosen_from_the_corpus_and_a_given_one_kept(tmp_path, given, lines, split):
    from types import SimpleNamespace

    from elmo_hf.train.pretrain_word_split import chosen_word_split

    args = SimpleNamespace(word_split=given, encoding="utf-8")
    assert chosen_word_split(args, [str(write(tmp_path, "train.txt", "\n".join(lines) + "\n"))], is_main=True) == split


def test_a_tagger_on_a_biLM_that_kept_chinese_sentences_as_words_is_warned_of_with_counts(tmp_path):
    """A biLM pretrained with --word_split whitespace on Chinese without spaces saves that split; a character tagger
    fine-tuned from it tagged each raw test line as one word without a word: the training file's words and the lines
    to tag are now warned of, with their counts."""
    corpus = write(tmp_path, "corpus.txt", "\n".join(text for text, _ in CHARACTERS * 4) + "\n")
    result = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", tmp_path / "bilm", *PRETRAIN_STEP,
                                       "--word_split", "whitespace"])
    assert result.returncode == 0, result.stderr[-3000:]
    test = write(tmp_path, "raw.txt", "鲁迅出生在绍兴。\n北京是中国的首都。\n我们\n")
    status, _, stderr = command(TAG, [*ONE_STEP[2:], "--model_name_or_path", tmp_path / "bilm", "--train_file",
                                      character_conll(tmp_path), "--do_predict", "--test_file", test,
                                      "--output_dir", tmp_path / "tagger"])
    assert status == 0, stderr[-3000:]
    assert "the word split whitespace cuts the training sentences into" in stderr, stderr[-3000:]
    assert (f"--test_file {test}: the word split whitespace leaves 2 words of six or more CJK characters in 2 of 3 "
            "lines ('鲁迅出生在绍兴。', ...), each tagged as one word; give --word_split punctuation") in stderr


def test_answers_inside_a_jieba_word_are_warned_of_with_their_count_and_ids(tmp_path):
    """--word_split jieba: 北京 in 北京大学 is trained as the whole word and can never be matched exactly; the answers
    such a split cannot reach are counted and named before training, and none is under the per-character split."""
    pytest.importorskip("jieba", reason="jieba is the optional extra elmo-hf[zh]")
    context = "他在北京大学读书。鲁迅出生在绍兴。"
    qas = [{"id": "inside", "question": "他在哪个城市读书？", "answers": [{"text": "北京", "answer_start": 2}]},
           {"id": "whole", "question": "他在哪里读书？", "answers": [{"text": "北京大学", "answer_start": 2}]},
           {"id": "person", "question": "谁出生在绍兴？", "answers": [{"text": "鲁迅", "answer_start": 9}]}]
    data = write(tmp_path, "cmrc.json", json.dumps({"version": "v1.0", "data": [
        {"paragraphs": [{"context": context, "qas": qas}]}]}, ensure_ascii=False))
    warned = ("1 of 3 answers start or end inside a word of the word split jieba: the head answers whole words, so "
              "these can never be matched exactly (questions 'inside'; '北京' is inside ['北京大学'])")
    for split, says in (("jieba", True), ("punctuation", False)):
        status, _, stderr = command(ANSWER, [*ONE_STEP, "--train_file", data, "--word_split", split,
                                             "--output_dir", tmp_path / split])
        assert status == 0 and (warned in stderr) == says, stderr[-3000:]
