"""flair 0.15.1 on an ELMo folder, run by the interpreter of the flair environment (tests/test_ecosystem.py starts it).

    python tests/compat/flair_checks.py FOLDER OUT [--repo REPO]

First as a user without the project: `TransformerWordEmbeddings(FOLDER, trust_remote_code=True)` embeds flair
Sentences, every token's vector the ELMo vector of its word (the model run by hand, as remote code), and a
`SequenceTagger` on those embeddings trains a few steps. With --repo, then, the project imported from REPO (as where
it is installed, `import elmo_hf.modeling_elmo`): the same without `trust_remote_code`, and the tagger saved and loaded back
(flair pickles the embeddings' tokenizer and configuration, which find ELMo's classes by name there). A check that
fails ends the process with its traceback; OUT/results.json says what ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from checkout import NoProject, import_project_from

TEXTS = ["The bank of England rose .", "We sat on the river bank today", "Peter Blackburn said it 's 3.14 in the U.S."]
TAGGED = [("The bank of England rose .", ["DT", "NN", "IN", "NNP", "VBD", "."]),
          ("Peter Blackburn sat .", ["NNP", "NNP", "VBD", "."]),
          ("We met Ada in Lisbon .", ["PRP", "VBD", "NNP", "IN", "NNP", "."])]


def _vectors_by_hand(folder: Path, words: list[str], trust: dict):
    """The top layer at each word of `words`, the model and tokenizer run directly."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, **trust)
    model = AutoModel.from_pretrained(folder, **trust).eval()
    with torch.no_grad():
        out = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"))
    return out.last_hidden_state[0, 1: len(words) + 1]


def _embeddings(folder: Path, trust: dict) -> int:
    import torch
    from flair.data import Sentence
    from flair.embeddings import TransformerWordEmbeddings

    embeddings = TransformerWordEmbeddings(str(folder), layers="-1", subtoken_pooling="first", **trust)
    sentences = [Sentence(text) for text in TEXTS]
    embeddings.embed(sentences)
    for sentence in sentences:
        words = [token.text for token in sentence]
        expected = _vectors_by_hand(folder, words, trust)
        got = torch.stack([token.embedding for token in sentence])
        assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-6), sentence
    return embeddings.embedding_length


def _tagger(folder: Path, trust: dict, save: bool) -> dict:
    import torch
    from flair.data import Dictionary, Sentence
    from flair.embeddings import TransformerWordEmbeddings
    from flair.models import SequenceTagger

    torch.manual_seed(0)
    sentences = []
    for text, tags in TAGGED:
        sentence = Sentence(text)
        for token, tag in zip(sentence, tags):
            token.set_label("pos", tag)
        sentences.append(sentence)
    tags = Dictionary(add_unk=False)
    for tag in sorted({tag for _, labels in TAGGED for tag in labels}):
        tags.add_item(tag)
    embeddings = TransformerWordEmbeddings(str(folder), layers="-1", **trust)
    tagger = SequenceTagger(hidden_size=16, embeddings=embeddings, tag_dictionary=tags, tag_type="pos",
                            use_crf=False, use_rnn=False, reproject_embeddings=False)
    optimizer = torch.optim.SGD(tagger.parameters(), lr=0.5)
    losses = []
    for _ in range(8):
        loss, count = tagger.forward_loss(sentences)
        losses.append(float(loss) / count)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < losses[0], losses
    results = {"losses": losses}
    if save:
        with tempfile.TemporaryDirectory() as scratch:
            tagger.save(Path(scratch) / "tagger.pt")
            loaded = SequenceTagger.load(Path(scratch) / "tagger.pt")
        probe, again = Sentence(TAGGED[0][0]), Sentence(TAGGED[0][0])
        tagger.eval()
        loaded.eval()
        tagger.predict(probe, return_probabilities_for_all_classes=True)
        loaded.predict(again, return_probabilities_for_all_classes=True)
        for before, after in zip(probe, again):
            assert before.get_label("pos").value == after.get_label("pos").value
            assert abs(before.get_label("pos").score - after.get_label("pos").score) < 1e-6
        results["saved_and_loaded"] = True
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--repo", type=Path)
    args = parser.parse_args()
    hidden = NoProject()
    sys.meta_path.insert(0, hidden)
    results = {"remote": {"embedding_length": _embeddings(args.folder, {"trust_remote_code": True}),
                          **_tagger(args.folder, {"trust_remote_code": True}, save=False)}}
    if args.repo is not None:
        sys.meta_path.remove(hidden)
        import_project_from(args.repo)
        from elmo_hf import modeling_elmo  # noqa: F401  (registers ELMo with transformers' Auto classes, as an installed user does)

        results["installed"] = {"embedding_length": _embeddings(args.folder, {}), **_tagger(args.folder, {}, True)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main()
