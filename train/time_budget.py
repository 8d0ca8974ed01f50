"""`--max_train_time`: a training run's budget of wall-clock time, as written on a command line.

The standard library only: the commands' `--help` and their usage errors answer before torch is imported. The
pretraining loop checks the budget at every step boundary (`train/pretrain_run.py`); the fine-tuning commands
through a `TrainerCallback` (`train/time_budget_callback.py`). `max_train_time_option` declares the option for both.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_WITH_UNITS = re.compile(rf"(?:{_NUMBER}[smhd])+")
_PART = re.compile(rf"({_NUMBER})([smhd])")
_CLOCK = re.compile(r"(\d+):([0-5]\d)(?::([0-5]\d))?")  # H:MM or H:MM:SS, as schedulers write a job's time

EXAMPLES = "90s, 20m, 1h30m, 8h, 2:30:00 or a number of seconds"


def parse_duration(text: str, option: str = "--max_train_time") -> float:
    """The seconds of `text`: a number of seconds (`5400`), numbers with units s, m, h, d (`90s`, `20m`, `1h30m`,
    `1.5h`) or a clock time `H:MM[:SS]`. A `ValueError` naming `option` for anything else, zero or less."""
    value = str(text).strip().lower().replace(" ", "")
    seconds = None
    if re.fullmatch(_NUMBER, value):
        seconds = float(value)
    elif _WITH_UNITS.fullmatch(value):
        seconds = sum(float(number) * UNITS[unit] for number, unit in _PART.findall(value))
    elif clock := _CLOCK.fullmatch(value):
        hours, minutes, secs = clock.groups()
        seconds = int(hours) * 3600.0 + int(minutes) * 60.0 + int(secs or 0)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{option} must be a positive duration ({EXAMPLES}), got {text!r}")
    return seconds


def checked_duration(text: str) -> str:
    """`--max_train_time`'s converter (`elmo_hf.tools.core.arguments`): `text` as it is, once `parse_duration` reads it;
    an `argparse.ArgumentTypeError` in one line otherwise (the option named by whoever reports it)."""
    try:
        parse_duration(text, option="")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).strip()) from error
    return text


def max_train_time_option(then: str) -> dataclasses.Field:
    """`--max_train_time` of the training commands: its help (what the command does `then`) and its check, in one
    place; the run reads the seconds with `parse_duration`."""
    return dataclasses.field(default=None, metadata={
        "help": f"Stop training at the first step boundary once this much time is spent ({EXAMPLES}), {then}",
        "type": checked_duration})


@dataclasses.dataclass
class TrainClock:
    """A pretraining run's budget (seconds, or None) and the training seconds its processes last agreed on."""

    budget: float | None = None
    agreed: float = 0.0

    def share(self) -> float:
        """The share of the budget spent (0 without one), what a schedule over the time reads."""
        return self.agreed / self.budget if self.budget else 0.0


def format_duration(seconds: float) -> str:
    """`seconds` for a log line: 45.2s, 20m, 1h30m5s."""
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)
