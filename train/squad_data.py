"""The old name of `elmo_hf.train.tasks.squad_data`, which docs/finetuning.md's examples imported before the move:
the same module object under its old name, so that code written against it runs on."""

import sys

from .tasks import squad_data

sys.modules[__name__] = squad_data
