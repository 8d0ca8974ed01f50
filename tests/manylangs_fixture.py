"""Tiny ELMoForManyLangs model folders with random weights, written by the `elmoformanylangs` package itself.

Test-only: it needs the package (`pip install elmoformanylangs==0.0.4.post2 "overrides<4"`). The folder has the
layout HIT-SCIR publish (`config.json` naming the network config, the network config, `char.dic`, `word.dic`,
`token_embedder.pkl`, `encoder.pkl`); the dictionaries are built and the weights created and saved by the package's
own `EmbeddingLayer` and `Model`, as its training script does, so the files are what the package reads.

    python tests/manylangs_fixture.py OUT_DIR [--char_dim 0] [--word_dim 0]
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
from pathlib import Path

import torch

# The published shape family (cnn_50_100_512_4096_sample.json: 7 CNN filters of widths 1..7, 2 highway layers,
# projection 512, cell 4096, 2 layers, clips 3), at test size.
TINY_NETWORK = {
    "encoder": {"name": "elmo", "projection_dim": 8, "cell_clip": 3, "proj_clip": 3, "dim": 12, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 4], [2, 4], [3, 6], [4, 6], [5, 8], [6, 8], [7, 10]],
        "n_highway": 2,
        "word_dim": 6,
        "char_dim": 5,
        "max_characters_per_token": 12,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 16},
    "dropout": 0.1,
}

# Words of the training "corpus" of the fixture: Chinese (each character and some two-character words) and Latin.
CORPUS_WORDS = [
    "我", "爱", "北京", "天安门", "上", "太阳", "升", "，", "。", "银行", "行走", "花", "钱", "打", "球",
    "The", "cat", "sat", "on", "the", "mat", ".", "naïve", "café", "über", "ELMo", "2018",
]


def build_lexicons(words=CORPUS_WORDS) -> tuple[dict[str, int], dict[str, int]]:
    """word and character dictionaries in the order of the package's training script (biLM.py): word specials
    first (`<oov>` = 0), characters in order of appearance then the six character specials."""
    word_lexicon: dict[str, int] = {}
    for special in ("<oov>", "<bos>", "<eos>", "<pad>"):
        word_lexicon[special] = len(word_lexicon)
    for word in words:
        word_lexicon.setdefault(word, len(word_lexicon))
    char_lexicon: dict[str, int] = {}
    for word in words:
        for ch in word:
            char_lexicon.setdefault(ch, len(char_lexicon))
    # A whitespace character: the package reads its line back as "\u3000" (line.strip() empties the key).
    char_lexicon.setdefault("\u3000", len(char_lexicon))
    for special in ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"):
        char_lexicon.setdefault(special, len(char_lexicon))
    return word_lexicon, char_lexicon


def write_model(
    folder: str | os.PathLike,
    char_dim: int | None = None,
    word_dim: int | None = None,
    seed: int = 0,
    legacy_format: bool = True,
    network_name: str = "cnn_tiny_sample.json",
    network_overrides: dict | None = None,
) -> Path:
    """Write a random model folder with the package's own classes; returns the folder.

    Every parameter (padding rows included) is drawn at random, at the scale of trained weights, so that no structure
    of the package's initialisation (zero biases, orthogonal blocks, unit-norm rows) can hide a mistake. `legacy_format`
    saves the `.pkl` files in the pre-1.6 torch format of the published models.
    """
    from elmoformanylangs.frontend import Model
    from elmoformanylangs.modules.embedding_layer import EmbeddingLayer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    network = json.loads(json.dumps(TINY_NETWORK))
    if char_dim is not None:
        network["token_embedder"]["char_dim"] = char_dim
    if word_dim is not None:
        network["token_embedder"]["word_dim"] = word_dim
    for section, values in (network_overrides or {}).items():
        network[section].update(values)
    embedder = network["token_embedder"]

    torch.manual_seed(seed)
    word_lexicon, char_lexicon = build_lexicons()
    word_layer = EmbeddingLayer(embedder["word_dim"], word_lexicon, fix_emb=False) if embedder["word_dim"] > 0 else None
    char_layer = EmbeddingLayer(embedder["char_dim"], char_lexicon, fix_emb=False) if embedder["char_dim"] > 0 else None
    model = Model(network, word_layer, char_layer, use_cuda=False)
    with torch.no_grad():
        for parameter in model.parameters():
            # fan-in scaled, like trained weights (embedding rows of norm ~1 like theirs); biases 0.2
            fan_in = parameter[0].numel() if parameter.dim() > 1 else 25
            parameter.copy_(torch.randn_like(parameter) / fan_in**0.5)

    # As biLM.py writes them: "token\tid" lines, char.dic only for a character CNN, word.dic always.
    if char_layer is not None:
        with codecs.open(folder / "char.dic", "w", encoding="utf-8") as out:
            for ch, i in char_layer.word2id.items():
                print(f"{ch}\t{i}", file=out)
    with codecs.open(folder / "word.dic", "w", encoding="utf-8") as out:
        for word, i in word_lexicon.items():
            print(f"{word}\t{i}", file=out)
    with open(folder / network_name, "w", encoding="utf-8") as out:
        json.dump(network, out, indent=1)
    # The training options the package records; only config_path is read back. Published folders often name an
    # absolute path of the authors' machine; the package then looks for the file name in the folder.
    options = {"seed": 1, "config_path": f"/users/conll18/elmo/configs/{network_name}", "batch_size": 32}
    with open(folder / "config.json", "w", encoding="utf-8") as out:
        json.dump(options, out)
    kwargs = {} if not legacy_format else {"_use_new_zipfile_serialization": False}
    torch.save(model.token_embedder.state_dict(), folder / "token_embedder.pkl", **kwargs)
    torch.save(model.encoder.state_dict(), folder / "encoder.pkl", **kwargs)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir")
    parser.add_argument("--char_dim", type=int, default=None)
    parser.add_argument("--word_dim", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(write_model(args.output_dir, args.char_dim, args.word_dim, args.seed))


if __name__ == "__main__":
    main()
