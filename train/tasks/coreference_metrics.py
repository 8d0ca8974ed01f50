"""The coreference scores of the CoNLL-2011/2012 shared tasks: MUC, B-cubed and CEAF-e (entity-based, with the phi4
similarity), each with its precision, recall and F1, and the CoNLL F1, the mean of the three F1s, which the ELMo paper
reports for coreference.

Computed as the reference scorer (Pradhan et al. 2014, "Scoring Coreference Partitions of Predicted Mentions: A
Reference Implementation"; reference-coreference-scorers v8.01) defines them, on the key (gold) and response
(predicted) clusters as given, singletons included, a mention being a `(start, end)` word span of its document:

* MUC (Vilain et al. 1995), links: recall = sum over key clusters K of (|K| - |p(K)|) / sum of (|K| - 1), where p(K)
  is the partition of K by the response clusters (a mention of K in no response cluster is a part of its own);
  precision the same with key and response swapped.
* B-cubed (Bagga and Baldwin 1998), mentions: recall = sum over K, R of |K & R| ** 2 / |K|, over the mentions of the
  key; precision the same over the response.
* CEAF-e (Luo 2005), entities: the one-to-one alignment of key and response clusters with the largest sum of
  phi4(K, R) = 2 |K & R| / (|K| + |R|); recall = that sum / the key's clusters, precision = / the response's.

Scores are summed over the documents of a corpus (numerators and denominators apart) before they are divided, as the
scorer does for a file of many documents. Standard library and numpy; the CEAF-e alignment is scipy's
`linear_sum_assignment` where scipy is installed, else the small Hungarian method below (the same optimum).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

Mention = tuple[int, int]
Clusters = Sequence[Sequence[Mention]]
METRICS = ("muc", "bcub", "ceafe")


def as_clusters(clusters: Iterable[Iterable[Sequence[int]]]) -> list[tuple[Mention, ...]]:
    """Clusters as tuples of `(start, end)` tuples, empty clusters left out; a mention listed twice in one cluster
    counts once. (JSON gives lists; tuples are what the scores compare.)"""
    result = []
    for cluster in clusters:
        mentions = tuple(dict.fromkeys((int(m[0]), int(m[1])) for m in cluster))
        if mentions:
            result.append(mentions)
    return result


def _cluster_of(clusters: list[tuple[Mention, ...]]) -> dict[Mention, int]:
    """Each mention's cluster index (the first cluster that lists it, when a file lists one mention twice)."""
    owner: dict[Mention, int] = {}
    for index, cluster in enumerate(clusters):
        for mention in cluster:
            owner.setdefault(mention, index)
    return owner


def muc_counts(key: list[tuple[Mention, ...]], response: list[tuple[Mention, ...]]) -> tuple[float, float]:
    """(numerator, denominator) of MUC recall of `key` against `response`; swapped, of precision."""
    owner = _cluster_of(response)
    numerator = denominator = 0
    for cluster in key:
        parts = {owner.get(mention, ("alone", mention)) for mention in cluster}  # a missing mention: a part alone
        numerator += len(cluster) - len(parts)
        denominator += len(cluster) - 1
    return float(numerator), float(denominator)


def b_cubed_counts(key: list[tuple[Mention, ...]], response: list[tuple[Mention, ...]]) -> tuple[float, float]:
    """(numerator, denominator) of B-cubed recall of `key` against `response`; swapped, of precision."""
    owner = _cluster_of(response)
    numerator = 0.0
    for cluster in key:
        shared: dict[int, int] = {}
        for mention in cluster:
            if mention in owner:
                shared[owner[mention]] = shared.get(owner[mention], 0) + 1
        numerator += sum(count * count for count in shared.values()) / len(cluster)
    return numerator, float(sum(len(cluster) for cluster in key))


def phi4(key: Sequence[Mention], response: Sequence[Mention]) -> float:
    """Luo's entity similarity: 2 |K & R| / (|K| + |R|)."""
    return 2 * len(set(key) & set(response)) / (len(key) + len(response))


