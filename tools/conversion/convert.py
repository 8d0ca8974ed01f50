"""`elmo-convert`: original ELMo weights to a Hugging Face folder, whichever format they come in.

    elmo-convert --model original --output_dir OUT                        # a published AllenNLP model
    elmo-convert --options_file OPTIONS --weight_file WEIGHTS --output_dir OUT     # bilm-tf / AllenNLP files
    elmo-convert --manylangs_dir DIR --output_dir OUT                     # an ELMoForManyLangs folder

`run` takes the options of `command_options.ConvertOptions`: without `--manylangs_dir` it hands them to
`convert_allennlp_elmo`, with it to `convert_elmoformanylangs` (`--word_split`, `--overwrite`, `--output_dir` and
`--verbose` apply to both). Quiet by default: one line saying where the model was written; SIGINT/SIGTERM end with one
line saying what was kept, nothing half-written. This dispatch lives here so that neither converter imports the
other (what they share is in `convert_common.py`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..core.command_options import ConvertOptions
from ..core.errors import RunFailed
from ..core.interrupts import Interrupted, InterruptGuard
from ..core.output_folders import run_lock
from ..core.output_paths import check_writable_folder
from ..hub.hub_push import HubPushError, push_folder
from . import convert_allennlp_elmo, convert_elmoformanylangs
from .convert_common import ConversionError, hide_write_progress, interrupted_line, notice

logger = logging.getLogger(__name__)

# The options of convert_allennlp_elmo that have no meaning for an ELMoForManyLangs folder.
_ALLENNLP_ONLY = ("model", "options_file", "weight_file", "vocab_file", "with_vocab", "base_url", "push_to_hub")


def run(args: ConvertOptions, guard: InterruptGuard | None = None) -> None:
    """Convert what `args` names into `args.output_dir` (and push it with `--push_to_hub`). Raises
    `ConversionError` (an `InputError`) for inputs that cannot be converted; an interruption carries the line that
    says what was kept (`report`)."""
    check_writable_folder(Path(args.output_dir), "--output_dir")  # before any work: one line, no folder made
    try:
        with run_lock(Path(args.output_dir), "elmo-convert"):
            out = _convert(args)
    except Interrupted as stop:
        stop.report = interrupted_line(stop, args.output_dir)
        raise
    notice.info("wrote %s", out)
    if args.push_to_hub:
        _push(Path(out).absolute(), args)


def _convert(args: ConvertOptions) -> Path:
    if args.manylangs_dir is None:
        return convert_allennlp_elmo.convert_sources(args)
    other = [f"--{name}" for name in _ALLENNLP_ONLY if getattr(args, name, None)]
    if other:
        raise ConversionError(f"--manylangs_dir converts an ELMoForManyLangs folder; drop {' and '.join(other)}")
    hide_write_progress()
    return convert_elmoformanylangs.convert(args.manylangs_dir, args.output_dir, args.overwrite, args.word_split)


def _push(out: Path, args: ConvertOptions) -> None:
    try:
        info = push_folder(out, args.push_to_hub, private=args.hub_private_repo or None,
                           commit_message="Upload ELMo converted with elmo-convert")
    except Interrupted as stop:
        stop.report = (f"interrupted ({stop.name}) while pushing: the conversion is in {out}; push it with "
                       "elmo_hf.tools.hub.hub_push.push_folder or run the command again")
        raise
    except (HubPushError, FileNotFoundError) as error:  # the folder is written: not bad input, a run that failed
        raise RunFailed(f"the conversion is in {out}, but the push failed: {error}") from error
    notice.info("pushed %s to %s (commit %s)", out, args.push_to_hub, info.oid)
