"""The second view: a word in a query sentence, and its nearest neighbours in context among the word occurrences of
a small corpus, by the cosine of one layer's vectors (as in Table 4 of the ELMo paper, where the biLM's neighbours
of "play" are the occurrences used in the same sense).

A corpus is embedded once and kept (the last few, keyed by their text and split), and the model's token cache runs
the character CNN once per distinct word, so a second query on the same corpus costs one sentence.
"""

from __future__ import annotations

import hashlib
import html
import time
from dataclasses import dataclass, field

import torch

from .session import AppInputError, AppSession, Sentences, embed_sentences, split_sentences
from .similarity import find_occurrences, joined

CORPORA_KEPT = 4


@dataclass
class CorpusIndex:
    """Every word occurrence of a corpus: unit vectors (N, L + 1, 2P) and where each one is."""

    sentences: Sentences
    unit: torch.Tensor  # (N, L + 1, 2P), each vector divided by its norm
    where: list[tuple[int, int]]  # (sentence, position) of each row
    seconds: float


@dataclass
class Neighbour:
    cosine: float
    sentence: int
    position: int
    word: str


@dataclass
class NeighboursResult:
    query_words: list[str]
    query_position: int
    layer: int
    neighbours: list[Neighbour]
    index: CorpusIndex
    notes: list[str] = field(default_factory=list)


def corpus_index(session: AppSession, text: str, split: str) -> CorpusIndex:
    """The embedded corpus `text` (one sentence per line, within the corpus limits), from the session's cache when
    the same text was embedded before."""
    key = hashlib.sha256(f"{split}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()
    cache = session.corpus_cache
    with session.corpus_lock:  # requests run side by side
        if key in cache:
            cache[key] = cache.pop(key)  # the most recently used goes last
            return cache[key]
    limits = session.limits
    sentences = split_sentences(text, split, max_chars=limits.max_corpus_chars,
                                max_sentences=limits.max_corpus_sentences, max_words=limits.max_words,
                                what="the corpus")
    start = time.perf_counter()
    vectors = embed_sentences(session, sentences.words)
    unit = torch.nn.functional.normalize(torch.cat([v.transpose(0, 1) for v in vectors]), dim=-1, eps=1e-30)
    where = [(s, i) for s, words in enumerate(sentences.words) for i in range(len(words))]
    index = CorpusIndex(sentences, unit, where, time.perf_counter() - start)
    with session.corpus_lock:
        cache.pop(key, None)  # a request beside this one may have embedded the same corpus meanwhile
        cache[key] = index
        while len(cache) > CORPORA_KEPT:
            cache.pop(next(iter(cache)))
    return index


def nearest_neighbours(session: AppSession, corpus: str, query: str, word: str, split: str, layer: int,
                       k: int = 10, same_word_only: bool = True) -> NeighboursResult:
    """The `k` occurrences of the corpus closest to `word` in `query` (its first occurrence there) at `layer`:
    among the occurrences of the same word, or of every word. With an empty `query`, the word's first sentence in
    the corpus is the query. The query occurrence itself is left out."""
    index = corpus_index(session, corpus, split)
    layers = session.num_layers
    if not 0 <= int(layer) < layers:
        raise AppInputError(f"layer must be between 0 and {layers - 1}, got {layer}")
    layer, notes = int(layer), list(index.sentences.notes)
    if (query or "").strip():
        limits = session.limits
        query_sentences = split_sentences(query, split, max_chars=limits.max_chars, max_sentences=1,
                                          max_words=limits.max_words, what="the query sentence")
        notes += query_sentences.notes
        occurrences, found = find_occurrences(query_sentences.words, word, split)
        query_words, position = query_sentences.words[0], occurrences[0].position
        vector = embed_sentences(session, [query_words])[0][:, position]  # (L + 1, 2P)
        vector = torch.nn.functional.normalize(vector, dim=-1, eps=1e-30)
        own = None
    else:
        occurrences, found = find_occurrences(index.sentences.words, word, split)
        first = occurrences[0]
        query_words, position = index.sentences.words[first.sentence], first.position
        own = index.where.index((first.sentence, first.position))
        vector = index.unit[own]
        notes.append(f"no query sentence: the query is the first occurrence of {first.word!r} in the corpus")
    notes += found
    target = query_words[position]
    scores = index.unit[:, layer] @ vector[layer]  # (N,)
    candidates = []
    for row, (s, i) in enumerate(index.where):
        w = index.sentences.words[s][i]
        if row == own or (own is None and index.sentences.words[s] == query_words and i == position):
            continue  # the query itself
        if same_word_only and w.casefold() != target.casefold():
            continue
        candidates.append(row)
    if not candidates:
        what = f"other occurrences of {target!r}" if same_word_only else "other words"
        raise AppInputError(f"the corpus has no {what} to compare with: add sentences"
                            + (", or untick 'same word only'" if same_word_only else ""))
    order = sorted(candidates, key=lambda row: -float(scores[row]))[: max(1, int(k))]
    neighbours = [Neighbour(float(scores[row]), *index.where[row], index.sentences.words[index.where[row][0]]
                            [index.where[row][1]]) for row in order]
    return NeighboursResult(query_words, position, layer, neighbours, index, notes)


def _marked(words: list[str], position: int) -> str:
    return joined(words, [f"<mark><b>{html.escape(w)}</b></mark>" if i == position else html.escape(w)
                          for i, w in enumerate(words)])


def neighbours_html(result: NeighboursResult) -> str:
    """The query and its neighbours, each with its cosine and its sentence (the word marked)."""
    rows = "".join(
        f"<tr><td>{rank}</td><td data-rank='{rank}'>{n.cosine:.4f}</td><td>{html.escape(n.word)}</td>"
        f"<td>{_marked(result.index.sentences.words[n.sentence], n.position)}</td></tr>"
        for rank, n in enumerate(result.neighbours, start=1))
    return (f"<p>Query: {_marked(result.query_words, result.query_position)}</p>"
            f"<table class='elmo-neighbours'><thead><tr><th>#</th><th>cosine (layer {result.layer})</th>"
            f"<th>word</th><th>in context</th></tr></thead><tbody>{rows}</tbody></table>")
