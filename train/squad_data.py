"""SQuAD-format data for `ElmoForQuestionAnswering`: the files read into questions, the questions cut into windows
of their passages for `Trainer`, and `Trainer`'s logits turned back into answers and scored.

    examples = read_squad_file("dev-v2.0.json")
    dataset = question_answering_features(examples, tokenizer, max_length=256, stride=32)
    output = trainer.predict(dataset)          # a Trainer over an ElmoForQuestionAnswering
    answers = answers_of(output.predictions, dataset, examples, handle_impossible_answer=True)  # id -> text
    squad_scores(answers, gold_answers(examples))                                           # exact_match, f1

Files: SQuAD v1.1 / v2.0 JSON (`data` -> `paragraphs` -> `context`, `qas` with `id`, `question`, `answers` of
`text` and `answer_start`, and in v2.0 `is_impossible`), or JSON lines (or a JSON array) of flat records as the
`datasets` SQuAD sets have them: `id`, `question`, `context`, `answers` {"text": [...], "answer_start": [...]}.
Each answer's text must be the passage's at its `answer_start`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import datasets

from modeling_elmo.question_answering_elmo import Windows, answer_words, best_answers, encode_windows

from .squad_metrics import squad_scores


def read_squad_file(path: str | os.PathLike, encoding: str = "utf-8") -> list[dict]:
    """The questions of a SQuAD JSON file or of flat JSON lines: `{"id", "question", "context", "answers":
    {"text": [...], "answer_start": [...]}}` each (no answers: unanswerable, as SQuAD 2.0 marks them)."""
    with open(path, encoding=encoding) as f:
        text = f.read().strip()
    if not text:
        raise ValueError("holds no questions (the file is empty)")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSON lines
    if isinstance(whole, dict) and "data" in whole:
        records = _squad_records(whole["data"])
    elif isinstance(whole, list):
        records = whole
    elif isinstance(whole, dict) and {"question", "context"} & set(whole):
        records = [whole]  # JSON lines of one line
    elif whole is None:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise ValueError(f"line {number} is not JSON ({error}): give SQuAD JSON or JSON lines with "
                                     "id, question, context, answers") from None
    else:
        raise ValueError("is neither SQuAD JSON ({\"data\": [...]}) nor JSON lines with id, question, context, answers")
    examples = [_checked(record, number) for number, record in enumerate(records, start=1)]
    if not examples:
        raise ValueError("holds no questions")
    return examples


def _squad_records(data) -> list[dict]:
    """SQuAD's nesting (articles, paragraphs, questions) flattened into one record per question; flat records
    under "data" (as `datasets` writes JSON with `field="data"`) are taken as they are."""
    if not isinstance(data, list):
        raise ValueError("'data' must be a list of articles with 'paragraphs'")
    records = []
    for article in data:
        if isinstance(article, dict) and {"question", "context"} & set(article):
            records.append(article)  # `datasets`' JSON layout: {"data": [flat records]}
            continue
        for paragraph in article.get("paragraphs", []) if isinstance(article, dict) else []:
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                answers = qa.get("answers") or []
                records.append({
                    "id": qa.get("id"), "question": qa.get("question"), "context": context,
                    "answers": {"text": [a.get("text") for a in answers],
                                "answer_start": [a.get("answer_start") for a in answers]},
                })
    return records


def _checked(record, number: int) -> dict:
    """One question, its fields checked: a one-line `ValueError` naming the question otherwise."""
    if not isinstance(record, dict):
        raise ValueError(f"question {number} is not a JSON object")
    name = f"question {record.get('id', number)!s}"
    for key in ("question", "context"):
        if not isinstance(record.get(key), str) or not record[key].strip():
            raise ValueError(f"{name} has no {key} (each question needs id, question, context and answers)")
    answers = record.get("answers") or {"text": [], "answer_start": []}
    if isinstance(answers, list):  # SQuAD's own list of {"text", "answer_start"}
        answers = {"text": [a.get("text") for a in answers], "answer_start": [a.get("answer_start") for a in answers]}
    texts, starts = list(answers.get("text") or []), list(answers.get("answer_start") or [])
    if len(texts) != len(starts):
        raise ValueError(f"{name}: {len(texts)} answer texts but {len(starts)} answer_start values")
    context = record["context"]
    for text, start in zip(texts, starts):
        if not isinstance(start, int) or not isinstance(text, str) or context[start: start + len(text)] != text:
            raise ValueError(f"{name}: the answer {text!r} is not in the context at answer_start {start!r}")
    return {"id": str(record.get("id", number)), "question": record["question"], "context": context,
            "answers": {"text": texts, "answer_start": starts}}


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
                     handle_impossible_answer: bool = False) -> dict[str, float]:
    """`exact_match` and `f1` (percent) of `Trainer`'s predictions on the dataset of `examples`."""
    answers = answers_of(predictions, dataset, examples, max_answer_words, handle_impossible_answer)
    return squad_scores(answers, gold_answers(examples))
