"""Semantic role labelling (`ElmoForSemanticRoleLabeling`, the task "semantic-role-labeling"): a head transformers has
no Auto class for. Its reader of predicate-argument columns, its span F1 against a hand-computed case, and
`elmo-finetune semantic-role-labeling` learning a generated set (ARG0 before the verb, ARG1 after it, in sentences of
two clauses, so that only the marked predicate tells which clause is labelled) well above chance; the fine-tuned
folder loads installed (`load_elmo`) and as remote code, without the project."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace

import pytest
import torch
from conftest import run_cli, run_isolated

from elmo_hf.modeling_elmo import ElmoForSemanticRoleLabeling
from elmo_hf.tools.loading import load_elmo
from elmo_hf.train.tasks import task_parts
from elmo_hf.train.tasks.semantic_role_labeling import argument_spans, span_scores

pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")  # tiny models: one thread, no fight for cores
TASK = "semantic-role-labeling"
NOUNS = "cat dog man woman bird child farmer teacher".split()
VERBS = "saw ate liked found chased helped".split()


def test_span_f1_on_a_hand_computed_case():
    """Sentence 1: gold ARG0 [0, 1] and ARG1 [3, 3], predicted ARG0 [0, 0] (wrong end) and ARG1 [3, 3]. Sentence 2:
    gold ARG0 [0, 0], predicted ARG0 [0, 0] and ARG2 [2, 2]. V spans never count. 2 of 4 predicted spans are right
    (precision 1/2), 2 of 3 gold ones found (recall 2/3): F1 = 2 * 1/2 * 2/3 / (1/2 + 2/3) = 4/7; tags 6 of 8."""
    references = [["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "O"], ["B-ARG0", "B-V", "O"]]
    predictions = [["B-ARG0", "O", "B-V", "B-ARG1", "O"], ["B-ARG0", "B-V", "B-ARG2"]]
    scores = span_scores(references, predictions)
    assert scores == pytest.approx({"precision": 0.5, "recall": 2 / 3, "f1": 4 / 7, "accuracy": 0.75})
    assert argument_spans(["I-ARG1", "I-ARG1", "B-V", "B-ARG2", "I-ARG3"]) == {("ARG1", 0, 1), ("ARG2", 3, 3),
                                                                              ("ARG3", 4, 4)}
    assert span_scores([["B-V", "O"]], [["B-V", "O"]])["f1"] == 0.0  # nothing to find: no credit


def test_the_reader_takes_bio_and_conll_2005_brackets_and_refuses_a_tag_column_short(tmp_path):
    """A sentence of N predicates is N examples; bracket columns read as the same BIO tags; a sentence whose tag
    columns do not match its predicates is refused, naming its line."""
    parts, options = task_parts(TASK), SimpleNamespace(predicate_column=1)
    bio = "John - B-ARG0 O\nsaw see B-V O\nMary - B-ARG1 B-ARG0\nleave leave I-ARG1 B-V\n"
    brackets = "John - (A0*) *\nsaw see (V*) *\nMary - (A1* (A0*)\nleave leave *) (V*)\n"
    (tmp_path / "bio.txt").write_text(bio + "\n" + bio, encoding="utf-8")
    (tmp_path / "brackets.txt").write_text(brackets, encoding="utf-8")
    read = parts.read_file(str(tmp_path / "bio.txt"), "utf-8", options)
    assert len(read) == 4 and [example["predicate"] for example in read] == [1, 3, 1, 3]
    assert read[0]["tags"] == ["B-ARG0", "B-V", "B-ARG1", "I-ARG1"] and read[1]["mark"] == "leave"
    assert [e["tags"] for e in parts.read_file(str(tmp_path / "brackets.txt"), "utf-8", options)] == [
        ["B-A0", "B-V", "B-A1", "I-A1"], ["O", "O", "B-A0", "B-V"]]
    (tmp_path / "short.txt").write_text("x -\n\nJohn - B-ARG0\nsaw see B-V\nMary - B-ARG1\nleft leave O\n",
                                        encoding="utf-8")
    with pytest.raises(ValueError, match="line 3: 2 predicates but 1 tag columns"):
        parts.read_file(str(tmp_path / "short.txt"), "utf-8", options)


def test_a_test_file_with_conll_2009_marks_and_a_sentence_without_predicate_is_predicted_line_for_line(tmp_path):
    """`_` (CoNLL-2009's PRED column) marks a word that is not a predicate, as `-` does: every word of such a test
    file was a predicate. A sentence without a predicate is written back as it came, so that predictions.txt lines
    up with the file (srl-eval.pl compares the two line by line); it was left out (issue 68, case 16)."""
    from elmo_hf.train.tasks.semantic_role_labeling import predict_roles

    parts, options = task_parts(TASK), SimpleNamespace(predicate_column=1, max_seq_length=64)
    text = "John _\nsaw see.01\nMary _\n\nIt _\nrains _\n\nMary _\nleft leave.01\n"
    (tmp_path / "test.txt").write_text(text, encoding="utf-8")
    test = parts.read_test_file(str(tmp_path / "test.txt"), "utf-8", options)
    assert [(example["sentence"], example["predicate"]) for example in test] == [(0, 1), (1, None), (2, 1)]
    model, tokenizer = load_elmo("tiny", TASK, seed=0, config_overrides={
        "id2label": {0: "O", 1: "B-ARG0", 2: "B-V"}, "label2id": {"O": 0, "B-ARG0": 1, "B-V": 2}})
    lines, count = parts.prediction_lines(model, tokenizer, test, options, batch_size=2)
    assert count == 2 and len(lines) == len(text.splitlines()) + 1
    assert [line.split()[:2] for line in lines if line] == [line.split() for line in text.splitlines() if line]
    assert lines[4:7] == ["It _", "rains _", ""]
    alone = predict_roles(model, tokenizer, [test[2]], options, batch_size=1)[0]
    assert [line.split()[2] for line in lines[7:9]] == alone  # the same tags as the sentence predicted alone


def test_srl_refusals_name_the_bad_line_and_a_verb_tag_away_from_its_predicate(tmp_path):
    """A tag column whose B-V is not at its predicate (columns in another order than the predicates) trained
    silently (issue 68, case 8); a bracket error and a line of other columns named the sentence's first line."""
    parts, options = task_parts(TASK), SimpleNamespace(predicate_column=1)
    swapped = "John - O B-ARG0\nsaw see O B-V\nMary - B-ARG0 B-ARG1\nleave leave B-V I-ARG1\n"
    (tmp_path / "swapped.txt").write_text(swapped, encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 4: the tag column of predicate 1 \(line 2, 'saw'\) has its B-V at "
                                         r"'leave': the tag columns follow the predicates in their order"):
        parts.read_file(str(tmp_path / "swapped.txt"), "utf-8", options)
    several = "he - B-ARG0\ngave give B-V\nup - I-V\n"  # a verb of two words: its mark on either is its own
    (tmp_path / "several.txt").write_text(several + "\n" + several.replace("gave give", "gave -").replace(
        "up -", "up give"), encoding="utf-8")
    assert [e["predicate"] for e in parts.read_file(str(tmp_path / "several.txt"), "utf-8", options)] == [1, 2]
    (tmp_path / "bracket.txt").write_text("John - (A0*\nsaw see (V*)\nMary - (A1*)\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2, predicate 1: '\(V\*\)' opens an argument inside A0"):
        parts.read_file(str(tmp_path / "bracket.txt"), "utf-8", options)
    (tmp_path / "width.txt").write_text("John - B-ARG0\nsaw see B-V\nMary - B-ARG1 O\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: 4 columns where the sentence's first line \(line 1\) has 3"):
        parts.read_file(str(tmp_path / "width.txt"), "utf-8", options)
    (tmp_path / "plain.txt").write_text("John - ARG0\nsaw see V\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1, predicate 1: the tag 'ARG0' is neither BIO"):
        parts.read_file(str(tmp_path / "plain.txt"), "utf-8", options)
    (tmp_path / "marks.txt").write_text("John x B-ARG0\nsaw see B-V\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 predicates but 1 tag columns .* - or _ a word that is not one"):
        parts.read_file(str(tmp_path / "marks.txt"), "utf-8", options)


def clauses(count: int, seed: int) -> list[str]:
    """`count` sentences "N1 V1 N2 and N3 V2 N4", each with both verbs marked and a tag column per verb."""
    rng, sentences = random.Random(seed), []
    for _ in range(count):
        n1, n2, n3, n4 = (rng.choice(NOUNS) for _ in range(4))
        v1, v2 = rng.sample(VERBS, 2)
        words = [n1, v1, n2, "and", n3, v2, n4]
        first = ["B-ARG0", "B-V", "B-ARG1", "O", "O", "O", "O"]
        second = ["O", "O", "O", "O", "B-ARG0", "B-V", "B-ARG1"]
        lines = [f"{word} {word if i in (1, 5) else '-'} {a} {b}"
                 for i, (word, a, b) in enumerate(zip(words, first, second))]
        sentences.append("\n".join(lines) + "\n")
    return sentences


@pytest.mark.slow
def test_the_command_learns_a_generated_set_and_the_folder_loads_installed_and_as_remote_code(tiny_model_dir,
                                                                                              tmp_path):
    train, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    train.write_text("\n".join(clauses(24, seed=0)), encoding="utf-8")
    valid.write_text("\n".join(clauses(12, seed=1)), encoding="utf-8")
    out = tmp_path / "out"
    result = run_cli("elmo-finetune", [
        TASK, "--model", tiny_model_dir, "--train_file", train, "--validation_file", valid, "--test_file", valid,
        "--do_predict", "--output_dir", out, "--use_cpu", "--report_to", "none", "--save_strategy", "no",
        "--disable_tqdm", "true", "--seed", "0", "--num_train_epochs", "10", "--learning_rate", "2e-2"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "48 training and 24 validation predicates, tags ['O', 'B-ARG0', 'B-ARG1', 'B-V']" in result.stderr
    scores = json.loads((out / "eval_results.json").read_text())
    # chance: a tagger that cannot tell the clauses apart finds half the arguments at best, with as many wrong ones
    assert scores["eval_f1"] > 0.8, scores
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["ElmoForSemanticRoleLabeling"]
    assert config["auto_map"]["ElmoForSemanticRoleLabeling"] == "modeling_elmo_srl.ElmoForSemanticRoleLabeling"
    assert (out / "modeling_elmo_srl.py").is_file()
    predicted = (out / "predictions.txt").read_text(encoding="utf-8").split("\n\n")
    assert len([block for block in predicted if block.strip()]) == 12
    first = [line.split() for line in predicted[0].splitlines()]
    assert [row[:2] for row in first] == [[row[0], row[1]] for row in (line.split() for line in
                                                                       clauses(1, seed=1)[0].splitlines())]

    # installed: the loader by the task's name; the tags of the words as the command predicted them
    model, tokenizer = load_elmo(out, TASK)
    assert type(model) is ElmoForSemanticRoleLabeling
    words = [row[0] for row in first]
    encoded = tokenizer([words], is_split_into_words=True, return_tensors="pt")
    marks = torch.zeros_like(encoded["attention_mask"])
    marks[0, 2] = 1  # the first verb, after <S>
    tags = [model.config.id2label[i] for i in model.decode(**encoded, predicate_mask=marks)[0]]
    assert tags == [row[2] for row in first]

    # remote code, in an interpreter without the project: the class the saved auto_map names
    code = f"""
import torch
from transformers import AutoConfig, AutoTokenizer
from transformers.dynamic_module_utils import get_class_from_dynamic_module
folder = {str(out)!r}
config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
head = get_class_from_dynamic_module(config.auto_map["ElmoForSemanticRoleLabeling"], folder)
model = head.from_pretrained(folder).eval()
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
encoded = tokenizer([{words!r}], is_split_into_words=True, return_tensors="pt")
marks = torch.zeros_like(encoded["attention_mask"])
marks[0, 2] = 1
print("TAGS", [model.config.id2label[i] for i in model.decode(**encoded, predicate_mask=marks)[0]])
"""
    shown = run_isolated(code, cwd=tmp_path).stdout
    assert f"TAGS {tags}" in shown, shown
    remote, _ = load_elmo(out, TASK, trust_remote_code=True)
    assert type(remote).__name__ == "ElmoForSemanticRoleLabeling" and type(remote) is not ElmoForSemanticRoleLabeling


def test_the_head_reads_the_predicate_and_its_crf_decodes_bio():
    """The same words with another predicate marked give other logits; with `use_crf`, the loss is the CRF's and the
    decoded tags never open with an I- tag (BIO's rule)."""
    from conftest import tiny_config

    from elmo_hf.tokenization import ElmoTokenizer

    labels = ["O", "B-ARG0", "I-ARG0", "B-V"]
    config = tiny_config(use_crf=True, id2label=dict(enumerate(labels)),
                         label2id={label: i for i, label in enumerate(labels)})
    torch.manual_seed(0)
    model = ElmoForSemanticRoleLabeling(config).eval()
    encoded = ElmoTokenizer()([["the", "cat", "saw", "it"]] * 2, is_split_into_words=True, return_tensors="pt")
    marks = torch.zeros_like(encoded["attention_mask"])
    marks[0, 3], marks[1, 1] = 1, 1  # "saw" in the first row, "the" in the second
    with torch.no_grad():
        logits = model(**encoded, predicate_mask=marks).logits
    assert not torch.allclose(logits[0], logits[1])
    target = torch.tensor([[-100, 1, 2, 3, 0, -100]] * 2)
    model.train()
    assert torch.isfinite(model(**encoded, predicate_mask=marks, labels=target).loss)
    for row in model.decode(**encoded, predicate_mask=marks):
        assert len(row) == 4 and labels[row[0]] != "I-ARG0"


@pytest.mark.slow
def test_crf_trains_a_head_and_refuses_tags_its_scheme_forbids(tiny_model_dir, tmp_path):
    """`--crf true` as the NER command takes it: the saved head has its CRF and predicts; a predicate's tags that BIO
    forbids (an argument opening with I-) are refused in one line naming the predicate, before anything is written."""
    train = tmp_path / "train.txt"
    train.write_text("\n".join(clauses(4, seed=0)), encoding="utf-8")
    common = [TASK, "--model", tiny_model_dir, "--train_file", train, "--use_cpu", "--report_to", "none",
              "--save_strategy", "no", "--disable_tqdm", "true", "--seed", "0", "--max_steps", "2", "--crf", "true"]
    out = tmp_path / "out"
    result = run_cli("elmo-finetune", [*common, "--test_file", train, "--do_predict", "--output_dir", out])
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "config.json").read_text())["use_crf"] is True
    assert len([block for block in (out / "predictions.txt").read_text().split("\n\n") if block.strip()]) == 4

    bad = tmp_path / "bad.txt"
    bad.write_text(clauses(1, seed=0)[0].replace("B-ARG1", "I-ARG1", 1), encoding="utf-8")
    refused = run_cli("elmo-finetune", [*common, "--train_file", bad, "--output_dir", tmp_path / "refused"])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert re.search(r"--crf: predicate 1 \(line 1, word \d+\) of --train_file", refused.stderr), refused.stderr
    assert "I-ARG1 after B-V" in refused.stderr, refused.stderr
    assert not (tmp_path / "refused").exists()
