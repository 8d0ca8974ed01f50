"""`Dataset.map` with the ELMo tokenizer on the datasets of one environment (tests/test_compat.py starts it in the
datasets 3.6 environment of tests/compat/): what a notebook user of transformers' recipes runs.

    python tests/compat/datasets_checks.py FOLDER OUT --repo REPO

FOLDER is a saved ELMo model with its tokenizer; OUT a scratch folder (the recipes write their files there). First the
project cannot be imported: the tokenizer loads as remote code, datasets fingerprints it (`Hasher.hash`, which datasets
before 4.7 does by replacing the tokenizer's attribute named `cache` on the live object), `Dataset.map` runs it, and
the SQuAD and GLUE blocks of docs/ecosystem.md run as written on FOLDER. Then, with the project's packages imported
from REPO, the same fingerprint and map with `ElmoTokenizer` and `ElmoTokenizerFast`. Prints one JSON line last: per
mode, whether the mapped rows are the tokenizer's own, whether the fingerprint held as the cache filled and whether the
tokenizer's class is pickled by name (not by value), and the recipes' printed lines.
Standard library, transformers and datasets only.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import re
import sys
from pathlib import Path

from checkout import NoProject, import_project_from

TEXTS = ["The bank of England rose .", "We sat on the river bank today", "", "ELMo reads characters"]
RECIPES = ("## transformers' SQuAD recipe", "## flair")  # the part of docs/ecosystem.md whose blocks run here


def class_found_by_name(tokenizer) -> bool:
    """Whether the tokenizer's class is reached from its top package through attributes (`package.module.Class`), as
    dill looks a class up before pickling it by reference; one it does not reach it pickles by value, with the globals
    of its module (remote code as transformers imports it: a thread-local there failed the fingerprint)."""
    cls = type(tokenizer)
    found = importlib.import_module(cls.__module__.split(".")[0])
    for part in cls.__module__.split(".")[1:] + cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is cls


def map_checks(tokenizer) -> dict:
    """Fingerprint `tokenizer`, map it over TEXTS, fingerprint it again after new words filled its cache."""
    import datasets
    from datasets.fingerprint import Hasher

    fingerprint = Hasher.hash(tokenizer)
    mapped = datasets.Dataset.from_dict({"text": TEXTS}).map(lambda batch: tokenizer(batch["text"]), batched=True)
    direct = tokenizer(TEXTS)
    tokenizer("words this tokenizer never saw before")
    return {"datasets": datasets.__version__, "class_found_by_name": class_found_by_name(tokenizer),
            "rows_equal": [mapped[i]["input_ids"] for i in range(len(TEXTS))] == direct["input_ids"],
            "fingerprint_held": Hasher.hash(tokenizer) == fingerprint}


def recipe_blocks(page: Path) -> list[str]:
    """The Python blocks of the SQuAD and GLUE recipes of docs/ecosystem.md, in order."""
    text = page.read_text(encoding="utf-8")
    part = text[text.index(RECIPES[0]) : text.index(RECIPES[1])]
    return re.findall(r"^```python\n(.*?)^```$", part, flags=re.S | re.M)


def run_recipes(page: Path, folder: Path) -> list[str]:
    """Run the recipes' blocks in one namespace, on `folder`; the lines they print."""
    namespace: dict = {"__name__": "__main__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in recipe_blocks(page):
            exec(compile(block.replace('"outputs/demo/model"', repr(str(folder))), str(page), "exec"), namespace)
    return printed.getvalue().splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--repo", type=Path, required=True, help="the project's checkout (docs/ecosystem.md, then "
                                                                  "the packages imported as where it is installed)")
    args = parser.parse_args()
    folder = args.folder.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    os.chdir(args.out)
    results = {}

    sys.meta_path.insert(0, NoProject())
    from transformers import AutoTokenizer

    results["remote"] = map_checks(AutoTokenizer.from_pretrained(folder, trust_remote_code=True))
    results["recipes"] = run_recipes(args.repo / "docs" / "ecosystem.md", folder)
    sys.meta_path.remove(next(finder for finder in sys.meta_path if isinstance(finder, NoProject)))

    import_project_from(args.repo)
    from elmo_hf.tokenization import ElmoTokenizer, ElmoTokenizerFast

    results["installed"] = map_checks(ElmoTokenizer.from_pretrained(folder))
    results["installed_fast"] = map_checks(ElmoTokenizerFast.from_pretrained(folder))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
