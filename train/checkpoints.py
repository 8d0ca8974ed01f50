"""Checkpoints of `elmo-pretrain` and how a run stops: written whole, resumed exactly, kept when a run is interrupted.

A checkpoint (`output_dir/checkpoints/step-NNNNNNNN/`) holds Accelerate's state (model, optimizer, scheduler, RNG
states of every process), `progress_rank{i}.pt` (the data position and the LSTM state of each process's rows) and
`args.json`. It is written into a temporary folder renamed into place, with SIGINT/SIGTERM held back until it is
whole, so a folder named `step-*` is always complete.

SIGINT and SIGTERM during training stop every process at the same step (`InterruptGuard.received`, `agreed_stop`): the
processes agree at each step boundary, write a checkpoint of that step, and end with one line saying what was kept and
how to go on; the exit status is 130 or 143.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from elmo_hf.tools.core.errors import InputError, reading, writing
from elmo_hf.tools.core.interrupts import Interrupted, InterruptGuard

logger = logging.getLogger("elmo-pretrain")

RESUME_OPTION = "--resume_from_checkpoint latest"


@dataclass
class Progress:
    """Where training is: saved in every checkpoint, with the LSTM state of this process's rows."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0
    tokens_seen: int = 0
    train_seconds: float = 0.0


def agreed_stop(accelerator, guard: InterruptGuard, have_batch: bool | None = None) -> tuple[int, int]:
    """One collective for every process at a step boundary: (how many processes have a batch, the signal one of them
    received or 0). Every process calls it at the same points, so all stop at the same step."""
    mine = torch.tensor([float(bool(have_batch)), float(guard.received or 0)], device=accelerator.device)
    flags = accelerator.gather(mine).reshape(-1, 2)  # (processes, 2)
    return int(flags[:, 0].sum().item()), int(flags[:, 1].max().item())


def save_checkpoint(run: Any) -> Path:
    """Write a checkpoint of `run` (a `elmo_hf.train.pretrain_run.Run`) atomically: into a temporary folder, renamed
    into place, with the signals held back until it is whole. Every process calls it."""
    accelerator, progress = run.accelerator, run.progress
    root = run.output_dir / "checkpoints"
    final = root / f"step-{progress.step:08d}"
    tmp = root / f".tmp-step-{progress.step:08d}"
    with run.guard.deferred(), writing(final):
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(tmp))
        state = None if run.lstm_state is None else tuple(t.detach().cpu() for t in run.lstm_state)
        torch.save({"progress": asdict(progress), "lstm_state": state},
                   tmp / f"progress_rank{accelerator.process_index}.pt")
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            (tmp / "args.json").write_text(json.dumps(asdict(run.args), indent=2))
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            kept = checkpoints(run.output_dir)
            for old in kept[: max(0, len(kept) - run.args.save_total_limit)]:
                shutil.rmtree(old, ignore_errors=True)
        accelerator.wait_for_everyone()
    run.saved_step = progress.step
    return final


def checkpoints(output_dir: Path) -> list[Path]:
    """The complete checkpoints of a run, oldest first."""
    return sorted(p for p in (output_dir / "checkpoints").glob("step-*") if p.is_dir())


def resolved_resume(args: Any) -> str | None:
    """What `--resume_from_checkpoint` means for this run: `auto` is `latest` when `--output_dir` holds a checkpoint,
    else None (a fresh start): one command line that a launcher can restart as it is (`torchrun --max_restarts`, a
    requeued job); any other value is itself. Every process decides alone, before the processes meet; they decide
    alike because no process of the run is writing a checkpoint then (a launcher stops all the workers of an attempt
    before it starts the next)."""
    if args.resume_from_checkpoint == "auto":
        return "latest" if checkpoints(Path(args.output_dir)) else None
    return args.resume_from_checkpoint


# The options that make a run what it is: a checkpoint resumed with another value of one of them would not go on
# with the same run (an optimizer's state restored under another rate, another softmax, another data order), least
# of all silently when only a default changed between the two commands (the default recipe's softmax did).
SAME_RUN_OPTIONS = ("optimizer", "learning_rate", "weight_decay", "lr_scheduler_type", "warmup_steps",
                    "max_grad_norm", "softmax", "num_sampled", "per_device_batch_size", "batch_mode", "unroll_steps",
                    "dropout", "mixed_precision", "seed", "shuffle_buffer")


