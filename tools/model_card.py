"""The old name of `elmo_hf.tools.hub.model_card`, which docs/sharing.md's examples imported before the move: the
same module object under its old name, so that code written against it runs on."""

import sys

from .hub import model_card

sys.modules[__name__] = model_card
