"""The old name of `elmo_hf.tools.export.runtime_model`, which docs/deployment.md's examples imported before the
move: the same module object under its old name, so that code written against it runs on."""

import sys

from .export import runtime_model

sys.modules[__name__] = runtime_model
