"""The word softmax of ELMo's pretraining (`ElmoForPreTraining`): full, sampled (as bilm-tf trained) or adaptive.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch and its siblings.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_elmo import ElmoConfig
from .matmul_elmo import mm_nt, mm_tn, needs_grad, training_onednn


class ElmoSoftmax(nn.Module):
    """The word softmax shared by both LM directions: full, sampled (as bilm-tf trained) or adaptive.

    `weight` (V, P) and `bias` (V,) for "full" and "sampled"; "adaptive" uses
    `torch.nn.AdaptiveLogSoftmaxWithLoss` with `config.adaptive_cutoffs`.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        if config.vocab_size < 1:
            raise ValueError("ElmoForPreTraining needs a word vocabulary: set ElmoConfig.vocab_size > 0")
        self.config = config  # `lstm_implementation="reference"` also keeps the plain full softmax
        self.softmax_type = config.softmax_type
        self.vocab_size = config.vocab_size
        self.num_sampled = config.num_sampled
        if self.softmax_type == "adaptive":
            cutoffs = config.adaptive_cutoffs or _default_cutoffs(config.vocab_size)
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(config.projection_dim, config.vocab_size, cutoffs,
                                                          div_value=4.0)
        else:
            self.weight = nn.Parameter(torch.empty(config.vocab_size, config.projection_dim))
            self.bias = nn.Parameter(torch.empty(config.vocab_size))

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full log-probabilities over the vocabulary: (N, P) -> (N, V)."""
        if self.softmax_type == "adaptive":
            return self.adaptive.log_prob(hidden)
        return F.log_softmax(F.linear(hidden, self.weight, self.bias).float(), dim=-1)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of `targets` (N,) given `hidden` (N, P).

        While training with the sampled softmax, an estimate from `num_sampled` negatives shared by the
        batch (log-uniform over a frequency-sorted vocabulary, accidental hits removed, logits corrected by
        the log expected count), as TensorFlow's `sampled_softmax_loss` that bilm-tf used. Otherwise exact.
        """
        if self.softmax_type == "adaptive":
            return -self.adaptive(hidden, targets).output.float().sum()
        if self.softmax_type == "sampled" and self.training and self.num_sampled < self.vocab_size:
            return self._sampled_nll(hidden, targets)
        fast = getattr(self.config, "lstm_implementation", "auto") != "reference"
        return full_softmax_nll(hidden, self.weight, self.bias, targets, fast=fast)

    def mean_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean negative log-likelihood of one LM direction and how many targets it averages: `hidden`
        (B, T, P), `targets` (B, T) word ids, -100 where there is none."""
        valid = targets != -100
        chosen = targets[valid]
        if chosen.numel() and (int(chosen.min()) < 0 or int(chosen.max()) >= self.vocab_size):
            raise ValueError(
                f"labels must be word ids in [0, {self.vocab_size}) or -100, "
                f"got values from {int(chosen.min())} to {int(chosen.max())}"
            )
        count = valid.sum()
        return self.nll(hidden[valid], chosen) / count.clamp(min=1), count

    def _log_uniform_log_q(self, ids: torch.Tensor, num_tries: int) -> torch.Tensor:
        """Log of the probability that `ids` is among the distinct ids of `num_tries` log-uniform draws."""
        ids = ids.double()
        prob = (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / math.log(self.vocab_size + 1.0)
        return torch.log(-torch.expm1(num_tries * torch.log1p(-prob))).float()

    def _sample_negatives(self, device: torch.device) -> tuple[torch.Tensor, int]:
        """`num_sampled` distinct ids from the log-uniform (Zipfian) distribution over a frequency-sorted
        vocabulary, P(k) = log((k + 2) / (k + 1)) / log(V + 1), and the number of draws it took."""
        draws = torch.rand(4 * self.num_sampled + 64, device=device, dtype=torch.float64)
        ids = (torch.exp(draws * math.log(self.vocab_size + 1.0)).floor().long() - 1).clamp_(0, self.vocab_size - 1)
        unique, inverse = torch.unique(ids, return_inverse=True)
        positions = torch.arange(ids.numel(), device=device)
        first = torch.full((unique.numel(),), ids.numel(), device=device).scatter_reduce(0, inverse, positions, "amin")
        first, order = first.sort()  # distinct ids in the order they were drawn
        count = min(self.num_sampled, unique.numel())
        num_tries = int(first[count - 1]) + 1 if count == self.num_sampled else ids.numel()
        return unique[order[:count]], num_tries

    def _sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        sampled, num_tries = self._sample_negatives(hidden.device)  # (S,)
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]  # (N,)
        true_logits = true_logits.float() - self._log_uniform_log_q(targets, num_tries)
        sampled_logits = F.linear(hidden, self.weight[sampled], self.bias[sampled]).float()  # (N, S)
        sampled_logits = sampled_logits - self._log_uniform_log_q(sampled, num_tries)
        hits = targets.unsqueeze(1) == sampled.unsqueeze(0)  # accidental hits: a target among the negatives
        sampled_logits = sampled_logits.masked_fill(hits, float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        return F.cross_entropy(logits, torch.zeros_like(targets), reduction="sum")


class _FullSoftmaxNll(torch.autograd.Function):
    """The summed negative log-likelihood of a full softmax, `cross_entropy(linear(hidden, weight, bias), targets)`,
    with its multiplies through oneDNN and fewer passes over the (N, V) logits, which at PTB's 10k words are larger
    than the cache: the log-softmax is taken in place in the logits' buffer and made into the softmax in place by the
    backward pass (no zero-filled gradient of the log-probabilities), and the gradient's scale is applied to the
    small results of the multiplies instead of to the large matrix."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets):
        logits = mm_nt(hidden, weight, bias)  # (N, V)
        log_probs = torch.ops.aten._log_softmax.out(logits, 1, False, out=logits)  # in place, row by row
        loss = -log_probs.gather(1, targets.unsqueeze(1)).sum()
        ctx.save_for_backward(hidden, weight, targets)
        ctx.log_probs = log_probs  # an intermediate, made into the gradient by the backward pass
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        hidden, weight, targets = ctx.saved_tensors
        grad_logits, ctx.log_probs = ctx.log_probs.exp_(), None  # the softmax, in place
        grad_logits[torch.arange(targets.shape[0], device=targets.device), targets] -= 1.0  # / grad, applied below
        grad_hidden = mm_nt(grad_logits, weight.t()).mul_(grad) if ctx.needs_input_grad[0] else None
        grad_weight = mm_tn(grad_logits, hidden).mul_(grad) if ctx.needs_input_grad[1] else None
        grad_bias = grad_logits.sum(0).mul_(grad) if ctx.needs_input_grad[2] else None
        return grad_hidden, grad_weight, grad_bias, None


def full_softmax_nll(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor, fast: bool = True
) -> torch.Tensor:
    """`F.cross_entropy(F.linear(hidden, weight, bias).float(), targets, reduction="sum")`, the full softmax's loss:
    with `fast`, in training on the CPU (float32, oneDNN), through `_FullSoftmaxNll`."""
    if fast and hidden.shape[0] > 0 and needs_grad(hidden, weight, bias) and training_onednn(hidden, weight, bias):
        return _FullSoftmaxNll.apply(hidden, weight, bias, targets)
    return F.cross_entropy(F.linear(hidden, weight, bias).float(), targets, reduction="sum")


def _default_cutoffs(vocab_size: int) -> list[int]:
    cutoffs = [c for c in (2000, 10000, 50000) if c < vocab_size]
    return cutoffs or [max(1, vocab_size // 2)]


def shifted_targets(labels: torch.Tensor, shift: int) -> torch.Tensor:
    """labels (B, T) -> the label `shift` positions later (+1) or earlier (-1), -100 past the ends."""
    out = torch.full_like(labels, -100)
    if shift > 0:
        out[:, :-shift] = labels[:, shift:]
    else:
        out[:, -shift:] = labels[:, :shift]
    return out
