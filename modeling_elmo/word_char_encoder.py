"""Layer 0 of the ELMoForManyLangs models (HIT-SCIR): a word embedding beside the character CNN.

This file travels to the Hub as remote code with `modeling_elmo.py`: it imports only torch.

`ElmoConfig(token_encoder="word_char")` selects it. Their `ConvTokenEmbedder` concatenates a word embedding with
the character CNN's output *after* its highway layers, and always projects the concatenation linearly to P; either
part may be absent (`word_dim` 0 or `char_dim` 0 in their network config). See docs/original_model.md,
"ELMoForManyLangs".
"""

from __future__ import annotations

import torch
from torch import nn


def token_id_parts(input_ids: torch.Tensor, config) -> list[tuple[str, torch.Tensor, int]]:
    """`(what, ids, vocabulary size)` for each kind of id in the token rows of `input_ids`, for range checks."""
    if config.token_encoder != "word_char":
        return [("input_ids", input_ids, config.char_vocab_size)]
    parts = []
    chars = config.max_characters_per_token if config.char_embedding_dim > 0 else 0
    if chars:
        parts.append(("the character ids of input_ids", input_ids[..., :chars], config.char_vocab_size))
    if config.word_input_embedding_dim > 0:
        parts.append(("the word ids of input_ids (last of each row)", input_ids[..., chars],
                      config.word_input_vocab_size))
    return parts


class ElmoWordCharEncoder(nn.Module):
    """Rows of ids of tokens -> token vectors of size `projection_dim`: `projection([word embedding ; char CNN])`.

    A token's row is its `max_characters_per_token` character ids (when there is a character CNN) followed by its
    word id (when there is a word embedding); `config.token_row_width` ids in all, 0 everywhere for padding.

    The character part is the model's own character encoder (`char_encoder_class`, i.e. `ElmoCharacterEncoder`) with
    its projection removed, so its fast inference paths and its token cache serve this encoder too (the cache is
    keyed by the character ids alone, which is all the CNN depends on).
    """

    def __init__(self, config, char_encoder_class: type[nn.Module]):
        super().__init__()
        self.char_width = config.max_characters_per_token if config.char_embedding_dim > 0 else 0
        width = 0
        self.char_cnn = None
        if config.char_embedding_dim > 0:
            self.char_cnn = char_encoder_class(config)
            self.char_cnn.projection = None  # the projection comes after the word embedding is concatenated
            width += config.num_char_filters
        self.word_embedding = None
        if config.word_input_embedding_dim > 0:
            self.word_embedding = nn.Embedding(
                config.word_input_vocab_size, config.word_input_embedding_dim, padding_idx=0
            )
            width += config.word_input_embedding_dim
        self.projection = nn.Linear(width, config.projection_dim)

    @property
    def char_embedding(self) -> nn.Embedding:
        """The input embedding table (`get_input_embeddings`): the characters', or the words' without a CNN."""
        return self.char_cnn.char_embedding if self.char_cnn is not None else self.word_embedding

    @char_embedding.setter
    def char_embedding(self, value: nn.Embedding) -> None:
        if self.char_cnn is not None:
            self.char_cnn.char_embedding = value
        else:
            self.word_embedding = value

    @property
    def token_cache(self):
        return self.char_cnn.token_cache if self.char_cnn is not None else None

    @token_cache.setter
    def token_cache(self, cache) -> None:
        if self.char_cnn is not None:  # without a CNN, layer 0 is a table lookup: nothing to cache
            self.char_cnn.token_cache = cache

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        """`rows` (N, token_row_width) of real tokens -> (N, P)."""
        parts = []
        if self.word_embedding is not None:  # their order: the word embedding first, then the CNN
            parts.append(self.word_embedding(rows[:, -1]))
        if self.char_cnn is not None:
            parts.append(self.char_cnn(rows[:, : self.char_width]))
        x = parts[0] if len(parts) == 1 else torch.cat([p.to(parts[-1].dtype) for p in parts], dim=-1)
        return self.projection(x)


def elmoformanylangs_layers(hidden_states, attention_mask: torch.Tensor, output_layer: int = -1) -> list[torch.Tensor]:
    """Per sentence, what their `Embedder.sents2elmo(sentences, output_layer)` returns, from one call of our model
    (`output_hidden_states=True`, sentences encoded with the `<bos>`/`<eos>` the tokenizer adds).

    Their `output_layer`: 0 the token layer, 1 .. L the biLSTM layers, -1 the average of the L + 1 layers, -2 all of
    them stacked. Each result covers the sentence's words only (their `<bos>`/`<eos>` are dropped, as they drop them):
    `(words, 2P)`, or `(L + 1, words, 2P)` for -2.
    """
    layers = torch.stack(tuple(hidden_states), dim=1)  # (B, L + 1, T, 2P)
    count = layers.shape[1]
    if isinstance(output_layer, bool) or not isinstance(output_layer, int) or not -2 <= output_layer < count:
        raise ValueError(f"output_layer must be -2, -1 or a layer 0..{count - 1}, got {output_layer!r}")
    results = []
    for row, length in enumerate(attention_mask.sum(-1).tolist()):
        words = layers[row, :, 1 : int(length) - 1]  # (L + 1, words, 2P)
        if output_layer == -1:
            words = words.mean(dim=0)
        elif output_layer >= 0:
            words = words[output_layer]
        results.append(words)
    return results
