"""The old name of `elmo_hf.tools.export.onnx_standalone`, which docs/deployment.md's examples imported before the
move: the same module object under its old name (its `__file__` included, which a deployment copies), so that code
written against it runs on."""

import sys

from .export import onnx_standalone

sys.modules[__name__] = onnx_standalone
