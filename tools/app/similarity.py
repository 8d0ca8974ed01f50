"""The first view: one word in several sentences. Per layer, the cosine similarity of its occurrences (a heat map
and the numbers) and a 2-D projection of the occurrences (PCA), coloured by sentence.

Layer 0, the character encoder, gives every occurrence of a word the same vector (cosine 1, one point); the biLSTM
layers move each occurrence with its context, which is what ELMo is for.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field

import torch

from elmo_hf.tokenization import split_words

from .session import AppInputError, AppSession, Sentences, embed_sentences, split_sentences


@dataclass
class Occurrence:
    """The `position`-th word (0-based, `<S>` not counted) of sentence `sentence` (0-based); `label` names it in the
    page: S2 is the word in sentence 2, S2.1 and S2.2 two occurrences in sentence 2."""

    sentence: int
    position: int
    word: str
    label: str = ""


@dataclass
class SimilarityResult:
    word: str
    sentences: Sentences
    occurrences: list[Occurrence]
    vectors: torch.Tensor  # (L + 1, n, 2P) float32: the model's hidden_states at the occurrences
    cosine: torch.Tensor  # (L + 1, n, n) float64
    projection: torch.Tensor  # (L + 1, n, 2): the first two principal components of each layer's occurrences
    explained: torch.Tensor  # (L + 1, 2): the fraction of the variance each component explains (0: all identical)
    notes: list[str] = field(default_factory=list)


def find_occurrences(sentences: list[list[str]], word: str, split: str) -> tuple[list[Occurrence], list[str]]:
    """Every occurrence of `word` (one word under `split`), matched exactly or, where it never occurs so, ignoring
    case; with notes. An `AppInputError` names the problem: no word, several words, or not in the sentences."""
    word = (word or "").strip()
    if not word:
        raise AppInputError("type the word to compare (one word that occurs in at least two of the sentences)")
    parts = split_words(word, split)
    if len(parts) != 1:
        raise AppInputError(f"{word!r} is {len(parts)} words under the word split {split!r} "
                            f"({' | '.join(parts)}): pick one of them, or another split (jieba for Chinese words)")
    word, notes = parts[0], []
    found = [(s, i) for s, words in enumerate(sentences) for i, w in enumerate(words) if w == word]
    if not found:
        found = [(s, i) for s, words in enumerate(sentences) for i, w in enumerate(words)
                 if w.casefold() == word.casefold()]
        if found:
            notes.append(f"{word!r} matched ignoring case")
    if not found:
        counts = Counter(w for words in sentences for w in words)
        repeated = [w for w, n in counts.most_common() if n > 1][:12]
        hint = f"; words that occur more than once: {', '.join(repeated)}" if repeated else ""
        raise AppInputError(f"{word!r} is not a word of the sentences (word split {split!r}){hint}")
    per_sentence = Counter(s for s, _ in found)
    seen: Counter = Counter()
    occurrences = []
    for s, i in found:
        seen[s] += 1
        label = f"S{s + 1}" if per_sentence[s] == 1 else f"S{s + 1}.{seen[s]}"
        occurrences.append(Occurrence(s, i, sentences[s][i], label))
    return occurrences, notes


def cosine_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """(..., n, D) -> (..., n, n) cosine similarities, in float64 (a zero vector has cosine 0 with everything)."""
    unit = torch.nn.functional.normalize(vectors.double(), dim=-1, eps=1e-30)
    return unit @ unit.transpose(-1, -2)


def project_2d(vectors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L + 1, n, D) -> the coordinates (L + 1, n, 2) of each layer's points on its first two principal components
    (PCA by SVD of the centred points; the sign fixed so that the largest coordinate is positive) and the fraction
    of the variance each explains (L + 1, 2); 0 where the points coincide (layer 0: one word, one vector)."""
    layers, n, _ = vectors.shape
    coords = torch.zeros(layers, n, 2, dtype=torch.float64)
    explained = torch.zeros(layers, 2, dtype=torch.float64)
    for layer in range(layers):
        points = vectors[layer].double()
        centred = points - points.mean(0, keepdim=True)
        u, s, _ = torch.linalg.svd(centred, full_matrices=False)
        total = (s**2).sum()
        if total <= 1e-20 * max(float((points**2).sum()), 1e-300):  # identical points: no direction to show
            continue
        k = min(2, len(s))
        layer_coords = u[:, :k] * s[:k]
        flip = torch.sign(layer_coords.gather(0, layer_coords.abs().argmax(0, keepdim=True)))
        coords[layer, :, :k] = layer_coords * torch.where(flip == 0, 1.0, flip)
        explained[layer, :k] = s[:k] ** 2 / total
    return coords, explained


@dataclass
class _Request:
    """A similarity request checked and found in its sentences: what remains is its forward pass."""

    sentences: Sentences
    occurrences: list[Occurrence]
    notes: list[str]

    @property
    def used(self) -> list[int]:
        """The sentences that hold the word: only these run through the model."""
        return sorted({o.sentence for o in self.occurrences})


def _checked_request(session: AppSession, text: str, word: str, split: str) -> _Request:
    """The sentences and the word's occurrences of one request, within the session's limits (an `AppInputError`
    says what is wrong)."""
    limits = session.limits
    sentences = split_sentences(text, split, max_chars=limits.max_chars, max_sentences=limits.max_sentences,
                                max_words=limits.max_words, what="the sentence box")
    try:
        occurrences, notes = find_occurrences(sentences.words, word, split)
    except AppInputError as error:  # say what the limits left out too: the word may be in the part cut
        raise AppInputError("; ".join([*sentences.notes, str(error)])) from error
    if len(occurrences) < 2:
        raise AppInputError(f"{occurrences[0].word!r} occurs once: use it in at least two sentences to compare "
                            "its vectors")
    if len(occurrences) > limits.max_occurrences:
        notes.append(f"{occurrences[0].word!r} occurs {len(occurrences)} times: the first "
                     f"{limits.max_occurrences} are compared")
        occurrences = occurrences[: limits.max_occurrences]
    return _Request(sentences, occurrences, sentences.notes + notes)


