"""`elmo-export`'s options (standard library only: `--help` and usage errors answer before torch loads)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .arguments import flag, positional


@dataclass
class ExportOptions:
    """`elmo-export`: the ONNX graph of a saved ELMo (its biLM; a task head's scalar mix and logits where it has
    them), checked against PyTorch at several lengths, for ONNX Runtime, OpenVINO and their C++, C# and Java APIs
    (docs/deployment.md)."""

    model: str = positional("model folder, Hub id, or preset name (random weights, only to test)")
    output: str | None = field(default=None, metadata={
        "help": "the .onnx file to write (default for a folder: MODEL/onnx/model.onnx, where elmo-embed --backend "
                "looks first)"})
    int8: bool = flag("also write ONNX Runtime's int8 graph beside it (model.int8.onnx)")
    no_check: bool = flag("skip the check against PyTorch at other lengths and batches (seconds)")
    overwrite: bool = flag("replace an existing --output")
    verbose: bool = flag("debugging messages too")
