"""spacy-transformers 1.4 on an ELMo folder, run by the interpreter of the spaCy environment (tests/test_ecosystem.py).

    python tests/compat/spacy_checks.py FOLDER OUT --repo REPO

The project is imported from REPO (`import elmo_hf.tools.spacy_pipe`, which also registers ELMo with transformers' Auto
classes, as where it is installed): spacy-transformers passes its
`transformer_config` to the configuration's loader but nothing to the model's (`AutoModel.from_pretrained(name,
config=config)`), so remote code cannot load there; with the project registered no custom code is needed at all.

A blank English pipeline with a `transformer` pipe naming FOLDER through the project's architecture
(`elmo.TransformerModel.v1`, tools/spacy_pipe.py) fills `doc._.trf_data` for every document of a batch: one
alignment row per spaCy token, each pointing at the ELMo words that cover its characters, whose vectors are the
model's own (run by hand on the tokenizer's words of the text). spaCy's tokens and ELMo's words differ on hyphens,
contractions and abbreviations; the texts below hold such cases. The pipeline saved to disk and loaded back gives the
same vectors. spacy-transformers' own architecture is checked to misalign the documents after a batch's first (the
reason the project's exists) and to align them one document a batch. A check that fails ends the process with its
traceback; OUT/results.json says what ran.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from checkout import import_project_from

TEXTS = ["I don't think it's 3.14 in the U.S. today.", "A well-known bank can't lend $5 e.g. to Ada-Marie.",
         "ELMo reads characters", "Hi"]


STOCK = "spacy-transformers.TransformerModel.v3"  # spacy-transformers' own architecture
ELMO = "elmo.TransformerModel.v1"  # the project's: the same with the batch split by document per position


def _pipeline(folder: Path, architecture: str, batch_size: int):
    import spacy

    nlp = spacy.blank("en", config={"nlp": {"batch_size": batch_size}})
    nlp.add_pipe("transformer", config={"model": {
        "@architectures": architecture, "name": str(folder), "tokenizer_config": {"use_fast": False},
        "get_spans": {"@span_getters": "spacy-transformers.doc_spans.v1"},
    }})
    nlp.initialize()
    return nlp


def _check_alignment(doc, folder: Path) -> dict:
    """Every spaCy token aligned to the words of ELMo's tokenizer that overlap its characters, with their vectors."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    encoded = tokenizer(doc.text, return_offsets_mapping=True, return_tensors="pt")
    with torch.no_grad():
        vectors = model(encoded["input_ids"], encoded["attention_mask"]).last_hidden_state[0]
    offsets = encoded["offset_mapping"][0].tolist()
    data = doc._.trf_data
    align = data.align
    assert len(align.lengths) == len(doc), (len(align.lengths), len(doc))  # one row per spaCy token
    state = torch.as_tensor(data.model_output.last_hidden_state)  # (spans of the doc, positions, width)
    hidden = state.reshape(-1, state.shape[-1])  # the positions of the doc's spans one after the other
    differing = 0
    for token, row in zip(doc, align):
        positions = [int(p) for p in row.data.ravel()]
        expected = [i for i, (start, end) in enumerate(offsets)
                    if end > start and start < token.idx + len(token.text) and end > token.idx]
        assert positions == expected, (token.text, positions, expected)
        for position in positions:
            assert torch.allclose(hidden[position], vectors[position], atol=1e-6), token.text
        differing += [doc.text[slice(*offsets[p])] for p in positions] != [token.text]
    return {"tokens": len(doc), "tokens_not_one_word": differing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--repo", type=Path, required=True)
    args = parser.parse_args()
    import_project_from(args.repo)
    import numpy

    import elmo_hf.tools.spacy_pipe  # noqa: F401  (registers the architecture, as the installed entry point does)

    batch = len(TEXTS)  # one batch holds every document
    nlp = _pipeline(args.folder, ELMO, batch)
    results = {"docs": [_check_alignment(doc, args.folder) for doc in nlp.pipe(TEXTS)]}
    assert sum(r["tokens_not_one_word"] for r in results["docs"]) > 0  # the texts hold tokens that are not words
    stock = _pipeline(args.folder, STOCK, batch)
    misaligned = []
    for doc in stock.pipe(TEXTS):
        try:
            _check_alignment(doc, args.folder)
        except AssertionError:
            misaligned.append(doc.text)
    assert misaligned == TEXTS[1:], misaligned  # every document after the batch's first
    stock.batch_size = 1
    results["stock_one_a_batch"] = [_check_alignment(doc, args.folder) for doc in stock.pipe(TEXTS)]
    with tempfile.TemporaryDirectory() as scratch:
        nlp.to_disk(scratch)
        import spacy

        again = spacy.load(scratch)
        for before, after in zip(nlp.pipe(TEXTS), again.pipe(TEXTS)):
            assert numpy.array_equal(before._.trf_data.model_output.last_hidden_state,
                                     after._.trf_data.model_output.last_hidden_state)
    results["saved_and_loaded"] = True
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main()
