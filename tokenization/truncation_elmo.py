"""Truncation and windows: which words of each sentence (or of each sentence of a pair) a row of an encoding holds.

ELMo's tokens are whole words, so a row holds a run of each sentence's words, `(start, stop)`, and a window always
ends on a word boundary; `max_length` counts tokens, the `<S>` and `</S>` the tokenizer adds around each sentence
included.

* Truncation (`kept_spans`): how many words go, and from which sentence of a pair, is transformers' own rule: its
  `truncate_sequences` (the tokenizer's method) cuts lists of word positions, honouring `truncation_side` and the
  strategies `longest_first` (a word at a time from the longer sentence, from the second on a tie), `only_first` and
  `only_second`.
* Windows (`windows`, for `return_overflowing_tokens=True`): every sample cut into rows as transformers' fast
  tokenizers cut it (the `tokenizers` library's truncation): windows of the truncated sentence, consecutive ones
  sharing `stride` words, from the start (or from the end with `truncation_side="left"`); with `longest_first` both
  sentences of a pair are windowed, to the sizes that library gives them, and every window of one meets every window
  of the other, in its order. The first row of a sample is its truncation by the fast tokenizers' rule, which gives
  an odd word the other way from `truncate_sequences` when a pair's two sentences are cut by `longest_first`.

What transformers leaves to the caller is refused here in one line: a `max_length` without room for the added
tokens, a sentence too short to lose what `only_first` / `only_second` would take from it, a `stride` not below the
words of a window.

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library
and transformers.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator

from transformers.tokenization_utils_base import TruncationStrategy

Span = tuple[int, int]  # (start, stop) of the words kept


def kept_spans(
    truncate: Callable, strategy: TruncationStrategy, max_length: int | None, add_special_tokens: bool,
    first_lengths: list[int], second_lengths: list[int] | None,
) -> list[tuple[Span, Span | None]]:
    """The words each sentence keeps (of each pair: both spans; single sentences: `(span, None)`), so that a row's
    tokens are at most `max_length`. `truncate` is the tokenizer's `truncate_sequences`."""
    whole = _whole(first_lengths, second_lengths)
    room = _room(strategy, max_length, add_special_tokens, second_lengths is None)
    if room is None:
        return whole
    with _without_the_longest_first_notice(truncate):
        return [
            spans if sum(n for n in (a, b) if n) <= room else _cut(truncate, strategy, room, i, a, b, max_length)
            for i, (spans, a, b) in enumerate(zip(whole, first_lengths, second_lengths or [None] * len(whole)))
        ]


def windows(
    strategy: TruncationStrategy, max_length: int | None, stride: int, left: bool, add_special_tokens: bool,
    first_lengths: list[int], second_lengths: list[int] | None,
) -> list[tuple[int, Span, Span | None]]:
    """The rows of an encoding with `return_overflowing_tokens=True`: (its sample, the words it holds of the
    sentence, of the pair's second sentence or None), every sample's rows in the order transformers' fast tokenizers
    give them. `left`: `truncation_side="left"`."""
    room = _room(strategy, max_length, add_special_tokens, second_lengths is None)
    if room is None:
        return [(i, *spans) for i, spans in enumerate(_whole(first_lengths, second_lengths))]
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 0:
        raise ValueError(f"stride must be a non-negative integer (the words consecutive windows share), got {stride!r}")
    rows = []
    for i, a in enumerate(first_lengths):
        if second_lengths is None:
            rows.extend((i, span, None) for span in _runs(a, room, stride, left, f"sentence {i}"))
            continue
        b = second_lengths[i]
        if a + b <= room:
            rows.append((i, (0, a), (0, b)))
        elif strategy == TruncationStrategy.LONGEST_FIRST:
            size_a, size_b = _longest_first_sizes(a, b, room)
            firsts = _runs(a, size_a, stride, left, f"the first sentence of pair {i}")
            seconds = _runs(b, size_b, stride, left, f"the second sentence of pair {i}")
            # the order of the `tokenizers` library's pairs of overflowing encodings
            rows.append((i, firsts[0], seconds[0]))
            rows.extend((i, first, second) for first in firsts[1:] for second in seconds)
            rows.extend((i, firsts[0], second) for second in seconds[1:])
        else:
            cut = 0 if strategy == TruncationStrategy.ONLY_FIRST else 1
            size = room - (b, a)[cut]
            if size <= 0:
                raise ValueError(
                    f"max_length={max_length} is too short for truncation={strategy.value!r} with windows: the "
                    f"{('second', 'first')[cut]} sentence of pair {i} alone has {(b, a)[cut]} words, which leaves no "
                    "room for a window of the other"
                )
            runs = _runs((a, b)[cut], size, stride, left, f"the {('first', 'second')[cut]} sentence of pair {i}")
            rows.extend((i, run, (0, b)) if cut == 0 else (i, (0, a), run) for run in runs)
    return rows


