"""The question-answering set benchmarks/quality_heads.py asks of CoNLL-2003's sentences (its QA defaults are
measured on it): one question per entity type a sentence names exactly once, each answer a span of the passage that
the fine-tuning command's own reader accepts."""

from __future__ import annotations

import json
import sys

from conftest import REPO

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
    tags = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "I-ORG"]
    assert quality_heads.entity_spans(tags) == [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 7), ("ORG", 7, 8)]


def test_one_question_per_type_named_once_and_the_command_reads_them(tmp_path):
    (tmp_path / "train.txt").write_text(CONLL)
    records = quality_heads.conll_questions(quality_heads.conll_sentences(tmp_path / "train.txt"), "t-")
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
