"""The numerical bounds of the test suite: what each kind of comparison allows, and why, written once.

float32 keeps 24 significant bits: `EPS` = 2**-23 (1.19e-7) is the relative spacing of its numbers. Two evaluations of
the same float32 expression that add their terms in another order (another thread count splits a sum differently,
another instruction set vectorises it differently, a faster kernel blocks it differently, a batch of another shape
runs a multiply of another shape) round each partial sum differently: a sum of n terms moves by about
sqrt(n) * EPS of the size of its terms (a random walk of n roundings), at worst n * EPS. So every bound here is a
number of EPS applied either to 1, where the values compared are O(1), or to the larger of 1 and the largest value
expected, where they are not (random weights give activations of 10 and more): `Bound.scaled`.

A test names the bound of its comparison (`assert_close(got, expected, REORDERED)`); the failure message says which
bound, its value and its rule. With `ELMO_TEST_MARGINS=<file>` set, every comparison appends a JSON line (test,
bound, difference, limit) to that file: `make test-numerics` prints the closest calls.

Not here: bounds of lossy arithmetic (bfloat16, int8), which are cosines stated beside their tests
(test_int8.py, test_fast_paths.py), and comparisons meant to be exact (`torch.equal`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np
import torch

EPS = float(torch.finfo(torch.float32).eps)  # 2**-23
EPS64 = float(torch.finfo(torch.float64).eps)  # 2**-52


@dataclass(frozen=True)
class Bound:
    """A bound on max |actual - expected|: `value`, times max(1, max |expected|) when `scaled`."""

    name: str
    value: float
    scaled: bool
    rule: str  # the derivation, shown when a comparison fails

    def limit(self, expected: torch.Tensor) -> float:
        if not self.scaled:
            return self.value
        return self.value * max(1.0, float(expected.abs().max()) if expected.numel() else 1.0)


# Ours against an original implementation (bilm-tf's TensorFlow outputs, allennlp's `Elmo`, ELMoForManyLangs) on trained
# or published weights, whose vectors are O(1): the project's promise for converted weights, absolute, never loosened.
PARITY = Bound(
    "parity", 1e-5, scaled=False,
    rule="1e-5 absolute (84 EPS) on O(1) vectors: the widest sums (2048 filters, 4096 cells) reordered move by "
         "sqrt(4096) * EPS = 64 EPS of their terms at most in a random walk; the promise for converted weights",
)
# The same promise on random weights at a published size, whose layer 0 reaches 11: the same 84 EPS, of the largest
# value (a reordered sum errs in proportion to its terms). Measured: 9.5e-7 of the largest value on AVX-512, 2 threads.
PARITY_SCALED = Bound(
    "parity (scaled)", 1e-5, scaled=True,
    rule="1e-5 of max(1, max |expected|): PARITY's 84 EPS, of values above 1 (random weights)",
)
# One model, the same float32 arithmetic by another route: a kernel against the reference loop, a sentence alone
# against the same sentence in a padded batch, a sequence in chunks with the state carried against the whole, another
# CPU's kernels, another thread count. The tests' tiny models sum at most 64 terms (sqrt(64) = 8 EPS a sum) and the
# error passes through up to 4 sums in sequence (CNN, highway, two LSTM layers; clipping and the gates' sigmoids
# shrink it, they do not grow it): 32 EPS of the largest value. Measured worst: 1.1e-6 (no-AVX2 kernels).
REORDERED = Bound(
    "reordered", 32 * EPS, scaled=True,
    rule="32 EPS of max(1, max |expected|): sums of up to 64 terms (8 EPS each) through 4 sums in sequence",
)
# Gradients of a training step by two routes (the written-out backward pass against autograd's, another CPU's
# kernels): the backward pass runs every step's sums again, in reverse, and adds the gradients of all the steps.
GRADIENT = Bound(
    "gradient", 1e-5, scaled=True,
    rule="1e-5 (84 EPS) of max(1, max |gradient|): the backward pass sums over every step, in another order",
)
# float64 computations against a float64 reference: the same reasoning with float64's epsilon, 4500 EPS64.
FLOAT64 = Bound(
    "float64", 1e-12, scaled=True,
    rule="1e-12 (4500 float64 EPS) of max(1, max |expected|): float64 sums reordered",
)
# Statistics computed from float32 vectors (cosines, variances, a softmax's probabilities summed): O(1) numbers that
# are each a sum over a vector's width or a set of vectors (up to a few thousand terms: 64 EPS).
STATISTIC = Bound(
    "statistic", 64 * EPS, scaled=False,
    rule="64 EPS absolute (7.6e-6): an O(1) statistic summed over up to 4096 float32 terms (sqrt = 64)",
)
ALL_BOUNDS = (PARITY, PARITY_SCALED, REORDERED, GRADIENT, FLOAT64, STATISTIC)


def _as_tensor(value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64)
    return torch.as_tensor(np.asarray(value, dtype=np.float64))


def max_difference(actual, expected) -> float:
    """max |actual - expected| over all elements (0 for empty tensors); shapes must be equal."""
    a, b = _as_tensor(actual), _as_tensor(expected)
    assert a.shape == b.shape, f"shapes differ: {tuple(a.shape)} and {tuple(b.shape)}"
    return float((a - b).abs().max()) if a.numel() else 0.0


def assert_close(actual, expected, bound: Bound, what: str = "") -> None:
    """max |actual - expected| <= `bound`'s limit for `expected` (tensors, arrays or numbers of one shape)."""
    difference = max_difference(actual, expected)
    limit = bound.limit(_as_tensor(expected))
    _record(bound, difference, limit, what)
    assert difference <= limit and not math.isnan(difference), (
        f"{what + ': ' if what else ''}max |difference| {difference:.3g} is above the {bound.name} bound "
        f"{limit:.3g} ({bound.rule})"
    )


def _record(bound: Bound, difference: float, limit: float, what: str) -> None:
    """One JSON line per comparison in the file `ELMO_TEST_MARGINS` names, when it names one."""
    path = os.environ.get("ELMO_TEST_MARGINS")
    if not path:
        return
    entry = {"test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0], "what": what,
             "bound": bound.name, "difference": difference, "limit": limit}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
