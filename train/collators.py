"""The old name of `elmo_hf.train.tasks.common_collators`, which docs/finetuning.md's examples imported before the
move: the same module object under its old name, so that code written against it runs on."""

import sys

from .tasks import common_collators

sys.modules[__name__] = common_collators
