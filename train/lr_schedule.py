"""The learning-rate schedule of `elmo-pretrain`: transformers' schedules, run over whichever end of the run comes
first, the steps (`--max_steps`, or the epochs) or the time (`--max_train_time`).

A decaying schedule laid over the steps alone would hardly decay in a run that the clock ends: `--max_train_time 1h`
with the default epochs' estimate of steps stops long before the schedule's end. So, with a time budget, the
schedule is read at the later of the two positions, the step's share of the steps and the time's share of the
budget: the rate reaches the schedule's end when the run does, whichever ends it. The warm-up stays in steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import get_scheduler

from elmo_hf.tools.core.errors import InputError


def check_schedule(name: str, warmup_steps: int) -> None:
    """`--lr_scheduler_type`: a schedule of the step that needs no more arguments than elmo-pretrain gives, refused in
    one line before anything is written (transformers' names differ between its versions, so it is asked)."""
    probe = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    try:
        scheduler = get_scheduler(name, probe, num_warmup_steps=warmup_steps, num_training_steps=100)
    except (ValueError, TypeError) as error:  # an unknown name, or one that needs arguments of its own
        raise InputError(f"--lr_scheduler_type {name}: {str(error).splitlines()[0]}") from error
    if not isinstance(scheduler, LambdaLR):
        raise InputError(f"--lr_scheduler_type {name} is stepped with a metric, which elmo-pretrain does not give "
                         "it: choose a schedule of the step (constant, linear, cosine, ...)")


def make_scheduler(name: str, optimizer, warmup_steps: int, total_steps: int,
                   time_share: Callable[[], float] | None = None):
    """transformers' `name` schedule over `total_steps`; with `time_share` (the share of the time budget spent, the
    same on every process: `train/pretrain_run.py` agrees on it once a step), read at the step or at that share of
    the steps after the warm-up, whichever is later."""
    scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)
    if time_share is None or not isinstance(scheduler, LambdaLR):
        return scheduler  # no budget, or a schedule that is not a function of the step (reduce_lr_on_plateau)

    decaying = max(total_steps - warmup_steps, 0)

    def position(step: int) -> int:
        if step < warmup_steps:
            return step
        return max(step, warmup_steps + math.floor(min(time_share(), 1.0) * decaying))

    shapes = list(scheduler.lr_lambdas)
    scheduler.lr_lambdas = [lambda step, shape=shape: shape(position(step)) for shape in shapes]
    return scheduler
