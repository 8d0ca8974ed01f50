"""The ELMo demo page, at the repository root as Hugging Face Spaces expect it: `python app.py [--model ...]`, the
same as the `elmo-app` command (docs/app.md). On a Space, set the variable ELMO_APP_MODEL to the model's Hub id.

A Space runs the checkout without installing it: the project's packages are then the folders beside this file,
imported under their installed names (`elmo_hf.<folder>`, as pyproject.toml's package-dir maps them)."""

import sys
import types
from pathlib import Path

try:
    from elmo_hf.cli import run
except ModuleNotFoundError:  # not installed: this checkout is the namespace
    namespace = types.ModuleType("elmo_hf")
    namespace.__path__ = [str(Path(__file__).resolve().parent)]
    sys.modules["elmo_hf"] = namespace
    from elmo_hf.cli import run

if __name__ == "__main__":
    sys.exit(run("elmo-app"))
