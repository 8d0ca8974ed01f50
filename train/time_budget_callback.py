"""`--max_train_time` for `Trainer`: a callback that ends training at a step boundary once the time is spent.

transformers' `TrainingArguments` has no time budget; this is the usual way to give one: `on_step_end` sets
`should_training_stop` (and `should_save`, so the step reached is a checkpoint to resume from), and the command then
saves, evaluates and writes its files as at the end of any run. The time is counted over the whole run, like
`max_steps`: the callback is an `ExportableState`, so every checkpoint's `trainer_state.json` records the time
spent, and a run resumed from it goes on from there (with the same budget it stops after one more step, the first
boundary Trainer asks at; give a larger one to train longer). With several processes the first to run out of time stops
them all at the same step.
"""

from __future__ import annotations

import logging
import time

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from .time_budget import format_duration

logger = logging.getLogger(__name__)


class TimeBudgetCallback(TrainerCallback, ExportableState):
    """Stop training at the first step boundary after `seconds` of training time (this run's and the time of the
    checkpoint it resumed from)."""

    def __init__(self, seconds: float, seconds_spent: float = 0.0):
        self.seconds = float(seconds)
        self.seconds_spent = float(seconds_spent)  # before this `train()` call
        self._started: float | None = None

    def spent(self) -> float:
        now = time.perf_counter()
        return self.seconds_spent + (now - self._started if self._started is not None else 0.0)

    def state(self) -> dict:
        return {"args": {"seconds": self.seconds}, "attributes": {"seconds_spent": self.spent()}}

    def on_train_begin(self, args, state, control, **kwargs):
        # A resumed run's TrainerState holds what its checkpoint recorded; a fresh one this callback's own state (0).
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if isinstance(saved, list):
            saved = saved[-1]
        self.seconds_spent = float((saved or {}).get("attributes", {}).get("seconds_spent", 0.0))
        self._started = time.perf_counter()
        if self.seconds_spent >= self.seconds:
            self._stop(state, control)

    def on_step_end(self, args, state, control, **kwargs):
        if any_process(self.spent() >= self.seconds):  # one process out of time stops all of them
            self._stop(state, control)

    def on_train_end(self, args, state, control, **kwargs):
        self.seconds_spent, self._started = self.spent(), None

    def _stop(self, state, control) -> None:
        if not control.should_training_stop and state.is_world_process_zero:
            logger.info("--max_train_time %s is spent at step %d: saving and evaluating",
                        format_duration(self.seconds), state.global_step)
        control.should_training_stop = True
        control.should_save = state.global_step > 0  # the step reached, to resume from


def any_process(flag: bool) -> bool:
    """`flag` of any process of the run (every process must ask at the same step): a decision taken on a clock,
    which differs between processes, made the same on all of them."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flag
    tensor = torch.tensor([float(flag)])
    if torch.distributed.get_backend() == "nccl":
        tensor = tensor.cuda()
    torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
    return bool(tensor.item())
