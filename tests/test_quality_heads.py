"""The sets benchmarks/quality_heads.py writes to measure fine-tuning defaults: questions asked of CoNLL-2003's
sentences (one per entity type a sentence names exactly once, each answer a span of the passage) and endings of Penn
Treebank's sentences (the sentence's own second half among three others of its length), each read by the fine-tuning
command's own reader."""

from __future__ import annotations

import json
import sys

from conftest import REPO

from elmo_hf.train.tasks.common_data import read_conll_file
from elmo_hf.train.tasks.squad_data import read_squad_file

sys.path.insert(0, str(REPO / "benchmarks"))
import quality_heads  # noqa: E402

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
in IN B-PP O
New NNP B-NP B-LOC
York NNP I-NP I-LOC
and CC O O
Paris NNP B-NP B-LOC
"""


def test_entity_spans_of_iob2_tags_adjacent_and_multiword():
    """The questions' entities, read by the NER scorer's rules: two adjacent PER (so no PER question), a three-word
    LOC, and an ORG right after it (I- of another type opens an entity)."""
    tags = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "I-ORG"]
    sentence = {"tokens": [f"w{i}" for i in range(len(tags))], "tags": tags}
    records = quality_heads.conll_questions([sentence], "t-")
    asked = {record["id"]: (record["answers"]["text"][0], record["answers"]["answer_start"][0]) for record in records}
    assert asked == {"t-0-LOC": ("w4 w5 w6", 12), "t-0-ORG": ("w7", 21)}


def test_one_question_per_type_named_once_and_the_command_reads_them(tmp_path):
    (tmp_path / "train.txt").write_text(CONLL)
    records = quality_heads.conll_questions(read_conll_file(tmp_path / "train.txt"), "t-")
    asked = {record["id"]: record["answers"]["text"][0] for record in records}
    # sentence 0: one ORG, two MISC (no MISC question); sentence 1: one PER, two LOC (no LOC question)
    assert asked == {"t-0-ORG": "EU", "t-1-PER": "Peter Blackburn"}
    for record in records:
        start = record["answers"]["answer_start"][0]
        assert record["context"][start:].startswith(record["answers"]["text"][0])
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    read = read_squad_file(path)
    assert [(r["id"], r["answers"]["text"]) for r in read] == [(i, [a]) for i, a in asked.items()]


def test_ptb_endings_hold_the_sentence_s_own_half_among_three_others_of_its_length(tmp_path):
    from elmo_hf.train.tasks.multiple_choice import _examples

    lines = [" ".join(f"w{n}x{i}" for i in range(8 + n % 9)) for n in range(60)]
    (tmp_path / "ptb.txt").write_text("\n".join([" short line", *lines]) + "\n")
    records = quality_heads.ptb_endings(tmp_path / "ptb.txt", rows=30, seed=0)
    assert len(records) == 30
    by_context = {" ".join(line.split()[: len(line.split()) // 2]): line for line in lines}
    for record in records:
        endings, right = record["endings"], record["endings"][record["label"]]
        assert f"{record['context']} {right}" == by_context[record["context"]]  # its own second half
        assert len(set(endings)) == 4 and len({len(e.split()) for e in endings}) == 1
    assert len({record["label"] for record in records}) > 1  # the right one not always at the same place
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert [e["label"] for e in _examples(str(path), "utf-8", labelled=True)] == [r["label"] for r in records]


def test_sst2_choices_hold_one_positive_review_among_three_negative_ones(tmp_path):
    from elmo_hf.train.tasks.multiple_choice import _examples

    rows = [f"{n % 2}\treview {n} {'good' if n % 2 else 'bad'}" for n in range(40)]
    (tmp_path / "sst2.tsv").write_text("\n".join(["label\tsentence", *rows]) + "\n")
    records = quality_heads.sst2_choices(tmp_path / "sst2.tsv", rows=30, seed=0)
    assert len(records) == 20  # every positive review once, however many rows are asked for
    for record in records:
        endings = record["endings"]
        assert len(endings) == 4 and [e.endswith("good") for e in endings].count(True) == 1
        assert endings[record["label"]].endswith("good")
    assert len({record["label"] for record in records}) > 1
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert [e["label"] for e in _examples(str(path), "utf-8", labelled=True)] == [r["label"] for r in records]
