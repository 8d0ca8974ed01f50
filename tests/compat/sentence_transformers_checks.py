"""`SentenceTransformer` on the project's export, on the sentence-transformers of one environment (tests/test_compat.py
starts it in the sentence-transformers environments of tests/compat/, the oldest release the `sentence-transformers`
extra allows among them).

    python tests/compat/sentence_transformers_checks.py FOLDER OUT --repo REPO

FOLDER is a saved ELMo model that `save_for_sentence_transformers` exported (modules.json and the pooling module).
First the project cannot be imported: the folder loads as remote code (`trust_remote_code=True`) and encodes
SENTENCES in batches of 3 (sentence-transformers sorts them by length). Then, with the project's packages imported
from REPO, as where it is installed, the same folder, and `sentence_transformer(FOLDER)` built in the library (no files
written, no remote code). Each mode's vectors go to OUT/MODE.npy for the calling test to compare with the project's
own pooled vectors; the last line printed is JSON: the sentence-transformers version, each mode's model class's
module and the sentences. Standard library, numpy and sentence-transformers only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from checkout import NoProject, import_project_from

SENTENCES = [
    "The bank raised its rates.",
    "We sat on the river bank and watched the water for a long, long time.",
    "",
    "Hello",
    "Don't stop: it's 3.14 , not 1,000 !",
]


def encode(model, out: Path, mode: str) -> str:
    import numpy

    numpy.save(out / f"{mode}.npy", model.encode(SENTENCES, batch_size=3))
    return type(model[0].auto_model).__module__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--repo", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    hidden = NoProject()
    sys.meta_path.insert(0, hidden)
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    modules = {"remote": encode(SentenceTransformer(str(args.folder), device="cpu", trust_remote_code=True),
                                args.out, "remote")}
    sys.meta_path.remove(hidden)
    import_project_from(args.repo)
    from elmo_hf.tools.embedding.sentence_vectors import sentence_transformer

    modules["installed"] = encode(SentenceTransformer(str(args.folder), device="cpu"), args.out, "installed")
    modules["in_library"] = encode(sentence_transformer(args.folder, device="cpu"), args.out, "in_library")
    print(json.dumps({"sentence_transformers": sentence_transformers.__version__, "modules": modules,
                      "sentences": SENTENCES}))


if __name__ == "__main__":
    main()
