"""ELMo configuration.

This file travels to the Hub as remote code: it imports only transformers and the standard library.
"""

from __future__ import annotations

import copy

from transformers import PretrainedConfig

# The character CNN of every published ELMo (small, medium, original, 5.5B): 2048 filters in all.
CNN_FILTERS_2048 = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]

# Published sizes (ELMO_SPEC section 0). "tiny" is ours, for tests and demos.
PRESETS: dict[str, dict] = {
    "small": dict(
        cell_size=1024, projection_dim=128, num_highway_layers=1, char_embedding_dim=16,
        char_cnn_filters=CNN_FILTERS_2048,
    ),
    "medium": dict(
        cell_size=2048, projection_dim=256, num_highway_layers=1, char_embedding_dim=16,
        char_cnn_filters=CNN_FILTERS_2048,
    ),
    "original": dict(
        cell_size=4096, projection_dim=512, num_highway_layers=2, char_embedding_dim=16,
        char_cnn_filters=CNN_FILTERS_2048,
    ),
    "tiny": dict(
        cell_size=32, projection_dim=16, num_highway_layers=1, char_embedding_dim=4,
        char_cnn_filters=[[1, 4], [2, 8], [3, 16], [4, 32]],
    ),
}

_ACTIVATIONS = ("relu", "tanh")

# Every Elmo class, for the `auto_map` of config.json, so that a folder saved from any one class opens
# with every Auto class through remote code (`save_pretrained` alone records only the class saved).
AUTO_MAP = {
    "AutoConfig": "configuration_elmo.ElmoConfig",
    "AutoModel": "modeling_elmo.ElmoModel",
    "AutoModelForPreTraining": "modeling_elmo.ElmoForPreTraining",
}
_SOFTMAX_TYPES = ("full", "sampled", "adaptive")


