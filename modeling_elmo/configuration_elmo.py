"""ELMo configuration, and the table of the Elmo classes by Auto class (`AUTO_CLASSES`).

This file travels to the Hub as remote code: it imports only transformers, the standard library and its siblings: the
kernel registry and the LSTM kernels, so that `lstm_implementation` is checked against the registered kernels even
where this file is loaded alone (remote code loads a configuration with its own imports only).
"""

from __future__ import annotations

import copy
import math

from transformers import PretrainedConfig
from transformers.utils import logging

from .kernels_elmo import ALL_LSTM_FUNCTIONS

# Imported for its registrations: the LSTM kernels a configuration may name ("reference", "loop", "fused").
from .lstm_inference_elmo import lstm_loop  # noqa: F401
from .quantization_elmo import lstm_int8  # noqa: F401  ("int8")

logger = logging.get_logger(__name__)

# The character CNN of every published ELMo (small, medium, original, 5.5B): 2048 filters in all.
CNN_FILTERS_2048 = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]

# Published sizes (docs/weight_layout.md, "options.json"). "tiny" is ours, for tests and demos.
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

# Every Elmo model class by its Auto class, as "module.Class" of the files that travel: the one list of them.
# `import modeling_elmo` registers each with its Auto class; every config.json gets them all in its `auto_map`,
# and a model's `save_pretrained` copies every travelling file (`remote_code_elmo.py`), so that a folder saved from
# any one class opens with every Auto class through remote code (transformers alone records and copies only the
# class saved). A new head is a class in a file of this folder and a row here.
AUTO_CLASSES = {
    "AutoModel": "modeling_elmo.ElmoModel",
    "AutoModelForPreTraining": "modeling_elmo.ElmoForPreTraining",
    "AutoModelForSequenceClassification": "modeling_elmo_heads.ElmoForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_elmo_heads.ElmoForTokenClassification",
}


def _auto_map(saved: dict) -> dict:
    """The `auto_map` of a config: the table's entries, and what a saved config adds. A saved entry naming a file of
    this folder (`modeling_elmo.ElmoForSequenceClassification`, as folders saved before the heads had their own
    file say) gives way to the table, which names the files written beside it now; one that names another
    repository's code (`owner/repo--module.Class`, as transformers writes for a config loaded from the Hub) is kept."""
    table = {"AutoConfig": "configuration_elmo.ElmoConfig", **AUTO_CLASSES}
    return {**saved, **{key: value for key, value in table.items() if "--" not in str(saved.get(key, ""))}}


_SOFTMAX_TYPES = ("full", "sampled", "adaptive")
_PROBLEM_TYPES = (None, "regression", "single_label_classification", "multi_label_classification")
_SCALAR_MIXES = ("learned", "top", "average", "fixed")
_CLASSIFIER_POOLINGS = ("mean", "max", "lstm", "attention")
_TOKEN_CLASSIFIER_ENCODERS = ("none", "lstm")
_TOKEN_ENCODERS = ("char_cnn", "word_char")


def _check_num_labels(value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"ElmoConfig.num_labels must be a positive integer, got {value!r}")


