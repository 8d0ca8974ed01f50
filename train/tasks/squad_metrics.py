"""Exact match and F1 of extractive answers, scored on words (SQuAD) or on characters (CMRC 2018).

Words, SQuAD's official rule: lower case, ASCII punctuation and the articles "a", "an", "the" dropped, runs of white
space made one space; F1 of the bags of words.

Characters, the rule of CMRC 2018's evaluation script (`cmrc2018_evaluate.py`) for text written without spaces between
words: lower case; the marks of its list (`CMRC_DROPPED`: Chinese punctuation and a few ASCII symbols) are dropped; each
Chinese character (U+4E00 to U+9FA5) is a unit of its own, and the other text between them is cut into words as its NLTK
tokenizer does (here without NLTK, and close to it: a number keeps its "." and ",", as in "3.5" or "1,000", a word its
inner dots; another mark, "." and "," included, is a unit of its own). Exact match compares the answers' text with the
marks dropped (spaces count); F1 takes the longest run of units both share (precision over the predicted units, recall
over the gold ones). So "深圳市" scores F1 0.5 against "广东省深圳市龙岗区", where words give 0 (neither has a
space), "北京。" matches "北京", and "3" scores 0 against "3.5", as in the official script.

A question is scored against its best-matching gold answer; an unanswerable question (SQuAD 2.0) has the one gold
answer "", which only "" matches. `scoring_for` picks characters for data whose passages are mostly CJK characters.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
SCORINGS = ("words", "characters")
SCORING_NAMES = {"words": "words (SQuAD)", "characters": "characters (CMRC 2018)"}


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


def is_cjk(character: str) -> bool:
    """A character of a script written without spaces between words: CJK ideographs (with their extensions and
    compatibility forms), hiragana and katakana."""
    code = ord(character)
    return (0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF
            or 0x20000 <= code <= 0x3FFFF or 0x3040 <= code <= 0x30FF)


# The marks CMRC 2018's script drops (its `sp_char`; its "……" is two characters and never matches one).
CMRC_DROPPED = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")
_CMRC_CHINESE = re.compile("[\u4e00-\u9fa5]")
# Close to what NLTK's word_tokenize makes of the text between Chinese characters, for answers: numbers with their
# inner "." and "," ("3.5", "1,000"), words with inner dots ("U.S.", "www.example.com"), words, every other mark alone
# (NLTK's "n't" and other English contractions are not followed).
_CMRC_WORD = re.compile(r"\d+(?:[.,]\d+)+|\w+(?:\.\w+)+\.?|\w+|\S")


def _without_marks(text: str) -> str:
    return "".join(character for character in text.lower().strip() if character not in CMRC_DROPPED)


def character_units(text: str) -> list[str]:
    """The units of CMRC 2018's F1 (module docstring): each Chinese character alone, other text in words; the
    script's marks dropped."""
    units, run = [], ""
    for character in _without_marks(text):  # a mark dropped does not end the word around it, as in the script
        if _CMRC_CHINESE.match(character):
            units += _CMRC_WORD.findall(run)
            run = ""
            units.append(character)
        else:
            run += character
    return units + _CMRC_WORD.findall(run)


def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            if x == y:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def character_exact_match(prediction: str, gold: str) -> float:
    """CMRC 2018's exact match: the texts equal with its marks dropped."""
    return float(_without_marks(prediction) == _without_marks(gold))


def character_f1(prediction: str, gold: str) -> float:
    """CMRC 2018's F1: the longest run of units both share, over the predicted units (precision) and the gold
    ones (recall); 1 when both are empty."""
    predicted, wanted = character_units(prediction), character_units(gold)
    if not predicted or not wanted:
        return float(predicted == wanted)
    common = _longest_common_run(predicted, wanted)
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def scoring_for(texts: Iterable[str], chosen: str | None = None) -> str:
    """`chosen` ("words" or "characters") when given; otherwise "characters" when most of the letters of `texts`
    (the passages) are CJK characters, else "words"."""
    if chosen not in (None, "auto"):
        if chosen not in SCORINGS:
            raise ValueError(f"--scoring must be auto, words or characters, got {chosen!r}")
        return chosen
    letters = cjk = 0
    for text in texts:
        for character in text:
            if character.isalpha():
                letters += 1
                cjk += is_cjk(character)
    return "characters" if letters and cjk > letters / 2 else "words"


def squad_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]],
                 scoring: str = "words") -> dict[str, float]:
    """`exact_match` and `f1` in percent over the questions of `references` (id -> gold answers; [] or [""] for an
    unanswerable question), each the best over its gold answers; a question without a prediction scores 0.
    `scoring`: "words" (SQuAD) or "characters" (CMRC 2018)."""
    if not references:
        raise ValueError("no questions to score")
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    matches, overlaps, kept = ((exact_match, f1, normalize_answer) if scoring == "words" else
                               (character_exact_match, character_f1, character_units))
    total_em = total_f1 = 0.0
    for question, golds in references.items():
        golds = [gold for gold in golds if kept(gold)] or [""]
        predicted = predictions.get(question)
        if predicted is None:
            continue
        total_em += max(matches(predicted, gold) for gold in golds)
        total_f1 += max(overlaps(predicted, gold) for gold in golds)
    return {"exact_match": 100 * total_em / len(references), "f1": 100 * total_f1 / len(references)}