class ElmoConfig(PretrainedConfig):
    r"""Configuration of an ELMo biLM (Peters et al. 2018).

    The defaults are the "original" model (`2x4096_512_2048cnn_2xhighway`).

    Args:
        char_embedding_dim (`int`): size of each character embedding (16 in the published models).
        char_cnn_filters (`list[list[int]]`): `[[width, count], ...]` convolution filters over characters.
        char_cnn_activation (`str`): activation after the max-pooled CNN, `"relu"` or `"tanh"`.
        num_highway_layers (`int`): highway layers after the CNN (0 allowed).
        max_characters_per_token (`int`): character slots per token (50, including begin/end of word).
        char_vocab_size (`int`): character ids, 262 (256 bytes, 5 specials, the +1 shift; 0 = padding).
        projection_dim (`int`): P, the size of the token embedding and of each LSTM's projected output.
        cell_size (`int`): C, the LSTM memory cell size.
        num_layers (`int`): L, biLSTM layers per direction.
        cell_clip (`float` or `None`): clip of the memory cell to `[-cell_clip, cell_clip]`; None turns it off.
        proj_clip (`float` or `None`): clip of the projected hidden state; None turns it off.
        use_skip_connections (`bool`): residual connection around every LSTM layer but the first.
        dropout (`float`): dropout on the input of every LSTM layer while training (0.1 in bilm-tf).
        initializer_range (`float`): scale used by `_init_weights` for the LSTM and projections.
        vocab_size (`int`): size of the word vocabulary predicted by the pretraining softmax (0 = none).
        softmax_type (`str`): `"full"`, `"sampled"` or `"adaptive"` softmax for pretraining.
        num_sampled (`int`): negatives shared by the batch for the sampled softmax (8192 in bilm-tf).
        adaptive_cutoffs (`list[int]`): cluster boundaries of the adaptive softmax.
    """

    model_type = "elmo"

    def __init__(
        self,
        char_embedding_dim: int = 16,
        char_cnn_filters: list[list[int]] | None = None,
        char_cnn_activation: str = "relu",
        num_highway_layers: int = 2,
        max_characters_per_token: int = 50,
        char_vocab_size: int = 262,
        projection_dim: int = 512,
        cell_size: int = 4096,
        num_layers: int = 2,
        cell_clip: float | None = 3.0,
        proj_clip: float | None = 3.0,
        use_skip_connections: bool = True,
        dropout: float = 0.1,
        initializer_range: float = 0.02,
        vocab_size: int = 0,
        softmax_type: str = "full",
        num_sampled: int = 8192,
        adaptive_cutoffs: list[int] | None = None,
        **kwargs,
    ):
        self.char_embedding_dim = char_embedding_dim
        self.char_cnn_filters = [list(f) for f in (CNN_FILTERS_2048 if char_cnn_filters is None else char_cnn_filters)]
        self.char_cnn_activation = char_cnn_activation
        self.num_highway_layers = num_highway_layers
        self.max_characters_per_token = max_characters_per_token
        self.char_vocab_size = char_vocab_size
        self.projection_dim = projection_dim
        self.cell_size = cell_size
        self.num_layers = num_layers
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.vocab_size = vocab_size
        self.softmax_type = softmax_type
        self.num_sampled = num_sampled
        self.adaptive_cutoffs = list(adaptive_cutoffs) if adaptive_cutoffs is not None else None
        kwargs["auto_map"] = {**AUTO_MAP, **(kwargs.get("auto_map") or {})}
        super().__init__(**kwargs)
        self.validate()

    # Names the rest of the transformers ecosystem looks for.
    @property
    def hidden_size(self) -> int:
        """Width of every output layer: forward and backward projections side by side (2P)."""
        return 2 * self.projection_dim

    @property
    def num_hidden_layers(self) -> int:
        return self.num_layers

    @property
    def num_char_filters(self) -> int:
        """F, the total number of CNN filters (the width of the character encoder before projection)."""
        return sum(count for _, count in self.char_cnn_filters)

    def validate(self) -> None:
        """Raise `ValueError` naming the field and the value when the configuration is not usable."""

        def positive_int(name: str, allow_zero: bool = False) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
                kind = "a non-negative integer" if allow_zero else "a positive integer"
                raise ValueError(f"ElmoConfig.{name} must be {kind}, got {value!r}")

        for name in ("char_embedding_dim", "max_characters_per_token", "char_vocab_size",
                     "projection_dim", "cell_size", "num_layers"):
            positive_int(name)
        for name in ("num_highway_layers", "vocab_size"):
            positive_int(name, allow_zero=True)
        if self.max_characters_per_token < 3:
            raise ValueError(
                f"ElmoConfig.max_characters_per_token must be at least 3 (begin, one byte, end), "
                f"got {self.max_characters_per_token}"
            )
        if not self.char_cnn_filters:
            raise ValueError(f"ElmoConfig.char_cnn_filters must list at least one [width, count], got {self.char_cnn_filters!r}")
        for item in self.char_cnn_filters:
            if (
                len(item) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in item)
                or item[0] > self.max_characters_per_token
            ):
                raise ValueError(
                    f"ElmoConfig.char_cnn_filters entries must be [width, count] with 0 < width <= "
                    f"max_characters_per_token ({self.max_characters_per_token}) and count > 0, got {item!r} "
                    f"in {self.char_cnn_filters!r}"
                )
        if self.char_cnn_activation not in _ACTIVATIONS:
            raise ValueError(
                f"ElmoConfig.char_cnn_activation must be one of {_ACTIVATIONS}, got {self.char_cnn_activation!r}"
            )
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"ElmoConfig.{name} must be a positive number or None (no clipping), got {value!r}")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ElmoConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if self.softmax_type not in _SOFTMAX_TYPES:
            raise ValueError(f"ElmoConfig.softmax_type must be one of {_SOFTMAX_TYPES}, got {self.softmax_type!r}")
        positive_int("num_sampled")
        if self.adaptive_cutoffs is not None:
            cutoffs = self.adaptive_cutoffs
            if not cutoffs or any(not isinstance(c, int) or c <= 0 for c in cutoffs) or sorted(set(cutoffs)) != cutoffs:
                raise ValueError(
                    f"ElmoConfig.adaptive_cutoffs must be increasing positive integers, got {cutoffs!r}"
                )
            if self.vocab_size and cutoffs[-1] >= self.vocab_size:
                raise ValueError(
                    f"ElmoConfig.adaptive_cutoffs must all be below vocab_size ({self.vocab_size}), got {cutoffs!r}"
                )

    @classmethod
    def from_preset(cls, name: str, **overrides) -> ElmoConfig:
        """A configuration of a published size: `"small"`, `"medium"`, `"original"`, or `"tiny"` for tests.

        Keyword arguments override single fields, e.g. `ElmoConfig.from_preset("small", dropout=0.0)`.
        """
        if name not in PRESETS:
            raise ValueError(f"Unknown ELMo preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**copy.deepcopy(PRESETS[name]), **overrides})
