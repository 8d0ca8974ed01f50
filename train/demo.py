"""The main job: train a small ELMo, reload it, and show what contextual vectors are for.

    python -m train.demo                              # generated corpus, a few minutes on 2 CPU cores
    python -m train.demo --train_file my_corpus.txt   # your own corpus (one sentence per line)
    python -m train.demo --language zh                # the same on a generated Chinese corpus, per character

1. Writes a generated corpus in which "bank", "bat", "plant" and "spring" occur in two senses each
   (`train/sense_corpus.py`), unless `--train_file` is given. With `--language zh`, a Chinese corpus in which
   行, 长, 花, 打, 还, 好, 觉 and 乐 do (`train/sense_corpus_zh.py`: 银行 háng "bank" / 行走 xíng "walk", ...).
2. Pretrains a biLM on it with `train.pretrain` (the same code as any pretraining run).
3. Reloads the result with `load_elmo` (the feature model, as `AutoModel` loads it), embeds held-out sentences,
   and scores how well the vectors of each ambiguous word separate its senses: leave-one-out nearest-centroid
   accuracy, for the context-free layer 0 (which gives every occurrence of a word the same vector, so it cannot
   beat chance) and for the contextual biLSTM layers.
4. Measures how contextual each layer is on held-out text (`elmo-analyze`, `elmo_tools/analysis.py`:
   self-similarity, intra-sentence similarity and maximum explainable variance per layer, Ethayarajh 2019).
5. Writes `sense_scores.json`, the plot `senses.png`, `contextuality.json` and its plot `contextuality.png`, and
   says where they are.

Ctrl-C (SIGINT) or SIGTERM ends the demo with one line saying what was kept and how to go on, exit status 130/143:
during pretraining a checkpoint of the step reached is kept (as in `elmo-pretrain`); the same command with
`--resume_from_checkpoint latest` continues from it, or, once the model is trained, only scores it again.

The model's tokenizer splits raw text with the default rule, `punctuation` (`tokenization.split_words`); the
generated corpus is already tokenized (spaces around punctuation), so both rules give it the same words. The
same rule makes every Chinese ideograph a token of its own, so the Chinese model is trained per character.

The Chinese plot names the characters with a CJK font when matplotlib has one (Noto Sans CJK, Source Han Sans,
WenQuanYi, SimHei, ...: any installed font that has the glyphs), and in pinyin with the sense otherwise
(`háng (bank)` / `xíng (walk)`), so it never shows missing-glyph boxes.

This module is the command's door (its options, `--help` and mistyped paths without torch); the demo itself is
`train/demo_run.py`.
"""

from __future__ import annotations

import importlib
import logging
import sys

from elmo_tools.interrupts import one_line_if_interrupted_while_starting
from elmo_tools.output_paths import check_writable_folder
from elmo_tools.text_files import resolve_files

from .arguments import parse_dataclass
from .demo_args import DemoArguments

logger = logging.getLogger("train.demo")

def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    for noisy in ("accelerate", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        args = parse_dataclass(DemoArguments, sys.argv[1:] if argv is None else argv, prog="elmo-demo",
                               description="Train a small ELMo and show what contextual vectors are for.")
    except (ValueError, OSError) as error:
        logger.error("%s", error)
        return 2
    try:  # a mistyped path answers now, not after the seconds of importing torch; the run checks them again
        resolve_files((args.train_file or []) + (args.validation_file or []))
        if args.output_dir is not None:  # the default (outputs/demo) is made with its parent
            check_writable_folder(args.output_dir, "--output_dir")
    except (ValueError, OSError) as error:
        logger.error("%s", error)
        return 2
    with one_line_if_interrupted_while_starting():  # importing torch takes seconds
        run = importlib.import_module("train.demo_run")
    return run.main(args)


if __name__ == "__main__":
    sys.exit(main())
