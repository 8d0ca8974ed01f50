"""The old name of `elmo_hf.tools.hub.hub_push`, which docs/sharing.md's examples imported before the move: the
same module object under its old name, so that code written against it runs on."""

import sys

from .hub import hub_push

sys.modules[__name__] = hub_push
