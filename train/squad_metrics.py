"""Exact match and F1 of extractive answers, with SQuAD's normalisation: lower case, punctuation and the articles
"a", "an", "the" dropped, runs of white space made one space. A question is scored against its best-matching gold
answer; an unanswerable question (SQuAD 2.0) has the one gold answer "", which only "" matches.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's comparison form of an answer: "The  Eiffel-Tower!" -> "eiffeltower"."""
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """The F1 of the bags of normalised words; 1 when both are empty (an unanswerable question answered so)."""
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not wanted:
        return float(predicted == wanted)
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """`exact_match` and `f1` in percent over the questions of `references` (id -> gold answers; [] or [""] for an
    unanswerable question), each the best over its gold answers; a question without a prediction scores 0."""
    if not references:
        raise ValueError("no questions to score")
    total_em = total_f1 = 0.0
    for question, golds in references.items():
        golds = [gold for gold in golds if normalize_answer(gold)] or [""]
        predicted = predictions.get(question)
        if predicted is None:
            continue
        total_em += max(exact_match(predicted, gold) for gold in golds)
        total_f1 += max(f1(predicted, gold) for gold in golds)
    return {"exact_match": 100 * total_em / len(references), "f1": 100 * total_f1 / len(references)}
