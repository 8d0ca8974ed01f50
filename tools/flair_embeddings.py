"""flair: a drop-in for flair's `ELMoEmbeddings`, backed by this project instead of allennlp 0.9.

flair 0.15's `flair.embeddings.ELMoEmbeddings` runs allennlp's `ElmoEmbedder`, which needs allennlp 0.9 (and the
torch of its day). This class takes the same arguments and gives every token the same kind of vector, so that a
flair script runs with one import changed:

    from elmo_hf.tools.flair_embeddings import ELMoEmbeddings   # instead of: from flair.embeddings import ...

    embeddings = ELMoEmbeddings("original", embedding_mode="all")

`model` is a converted folder or a Hub id, or one of flair's names of the published models ("small", "medium",
"original", "large"/"5.5B", "pt"/"portuguese", "pubmed"): those need the model converted once (`elmo-convert`, whose
command the error prints) into `$ELMO_HF_CACHE/converted/NAME` (default `~/.cache/elmo-hf/converted/NAME`), where
they are then found. `embedding_mode` mixes the layers as flair's does: "all" concatenates the L + 1 layers (the
token layer, as allennlp, its two halves equal, then every biLSTM layer), "top" is the top layer, "average" their mean.

Importing this module registers the class with flair's embeddings, so that a tagger saved with it loads again where
this module was imported (the tagger holds the model's folder or name, not its weights: the vectors are static).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from flair.data import Sentence
from flair.embeddings import TokenEmbeddings
from flair.embeddings.base import register_embeddings

from elmo_hf.tools.core.published_models import CACHE_ENV

# flair's names of AllenNLP's models -> the `elmo-convert` arguments that make their folders.
_ALLENNLP = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
_PUBLISHED = {
    "small": "--model small",
    "medium": "--model medium",
    "original": "--model original",
    "large": "--model original-5.5b",
    "pt": f"--options_file {_ALLENNLP}/contributed/pt/elmo_pt_options.json "
          f"--weight_file {_ALLENNLP}/contributed/pt/elmo_pt_weights.hdf5",
    "pubmed": f"--options_file {_ALLENNLP}/contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json "
              f"--weight_file {_ALLENNLP}/contributed/pubmed/"
              "elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
}
_ALIASES = {"portuguese": "pt", "5.5B": "large"}
EMBEDDING_MODES = ("all", "top", "average")


def converted_folder(name: str) -> Path:
    """Where the converted folder of the published model `name` (flair's name) is looked for."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "elmo-hf")
    return root / "converted" / _ALIASES.get(name, name)


def resolve_model(model: str | os.PathLike, options_file: str | None = None, weight_file: str | None = None) -> str:
    """The folder or Hub id that `load_elmo` loads for flair's `model` argument; a one-line error where there is
    none yet (the `elmo-convert` command that makes it)."""
    if options_file or weight_file:
        raise ValueError("ELMoEmbeddings reads converted models: convert the files once with `elmo-convert "
                         f"--options_file {options_file} --weight_file {weight_file} --output_dir DIR` and pass DIR")
    if Path(model).is_dir():
        return str(model)
    name = str(model)
    if name in _PUBLISHED or name in _ALIASES:
        folder = converted_folder(name)
        if not folder.is_dir():
            arguments = _PUBLISHED[_ALIASES.get(name, name)]
            raise FileNotFoundError(f"ELMoEmbeddings({name!r}) needs the converted model: run `elmo-convert "
                                    f"{arguments} --output_dir {folder}` once (or pass a converted folder)")
        return str(folder)
    return name  # a Hub id (load_elmo says in one line when there is nothing there)


@register_embeddings("elmo_hf.ELMoEmbeddings")
class ELMoEmbeddings(TokenEmbeddings):
    """flair's `ELMoEmbeddings` (its arguments, its vectors' layout), on this project's `ElmoModel` (module docstring).

    Every token gets, from the sentence read whole, the layers of the biLM at its word, mixed by `embedding_mode`.
    """

    def __init__(self, model: str = "original", options_file: str | None = None, weight_file: str | None = None,
                 embedding_mode: str = "all", device: str | torch.device | None = None) -> None:
        super().__init__()
        if embedding_mode not in EMBEDDING_MODES:
            raise ValueError(f"embedding_mode must be one of {list(EMBEDDING_MODES)}, got {embedding_mode!r}")
        import flair

        from elmo_hf.tools.loading import load_elmo

        self.model_name = str(model)
        self.embedding_mode = embedding_mode
        self.name = f"elmo-{model}-{embedding_mode}"
        self.static_embeddings = True
        self.elmo, self.tokenizer = load_elmo(resolve_model(model, options_file, weight_file),
                                              device=device if device is not None else flair.device)
        self.elmo.requires_grad_(False)
        config = self.elmo.config
        layers = config.num_layers + 1
        self._embedding_length = 2 * config.projection_dim * (layers if embedding_mode == "all" else 1)

    @property
    def embedding_length(self) -> int:
        return self._embedding_length

    def layers_of(self, sentences: list[Sentence]) -> list[torch.Tensor]:
        """(L + 1, words, 2P) per sentence: every layer at each of its words (the sentence markers left out)."""
        words = [[token.text for token in sentence] for sentence in sentences]
        inputs = self.tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
        device = next(self.elmo.parameters()).device
        with torch.no_grad():
            out = self.elmo(**{key: value.to(device) for key, value in inputs.items()}, output_hidden_states=True)
        stacked = torch.stack(out.hidden_states)  # (L + 1, B, T, 2P)
        return [stacked[:, row, 1: len(row_words) + 1] for row, row_words in enumerate(words)]

    def _add_embeddings_internal(self, sentences: list[Sentence]) -> list[Sentence]:
        sentences = [sentence for sentence in sentences if len(sentence) > 0]
        if not sentences:
            return sentences
        for sentence, layers in zip(sentences, self.layers_of(sentences)):
            if self.embedding_mode == "all":
                vectors = layers.permute(1, 0, 2).reshape(layers.shape[1], -1)  # each word: its layers end to end
            elif self.embedding_mode == "top":
                vectors = layers[-1]
            else:
                vectors = layers.mean(0)
            for token, vector in zip(sentence, vectors):
                token.set_embedding(self.name, vector)
        return sentences

    def extra_repr(self) -> str:
        return f"model={self.name}"

    def __str__(self) -> str:
        return self.name

    def to_params(self) -> dict:
        return {"model": self.model_name, "embedding_mode": self.embedding_mode}

    @classmethod
    def from_params(cls, params: dict) -> ELMoEmbeddings:
        return cls(**params)