class ElmoConfig(PretrainedConfig):
    r"""Configuration of an ELMo biLM (Peters et al. 2018).

    The defaults are the "original" model (`2x4096_512_2048cnn_2xhighway`).

    Args:
        char_embedding_dim (`int`): size of each character embedding (16 in the published models).
        char_cnn_filters (`list[list[int]]`): `[[width, count], ...]` convolution filters over characters.
        char_cnn_activation (`str`): activation after the max-pooled CNN, `"relu"` or `"tanh"`.
        num_highway_layers (`int`): highway layers after the CNN (0 allowed).
        max_characters_per_token (`int`): character slots per token (50, including begin/end of word).
        char_vocab_size (`int`): character ids, 262 (256 bytes, 5 specials, the +1 shift; 0 = padding); with a
            character dictionary (ELMoForManyLangs), its size + 1.
        token_encoder (`str`): layer 0. `"char_cnn"` (default): the character CNN of the AllenNLP models, projected
            to P when F != P. `"word_char"`: the token embedder of ELMoForManyLangs (HIT-SCIR): a word embedding
            (`word_input_embedding_dim` > 0) concatenated with the character CNN after its highway layers
            (`char_embedding_dim` > 0; either part may be absent), always followed by a linear projection to P.
            Each token's row in `input_ids` is then its character ids (when there is a CNN) followed by one word id
            (when there is a word embedding): `token_row_width` ids. Ids come from dictionaries, shifted by +1 so
            that 0 is padding (docs/original_model.md, "ELMoForManyLangs").
        word_input_vocab_size (`int`): rows of that word embedding (dictionary size + 1; 0 = none).
        word_input_embedding_dim (`int`): size of that word embedding (0 = none).
        sentence_boundary_rows (`list[list[int]]`, *optional*): the rows of ids of the sentence markers the tokenizer
            adds, when they are not `<S>`/`</S>` (ELMoForManyLangs: `<bos>`/`<eos>`), so that the task heads can
            leave them out (`keep_sentence_boundaries=False`). None: `<S>`/`</S>`.
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
        lstm_implementation (`str`): how the biLSTM runs; every choice gives the reference results to rounding
            (tests/test_fast_paths.py). `"loop"`: when no gradient is needed, the inference loop (packed rows, state
            updated in place, on the CPU oneDNN multiplies with weights packed once, and the same for the character
            CNN); the autograd loop when one is. `"fused"`: torch's LSTM kernel (cuDNN on GPU), gradients included,
            only for models without clipping (`cell_clip=None`, `proj_clip=None`). `"auto"` (default): `"fused"`
            when nothing is clipped and the model runs on CUDA or is being trained, else `"loop"`. `"reference"`: the
            plain loops (the definition the others are tested against). `"int8"`: inference on the CPU with int8
            multiplies (`quantize_int8()`), not exact: tested against float32 with its own tolerance. Not a
            property of the weights: switch it freely, also on a loaded model (`model.config.lstm_implementation`).

    Downstream use (the task heads `ElmoForSequenceClassification`, `ElmoForTokenClassification`; Peters et al.
    2018 section 3.3; docs/original_model.md, "Scalar mix"). `num_labels`, `id2label`, `label2id` and
    `problem_type` are the usual transformers fields.

        freeze_bilm (`bool`): keep the biLM fixed (default, as in the paper): its parameters get
            `requires_grad=False` and it runs in eval mode under `no_grad`. False fine-tunes it.
        num_output_representations (`int`): independent scalar mixes computed from one biLM run (allennlp
            `Elmo(num_output_representations=...)`); the heads use the first, `get_elmo_representations` gives all.
        scalar_mix (`str`): `"learned"` (softmax-normalised weights and gamma, trained), `"top"` (top layer
            only), `"average"` (equal weights), or `"fixed"` (pre-softmax weights from `scalar_mix_parameters`,
            e.g. `[-9e10, 1, -9e10]` selects layer 1). Fixed mixes keep gamma at 1, as allennlp does.
        scalar_mix_parameters (`list[float]`, *optional*): the L + 1 pre-softmax weights of `scalar_mix="fixed"`.
        scalar_mix_layer_norm (`bool`): normalise each layer before mixing, with one mean and one variance per
            sentence over all its unmasked elements (not per token). allennlp's `ScalarMix` and bilm-tf take them
            over the whole batch instead, so that there a sentence's vectors depend on the other sentences of its
            batch; here they never do.
        scalar_mix_l2_coef (`float`): lambda of the L2 penalty `lambda * sum(w ** 2)` on the learned mix weights,
            added to the loss while training (0.001 in the paper; 0 turns it off).
        representation_dropout (`float`): dropout on the mixed vectors fed to the task model (0.5 in allennlp).
        keep_sentence_boundaries (`bool`): also pool over `<S>`/`</S>` and include them in the layer-norm
            statistics (allennlp's statistics do, bilm-tf's do not). Default False: words only.
        word_embedding_dim (`int`): if > 0, a trainable word embedding of this size is concatenated to the ELMo
            vector ("ELMo plus word embedding"). Words are hashed from their character ids into
            `word_embedding_buckets` rows, so it needs no vocabulary and no extra input.
        word_embedding_buckets (`int`): rows of that hashed embedding (row 0 is padding).
        classifier_pooling (`str`): how `ElmoForSequenceClassification` pools tokens: `"mean"`, `"max"`,
            `"lstm"` (a trainable biLSTM over the mixed vectors, final states of both directions) or
            `"attention"` (trainable attention pooling: a softmax over the tokens of learned scores).
        token_classifier_encoder (`str`): `"none"` (linear tagger on the mixed vectors) or `"lstm"` (a trainable
            biLSTM between the mix and the tagger, as in Peters et al.'s NER model).
        head_hidden_size (`int`, *optional*): size of the head's biLSTM (per direction) or attention layer;
            defaults to `projection_dim`.
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
        token_encoder: str = "char_cnn",
        word_input_vocab_size: int = 0,
        word_input_embedding_dim: int = 0,
        sentence_boundary_rows: list[list[int]] | None = None,
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
        lstm_implementation: str = "auto",
        freeze_bilm: bool = True,
        num_output_representations: int = 1,
        scalar_mix: str = "learned",
        scalar_mix_parameters: list[float] | None = None,
        scalar_mix_layer_norm: bool = False,
        scalar_mix_l2_coef: float = 0.001,
        representation_dropout: float = 0.5,
        keep_sentence_boundaries: bool = False,
        word_embedding_dim: int = 0,
        word_embedding_buckets: int = 65536,
        classifier_pooling: str = "mean",
        token_classifier_encoder: str = "none",
        head_hidden_size: int | None = None,
        **kwargs,
    ):
        self.char_embedding_dim = char_embedding_dim
        self.char_cnn_filters = [list(f) for f in (CNN_FILTERS_2048 if char_cnn_filters is None else char_cnn_filters)]
        self.char_cnn_activation = char_cnn_activation
        self.num_highway_layers = num_highway_layers
        self.max_characters_per_token = max_characters_per_token
        self.char_vocab_size = char_vocab_size
        self.token_encoder = token_encoder
        self.word_input_vocab_size = word_input_vocab_size
        self.word_input_embedding_dim = word_input_embedding_dim
        self.sentence_boundary_rows = (
            [list(row) for row in sentence_boundary_rows] if sentence_boundary_rows is not None else None
        )
        self.projection_dim = projection_dim
        self.cell_size = cell_size
        self.num_layers = num_layers
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.softmax_type = softmax_type
        self.num_sampled = num_sampled
        self.adaptive_cutoffs = list(adaptive_cutoffs) if adaptive_cutoffs is not None else None
        self.lstm_implementation = lstm_implementation
        self.freeze_bilm = freeze_bilm
        self.num_output_representations = num_output_representations
        self.scalar_mix = scalar_mix
        self.scalar_mix_parameters = list(scalar_mix_parameters) if scalar_mix_parameters is not None else None
        self.scalar_mix_layer_norm = scalar_mix_layer_norm
        self.scalar_mix_l2_coef = scalar_mix_l2_coef
        self.representation_dropout = representation_dropout
        self.keep_sentence_boundaries = keep_sentence_boundaries
        self.word_embedding_dim = word_embedding_dim
        self.word_embedding_buckets = word_embedding_buckets
        self.classifier_pooling = classifier_pooling
        self.token_classifier_encoder = token_classifier_encoder
        self.head_hidden_size = head_hidden_size
        kwargs["auto_map"] = _auto_map(kwargs.get("auto_map") or {})
        # Checked before transformers turns it into `id2label` (`range(num_labels)`): a count below 1 would become
        # an empty map, a string a TypeError.
        _check_num_labels(kwargs.get("num_labels"))
        super().__init__(**kwargs)
        # Set after transformers' own check of the special-token ids (it compares every `*_token_id` with
        # `vocab_size`, and warns): our token ids (the tokenizer's <S>, </S>, padding, which Trainer copies into the
        # config) are character ids, while `vocab_size` counts the softmax's words (0 in a task model).
        # `validate` checks them against `char_vocab_size` instead.
        self.vocab_size = vocab_size
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
    def token_row_width(self) -> int:
        """Ids per token in `input_ids`: the character slots (when there is a character CNN) and one word id (when
        there is a word embedding, `token_encoder="word_char"`)."""
        chars = self.max_characters_per_token if self.char_embedding_dim > 0 else 0
        return chars + (1 if self.word_input_embedding_dim > 0 else 0)

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

        for name in ("max_characters_per_token", "char_vocab_size", "projection_dim", "cell_size", "num_layers"):
            positive_int(name)
        self._validate_token_encoder(positive_int)
        for name in ("num_highway_layers", "vocab_size"):
            positive_int(name, allow_zero=True)
        for name, value in vars(self).items():
            ids = value if isinstance(value, list) else [value]
            if name.endswith("_token_id") and not all(
                i is None or (isinstance(i, int) and 0 <= i < self.char_vocab_size) for i in ids
            ):
                raise ValueError(
                    f"ElmoConfig.{name} must be None or a character id below char_vocab_size "
                    f"({self.char_vocab_size}), got {value!r}"
                )
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
        implementations = ("auto", *ALL_LSTM_FUNCTIONS.choices)  # "auto": `lstm_implementation` picks per call
        if self.lstm_implementation not in implementations:
            raise ValueError(
                f"ElmoConfig.lstm_implementation must be one of {implementations}, got {self.lstm_implementation!r}"
            )
        if self.lstm_implementation == "fused" and (
            self.cell_clip is not None or (self.proj_clip is not None and self.cell_size != self.projection_dim)
        ):
            raise ValueError(
                "ElmoConfig.lstm_implementation='fused' needs a model without clipping (torch's LSTM kernel has "
                f"none): cell_clip={self.cell_clip!r}, proj_clip={self.proj_clip!r}; use 'auto' or 'loop'"
            )
        self._validate_task_fields(positive_int)

    def _validate_token_encoder(self, positive_int) -> None:
        """`token_encoder` and the sizes of its parts; the AllenNLP layout has a CNN and no word embedding."""
        if self.token_encoder not in _TOKEN_ENCODERS:
            raise ValueError(f"ElmoConfig.token_encoder must be one of {_TOKEN_ENCODERS}, got {self.token_encoder!r}")
        word_char = self.token_encoder == "word_char"
        positive_int("char_embedding_dim", allow_zero=word_char)
        positive_int("word_input_vocab_size", allow_zero=True)
        positive_int("word_input_embedding_dim", allow_zero=True)
        if not word_char and (self.word_input_vocab_size or self.word_input_embedding_dim):
            raise ValueError(
                "ElmoConfig.word_input_vocab_size and word_input_embedding_dim need token_encoder='word_char', got "
                f"{self.word_input_vocab_size} and {self.word_input_embedding_dim} with {self.token_encoder!r}"
            )
        if word_char and self.char_embedding_dim == 0 and self.word_input_embedding_dim == 0:
            raise ValueError(
                "ElmoConfig.token_encoder='word_char' needs a character CNN (char_embedding_dim > 0), a word "
                "embedding (word_input_embedding_dim > 0) or both; got neither"
            )
        rows = self.sentence_boundary_rows
        if rows is not None and (
            len(rows) != 2
            or any(len(row) != self.token_row_width for row in rows)
            or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for row in rows for i in row)
        ):
            raise ValueError(
                f"ElmoConfig.sentence_boundary_rows must be two rows of {self.token_row_width} non-negative ids "
                f"(begin, end of sentence), got {rows!r}"
            )
        if (self.word_input_embedding_dim > 0) != (self.word_input_vocab_size > 1):
            raise ValueError(
                "ElmoConfig.word_input_vocab_size must be at least 2 (row 0 is padding) exactly when "
                f"word_input_embedding_dim > 0; got {self.word_input_vocab_size} and {self.word_input_embedding_dim}"
            )

    def _validate_task_fields(self, positive_int) -> None:
        """The fields of the task heads (scalar mix, pooling, word embedding)."""
        for name in ("freeze_bilm", "scalar_mix_layer_norm", "keep_sentence_boundaries"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"ElmoConfig.{name} must be True or False, got {getattr(self, name)!r}")
        positive_int("num_output_representations")
        positive_int("word_embedding_dim", allow_zero=True)
        positive_int("word_embedding_buckets")
        if self.word_embedding_buckets < 2:
            raise ValueError(
                f"ElmoConfig.word_embedding_buckets must be at least 2 (row 0 is padding), got {self.word_embedding_buckets}"
            )
        if self.head_hidden_size is not None:
            positive_int("head_hidden_size")
        if self.scalar_mix not in _SCALAR_MIXES:
            raise ValueError(f"ElmoConfig.scalar_mix must be one of {_SCALAR_MIXES}, got {self.scalar_mix!r}")
        params = self.scalar_mix_parameters
        if self.scalar_mix == "fixed":
            if (
                params is None
                or len(params) != self.num_layers + 1
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in params)
            ):
                raise ValueError(
                    f"ElmoConfig.scalar_mix='fixed' needs scalar_mix_parameters: num_layers + 1 = {self.num_layers + 1} "
                    f"numbers (pre-softmax weights of layers 0..{self.num_layers}), got {params!r}"
                )
        elif params is not None:
            raise ValueError(
                f"ElmoConfig.scalar_mix_parameters is only used with scalar_mix='fixed', got it with "
                f"scalar_mix={self.scalar_mix!r}: {params!r}"
            )
        value = self.scalar_mix_l2_coef
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise ValueError(f"ElmoConfig.scalar_mix_l2_coef must be a non-negative number, got {value!r}")
        _check_num_labels(self.num_labels)  # also an `id2label` set or emptied after construction
        if self.problem_type not in _PROBLEM_TYPES:
            raise ValueError(f"ElmoConfig.problem_type must be one of {_PROBLEM_TYPES}, got {self.problem_type!r}")
        value = self.representation_dropout
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"ElmoConfig.representation_dropout must be in [0, 1), got {value!r}")
        if self.classifier_pooling not in _CLASSIFIER_POOLINGS:
            raise ValueError(
                f"ElmoConfig.classifier_pooling must be one of {_CLASSIFIER_POOLINGS}, got {self.classifier_pooling!r}"
            )
        if self.token_classifier_encoder not in _TOKEN_CLASSIFIER_ENCODERS:
            raise ValueError(
                f"ElmoConfig.token_classifier_encoder must be one of {_TOKEN_CLASSIFIER_ENCODERS}, "
                f"got {self.token_classifier_encoder!r}"
            )

    @classmethod
    def from_preset(cls, name: str, **overrides) -> ElmoConfig:
        """A configuration of a published size: `"small"`, `"medium"`, `"original"`, or `"tiny"` for tests.

        Keyword arguments override single fields, e.g. `ElmoConfig.from_preset("small", dropout=0.0)`.
        """
        if name not in PRESETS:
            raise ValueError(f"Unknown ELMo preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**copy.deepcopy(PRESETS[name]), **overrides})