def ceafe_counts(key: list[tuple[Mention, ...]], response: list[tuple[Mention, ...]]) -> tuple[float, float, float]:
    """(similarity of the best alignment, key clusters, response clusters): recall is the first over the second,
    precision over the third."""
    if not key or not response:
        return 0.0, float(len(key)), float(len(response))
    scores = np.array([[phi4(k, r) for r in response] for k in key])
    rows, columns = best_assignment(scores)
    return float(scores[rows, columns].sum()), float(len(key)), float(len(response))


def best_assignment(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns of the one-to-one assignment of largest total score (a rectangular matrix: every row or
    every column assigned, whichever are fewer)."""
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        return hungarian(scores)
    return linear_sum_assignment(scores, maximize=True)


def hungarian(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The maximum-score assignment by the Hungarian method with potentials (O(n^2 m)), for where scipy is not
    installed: rows are the smaller side (the matrix is transposed when it has more rows than columns)."""
    transposed = scores.shape[0] > scores.shape[1]
    cost = -(scores.T if transposed else scores)  # minimise the negated scores
    n, m = cost.shape
    u, v = np.zeros(n + 1), np.zeros(m + 1)  # the potentials; index 0 is the virtual start column
    match = np.zeros(m + 1, dtype=int)  # match[j]: the row (1-based) given column j, 0 for none
    for row in range(1, n + 1):
        match[0], column = row, 0
        least, previous = np.full(m + 1, np.inf), np.zeros(m + 1, dtype=int)
        used = np.zeros(m + 1, dtype=bool)
        while match[column] != 0:  # grow the alternating tree until a free column is reached
            used[column] = True
            here, step, nxt = match[column], np.inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    reduced = cost[here - 1, j - 1] - u[here] - v[j]
                    if reduced < least[j]:
                        least[j], previous[j] = reduced, column
                    if least[j] < step:
                        step, nxt = least[j], j
            for j in range(m + 1):
                if used[j]:
                    u[match[j]] += step
                    v[j] -= step
                else:
                    least[j] -= step
            column = nxt
        while column:  # flip the path back to the start
            before = previous[column]
            match[column] = match[before]
            column = before
    pairs = sorted((match[j] - 1, j - 1) for j in range(1, m + 1) if match[j])
    rows, columns = np.array([p[0] for p in pairs], dtype=int), np.array([p[1] for p in pairs], dtype=int)
    return (columns, rows) if transposed else (rows, columns)


def _prf(p_num: float, p_den: float, r_num: float, r_den: float) -> tuple[float, float, float]:
    precision = p_num / p_den if p_den else 0.0
    recall = r_num / r_den if r_den else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


class CorefScores:
    """The three metrics summed over documents: `add(gold, predicted)` a document at a time, then `scores()`."""

    def __init__(self):
        self.counts = {metric: [0.0, 0.0, 0.0, 0.0] for metric in METRICS}  # p_num, p_den, r_num, r_den

    def add(self, gold: Iterable[Iterable[Sequence[int]]], predicted: Iterable[Iterable[Sequence[int]]]) -> None:
        key, response = as_clusters(gold), as_clusters(predicted)
        found = {
            "muc": (*muc_counts(response, key), *muc_counts(key, response)),
            "bcub": (*b_cubed_counts(response, key), *b_cubed_counts(key, response)),
        }
        similarity, key_count, response_count = ceafe_counts(key, response)
        found["ceafe"] = (similarity, response_count, similarity, key_count)
        for metric, values in found.items():
            self.counts[metric] = [a + b for a, b in zip(self.counts[metric], values)]

    def scores(self) -> dict[str, float]:
        """`{"muc_precision", "muc_recall", "muc_f1", "bcub_...", "ceafe_...", "conll_f1"}`."""
        result = {}
        for metric in METRICS:
            precision, recall, f1 = _prf(*self.counts[metric])
            result.update({f"{metric}_precision": precision, f"{metric}_recall": recall, f"{metric}_f1": f1})
        result["conll_f1"] = sum(result[f"{metric}_f1"] for metric in METRICS) / len(METRICS)
        return result


def coref_scores(gold_documents: Iterable[Clusters], predicted_documents: Iterable[Clusters]) -> dict[str, float]:
    """The scores of a corpus: each document's gold clusters against its predicted ones."""
    scorer = CorefScores()
    for gold, predicted in zip(gold_documents, predicted_documents, strict=True):
        scorer.add(gold, predicted)
    return scorer.scores()
