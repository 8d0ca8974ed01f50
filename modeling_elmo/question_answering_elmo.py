"""Question answering over passages of any length with `ElmoForQuestionAnswering`: the passage cut into overlapping
windows of words, each window encoded as a pair with the question, and the best span over all windows mapped back
to the passage's characters. One implementation for the fine-tuning command, `Trainer` users and the pipeline
(`pipeline_question_answering_elmo.py`), so that all three give the same answers.

    windows = encode_windows(tokenizer, [question], [context], max_length=256, stride=32, padding=True,
                             return_tensors="pt")
    logits = model(**windows.encodings)
    answers = best_answers(logits.start_logits, logits.end_logits, windows, top_k=1)[0]
    # [{"score": 0.93, "start": 17, "end": 23, "answer": "Lisbon"}]

ELMo's tokens are words: a window is a run of whole words, and `stride` is how many words consecutive windows share
(so an answer near a window's edge is whole in the next one). The windows are the tokenizer's own, as transformers'
SQuAD recipe asks for them (`truncation="only_second"`, `stride`, `return_overflowing_tokens=True`: one row per
window, `overflow_to_sample_mapping`, `sequence_ids`, `word_ids`). The tokenizer is duck-typed: this file travels to
the Hub as remote code and imports only the standard library and numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# Positions of a pair before its passage's first word: <S> question </S> <S>
PAIR_FRAME = 3


def word_spans(tokenizer, text: str) -> list[tuple[int, int]]:
    """The (start, end) character offsets of each word the tokenizer splits `text` into: its offsets mapping, or for
    a tokenizer without one (a folder saved before it had them), its words found left to right (every split keeps
    words as they are in the text)."""
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(span) for span in encoded["offset_mapping"]]
    except (NotImplementedError, TypeError, ValueError, KeyError):
        pass
    spans, cursor = [], 0
    for word in tokenizer.tokenize(text):
        start = text.find(word, cursor)
        if start < 0:
            raise ValueError(f"the tokenizer's word {word!r} is not in the text at or after character {cursor}")
        spans.append((start, start + len(word)))
        cursor = start + len(word)
    return spans


def answer_words(spans: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The first and last word that the characters [start, end) of an answer overlap; None when they overlap none."""
    inside = [i for i, (a, b) in enumerate(spans) if a < end and b > start]
    return (inside[0], inside[-1]) if inside else None


@dataclass
class Windows:
    """The windows of a batch of (question, passage) examples: `encodings` (the tokenizer's `input_ids`,
    `attention_mask`, `token_type_ids`, one row per window, unpadded: `tokenizer.pad` or a collator pads them), and
    for each window its example, its first passage word, how many passage words it holds and where they start in its
    row. `spans` and `contexts` per example map words back to characters."""

    encodings: dict[str, list] = field(default_factory=dict)
    example: list[int] = field(default_factory=list)
    first_word: list[int] = field(default_factory=list)
    num_words: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)  # position of the window's first passage word in its row
    spans: list[list[tuple[int, int]]] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.example)

    def answer_positions(self, window: int, words: tuple[int, int] | None) -> tuple[int, int]:
        """The positions in the row of `window` of an answer's first and last passage word (`answer_words`); (0, 0),
        "no answer", when there is none or the window does not hold all of it."""
        if words is None:
            return 0, 0
        first, last = words[0] - self.first_word[window], words[1] - self.first_word[window]
        if first < 0 or last >= self.num_words[window]:
            return 0, 0
        return self.offset[window] + first, self.offset[window] + last