def check_same_run(args: Any) -> None:
    """With --resume_from_checkpoint: the checkpoint exists, and was written by a run with this command's values of
    `SAME_RUN_OPTIONS` (its args.json, the options as that run resolved them); refused in one line naming those that
    differ, before the corpus is read or anything is written. `--num_sampled` counts only where a side trains the
    sampled softmax (the others never read it). A checkpoint without args.json is not checked."""
    if not args.resume_from_checkpoint:
        return
    checkpoint = find_checkpoint(Path(args.output_dir), args.resume_from_checkpoint)
    with reading(checkpoint / "args.json", "--resume_from_checkpoint"):
        saved = json.loads((checkpoint / "args.json").read_text()) if (checkpoint / "args.json").is_file() else {}
    differ = [option for option in SAME_RUN_OPTIONS if option in saved and saved[option] != getattr(args, option)]
    if "sampled" not in (saved.get("softmax"), args.softmax):
        differ = [option for option in differ if option != "num_sampled"]
    if differ:
        trained = ", ".join(_option_value(option, saved[option]) for option in differ)
        given = ", ".join(_option_value(option, getattr(args, option)) for option in differ)
        raise InputError(
            f"{checkpoint} was trained with {trained}, this command says {given}: resume with the checkpoint's "
            "values to continue its run, or train anew in another --output_dir")


def _option_value(option: str, value: Any) -> str:
    return f"no --{option}" if value is None else f"--{option} {value}"


def find_checkpoint(output_dir: Path, resume_from_checkpoint: str) -> Path:
    if resume_from_checkpoint == "latest":
        kept = checkpoints(output_dir)
        if not kept:
            raise InputError(f"no checkpoint in {output_dir / 'checkpoints'} to resume from")
        return kept[-1]
    path = Path(resume_from_checkpoint)
    if not (path / "progress_rank0.pt").exists():
        raise InputError(f"{path} is not a checkpoint folder of elmo-pretrain (no progress_rank0.pt)")
    return path


def resume(run: Any, checkpoint: Path) -> None:
    """Model, optimizer, schedule and RNG states, the data position and this process's LSTM state."""
    with reading(checkpoint, "--resume_from_checkpoint"):
        run.accelerator.load_state(str(checkpoint))
        saved = torch.load(checkpoint / f"progress_rank{run.accelerator.process_index}.pt", weights_only=False)
    run.progress = Progress(**saved["progress"])
    if saved["lstm_state"] is not None:
        run.lstm_state = tuple(t.to(run.accelerator.device) for t in saved["lstm_state"])
    run.saved_step = run.progress.step
    if run.accelerator.is_main_process:
        with writing(run.output_dir / "train_log.jsonl"):
            drop_log_lines_after(run.output_dir / "train_log.jsonl", run.progress.step)
    logger.info("resumed from %s at step %d", checkpoint, run.progress.step)


def drop_log_lines_after(log: Path, step: int) -> None:
    """The lines of train_log.jsonl up to `step`: the run that stopped may have logged steps after its last
    checkpoint, which the resumed run trains and logs again (and a process killed while writing leaves half a
    line, always the last)."""
    if not log.exists():
        return
    lines = log.read_text().splitlines(keepends=True)
    kept = [line for line in lines if line.endswith("\n") and json.loads(line)["step"] <= step]
    if len(kept) != len(lines):
        log.write_text("".join(kept))


def interrupted_message(stop: Interrupted, output_dir: Path, finished: bool) -> str:
    """The one line of an interrupted run: what was kept, and how to go on."""
    if finished:
        return f"interrupted ({stop.name}) as the run ended: the model folder {output_dir} is complete"
    kept = checkpoints(output_dir)
    if not kept:
        return (f"interrupted ({stop.name}) before the first checkpoint of {output_dir}: nothing was kept; run the "
                "same command to start again")
    step = int(re.sub(r"\D", "", kept[-1].name))
    return (f"interrupted ({stop.name}): the checkpoint of step {step} is kept in {kept[-1]}; run the same command "
            f"with {RESUME_OPTION} to continue from it")


class UndoUntilCheckpoint:
    """Leaves the output folder as it was found when the run fails before it wrote its first checkpoint: a folder
    the run created is removed, and from one that was there only what the run added (the vocabulary, logs).
    Then the corrected command can simply be run again. Only the main process writes, so only it cleans up."""

    def __init__(self, output_dir: Path, is_main_process: bool):
        self.output_dir, self.is_main_process = output_dir, is_main_process
        self.existed = output_dir.exists()
        self.entries = set(os.listdir(output_dir)) if self.existed else set()
        self.checkpoints = self._checkpoints()

    def _checkpoints(self) -> set[str]:
        return {p.name for p in checkpoints(self.output_dir)}

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or not isinstance(error, (Exception, Interrupted)) or not self.is_main_process:
            return False
        if self._checkpoints() - self.checkpoints:
            return False  # the run saved a checkpoint: keep it to resume from
        if not self.existed:
            shutil.rmtree(self.output_dir, ignore_errors=True)
        elif self.output_dir.is_dir():
            for name in set(os.listdir(self.output_dir)) - self.entries:
                path = self.output_dir / name
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return False
