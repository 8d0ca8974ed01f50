"""flair 0.15.1 on an ELMo folder, run by the interpreter of the flair environment (tests/test_ecosystem.py starts it).

    python tests/compat/flair_checks.py FOLDER OUT [--repo REPO | --load TAGGER]

First as a user without the project: `TransformerWordEmbeddings(FOLDER, trust_remote_code=True)` embeds flair
Sentences, every token's vector the ELMo vector of its word (the model run by hand, as remote code), `layers="all"`
mixes every layer (flair counts them with its probe `tensor([[1]])`), a `SequenceTagger` on those embeddings trains a
few steps, and flair's `ModelTrainer.train()` with its defaults runs to its end (where it loads best-model.pt back).
With --load, only that: a second process without the project loads a saved tagger after ELMo's remote code. With
--repo, then, the project imported from REPO (as where it is installed, `import elmo_hf.modeling_elmo`): the same
without `trust_remote_code`, the tagger saved and loaded back (flair pickles the embeddings' tokenizer and
configuration, which find ELMo's classes by name there), and the project's drop-in for flair's `ELMoEmbeddings`
(elmo_hf.tools.flair_embeddings) gives ElmoModel's layers. A check that fails ends the process with its traceback;
OUT/results.json says what ran.
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


def _all_layers(folder: Path, trust: dict) -> list[int]:
    """`layers="all"`: the layer indexes flair counted, and each token's vector the mean of every layer at its word."""
    import torch
    from flair.data import Sentence
    from flair.embeddings import TransformerWordEmbeddings
    from transformers import AutoModel, AutoTokenizer

    embeddings = TransformerWordEmbeddings(str(folder), layers="all", subtoken_pooling="first", **trust)
    sentence = Sentence(TEXTS[0])
    embeddings.embed(sentence)
    words = [token.text for token in sentence]
    tokenizer = AutoTokenizer.from_pretrained(folder, **trust)
    model = AutoModel.from_pretrained(folder, **trust).eval()
    with torch.no_grad():
        out = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True)
    expected = torch.stack(out.hidden_states).mean(0)[0, 1: len(words) + 1]
    got = torch.stack([token.embedding for token in sentence])
    assert torch.allclose(got, expected, atol=1e-6), (got - expected).abs().max()
    return embeddings.layer_indexes


def _tagged_sentences():
    from flair.data import Sentence

    sentences = []
    for text, tags in TAGGED:
        sentence = Sentence(text)
        for token, tag in zip(sentence, tags):
            token.set_label("pos", tag)
        sentences.append(sentence)
    return sentences


def _trainer(folder: Path, trust: dict, base: Path) -> dict:
    """flair's ModelTrainer.train() with its defaults (a dev set: it loads best-model.pt back at its end)."""
    import torch
    from flair.data import Corpus
    from flair.datasets import FlairDatapointDataset
    from flair.embeddings import TransformerWordEmbeddings
    from flair.models import SequenceTagger
    from flair.trainers import ModelTrainer

    torch.manual_seed(0)
    sentences = _tagged_sentences()
    corpus = Corpus(FlairDatapointDataset(sentences), FlairDatapointDataset(sentences[:2]),
                    FlairDatapointDataset(sentences[1:]))
    tags = corpus.make_label_dictionary("pos", add_unk=False)
    embeddings = TransformerWordEmbeddings(str(folder), layers="-1", **trust)
    tagger = SequenceTagger(hidden_size=16, embeddings=embeddings, tag_dictionary=tags, tag_type="pos",
                            use_crf=False, use_rnn=False, reproject_embeddings=False)
    result = ModelTrainer(tagger, corpus).train(base, max_epochs=2, mini_batch_size=2)
    assert (base / "best-model.pt").is_file() and "test_score" in result, result
    return {"test_score": float(result["test_score"]), "tags": _tags(SequenceTagger.load(base / "best-model.pt"))}


def _tags(tagger) -> list:
    from flair.data import Sentence

    sentence = Sentence(TAGGED[0][0])
    tagger.eval()
    tagger.predict(sentence, return_probabilities_for_all_classes=True)
    return [[token.get_label("pos").value, round(token.get_label("pos").score, 5)] for token in sentence]


