"""A linear-chain conditional random field over a tagger's scores (the output layer of Peters et al. 2018's NER
model, after Lample et al. 2016): `ElmoCRF`, and the transitions the label names allow (`allowed_transitions`).

A tag sequence y_1..y_n of a sentence scores `start[y_1] + sum_t emissions[t, y_t] + sum_t transitions[y_t, y_t+1]
+ end[y_n]`; the loss is the negative log-likelihood `log Z - score(gold)` (Z: the sum over every sequence, by the
forward algorithm), and the prediction the best sequence (Viterbi). Transitions the tagging scheme forbids (BIO:
`I-X` only after `B-X` or `I-X`; BIOES also: `B-X`/`I-X` only before `I-X`/`E-X`, no sentence starting with `I`/`E`
or ending with `B`/`I`) get `FORBIDDEN` added to their score: no decoded sequence takes them.

The CRF runs over the positions of a mask (a sentence's words: not `<S>`, `</S>` or padding), which need not be
contiguous: they are moved to the front of each row first.

This file travels to the Hub as remote code: it imports only torch.
"""

from __future__ import annotations

import torch
from torch import nn

# Added to the score of a forbidden transition: finite (no inf - inf = nan in the sums, fits float16), and far beyond
# any score a tagger's emissions reach, so that a forbidden transition is never part of the best sequence.
FORBIDDEN = -1.0e4

SCHEMES = ("auto", "bio", "bioes", "none")


def _split_label(label: str) -> tuple[str, str | None]:
    """("B", "PER") of "B-PER"; ("O", None) of "O"; ("", label) of a label of no scheme. Read as the entity scorer
    (train/tasks/common_data.py `_split_tag`) and the tag readers read tags: the prefix and O in either case ("b-per",
    "o"), "_" as well as "-" after it, and BILOU's L and U as BIOES's E and S; a lowercase file was otherwise a
    scheme of no rules ("none"), so that --crf's constraints and their check silently did nothing."""
    label = str(label)
    if label in ("O", "o"):
        return "O", None
    if len(label) > 2 and label[1] in "-_" and label[0] in "BIESLUbieslu":
        return {"L": "E", "U": "S"}.get(label[0].upper(), label[0].upper()), label[2:]
    return "", label


def scheme_of(labels: list[str], constraints: str = "auto") -> str:
    """The scheme whose rules constrain the transitions: `constraints` itself unless "auto", which reads the label
    names: "bioes" when some are E-/S-, "bio" when some are B-/I- and every label is of the scheme, else "none"."""
    if constraints != "auto":
        return constraints
    prefixes = {_split_label(label)[0] for label in labels}
    if "" in prefixes or not prefixes & {"B", "I", "E", "S"}:
        return "none"
    return "bioes" if prefixes & {"E", "S"} else "bio"


def allowed_transitions(labels: list[str], constraints: str = "auto") -> tuple[list[bool], list[list[bool]],
                                                                               list[bool]]:
    """(may start a sentence [K], may follow [K][K] as [previous][next], may end a sentence [K]) for the labels in
    id order, under the scheme `scheme_of(labels, constraints)`."""
    scheme = scheme_of(labels, constraints)
    parts = [_split_label(label) for label in labels]
    count = len(labels)
    if scheme == "none":
        return [True] * count, [[True] * count for _ in range(count)], [True] * count

    def inside(prefix: str) -> bool:  # within an entity that goes on at the next word
        return prefix in ("B", "I") if scheme == "bioes" else False

    def may_follow(previous: tuple[str, str | None], following: tuple[str, str | None]) -> bool:
        (before, kind_before), (after, kind_after) = previous, following
        continues = after in ("I", "E") if scheme == "bioes" else after == "I"
        if continues:  # I-X (E-X) goes on an entity of the same type
            return before in ("B", "I") and kind_before == kind_after
        return not inside(before)  # an entity open before must be continued

    start = [not (prefix == "I" or (scheme == "bioes" and prefix == "E")) for prefix, _ in parts]
    end = [not inside(prefix) for prefix, _ in parts]
    follow = [[may_follow(before, after) for after in parts] for before in parts]
    return start, follow, end


def _log_sum_exp_step(previous: torch.Tensor, transitions: torch.Tensor) -> torch.Tensor:
    """(B, K) scores of prefixes ending in each label -> (B, K) after one more transition, summed over the last."""
    return torch.logsumexp(previous.unsqueeze(2) + transitions, dim=1)


