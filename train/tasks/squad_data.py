"""SQuAD-format data for `ElmoForQuestionAnswering`: the files read into questions, the questions cut into windows
of their passages for `Trainer`, and `Trainer`'s logits turned back into answers and scored.

    examples = read_squad_file("dev-v2.0.json")
    dataset = question_answering_features(examples, tokenizer, max_length=256, stride=32)
    output = trainer.predict(dataset)          # a Trainer over an ElmoForQuestionAnswering
    answers = answers_of(output.predictions, dataset, examples, handle_impossible_answer=True)  # id -> text
    squad_scores(answers, gold_answers(examples))                                           # exact_match, f1

Files: SQuAD v1.1 / v2.0 JSON (`data` -> `paragraphs` -> `context`, `qas` with `id`, `question`, `answers` of
`text` and `answer_start`, and in v2.0 `is_impossible`), or JSON lines (or a JSON array) of flat records as the
`datasets` SQuAD sets have them: `id`, `question`, `context`, `answers` {"text": [...], "answer_start": [...]}
(or a list of answer texts, `["Lisbon"]`, each found at its first occurrence in the context).
Each answer's text must be the passage's at its `answer_start` (a whole number), each question's id unique, and a
question without answers is unanswerable only where the file says so (SQuAD 2.0's `is_impossible`, an empty answers
list of a flat record) or `version_2_with_negative` does: see `read_squad_file`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import datasets

from elmo_hf.modeling_elmo.question_answering_elmo import Windows, answer_words, best_answers, encode_windows
from elmo_hf.tools.core.errors import FileFormatError

from .squad_metrics import squad_scores


def read_squad_file(path: str | os.PathLike, encoding: str = "utf-8", version_2_with_negative: bool | None = None,
                    answers_needed: bool = True) -> list[dict]:
    """The questions of a SQuAD JSON file or of flat JSON lines: `{"id", "question", "context", "answers":
    {"text": [...], "answer_start": [...]}}` each.

    A question without answers is unanswerable (SQuAD 2.0) where the data says so: a SQuAD JSON file that marks
    questions `is_impossible` (or of version 2), or a flat record with an empty `answers` (as `datasets`' squad_v2
    has them); or where `version_2_with_negative` is True. Otherwise (a v1.1 file, a record without `answers`, or
    `version_2_with_negative` False) it is refused, naming the question. `answers_needed=False` (a file to predict):
    answers are not needed (those given are checked). Question ids must be unique: a repeated id is refused naming both
    places (predictions are keyed by id)."""
    with open(path, encoding=encoding) as f:
        text = f.read().strip()
    if not text:
        raise FileFormatError("holds no questions (the file is empty)")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSON lines
    if isinstance(whole, dict) and "data" in whole:
        records = _squad_records(whole["data"])
        version = str(whole.get("version", ""))
        nested_v2 = version.lstrip("v").startswith("2") or any(r.get("is_impossible") is not None for r, _ in records)
    elif isinstance(whole, list):
        records, nested_v2 = [(record, f"record {n}") for n, record in enumerate(whole, start=1)], False
    elif isinstance(whole, dict) and {"question", "context"} & set(whole):
        records, nested_v2 = [(whole, "line 1")], False  # JSON lines of one line
    elif whole is None:
        records, nested_v2 = [], False
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((json.loads(line), f"line {number}"))
                except json.JSONDecodeError as error:
                    raise FileFormatError(f"line {number} is not JSON ({error}): give SQuAD JSON or JSON lines with "
                                          "id, question, context, answers") from error
    else:
        raise FileFormatError("is neither SQuAD JSON ({\"data\": [...]}) nor JSON lines with id, question, context, "
                              "answers")
    rule = _UnanswerableRule(version_2_with_negative, nested_v2, answers_needed)
    examples, places = [], {}
    for number, (record, place) in enumerate(records, start=1):
        example = _checked(record, number, place, rule)
        if example["id"] in places:
            raise FileFormatError(f"the question id {example['id']!r} is at {places[example['id']]} and again at "
                                  f"{place}: each question needs an id of its own (answers are keyed by it)")
        places[example["id"]] = place
        examples.append(example)
    if not examples:
        raise FileFormatError("holds no questions")
    return examples


class _UnanswerableRule:
    """Whether a question without answers is unanswerable (SQuAD 2.0) or a mistake; see `read_squad_file`."""

    def __init__(self, chosen: bool | None, nested_v2: bool, answers_needed: bool):
        self.chosen, self.nested_v2, self.answers_needed = chosen, nested_v2, answers_needed

    def check(self, record: dict, name: str, answered: bool, nested: bool) -> None:
        if not self.answers_needed or answered:
            return
        if self.chosen is True:
            return
        if self.chosen is None:
            if nested and self.nested_v2:
                if record.get("is_impossible") is False:
                    raise FileFormatError(f"{name} is marked answerable (is_impossible false) but has no answers")
                return
            if not nested and record.get("answers") is not None:
                return  # datasets' squad_v2 records: an empty answers list marks an unanswerable question
        why = ("--version_2_with_negative false" if self.chosen is False else
               "a SQuAD v1.1 file needs one for every question" if nested else
               "a record without answers (an empty list marks an unanswerable question)")
        raise FileFormatError(f"{name} has no answers: {why}; give its answers"
                              + ("" if self.chosen is False else
                            ", or --version_2_with_negative true to read questions without answers as unanswerable"))


def _squad_records(data) -> list[tuple[dict, str]]:
    """SQuAD's nesting (articles, paragraphs, questions) flattened into one record per question, with its place
    ("article 1, paragraph 2, question 3"); flat records under "data" (as `datasets` writes JSON with
    `field="data"`) are taken as they are."""
    if not isinstance(data, list):
        raise FileFormatError("'data' must be a list of articles with 'paragraphs'")
    records = []
    for a, article in enumerate(data, start=1):
        if isinstance(article, dict) and {"question", "context"} & set(article):
            records.append((article, f"record {a} of 'data'"))  # `datasets`' JSON layout: {"data": [flat records]}
            continue
        for p, paragraph in enumerate(article.get("paragraphs", []) if isinstance(article, dict) else [], start=1):
            context = paragraph.get("context")
            for q, qa in enumerate(paragraph.get("qas", []), start=1):
                answers = qa.get("answers")
                record = {"id": qa.get("id"), "question": qa.get("question"), "context": context,
                          "answers": None if answers is None else
                          {"text": [a.get("text") if isinstance(a, dict) else a for a in answers],
                           "answer_start": [a.get("answer_start") if isinstance(a, dict) else None for a in answers]},
                          "_nested": True}
                if "is_impossible" in qa:
                    record["is_impossible"] = qa["is_impossible"]
                records.append((record, f"article {a}, paragraph {p}, question {q}"))
    return records


def _checked(record, number: int, place: str, rule: _UnanswerableRule) -> dict:
    """One question, its fields checked: a one-line `ValueError` naming the question otherwise."""
    if not isinstance(record, dict):
        raise FileFormatError(f"question {number} ({place}) is not a JSON object")
    identifier = str(record["id"]) if record.get("id") is not None else str(number)
    name = f"question {identifier} ({place})"
    for key in ("question", "context"):
        if not isinstance(record.get(key), str) or not record[key].strip():
            raise FileFormatError(f"{name} has no {key} (each question needs id, question, context and answers)")
    answers = record.get("answers") or {"text": [], "answer_start": []}
    if isinstance(answers, list):  # SQuAD's own list of {"text", "answer_start"}, or of answer texts
        answers = _answer_list(answers, record.get("context"), name)
    if not isinstance(answers, dict):
        raise FileFormatError(f"{name}: answers must be {{\"text\": [...], \"answer_start\": [...]}} or a list of "
                              f"{{\"text\", \"answer_start\"}}, got {answers!r:.60}")
    texts, starts = answers.get("text") or [], answers.get("answer_start") or []
    if not isinstance(texts, list) or not isinstance(starts, list):
        raise FileFormatError(f"{name}: answers' text and answer_start must be lists (as datasets' SQuAD has them), "
                              f"got {answers!r:.80}")
    if len(texts) != len(starts):
        raise FileFormatError(f"{name}: {len(texts)} answer texts but {len(starts)} answer_start values")
    context = record["context"]
    for text, start in zip(texts, starts):
        if not isinstance(text, str):
            raise FileFormatError(f"{name}: an answer's text must be a string, got {text!r:.60}")
        if not isinstance(start, int) or isinstance(start, bool):
            kind = "a string" if isinstance(start, str) else "missing" if start is None else type(start).__name__
            raise FileFormatError(f"{name}: the answer {text!r}: answer_start must be a whole number of characters, "
                                  f"got {start!r} ({kind})")
        if context[start: start + len(text)] != text:
            raise FileFormatError(f"{name}: the answer {text!r} is not in the context at answer_start {start!r}")
    if record.get("_nested") and record.get("is_impossible") is True and texts:
        raise FileFormatError(f"{name} is marked unanswerable (is_impossible true) but has answers")
    rule.check(record, name, bool(texts), bool(record.get("_nested")))
    return {"id": identifier, "question": record["question"], "context": context,
            "answers": {"text": texts, "answer_start": starts}}


def _answer_list(answers: list, context: str, name: str) -> dict:
    """`{"text", "answer_start"}` of a list of SQuAD's `{"text", "answer_start"}`, or of answer texts alone
    (`["Lisbon"]`), each found at its first occurrence in the context; anything else is refused naming the question
    and the forms it may take."""
    texts, starts = [], []
    for answer in answers:
        if isinstance(answer, dict):
            texts.append(answer.get("text"))
            starts.append(answer.get("answer_start"))
        elif isinstance(answer, str):
            start = context.find(answer) if answer.strip() else -1
            if start < 0:
                raise FileFormatError(f"{name}: the answer {answer!r:.60} is not in the context: give each answer as "
                                      "text the context holds, or as {\"text\", \"answer_start\"}")
            texts.append(answer)
            starts.append(start)
        else:
            raise FileFormatError(f"{name}: an answer must be {{\"text\", \"answer_start\"}} or the answer's text, got "
                                  f"{answer!r:.60}")
    return {"text": texts, "answer_start": starts}


def gold_answers(examples: Sequence[dict]) -> dict[str, list[str]]:
    """id -> the gold answer texts ([] for an unanswerable question)."""
    return {example["id"]: list(example["answers"]["text"]) for example in examples}


def question_answering_features(examples: Sequence[dict], tokenizer, max_length: int = 256, stride: int = 32,
                                max_question_words: int = 64) -> datasets.Dataset:
    """The windows of `examples` (`encode_windows`) as a `datasets.Dataset` for `Trainer`: the model's inputs,
    `start_positions`/`end_positions` of each window's first answer (0: "no answer", also where the window does not
    hold it), and what `answers_of` maps logits back with (`example`, `first_word`, `num_words`, `offset`, `spans`;
    `Trainer` leaves these columns out of the model's batches)."""
    windows = encode_windows(tokenizer, [e["question"] for e in examples], [e["context"] for e in examples],
                             max_length=max_length, stride=stride, max_question_words=max_question_words)
    starts, ends = [], []
    for w, index in enumerate(windows.example):
        answers = examples[index]["answers"]
        words = None
        if answers["text"]:
            first = answers["answer_start"][0]
            words = answer_words(windows.spans[index], first, first + len(answers["text"][0]))
        start, end = windows.answer_positions(w, words)
        starts.append(start)
        ends.append(end)
    features = datasets.Features({
        "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
        "attention_mask": datasets.Sequence(datasets.Value("int8")),
        "token_type_ids": datasets.Sequence(datasets.Value("int8")),
        "start_positions": datasets.Value("int64"), "end_positions": datasets.Value("int64"),
        "example": datasets.Value("int64"), "first_word": datasets.Value("int64"),
        "num_words": datasets.Value("int64"), "offset": datasets.Value("int64"),
        "spans": datasets.Sequence(datasets.Sequence(datasets.Value("int64"))),
    })
    return datasets.Dataset.from_dict({
        **{key: list(values) for key, values in windows.encodings.items()},
        "start_positions": starts, "end_positions": ends, "example": windows.example,
        "first_word": windows.first_word, "num_words": windows.num_words, "offset": windows.offset,
        "spans": [[list(span) for span in windows.spans[index]] for index in windows.example],
    }, features=features)


def windows_of(dataset: datasets.Dataset, examples: Sequence[dict]) -> Windows:
    """The `Windows` of a dataset of `question_answering_features` over `examples`."""
    columns = dataset.select_columns(["example", "first_word", "num_words", "offset", "spans"]).to_dict()
    spans: dict[int, list[tuple[int, int]]] = {}
    for index, row in zip(columns["example"], columns["spans"]):
        spans.setdefault(index, [tuple(span) for span in row])
    return Windows(example=columns["example"], first_word=columns["first_word"], num_words=columns["num_words"],
                   offset=columns["offset"], spans=[spans.get(i, []) for i in range(len(examples))],
                   contexts=[example["context"] for example in examples])


def answers_of(predictions, dataset: datasets.Dataset, examples: Sequence[dict], max_answer_words: int = 30,
               handle_impossible_answer: bool = False) -> dict[str, str]:
    """id -> the best answer's text, from `Trainer`'s predictions (start and end logits of the dataset's windows,
    in its order)."""
    start_logits, end_logits = predictions[:2]
    best = best_answers(start_logits, end_logits, windows_of(dataset, examples), max_answer_words=max_answer_words,
                        handle_impossible_answer=handle_impossible_answer)
    return {example["id"]: answers[0]["answer"] for example, answers in zip(examples, best)}


def evaluate_answers(predictions, dataset, examples, max_answer_words: int = 30,
                     handle_impossible_answer: bool = False, scoring: str = "words") -> dict[str, float]:
    """`exact_match` and `f1` (percent) of `Trainer`'s predictions on the dataset of `examples`, on words (SQuAD) or
    characters (`scoring="characters"`, CMRC 2018: `elmo_hf.train.tasks.squad_metrics`)."""
    answers = answers_of(predictions, dataset, examples, max_answer_words, handle_impossible_answer)
    return squad_scores(answers, gold_answers(examples), scoring)
