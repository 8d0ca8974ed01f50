"""The old name of `elmo_hf.tools.embedding.sentence_vectors`, which docs/embedding.md's examples imported before
the move: the same module object under its old name, so that code written against it runs on."""

import sys

from .embedding import sentence_vectors

sys.modules[__name__] = sentence_vectors
