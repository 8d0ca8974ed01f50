"""`elmo-export`'s options (standard library only: `--help` and usage errors answer before torch loads)."""

from __future__ import annotations

import argparse


def export_parser() -> argparse.ArgumentParser:
    """`elmo-export` (`elmo_tools.onnx_export.main`)."""
    parser = argparse.ArgumentParser(
        prog="elmo-export",
        description="Write the ONNX graph of a saved ELMo (its biLM; a task head's scalar mix and logits where it has "
                    "them), checked against PyTorch at several lengths, for ONNX Runtime, OpenVINO and their C++, "
                    "C# and Java APIs (docs/deployment.md).",
    )
    parser.add_argument("model", help="model folder, Hub id, or preset name (random weights, only to test)")
    parser.add_argument("output", nargs="?", default=None,
                        help="the .onnx file to write (default for a folder: MODEL/onnx/model.onnx, where "
                             "elmo-embed --backend looks first)")
    parser.add_argument("--int8", action="store_true",
                        help="also write ONNX Runtime's int8 graph beside it (model.int8.onnx)")
    parser.add_argument("--no_check", dest="check", action="store_false",
                        help="skip the check against PyTorch at several lengths and batches (seconds)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    parser.add_argument("--quiet", action="store_true", help="only problems")
    return parser
