"""A loss line at least every `LOSS_LINE_SECONDS` of fine-tuning, for `Trainer`.

transformers logs the loss every `logging_steps` (500 by default): a fine-tuning run on a CPU, at a few steps a
second or fewer, went minutes without a line. The commands log every 10 steps unless `--logging_steps` is given,
and this callback asks for a log line besides once the time since the last one passes the bound (the Trainer then
logs the loss averaged since the last line, as at a logging step). With several processes they decide together
(`any_process`, every `AGREE_EVERY` steps): a log gathers the loss from every process, so all of them must log at the
same step.
"""

from __future__ import annotations

import time

from transformers import TrainerCallback

from .time_budget_callback import any_process

LOSS_LINE_SECONDS = 30.0
AGREE_EVERY = 5  # steps between the processes' agreements (an all_reduce each) where there are several


class LossLinesCallback(TrainerCallback):
    """Set `should_log` at the first step end `seconds` after the last log (or the start of training)."""

    def __init__(self, seconds: float = LOSS_LINE_SECONDS):
        self.seconds = seconds
        self._last = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self._last = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if args.logging_strategy != "steps" or control.should_log:
            return
        if args.world_size > 1 and state.global_step % AGREE_EVERY:
            return  # several processes agree on a collective call: at every AGREE_EVERY-th step only
        if any_process(time.monotonic() - self._last >= self.seconds):
            control.should_log = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._last = time.monotonic()