def _result(request: _Request, embedded: list[torch.Tensor]) -> SimilarityResult:
    """The view's numbers from the vectors of `request.used` (in that order)."""
    by_sentence = dict(zip(request.used, embedded))
    vectors = torch.stack([by_sentence[o.sentence][:, o.position] for o in request.occurrences], dim=1)
    projection, explained = project_2d(vectors)  # vectors: (L + 1, n, 2P)
    return SimilarityResult(request.occurrences[0].word, request.sentences, request.occurrences, vectors,
                            cosine_matrix(vectors), projection, explained, request.notes)


def word_similarity(session: AppSession, text: str, word: str, split: str) -> SimilarityResult:
    """The similarity view for `text` (one sentence per line) and `word`, within the session's limits."""
    request = _checked_request(session, text, word, split)
    return _result(request, embed_sentences(session, [request.sentences.words[s] for s in request.used]))


def word_similarities(session: AppSession, requests: list[tuple[str, str, str]],
                      ) -> list[SimilarityResult | Exception]:
    """`word_similarity` for each `(text, word, split)` of several visitors, their sentences in shared forward
    passes: the model is batch-invariant (a sentence's vectors do not depend on the other rows of its batch, up to
    float32 rounding: docs/models.md), so each request gets the numbers it gets alone, for the cost of about one.
    A request that cannot be checked is its exception, in its place (an `AppInputError` for wrong input; any other,
    e.g. an API client sending a number for the word, must not cost the other visitors their answers); a forward
    pass that fails raises."""
    checked: list[_Request | Exception] = []
    for text, word, split in requests:
        try:
            checked.append(_checked_request(session, text, word, split))
        except Exception as error:  # noqa: BLE001 (returned in its place, for the caller to answer)
            checked.append(error)
    valid = [r for r in checked if isinstance(r, _Request)]
    embedded = iter(embed_sentences(session, [r.sentences.words[s] for r in valid for s in r.used]))
    return [r if isinstance(r, Exception) else _result(r, [next(embedded) for _ in r.used]) for r in checked]


def pair_rows(result: SimilarityResult) -> list[tuple[int, int, list[float]]]:
    """(i, j, the cosine of occurrences i and j per layer) for every pair i < j."""
    n = len(result.occurrences)
    return [(i, j, result.cosine[:, i, j].tolist()) for i in range(n) for j in range(i + 1, n)]


def result_json(result: SimilarityResult) -> dict:
    """The numbers behind the table, unrounded, for the page's JSON output and API clients: the occurrences
    (`sentence`: 1-based line of the sentences used, `position`: 0-based word) and `cosine[layer][i][j]`."""
    return {
        "word": result.word,
        "occurrences": [{"label": o.label, "sentence": o.sentence + 1, "position": o.position, "word": o.word}
                        for o in result.occurrences],
        "layers": [layer_name(k) for k in range(result.cosine.shape[0])],
        "cosine": result.cosine.tolist(),
    }


def layer_name(layer: int) -> str:
    return "layer 0 (characters)" if layer == 0 else f"layer {layer}"


# Scripts written without spaces between words (CJK ideographs, kana, CJK and full-width punctuation): a sentence
# split into such words is shown joined again as it is written, not with a space after every character.
_UNSPACED = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def joined(words: list[str], shown: list[str] | None = None) -> str:
    """`shown` (the words as HTML, default `words`) joined as the words are written: a space between two words,
    but none where either side of the gap is a character of a script written without spaces."""
    shown = words if shown is None else shown
    out = shown[:1]
    for before, after, piece in zip(words, words[1:], shown[1:]):
        spaced = before and after and not (_UNSPACED.match(before[-1]) or _UNSPACED.match(after[0]))
        out.append(f" {piece}" if spaced else piece)
    return "".join(out)


def sentences_html(result: SimilarityResult) -> str:
    """The sentences that hold the word, the word marked with its label."""
    marks = {(o.sentence, o.position): o.label for o in result.occurrences}
    items = []
    for s in sorted({o.sentence for o in result.occurrences}):
        words = [f"<mark><b>{html.escape(w)}</b><sub>{marks[s, i]}</sub></mark>" if (s, i) in marks
                 else html.escape(w) for i, w in enumerate(result.sentences.words[s])]
        items.append(f"<li value='{s + 1}'>{joined(result.sentences.words[s], words)}</li>")
    return f"<ol class='elmo-sentences'>{''.join(items)}</ol>"


def table_html(result: SimilarityResult) -> str:
    """The cosine of every pair of occurrences, one column per layer: the numbers behind the heat maps. Each cell
    carries `data-pair="i-j"` and `data-layer` (read by the browser test)."""
    layers = result.cosine.shape[0]
    head = "".join(f"<th>{layer_name(k)}</th>" for k in range(layers))
    rows = []
    for i, j, values in pair_rows(result):
        a, b = result.occurrences[i].label, result.occurrences[j].label
        cells = "".join(f"<td data-pair='{i}-{j}' data-layer='{k}'>{v:.4f}</td>" for k, v in enumerate(values))
        rows.append(f"<tr><th>{a} · {b}</th>{cells}</tr>")
    caption = (f"Cosine similarity of the vectors of {html.escape(result.word)!s} in each pair of sentences "
               "(1: the same vector)")
    return (f"<table class='elmo-cosines'><caption>{caption}</caption><thead><tr><th>pair</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")
