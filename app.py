"""The ELMo demo page, at the repository root as Hugging Face Spaces expect it: `python app.py [--model ...]`, the
same as the `elmo-app` command (docs/app.md). On a Space, set the variable ELMO_APP_MODEL to the model's Hub id."""

import sys

from elmo_hf.cli import run

if __name__ == "__main__":
    sys.exit(run("elmo-app"))