def encode_windows(tokenizer, questions: Sequence[str], contexts: Sequence[str], max_length: int = 256,
                   stride: int = 32, max_question_words: int = 64, **tokenizer_kwargs) -> Windows:
    """Each (question, context) as windows of the context's words that fit with the question (its first
    `max_question_words` words) into `max_length` tokens, consecutive windows sharing `stride` words: the tokenizer's
    windows of the pairs of word lists. `tokenizer_kwargs` (`padding=True, return_tensors="pt"`) go to the
    tokenizer."""
    windows = Windows()
    asked, passages = [], []
    for index, (question, context) in enumerate(zip(questions, contexts, strict=True)):
        words = tokenizer.tokenize(question)[:max_question_words]
        if not words:
            raise ValueError(f"question {index} has no words: {question!r}")
        spans = word_spans(tokenizer, context)
        asked.append(words)
        passages.append([context[a:b] for a, b in spans])
        windows.spans.append(spans)
        windows.contexts.append(context)
    if not asked:
        return windows
    encoded = tokenizer(asked, passages, is_split_into_words=True, truncation="only_second", max_length=max_length,
                        stride=stride, return_overflowing_tokens=True, return_token_type_ids=True, **tokenizer_kwargs)
    for row, example in enumerate(encoded["overflow_to_sample_mapping"]):
        passage = [position for position, sequence in enumerate(encoded.sequence_ids(row)) if sequence == 1]
        windows.example.append(int(example))
        windows.first_word.append(encoded.word_ids(row)[passage[0]] if passage else 0)
        windows.num_words.append(len(passage))
        windows.offset.append(passage[0] if passage else len(asked[int(example)]) + PAIR_FRAME)
    windows.encodings = {key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    return windows


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def window_candidates(start_logits: np.ndarray, end_logits: np.ndarray, offset: int, num_words: int,
                      max_answer_words: int, top: int) -> tuple[float, list[tuple[float, int, int]]]:
    """The "no answer" probability of one window and its `top` spans (probability, first word, last word; words
    counted in the window), the probabilities a softmax over "no answer" and the passage's words, start times end."""
    positions = np.r_[0, offset: offset + num_words]
    p_start, p_end = _softmax(start_logits[positions]), _softmax(end_logits[positions])
    null = float(p_start[0] * p_end[0])
    scores = np.outer(p_start[1:], p_end[1:])  # (start word, end word)
    scores = np.triu(scores) - np.triu(scores, k=max_answer_words)  # end >= start, at most max_answer_words words
    best = np.argsort(-scores, axis=None, kind="stable")[:top]
    firsts, lasts = np.unravel_index(best, scores.shape)
    return null, [(float(scores[a, b]), int(a), int(b)) for a, b in zip(firsts, lasts) if scores[a, b] > 0]


def best_answers(start_logits, end_logits, windows: Windows, top_k: int = 1, max_answer_words: int = 30,
                 handle_impossible_answer: bool = False) -> list[list[dict]]:
    """Per example, its `top_k` answers over all its windows, best first: `{"score", "start", "end", "answer"}` with
    character offsets into its passage, as transformers' question-answering pipeline gave them. With
    `handle_impossible_answer`, "no answer" (`answer` "", start = end = 0) is a candidate too, with the lowest
    "no answer" probability of its windows. `start_logits`/`end_logits`: (windows, positions), an array or a
    sequence of rows, each as long as its window's or longer (batches padded to different widths need not be padded
    again to one)."""
    found: list[dict[tuple[int, int], float]] = [{} for _ in windows.contexts]
    nulls = [1.0 for _ in windows.contexts]
    for w in range(len(windows)):
        example = windows.example[w]
        starts, ends = (np.asarray(logits[w], dtype=np.float64) for logits in (start_logits, end_logits))
        null, spans = window_candidates(starts, ends, windows.offset[w], windows.num_words[w], max_answer_words,
                                        top_k)
        nulls[example] = min(nulls[example], null)
        for score, first, last in spans:
            key = (windows.first_word[w] + first, windows.first_word[w] + last)
            found[example][key] = max(score, found[example].get(key, 0.0))
    answers = []
    for example, candidates in enumerate(found):
        spans, context = windows.spans[example], windows.contexts[example]
        ranked = [{"score": score, "start": spans[a][0], "end": spans[b][1],
                   "answer": context[spans[a][0]: spans[b][1]]} for (a, b), score in candidates.items()]
        if handle_impossible_answer or not ranked:
            ranked.append({"score": nulls[example], "start": 0, "end": 0, "answer": ""})
        ranked.sort(key=lambda answer: -answer["score"])
        answers.append(ranked[:top_k])
    return answers