def load_in_fresh_process(folder: Path, tagger_file: Path) -> list:
    """What a user without the project does in a new process: ELMo's remote code loaded first (the tokenizer, then
    the model: flair finds their classes by name when it rebuilds them), then `SequenceTagger.load`."""
    from flair.models import SequenceTagger
    from transformers import AutoModel, AutoTokenizer

    AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    AutoModel.from_pretrained(folder, trust_remote_code=True)
    return _tags(SequenceTagger.load(tagger_file))


def _drop_in(folder: Path, scratch: Path) -> dict:
    """The project's ELMoEmbeddings (flair's arguments): each mode the layers of ElmoModel run directly, a published
    name refused in one line with the command that converts it, and a tagger on it saved and loaded back."""
    import torch
    from flair.data import Dictionary, Sentence
    from flair.models import SequenceTagger

    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.flair_embeddings import ELMoEmbeddings

    model, tokenizer = ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder)
    sentences = [Sentence(text) for text in TEXTS]
    lengths = {}
    for mode, mix in (("all", lambda layers: torch.cat(list(layers), -1)), ("top", lambda layers: layers[-1]),
                      ("average", lambda layers: layers.mean(0))):
        embeddings = ELMoEmbeddings(str(folder), embedding_mode=mode)
        embeddings.embed(sentences)  # one batch: padding must not change a sentence's vectors
        for sentence in sentences:
            words = [token.text for token in sentence]
            with torch.no_grad():
                out = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"),
                            output_hidden_states=True)
            expected = mix(torch.stack(out.hidden_states)[:, 0, 1: len(words) + 1])
            got = torch.stack([token.get_embedding(embeddings.name) for token in sentence])
            assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-6), (mode, sentence)
        lengths[mode] = embeddings.embedding_length
    try:
        ELMoEmbeddings("original")
    except FileNotFoundError as error:
        assert "elmo-convert --model original --output_dir" in str(error) and "\n" not in str(error), error
    else:
        raise AssertionError("ELMoEmbeddings('original') loaded without a converted folder")
    tags = Dictionary(add_unk=False)
    for tag in sorted({tag for _, labels in TAGGED for tag in labels}):
        tags.add_item(tag)
    tagger = SequenceTagger(hidden_size=16, embeddings=ELMoEmbeddings(str(folder.resolve())), tag_dictionary=tags,
                            tag_type="pos", use_crf=False, use_rnn=False, reproject_embeddings=False)
    tagger.save(scratch / "drop-in-tagger.pt")
    assert _tags(SequenceTagger.load(scratch / "drop-in-tagger.pt")) == _tags(tagger)
    return {"embedding_length": lengths}


def _tagger(folder: Path, trust: dict, save: bool) -> dict:
    import torch
    from flair.data import Dictionary, Sentence
    from flair.embeddings import TransformerWordEmbeddings
    from flair.models import SequenceTagger

    torch.manual_seed(0)
    sentences = _tagged_sentences()
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
    parser.add_argument("--load", type=Path, help="only load this saved tagger in this process (no project) and "
                        "write the tags it gives to OUT/loaded.json")
    args = parser.parse_args()
    hidden = NoProject()
    sys.meta_path.insert(0, hidden)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.load is not None:
        tags = load_in_fresh_process(args.folder, args.load)
        (args.out / "loaded.json").write_text(json.dumps(tags), encoding="utf-8")
        return
    trust = {"trust_remote_code": True}
    results = {"remote": {"embedding_length": _embeddings(args.folder, trust),
                          "all_layers": _all_layers(args.folder, trust),
                          "trainer": _trainer(args.folder, trust, args.out / "trainer"),
                          **_tagger(args.folder, trust, save=False)}}
    if args.repo is not None:
        sys.meta_path.remove(hidden)
        import_project_from(args.repo)
        from elmo_hf import modeling_elmo  # noqa: F401  (registers ELMo with transformers' Auto classes, as an installed user does)

        results["installed"] = {"embedding_length": _embeddings(args.folder, {}), **_tagger(args.folder, {}, True),
                                "drop_in": _drop_in(args.folder, args.out)}
    (args.out / "results.json").write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main()
