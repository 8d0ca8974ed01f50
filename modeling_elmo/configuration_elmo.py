"""ELMo configuration, and the table of the Elmo classes (`ELMO_CLASSES`: Auto class, file, task).

The configuration is a declaration, in the manner of transformers' own configs: every field with its type, its
default and its checks beside it (`Annotated[type, check, ...]`, the way huggingface_hub's typed dicts declare a
validator): checks of the value alone, and rules that tie the field to others (`_Rule`). `validate()` runs them all
(at construction, and in `save_pretrained`) and raises a one-line `ValueError` naming the field and the value.

This file travels to the Hub as remote code. Like transformers' configs it imports nothing of the model: only
transformers, the standard library, the table of the choice fields' values (`config_choices_elmo.py`, which the
commands' options read too) and the kernel registry (`kernels_elmo.py`, which imports nothing and declares the
names of the built-in LSTM kernels), so that `lstm_implementation` is checked against every kernel a configuration
may name (the built-in ones and any registered since) without loading one.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, get_args, get_origin

from transformers import PretrainedConfig
from transformers.utils import logging

from .compat_elmo import config_fields, finish_config
from .config_choices_elmo import CHOICES, CRF_CONSTRAINTS, PAIR_COMBINATIONS  # noqa: F401  (exported here too)
from .kernels_elmo import ALL_LSTM_FUNCTIONS

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


@dataclass(frozen=True)
class ElmoClass:
    """One Elmo model class: its Auto class, where it is ("module.Class" of the files that travel), and for a task
    head, the task as transformers names it (the fine-tuning command's task, `train/tasks/<task>.py`, and
    `load_elmo(task=...)`) and what the head is for, in a few words (the model card's list of heads).

    `auto_class` None: a head of a task that transformers has no Auto class for (semantic role labelling). It is
    loaded by `elmo_hf.tools.loading.load_elmo(task=...)`, or as remote code through the saved config's `auto_map`,
    where its key is the class's own name (`auto_map_key`): `get_class_from_dynamic_module(config.auto_map[
    "ElmoForSemanticRoleLabeling"], folder)`, which `load_elmo(..., trust_remote_code=True)` does."""

    auto_class: str | None
    path: str
    task: str | None = None
    description: str | None = None

    @property
    def auto_map_key(self) -> str:
        """Its key in a config's `auto_map`: the Auto class, or the class's name where it has none."""
        return self.auto_class or self.path.rsplit(".", 1)[1]


# Every Elmo model class, the one list of them. `import elmo_hf.modeling_elmo` registers each with its Auto class and
# exports it; every config.json gets them all in its `auto_map`, and a model's `save_pretrained` copies every
# travelling file (`remote_code_elmo.py`), so that a folder saved from any one class opens with every Auto class
# through remote code (transformers alone records and copies only the class saved). A new head is a class in a file of
# this folder and a row here (docs/architecture.md, "A new head").
ELMO_CLASSES = (
    ElmoClass("AutoModel", "modeling_elmo.ElmoModel"),
    ElmoClass("AutoModelForPreTraining", "modeling_elmo.ElmoForPreTraining"),
    ElmoClass("AutoModelForSequenceClassification", "modeling_elmo_heads.ElmoForSequenceClassification",
              "sequence-classification", "text classification"),
    ElmoClass("AutoModelForTokenClassification", "modeling_elmo_heads.ElmoForTokenClassification",
              "token-classification", "token classification (e.g. NER, POS)"),
    ElmoClass("AutoModelForQuestionAnswering", "modeling_elmo_qa.ElmoForQuestionAnswering",
              "question-answering", "extractive question answering (SQuAD)"),
    ElmoClass("AutoModelForMultipleChoice", "modeling_elmo_multiple_choice.ElmoForMultipleChoice",
              "multiple-choice", "multiple choice (SWAG-style: a context and its possible endings)"),
    # no transformers Auto class for semantic role labelling: loaded by `load_elmo(task=...)` or by its `auto_map` key
    ElmoClass(None, "modeling_elmo_srl.ElmoForSemanticRoleLabeling", "semantic-role-labeling",
              "semantic role labelling (BIO argument tags of a marked predicate)"),
    # nor for coreference resolution
    ElmoClass(None, "modeling_elmo_coref.ElmoForCoreference", "coreference",
              "coreference resolution (clusters of mentions, Lee et al. 2017's span ranking)"),
)


def auto_classes(rows: tuple[ElmoClass, ...]) -> dict[str, str]:
    """Auto class -> "module.Class" of the rows that have one. Two rows of one Auto class: `ValueError` (the second
    registration would replace the first, and every config's `auto_map` would name one of them only)."""
    table: dict[str, str] = {}
    for row in rows:
        if row.auto_class is None:
            continue
        if row.auto_class in table:
            raise ValueError(f"ELMO_CLASSES: {table[row.auto_class]} and {row.path} both claim {row.auto_class}; a "
                             "head transformers has no Auto class for takes auto_class None")
        table[row.auto_class] = row.path
    return table


AUTO_CLASSES = auto_classes(ELMO_CLASSES)  # "AutoModel": "modeling_elmo.ElmoModel", ...
AUTO_MAP = {row.auto_map_key: row.path for row in ELMO_CLASSES}  # every class, as config.json's `auto_map` names it
TASK_CLASSES = {row.task: row for row in ELMO_CLASSES if row.task}  # the task heads, by task


# Every pipeline of this folder by its task, as transformers' `custom_pipelines` entries: written into every
# config.json, so that `pipeline(task, model=folder, trust_remote_code=True)` runs the class that travels with the
# model, the project installed or not. A task here is one whose stock pipeline cannot read ELMo's character ids (or
# that transformers no longer ships). A new pipeline is a class in a file of this folder and a row here.
CUSTOM_PIPELINES: dict[str, dict] = {
    "text-generation": {"impl": "pipeline_text_generation_elmo.ElmoTextGenerationPipeline",
                        "pt": ["AutoModelForPreTraining"], "tf": [], "type": "text"},
    "token-classification": {"impl": "pipeline_token_classification_elmo.ElmoTokenClassificationPipeline",
                             "pt": ["AutoModelForTokenClassification"], "tf": [], "type": "text"},
    # transformers' alias of token-classification: custom tasks are looked up before aliases are resolved
    "ner": {"impl": "pipeline_token_classification_elmo.ElmoTokenClassificationPipeline",
            "pt": ["AutoModelForTokenClassification"], "tf": [], "type": "text"},
    "question-answering": {"impl": "pipeline_question_answering_elmo.ElmoQuestionAnsweringPipeline",
                           "pt": ["AutoModelForQuestionAnswering"], "tf": [], "type": "text"},
}


def _custom_pipelines(saved: dict) -> dict:
    """The `custom_pipelines` of a config: what a saved config holds, with the table's entries written now. Copies:
    transformers' `pipeline()` turns an entry's class names into classes in place, which would reach the table."""
    return copy.deepcopy({**saved, **CUSTOM_PIPELINES})


def _auto_map(saved: dict) -> dict:
    """The `auto_map` of a config: the table's entries, and what a saved config adds. A saved entry naming a file of
    this folder (`modeling_elmo.ElmoForSequenceClassification`, as folders saved before the heads had their own
    file say) gives way to the table, which names the files written beside it now; one that names another
    repository's code (`owner/repo--module.Class`, as transformers writes for a config loaded from the Hub) is kept."""
    table = {"AutoConfig": "configuration_elmo.ElmoConfig", **AUTO_MAP}
    return {**saved, **{key: value for key, value in table.items() if "--" not in str(saved.get(key, ""))}}


# --------------------------------------------------------------------------------------------------
# The checks a field declares (`Annotated[type, check, ...]`). A check of the value alone returns None for a good
# value, else what the value must be; `validate` raises "ElmoConfig.<field> <that>, got <value>". A `_Rule` checks
# the field against others, once every field passed the checks of its value, and raises its own one-line message.
# --------------------------------------------------------------------------------------------------
def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(minimum: int = 1):
    """An int (not a bool) of at least `minimum`: 1 ("a positive integer") or 0 ("a non-negative integer")."""
    wanted = "must be a positive integer" if minimum == 1 else "must be a non-negative integer"
    return lambda value: None if _is_int(value) and value >= minimum else wanted


def _at_least(minimum: int, reason: str):
    return lambda value: None if value >= minimum else f"must be at least {minimum} ({reason})"


def _one_of(choices: tuple | Callable[[], tuple]):
    """One of `choices`, or of the names a function gives at the time of the check (a registry's)."""
    def check(value):
        names = choices() if callable(choices) else choices
        return None if value in names else f"must be one of {names}"
    return check


def _optional(check):
    return lambda value: None if value is None else check(value)


def _flag(value) -> str | None:
    return None if isinstance(value, bool) else "must be True or False"


def _probability(value) -> str | None:
    return None if _is_number(value) and 0.0 <= value < 1.0 else "must be in [0, 1)"


def _positive_number(value) -> str | None:
    return None if _is_number(value) and value > 0 else "must be a positive number"


def _clip(value) -> str | None:
    good = value is None or (_is_number(value) and value > 0)
    return None if good else "must be a positive number or None (no clipping)"


def _non_negative_number(value) -> str | None:
    return None if _is_number(value) and 0 <= value < math.inf else "must be a non-negative number"


def _filters(value) -> str | None:
    return None if isinstance(value, list) and value else "must list at least one [width, count]"


def _cutoffs(value) -> str | None:
    good = isinstance(value, list) and value and all(_is_int(c) and c > 0 for c in value)
    return None if good and sorted(set(value)) == value else "must be increasing positive integers"


def _lstm_choices() -> tuple[str, ...]:
    return ("auto", *ALL_LSTM_FUNCTIONS.choices)  # "auto": `lstm_inference_elmo.lstm_implementation` picks per call


class _Rule:
    """A check between fields: `function(config)` raises a one-line `ValueError`."""

    def __init__(self, function: Callable[[ElmoConfig], None]):
        self.function = function


@_Rule
def _positive_unless_word_char(config: ElmoConfig) -> None:
    if config.char_embedding_dim == 0 and config.token_encoder != "word_char":
        raise ValueError("ElmoConfig.char_embedding_dim must be a positive integer, got 0")


@_Rule
def _word_char_parts(config: ElmoConfig) -> None:
    """The AllenNLP layout has a CNN and no word embedding; ELMoForManyLangs' has either or both."""
    word_char = config.token_encoder == "word_char"
    if not word_char and (config.word_input_vocab_size or config.word_input_embedding_dim):
        raise ValueError(
            "ElmoConfig.word_input_vocab_size and word_input_embedding_dim need token_encoder='word_char', got "
            f"{config.word_input_vocab_size} and {config.word_input_embedding_dim} with {config.token_encoder!r}"
        )
    if word_char and config.char_embedding_dim == 0 and config.word_input_embedding_dim == 0:
        raise ValueError(
            "ElmoConfig.token_encoder='word_char' needs a character CNN (char_embedding_dim > 0), a word "
            "embedding (word_input_embedding_dim > 0) or both; got neither"
        )


@_Rule
def _word_rows_with_a_word_embedding(config: ElmoConfig) -> None:
    if (config.word_input_embedding_dim > 0) != (config.word_input_vocab_size > 1):
        raise ValueError(
            "ElmoConfig.word_input_vocab_size must be at least 2 (row 0 is padding) exactly when "
            f"word_input_embedding_dim > 0; got {config.word_input_vocab_size} and {config.word_input_embedding_dim}"
        )


@_Rule
def _two_rows_of_a_token(config: ElmoConfig) -> None:
    rows, width = config.sentence_boundary_rows, config.token_row_width
    if rows is not None and (
        not isinstance(rows, list)
        or len(rows) != 2
        or any(not isinstance(row, list) or len(row) != width for row in rows)
        or any(not _is_int(i) or i < 0 for row in rows for i in row)
    ):
        raise ValueError(
            f"ElmoConfig.sentence_boundary_rows must be two rows of {width} non-negative ids (begin, end of "
            f"sentence), got {rows!r}"
        )


@_Rule
def _filters_within_a_token(config: ElmoConfig) -> None:
    limit = config.max_characters_per_token
    for item in config.char_cnn_filters:
        good = isinstance(item, list) and len(item) == 2 and all(_is_int(v) and v > 0 for v in item)
        if not good or item[0] > limit:
            raise ValueError(
                f"ElmoConfig.char_cnn_filters entries must be [width, count] with 0 < width <= "
                f"max_characters_per_token ({limit}) and count > 0, got {item!r} in {config.char_cnn_filters!r}"
            )


@_Rule
def _cutoffs_below_vocab_size(config: ElmoConfig) -> None:
    cutoffs = config.adaptive_cutoffs
    if cutoffs is not None and config.vocab_size and cutoffs[-1] >= config.vocab_size:
        raise ValueError(
            f"ElmoConfig.adaptive_cutoffs must all be below vocab_size ({config.vocab_size}), got {cutoffs!r}"
        )


@_Rule
def _fused_without_clipping(config: ElmoConfig) -> None:
    if config.lstm_implementation == "fused" and (
        config.cell_clip is not None or (config.proj_clip is not None and config.cell_size != config.projection_dim)
    ):
        raise ValueError(
            "ElmoConfig.lstm_implementation='fused' needs a model without clipping (torch's LSTM kernel has "
            f"none): cell_clip={config.cell_clip!r}, proj_clip={config.proj_clip!r}; use 'auto' or 'loop'"
        )


@_Rule
def _weights_of_a_fixed_mix(config: ElmoConfig) -> None:
    params, layers = config.scalar_mix_parameters, config.num_layers
    if config.scalar_mix != "fixed" and params is not None:
        raise ValueError(
            f"ElmoConfig.scalar_mix_parameters is only used with scalar_mix='fixed', got it with "
            f"scalar_mix={config.scalar_mix!r}: {params!r}"
        )
    if config.scalar_mix == "fixed" and (
        not isinstance(params, list) or len(params) != layers + 1 or not all(_is_number(v) for v in params)
    ):
        raise ValueError(
            f"ElmoConfig.scalar_mix='fixed' needs scalar_mix_parameters: num_layers + 1 = {layers + 1} numbers "
            f"(pre-softmax weights of layers 0..{layers}), got {params!r}"
        )


# transformers' own fields that the task heads read, checked like ours (`num_labels` also before transformers turns
# it into `id2label`: a count below 1 would become an empty map, a string a TypeError).
_INHERITED_FIELD_CHECKS = {
    "num_labels": _optional(_integer(1)),
    "problem_type": _one_of((None, "regression", "single_label_classification", "multi_label_classification")),
}


def _check_value(name: str, value, checks) -> None:
    for check in checks:
        wanted = None if isinstance(check, _Rule) else check(value)
        if wanted is not None:
            raise ValueError(f"ElmoConfig.{name} {wanted}, got {value!r}")


def _as_lists(value):
    """Lists and tuples, at any depth, as fresh lists (what JSON gives back): a configuration owns its values."""
    return [_as_lists(item) for item in value] if isinstance(value, (list, tuple)) else value


@config_fields
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
        use_crf (`bool`): `ElmoForTokenClassification` ends in a linear-chain CRF (`crf_elmo.ElmoCRF`; the output
            layer of Peters et al.'s NER model): the loss is the negative log-likelihood of the gold tag sequence,
            and the logits at each word are the scores of the best tag sequence with each tag there (max-marginals),
            so that their argmax is the Viterbi sequence. Default False: a softmax per word.
        crf_constraints (`str`): transitions the CRF never takes: `"bio"` (`I-X` only after `B-X`/`I-X`, no
            sentence starting with `I-`), `"bioes"` (also: `B-X`/`I-X` only before `I-X`/`E-X`, no sentence ending
            in `B-`/`I-`), `"none"`, or `"auto"` (default): BIOES when some labels are `E-`/`S-`, BIO when all are
            `O`/`B-`/`I-` names, none otherwise.
        qa_modeling_layer (`str`): what `ElmoForQuestionAnswering` runs over the passage after the attention between
            question and passage: `"lstm"` (BiDAF's modelling layer, a trainable biLSTM) or `"none"`.
        qa_null_answer (`bool`, *optional*): whether `ElmoForQuestionAnswering` was trained with unanswerable
            questions (SQuAD 2.0): its pipeline and predictions then let "no answer" compete with the best span.
        head_hidden_size (`int`, *optional*): size of the head's biLSTM (per direction) or attention layer;
            defaults to `projection_dim`.
        pair_combination (`str`, *optional*): makes `ElmoForSequenceClassification` a classifier of sentence pairs
            (NLI, paraphrase, STS; the tokenizer's `text_pair`, marked by `token_type_ids`). The biLM reads each
            sentence of a pair on its own, each is pooled as a single sentence is (`classifier_pooling`), and the
            two vectors u, v are combined before the classifier: `"concat_diff_product"` gives `[u; v; |u - v|;
            u * v]` (InferSent, ESIM's enhancement), `"concat"` gives `[u; v]`. None (default): single sentences.
        coref_max_span_width (`int`): `ElmoForCoreference` considers every span of up to this many words (Lee et
            al. 2017: 10).
        coref_spans_per_word (`float`): the spans of a document kept after the mention scores, per word (0.4).
        coref_max_antecedents (`int`): the nearest kept spans before each kept span that it is scored against
            (250 in Lee et al. 2017; 50 at CPU scale).
        coref_ffnn_size (`int`): width of the two hidden layers of the mention and antecedent scorers (150).
        coref_feature_size (`int`): width of the span-width and distance embeddings (20).
    """

    model_type = "elmo"

    # ----- layer 0: the token encoder -----
    char_embedding_dim: Annotated[int, _integer(0), _positive_unless_word_char] = 16
    char_cnn_filters: Annotated[list[list[int]] | None, _filters, _filters_within_a_token] = None  # CNN_FILTERS_2048
    char_cnn_activation: Annotated[str, _one_of(CHOICES["char_cnn_activation"])] = "relu"
    num_highway_layers: Annotated[int, _integer(0)] = 2
    max_characters_per_token: Annotated[int, _integer(1), _at_least(3, "begin, one byte, end")] = 50
    char_vocab_size: Annotated[int, _integer(1)] = 262
    token_encoder: Annotated[str, _one_of(CHOICES["token_encoder"]), _word_char_parts] = "char_cnn"
    word_input_vocab_size: Annotated[int, _integer(0), _word_rows_with_a_word_embedding] = 0
    word_input_embedding_dim: Annotated[int, _integer(0)] = 0
    sentence_boundary_rows: Annotated[list[list[int]] | None, _two_rows_of_a_token] = None
    # ----- the biLSTM -----
    projection_dim: Annotated[int, _integer(1)] = 512
    cell_size: Annotated[int, _integer(1)] = 4096
    num_layers: Annotated[int, _integer(1)] = 2
    cell_clip: Annotated[float | None, _clip] = 3.0
    proj_clip: Annotated[float | None, _clip] = 3.0
    use_skip_connections: bool = True
    dropout: Annotated[float, _probability] = 0.1
    initializer_range: float = 0.02
    # ----- the pretraining softmax -----
    vocab_size: Annotated[int, _integer(0)] = 0
    softmax_type: Annotated[str, _one_of(CHOICES["softmax_type"])] = "full"
    num_sampled: Annotated[int, _integer(1)] = 8192
    adaptive_cutoffs: Annotated[list[int] | None, _optional(_cutoffs), _cutoffs_below_vocab_size] = None
    lstm_implementation: Annotated[str, _one_of(_lstm_choices), _fused_without_clipping] = "auto"
    # ----- the task heads -----
    freeze_bilm: Annotated[bool, _flag] = True
    num_output_representations: Annotated[int, _integer(1)] = 1
    scalar_mix: Annotated[str, _one_of(CHOICES["scalar_mix"])] = "learned"
    scalar_mix_parameters: Annotated[list[float] | None, _weights_of_a_fixed_mix] = None
    scalar_mix_layer_norm: Annotated[bool, _flag] = False
    scalar_mix_l2_coef: Annotated[float, _non_negative_number] = 0.001
    representation_dropout: Annotated[float, _probability] = 0.5
    keep_sentence_boundaries: Annotated[bool, _flag] = False
    word_embedding_dim: Annotated[int, _integer(0)] = 0
    word_embedding_buckets: Annotated[int, _integer(1), _at_least(2, "row 0 is padding")] = 65536
    classifier_pooling: Annotated[str, _one_of(CHOICES["classifier_pooling"])] = "mean"
    token_classifier_encoder: Annotated[str, _one_of(CHOICES["token_classifier_encoder"])] = "none"
    use_crf: Annotated[bool, _flag] = False
    crf_constraints: Annotated[str, _one_of(CHOICES["crf_constraints"])] = "auto"
    qa_modeling_layer: Annotated[str, _one_of(CHOICES["qa_modeling_layer"])] = "lstm"
    qa_null_answer: Annotated[bool | None, _optional(_flag)] = None  # None: not trained for questions
    head_hidden_size: Annotated[int | None, _optional(_integer(1))] = None  # None: projection_dim
    # None: single sentences
    pair_combination: Annotated[str | None, _optional(_one_of(CHOICES["pair_combination"]))] = None
    # ----- the coreference head (`ElmoForCoreference`) -----
    coref_max_span_width: Annotated[int, _integer(1)] = 10
    coref_spans_per_word: Annotated[float, _positive_number] = 0.4
    coref_max_antecedents: Annotated[int, _integer(1)] = 50
    coref_ffnn_size: Annotated[int, _integer(1)] = 150
    coref_feature_size: Annotated[int, _integer(1)] = 20

    def __post_init__(self, **kwargs):
        # transformers >= 5.6 makes this class a dataclass of the fields above; on 4.46 - 4.x, where it does not,
        # `compat_elmo.config_fields` gives it the same `__init__`. Either sets the fields and passes every other
        # keyword (`num_labels`, token ids, a saved config's other keys) here. Not `@strict`, as transformers' own
        # configs are:
        # it would check every assignment (a field set on a loaded model is checked when saved, by `validate`),
        # raise its own two-line error rather than a `ValueError`, refuse an int for a float field and a tuple for
        # a list, and it reserves the name `validate`.
        for name in self._field_checks():
            setattr(self, name, _as_lists(getattr(self, name)))
        if self.char_cnn_filters is None:
            self.char_cnn_filters = _as_lists(CNN_FILTERS_2048)
        kwargs["auto_map"] = _auto_map(kwargs.get("auto_map") or {})
        pipelines = _custom_pipelines(kwargs.get("custom_pipelines") or {})
        if pipelines:
            kwargs["custom_pipelines"] = pipelines
        _check_value("num_labels", kwargs.get("num_labels"), [_INHERITED_FIELD_CHECKS["num_labels"]])
        finish_config(self, kwargs)
        # transformers 4.x's pipeline() loads no tokenizer for remote code without it
        if getattr(self, "tokenizer_class", None) is None:
            self.tokenizer_class = "ElmoTokenizer"
        self.validate()

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """transformers' reading of config.json, refusing a file that is JSON but not an object (a hand edit gone
        wrong), which would otherwise end in a TypeError that names no file."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if not isinstance(config_dict, dict):
            raise OSError(f"the config.json of {pretrained_model_name_or_path} holds a JSON "
                          f"{type(config_dict).__name__}, not an object of ElmoConfig's fields")
        return config_dict, kwargs

    @classmethod
    @functools.cache
    def _field_checks(cls) -> dict[str, tuple]:
        """Every field declared by ElmoConfig (and by a subclass), in order, with the checks declared with it."""
        fields = {}
        for klass in reversed(cls.__mro__[: cls.__mro__.index(ElmoConfig) + 1]):
            for name, annotation in inspect.get_annotations(klass, eval_str=True).items():
                fields[name] = get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()
        return fields

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
        """Raise `ValueError`, in one line naming the field and the value, when the configuration is not usable:
        the checks of every field's value (and of transformers' fields the heads read), then the rules between
        fields. Called at construction and by `save_pretrained`; a field set afterwards is checked there."""
        for name, checks in self._field_checks().items():
            _check_value(name, getattr(self, name), checks)
        for name, check in _INHERITED_FIELD_CHECKS.items():  # also an `id2label` set or emptied after construction
            _check_value(name, getattr(self, name), [check])
        self.validate_token_ids()
        self.validate_architecture()
        self.validate_label_maps()

    def validate_label_maps(self) -> None:
        """`id2label` and `label2id` are each other's inverse. A config.json edited on one side only (a label renamed
        in `id2label`) trained and scored by one map and wrote its predictions by the other: every prediction another
        label, with exit status 0."""
        id2label, label2id = getattr(self, "id2label", None) or {}, getattr(self, "label2id", None) or {}
        names = {int(i): label for i, label in id2label.items()}  # each id's label, by either map
        named = {int(i): label for label, i in label2id.items()}
        if label2id and (names != named or len(named) != len(label2id)):
            ids = sorted(i for i in names.keys() | named.keys() if names.get(i) != named.get(i))
            shown = "; ".join(f"id {i} is {names.get(i)!r} in id2label, {named.get(i)!r} in label2id" for i in ids[:3])
            raise ValueError(f"ElmoConfig.id2label and label2id disagree ({shown or 'two labels of one id'}): each "
                             "must be the other's inverse; edit both in config.json, or rename the labels by "
                             "fine-tuning again")

    def validate_token_ids(self) -> None:
        """The special-token ids (the tokenizer's, which Trainer copies into the config) are character ids."""
        for name, value in vars(self).items():
            ids = value if isinstance(value, list) else [value]
            if name.endswith("_token_id") and not all(
                i is None or (_is_int(i) and 0 <= i < self.char_vocab_size) for i in ids
            ):
                raise ValueError(
                    f"ElmoConfig.{name} must be None or a character id below char_vocab_size "
                    f"({self.char_vocab_size}), got {value!r}"
                )

    def validate_architecture(self) -> None:
        """The rules between fields (`_Rule`s, declared with the field they name), in the order of the fields."""
        for checks in self._field_checks().values():
            for check in checks:
                if isinstance(check, _Rule):
                    check.function(self)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> ElmoConfig:
        """A configuration of a published size: `"small"`, `"medium"`, `"original"`, or `"tiny"` for tests.

        Keyword arguments override single fields, e.g. `ElmoConfig.from_preset("small", dropout=0.0)`.
        """
        if name not in PRESETS:
            raise ValueError(f"Unknown ELMo preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**copy.deepcopy(PRESETS[name]), **overrides})


def _register_as_remote_code() -> None:
    """Name "elmo" to transformers' AutoConfig when this file runs as remote code (`trust_remote_code=True`).

    Loading remote code registers the model class for this configuration class, never the model type; but code that
    rebuilds a model from a saved configuration dictionary looks the type up by name (flair's `SequenceTagger.load`,
    which `ModelTrainer.train()` calls at its end, does `CONFIG_MAPPING[config["model_type"]]`). Where the project
    is installed its package has registered its own class already, and that one stays. The same loader rebuilds the
    tokenizer from a folder it saved, without `trust_remote_code`: a tokenizer module of this remote folder loaded
    before (flair loads the tokenizer first) is registered too, so that AutoTokenizer finds its classes by name.
    """
    import sys

    from transformers import AutoConfig, AutoTokenizer
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if ElmoConfig.model_type in CONFIG_MAPPING:
        return
    AutoConfig.register(ElmoConfig.model_type, ElmoConfig)
    tokenization = sys.modules.get(f"{__package__}.tokenization_elmo")
    for name in ("ElmoManyLangsTokenizer", "ElmoTokenizer"):  # the last one is ElmoConfig's default
        if hasattr(tokenization, name):
            AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=getattr(tokenization, name), exist_ok=True)


if __name__.split(".")[0] == "transformers_modules":
    _register_as_remote_code()