def _max_step(previous: torch.Tensor, transitions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (previous.unsqueeze(2) + transitions).max(dim=1)


class ElmoCRF(nn.Module):
    """Linear-chain CRF over `num_labels` tags: learned `transitions` [previous, next], `start_transitions` and
    `end_transitions`, plus the fixed penalties of the transitions `allowed` (from `allowed_transitions`) forbids."""

    def __init__(self, num_labels: int, allowed: tuple[list[bool], list[list[bool]], list[bool]] | None = None):
        super().__init__()
        self.num_labels = num_labels
        self.transitions = nn.Parameter(torch.zeros(num_labels, num_labels))
        self.start_transitions = nn.Parameter(torch.zeros(num_labels))
        self.end_transitions = nn.Parameter(torch.zeros(num_labels))
        if allowed is None:
            allowed = ([True] * num_labels, [[True] * num_labels] * num_labels, [True] * num_labels)
        # Lists, not buffers: they follow from the label names in the config, never from the weights file, and
        # a tensor made here would be left on the meta device where transformers builds a model to load it.
        self.allowed = allowed

    def scores(self, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(start [K], transitions [K, K], end [K]) with the forbidden transitions' penalty added."""
        learned = (self.start_transitions, self.transitions, self.end_transitions)
        return tuple(
            w.to(dtype) + torch.where(torch.tensor(rule, device=device), 0.0, FORBIDDEN).to(dtype)
            for w, rule in zip(learned, self.allowed)
        )

    @staticmethod
    def _compact(emissions: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The masked positions of each row moved to its front: emissions (B, T, K), new mask (B, T), the order."""
        order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # kept positions first
        lengths = mask.sum(1)
        compact = emissions.gather(1, order.unsqueeze(-1).expand_as(emissions))
        steps = torch.arange(mask.shape[1], device=mask.device)
        return compact, steps.unsqueeze(0) < lengths.unsqueeze(1), order

    def _working_dtype(self, emissions: torch.Tensor) -> torch.dtype:
        return torch.float64 if emissions.dtype == torch.float64 else torch.float32

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z of every row (B,): the log-sum-exp of the scores of all tag sequences over its masked positions
        (0 for a row without any)."""
        dtype = self._working_dtype(emissions)
        x, compact_mask, _ = self._compact(emissions.to(dtype), mask)
        if not x.shape[1]:
            return x.new_zeros(x.shape[0])
        start, transitions, end = self.scores(dtype, x.device)
        alpha = start + x[:, 0]  # (B, K)
        for t in range(1, x.shape[1]):
            step = _log_sum_exp_step(alpha, transitions) + x[:, t]
            alpha = torch.where(compact_mask[:, t : t + 1], step, alpha)
        total = torch.logsumexp(alpha + end, dim=1)
        return torch.where(compact_mask[:, 0], total, torch.zeros_like(total))

    def sequence_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The score of the tag sequence `tags` (B, T) at the masked positions of every row (B,)."""
        dtype = self._working_dtype(emissions)
        x, compact_mask, order = self._compact(emissions.to(dtype), mask)
        if not x.shape[1]:
            return x.new_zeros(x.shape[0])
        tags = tags.gather(1, order).masked_fill(~compact_mask, 0)
        start, transitions, end = self.scores(dtype, x.device)
        emitted = x.gather(2, tags.unsqueeze(-1)).squeeze(-1)  # (B, T)
        score = (emitted * compact_mask).sum(1) + start[tags[:, 0]]
        steps = transitions[tags[:, :-1], tags[:, 1:]] * compact_mask[:, 1:]
        last = tags.gather(1, (compact_mask.sum(1, keepdim=True) - 1).clamp(min=0)).squeeze(1)
        score = score + steps.sum(1) + end[last]
        return torch.where(compact_mask[:, 0], score, torch.zeros_like(score))

    def negative_log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mean over the rows that have masked positions of `log Z - score(tags)`."""
        per_row = self.log_partition(emissions, mask) - self.sequence_score(emissions, tags, mask)
        rows = mask.any(1)
        return (per_row * rows).sum() / rows.sum().clamp(min=1)

    def max_marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, K): at each masked position t and label k, the score of the best tag sequence that has k at t;
        elsewhere the emissions as they are. Its argmax at each position is the Viterbi sequence's tag there."""
        dtype = self._working_dtype(emissions)
        x, compact_mask, order = self._compact(emissions.to(dtype), mask)
        start, transitions, end = self.scores(dtype, x.device)
        steps = x.shape[1]
        forward = [start + x[:, 0]] if steps else []
        for t in range(1, steps):
            step = _max_step(forward[-1], transitions)[0] + x[:, t]
            forward.append(torch.where(compact_mask[:, t : t + 1], step, forward[-1]))
        backward = [None] * steps  # best score of what follows position t (after its emission), given its label
        lengths = compact_mask.sum(1, keepdim=True)
        following = end.expand(x.shape[0], -1)
        for t in reversed(range(steps)):
            is_last = (lengths - 1) == t
            later = _max_step(following, transitions.transpose(0, 1))[0] if t + 1 < steps else following
            backward[t] = torch.where(is_last, end.expand_as(following), later)
            following = torch.where(compact_mask[:, t : t + 1], backward[t] + x[:, t], following)
        if not steps:
            return emissions
        best = torch.stack(forward, 1) + torch.stack(backward, 1)  # (B, T, K)
        placed = emissions.to(dtype).clone()
        scattered = torch.empty_like(best).scatter_(1, order.unsqueeze(-1).expand_as(best), best)
        keep = mask.unsqueeze(-1)
        return torch.where(keep, scattered, placed).to(emissions.dtype if emissions.is_floating_point() else dtype)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """The Viterbi tag sequence of every row, over its masked positions (a list per row, in order)."""
        dtype = self._working_dtype(emissions)
        x, compact_mask, _ = self._compact(emissions.to(dtype), mask)
        start, transitions, end = self.scores(dtype, x.device)
        lengths = compact_mask.sum(1).tolist()
        if not x.shape[1]:
            return [[] for _ in lengths]
        score, pointers = start + x[:, 0], []
        for t in range(1, x.shape[1]):
            best, previous = _max_step(score, transitions)
            pointers.append(previous)
            score = torch.where(compact_mask[:, t : t + 1], best + x[:, t], score)
        score = score + end
        paths = []
        for row, length in enumerate(lengths):
            if length == 0:
                paths.append([])
                continue
            tag = int(score[row].argmax())
            path = [tag]
            for t in range(length - 1, 0, -1):
                tag = int(pointers[t - 1][row, tag])
                path.append(tag)
            paths.append(path[::-1])
        return paths


__all__ = ["ElmoCRF", "allowed_transitions", "scheme_of", "FORBIDDEN", "SCHEMES"]
