"""`elmo-convert`: original ELMo weights to a Hugging Face folder, whichever format they come in.

    elmo-convert --model original --output_dir OUT                        # a published AllenNLP model
    elmo-convert --options_file OPTIONS --weight_file WEIGHTS --output_dir OUT     # bilm-tf / AllenNLP files
    elmo-convert --manylangs_dir DIR --output_dir OUT                     # an ELMoForManyLangs folder
    python -m elmo_tools.convert ...  (the same)

The options (`command_options.convert_parser`) are those of `convert_allennlp_elmo` plus `--manylangs_dir`, which hands the folder to
`convert_elmoformanylangs` (`--word_split`, `--overwrite`, `--output_dir` and `--verbose` apply to both). Quiet by
default: one line saying where the model was written; SIGINT/SIGTERM end with one line, exit 130/143, nothing
half-written (`convert_common.run_guarded`). This dispatch lives here so that neither converter imports the other (what they share
is in `convert_common.py`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

from . import convert_allennlp_elmo, convert_elmoformanylangs
from .command_options import convert_parser
from .convert_common import configure_logging

logger = logging.getLogger(__name__)

# The options of convert_allennlp_elmo that have no meaning for an ELMoForManyLangs folder.
_ALLENNLP_ONLY = ("model", "options_file", "weight_file", "vocab_file", "with_vocab", "base_url", "push_to_hub")


def main(argv: Iterable[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for bad inputs, with the reason on stderr)."""
    args = convert_parser().parse_args(None if argv is None else list(argv))
    configure_logging(args.verbose)
    if args.manylangs_dir is None:
        return convert_allennlp_elmo.run(args)
    other = [f"--{name}" for name in _ALLENNLP_ONLY if getattr(args, name, None)]
    if other:
        logger.error("--manylangs_dir converts an ELMoForManyLangs folder; drop %s", " and ".join(other))
        return 2
    return convert_elmoformanylangs.run(args.manylangs_dir, args.output_dir, args.overwrite, args.word_split)


if __name__ == "__main__":
    sys.exit(main())