def _runs(length: int, size: int, stride: int, left: bool, what: str) -> list[Span]:
    """Windows of at most `size` of `length` words, consecutive ones sharing `stride` words: from the first word, or
    with `left` from the last one backwards (the `tokenizers` library's `Encoding.truncate`)."""
    if length <= size:
        return [(0, length)]
    if size == 0:
        raise ValueError(f"max_length leaves no room for a word of {what} in a window")
    if stride >= size:
        raise ValueError(f"stride={stride} must be less than the {size} words a window of {what} holds "
                         "(max_length less the <S> and </S> of every sentence and the words of the other sentence)")
    step, runs = size - stride, []
    if left:
        stop = length
        while not runs or runs[-1][0] > 0:
            runs.append((max(0, stop - size), stop))
            stop -= step
    else:
        start = 0
        while not runs or runs[-1][1] < length:
            runs.append((start, min(start + size, length)))
            start += step
    return runs


def _longest_first_sizes(a: int, b: int, room: int) -> tuple[int, int]:
    """The words each sentence of a pair keeps under `longest_first` in the `tokenizers` library: the shorter one
    whole where the longer can have the rest, else half of `room` each (the odd word to the second)."""
    short, long = sorted((a, b))
    long = short if short > room else max(short, room - short)
    if short + long > room:
        short = room // 2
        long = short + room % 2
    return (long, short) if a > b else (short, long)


def _whole(first_lengths: list[int], second_lengths: list[int] | None) -> list[tuple[Span, Span | None]]:
    seconds = [None] * len(first_lengths) if second_lengths is None else second_lengths
    return [((0, a), None if b is None else (0, b)) for a, b in zip(first_lengths, seconds, strict=True)]


def _room(strategy: TruncationStrategy, max_length: int | None, add_special_tokens: bool, singles: bool) -> int | None:
    """The words a row may hold besides its added tokens; None where nothing is truncated."""
    if strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
        return None
    if singles and strategy == TruncationStrategy.ONLY_SECOND:
        raise ValueError("truncation='only_second' needs a pair of sequences; ElmoTokenizer encodes one")
    added = (2 if singles else 4) if add_special_tokens else 0
    if max_length < added:
        what = "<S> and </S>" if singles else "<S> and </S> of both sentences of a pair"
        raise ValueError(f"max_length={max_length} leaves no room for the {what}; use max_length >= {added}")
    return max_length - added


def _cut(truncate: Callable, strategy: TruncationStrategy, room: int, pair: int, a: int, b: int | None,
         max_length: int) -> tuple[Span, Span | None]:
    """The spans of one sentence (`b` None) or pair whose `a + b` words are more than `room`."""
    over = a + (b or 0) - room
    if b is not None and strategy != TruncationStrategy.LONGEST_FIRST:
        cut = 0 if strategy == TruncationStrategy.ONLY_FIRST else 1
        if (a, b)[cut] < over:
            raise ValueError(
                f"max_length={max_length} is too short for truncation={strategy.value!r}: the "
                f"{('second', 'first')[cut]} sentence of pair {pair} alone has {(b, a)[cut]} words "
                "(truncation='longest_first' cuts both)"
            )
        if (a, b)[cut] == over:  # nothing left of it: transformers 4.x would log an error and cut nothing
            return ((0, 0), (0, b)) if cut == 0 else ((0, a), (0, 0))
    elif b is None and a == over:
        return (0, 0), None
    kept, pair_kept, _ = truncate(list(range(a)), None if b is None else list(range(b)),
                                  num_tokens_to_remove=over, truncation_strategy=strategy)
    return _span(kept), None if b is None else _span(pair_kept)


def _span(positions: list[int]) -> Span:
    return (positions[0], positions[-1] + 1) if positions else (0, 0)


@contextlib.contextmanager
def _without_the_longest_first_notice(truncate: Callable) -> Iterator[None]:
    """transformers' `truncate_sequences` warns, at every pair cut by `longest_first`, that it returns no overflowing
    tokens (its slow tokenizers never do for that strategy): true of it, not of this tokenizer, and said on every
    row. Dropped while `truncate` runs, from its own module's logger only."""
    module = inspect.getmodule(getattr(truncate, "__func__", truncate))
    target = getattr(module, "logger", None)
    if not isinstance(target, logging.Logger):
        yield
        return
    notice = _DropMessage("Be aware, overflowing tokens are not returned")
    target.addFilter(notice)
    try:
        yield
    finally:
        target.removeFilter(notice)


class _DropMessage(logging.Filter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)
