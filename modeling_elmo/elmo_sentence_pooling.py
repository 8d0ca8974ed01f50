"""`ElmoSentencePooling`: the sentence-transformers module that turns ELMo's layers into the pooled sentence vector
(`downstream_elmo.mean_pool`: mean over words, `<S>`/`</S>` and padding left out, of a fixed mix of the layers).

`elmo_hf.tools.embedding.sentence_vectors.save_for_sentence_transformers(folder)` copies this file into a saved model
folder (beside `downstream_elmo.py`, which the folder holds as the model's remote code) and names this class in
`modules.json`; `SentenceTransformer(folder, trust_remote_code=True)` then imports it from the folder. It sits flat
in `modeling_elmo/` for that reason: its one import of this package is a sibling's. Needs sentence-transformers
(the optional extra `sentence-transformers`); the model files never import it.
"""

from __future__ import annotations

from sentence_transformers.base.modules.module import Module

from .downstream_elmo import mean_pool

# isort: split
# transformers 4.x copies the remote code of a folder loaded from disk file by file: the module of a class it loads by
# name with the files that module imports itself, not the files those import in turn. So this module names every
# sibling it needs at any depth (tests/test_layout.py checks each module loaded by name).
from .character_ids import PADDING_ID  # noqa: F401


class ElmoSentencePooling(Module):
    """Features in: `input_ids` (B, T, 50), `attention_mask`, `token_embeddings` (the top layer) and, unless
    `layers == "top"`, `all_layer_embeddings` (the L + 1 layers). Out: `sentence_embedding` (B, 2P)."""

    config_keys: list[str] = ["layers", "embedding_dimension", "boundary_rows"]

    def __init__(self, embedding_dimension: int, layers: str | int | list[float] = "average",
                 boundary_rows: list[list[int]] | None = None):
        super().__init__()
        self.embedding_dimension = embedding_dimension
        self.layers = layers
        self.boundary_rows = boundary_rows  # the model's sentence markers when not <S>/</S> (ELMoForManyLangs)

    def forward(self, features: dict, **kwargs) -> dict:
        if self.layers == "top":
            hidden = [features["token_embeddings"]]
            layers = -1
        else:
            hidden = features.get("all_layer_embeddings")
            if hidden is None:
                raise ValueError(
                    "ElmoSentencePooling needs every layer: load the model with config_kwargs="
                    "{'output_hidden_states': True} (sentence_bert_config.json written by "
                    "save_for_sentence_transformers does)"
                )
            layers = self.layers
        pooled = mean_pool(hidden, features["input_ids"], features.get("attention_mask"), layers, self.boundary_rows)
        features["sentence_embedding"] = pooled.to(features["token_embeddings"].dtype)
        return features

    def get_embedding_dimension(self) -> int:
        return self.embedding_dimension

    def get_sentence_embedding_dimension(self) -> int:
        return self.embedding_dimension

    def save(self, output_path: str, *args, **kwargs) -> None:
        self.save_config(output_path)

