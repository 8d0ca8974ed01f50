"""The model card of an ELMo folder: `render_model_card(config, ...)` / `write_model_card(folder, ...)` write its
README.md from the template `model_card.md`, filled with facts from the configuration and the run (training,
perplexities, parity of a conversion). The metadata is built with `huggingface_hub.ModelCardData` (evaluation results
as `EvalResult`s in `model-index`), so it parses and validates as the Hub expects. Pushing a folder with its card:
`hub_push.py`.

This module never travels to the Hub as remote code (it imports `huggingface_hub`, a dependency of transformers, and
this package's configuration); it does not import the models (it counts parameters through the Auto classes).

Where the template is found: `model_card.md` at the top of the repository, in a checkout and an editable install; in
an installed wheel, where pyproject.toml's data files put it (`share/elmo-hf/` under the environment's prefix). When
it is missing, a minimal template embedded here is used, with a warning.
"""

from __future__ import annotations

import json
import os
import re
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from transformers import AutoModel, AutoModelForPreTraining, PretrainedConfig
from transformers.utils import logging

from elmo_hf.modeling_elmo.configuration_elmo import PRESETS, TASK_CLASSES, ElmoConfig

logger = logging.get_logger(__name__)

TEMPLATE_NAME = "model_card.md"
TEMPLATE_LOCATIONS = (
    Path(__file__).resolve().parents[2] / TEMPLATE_NAME,  # the repository's top: a checkout, an editable install
    Path(sysconfig.get_path("data")) / "share" / "elmo-hf" / TEMPLATE_NAME,  # a wheel's data files
)

DEFAULT_TAGS = ("elmo", "bilm", "lstm", "character-level", "contextual-embeddings", "feature-extraction", "custom_code")

_EMBEDDED_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

{{ summary }}

## How to use

```python
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{{ model_id }}", trust_remote_code=True)
model = AutoModel.from_pretrained("{{ model_id }}", trust_remote_code=True)
outputs = model(**tokenizer(["A sentence ."], return_tensors="pt"), output_hidden_states=True)
```

### Words and tokens

{{ tokenizer }}

### Fine-tuning

{{ fine_tuning }}

## Model details

{{ architecture }}

## Training

{{ training }}

## Evaluation

{{ evaluation }}

## Citation

Peters et al., 2018. Deep Contextualized Word Representations. NAACL. https://aclanthology.org/N18-1202
"""

# The card's example for a head whose examples are sentences with one label each, by its Auto class; `{auto_class}`
# and `{model_id}` are filled in.
CARD_EXAMPLES = {"AutoModelForSequenceClassification": """\
from transformers import {auto_class}, AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("{model_id}", trust_remote_code=True)
model = {auto_class}.from_pretrained("{model_id}", trust_remote_code=True, num_labels=2)

def encode(batch):
    return tokenizer(batch["text"], truncation=True, max_length=128)

train_dataset = dataset["train"].map(encode, batched=True)  # a datasets.Dataset with "text" and "label"
trainer = Trainer(
    model=model,
    args=TrainingArguments(output_dir="elmo-finetuned", learning_rate=1e-3, num_train_epochs=3),
    train_dataset=train_dataset,
    processing_class=tokenizer,
)
trainer.train()
"""}

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
# Numeric entries of `results` whose name holds one of these go into model-index; others (counts) stay in the text.
_METRIC_WORDS = ("perplexity", "loss", "accuracy", "f1", "precision", "recall", "bpc")


# --------------------------------------------------------------------------------------------------
# Model card
# --------------------------------------------------------------------------------------------------


def find_model_card_template() -> Path | None:
    """The `model_card.md` template file, or None when it is not installed (see the module docstring)."""
    for path in TEMPLATE_LOCATIONS:
        if path.is_file():
            return path
    return None


def _load_template(template: str | os.PathLike | None) -> str:
    if template is not None:
        return Path(template).read_text(encoding="utf-8")
    path = find_model_card_template()
    if path is None:
        logger.warning(
            "model_card.md was not found (looked in %s); using the minimal embedded model card template",
            ", ".join(str(p) for p in TEMPLATE_LOCATIONS),
        )
        return _EMBEDDED_TEMPLATE
    return path.read_text(encoding="utf-8")


def _as_config(config: ElmoConfig | PretrainedConfig | Mapping | str | os.PathLike) -> ElmoConfig:
    """An `ElmoConfig` from a config object, its dict, a config.json file, or the folder holding one."""
    if isinstance(config, PretrainedConfig):
        return config if isinstance(config, ElmoConfig) else ElmoConfig.from_dict(config.to_dict())
    if isinstance(config, Mapping):
        return ElmoConfig.from_dict(dict(config))
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no ELMo configuration at {path}: give an ElmoConfig, its dict, or a config.json")
    return ElmoConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))


def count_parameters(config: ElmoConfig) -> dict[str, int]:
    """Parameters of the biLM (`ElmoModel`: character CNN, highway, projection, biLSTMs) and of the pretraining
    softmax (0 without a word vocabulary), counted on a model built on the meta device (no memory used). The classes
    come from the Auto classes (`modeling_elmo/__init__.py` registers them): this module does not import
    the models, whose `push_to_hub` imports this module."""
    with torch.device("meta"):
        bilm = AutoModel.from_config(config).num_parameters()
        softmax = AutoModelForPreTraining.from_config(config).num_parameters() - bilm if config.vocab_size > 0 else 0
    return {"bilm": bilm, "softmax": softmax}


def _preset_name(config: ElmoConfig) -> str | None:
    for name, fields in PRESETS.items():
        if all(getattr(config, key) == value for key, value in fields.items()) and name != "tiny":
            return name
    return None


def _fmt(value: Any) -> str:
    """A value for a table: integers with separators, small floats in scientific notation, lists joined."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if 1 <= abs(value) < 1e4:
        return f"{value:.2f}"
    if value == 0 or 1e-3 <= abs(value) < 1:
        return f"{value:.4g}"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.2e}"


def _millions(n: int, exact: bool = False) -> str:
    """A parameter count as "93.6M", with the exact count in brackets if `exact`; small counts in full."""
    if n < 1e5:
        return f"{n:,}"
    return f"{n / 1e6:.1f}M ({n:,})" if exact else f"{n / 1e6:.1f}M"


def _humanize(key: str) -> str:
    return key.replace("_", " ").strip().capitalize()


def _table(rows: Sequence[tuple[str, str]], header: tuple[str, str]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {a} | {str(b).replace('|', '/')} |" for a, b in rows]
    return "\n".join(lines)


def _architecture(config: ElmoConfig, counts: dict[str, int], num_parameters: int | None) -> str:
    p, c, n_layers = config.projection_dim, config.cell_size, config.num_layers
    manylangs = config.token_encoder == "word_char"
    chars = config.char_embedding_dim > 0
    words = manylangs and config.word_input_embedding_dim > 0
    size = f"{n_layers}x{c}_{p}" + (f"_{config.num_char_filters}cnn_{config.num_highway_layers}xhighway" if chars
                                     else "") + (f"_{config.word_input_embedding_dim}word" if words else "")
    preset = None if manylangs else _preset_name(config)
    rows = [("Size", f"`{preset}` ({size})" if preset else size)]
    if words:
        rows.append(("Word embedding", f"{config.word_input_vocab_size - 1:,} words of the word dictionary × "
                     f"{config.word_input_embedding_dim}"))
    if chars:
        filters = ", ".join(f"{count}×{width}" for width, count in config.char_cnn_filters)
        table = (f"{config.char_vocab_size - 1:,} characters of the character dictionary" if manylangs
                 else f"{config.char_vocab_size} character ids (UTF-8 bytes and markers)")
        rows += [
            ("Character embedding", f"{table} × {config.char_embedding_dim}, {config.max_characters_per_token} "
             "characters per word"),
            ("Character CNN", f"filters (count×width) {filters}: F = {config.num_char_filters}, "
             f"{config.char_cnn_activation}"),
            ("Highway layers", str(config.num_highway_layers)),
        ]
    width = (config.num_char_filters if chars else 0) + (config.word_input_embedding_dim if words else 0)
    rows += [
        ("Token projection", f"{width} → {p} (P)"),
        ("biLSTM", f"{n_layers} layers per direction, cell size {c} (C), projection {p}, "
         f"cell clip {config.cell_clip}, projection clip {config.proj_clip}, "
         f"skip connections {'yes' if config.use_skip_connections else 'no'}"),
        ("Outputs", f"{n_layers + 1} layers (token encoder + {n_layers} biLSTM) of width {2 * p} (2P)"),
        ("biLM parameters", _millions(counts["bilm"], exact=True)),
    ]
    if config.vocab_size > 0:
        rows.append(("Word softmax (pretraining only)", f"{config.softmax_type}, vocabulary {config.vocab_size:,}, "
                     f"{_millions(counts['softmax'])} parameters"))
    if num_parameters is not None:
        rows.append(("Parameters in this checkpoint", _millions(num_parameters, exact=True)))
    return _table(rows, ("Component", "Value"))


# What each built-in word split does, for the card's "Words and tokens".
_SPLITS = {
    "punctuation": "the `punctuation` rule (PTB-like words, punctuation and symbols apart, one token per CJK "
    "ideograph or kana)",
    "whitespace": "`whitespace` (`str.split()`: the text must be tokenized already)",
    "jieba": "`jieba` (Chinese segmented into words by jieba, which must be installed: `pip install jieba`; other "
    "text as the punctuation rule)",
}


def _describe_split(word_split: str | None) -> str:
    if word_split is None:
        return "the tokenizer's `word_split` (saved in tokenizer_config.json; `punctuation` by default)"
    if word_split in _SPLITS:
        return _SPLITS[word_split]
    return (f"`{word_split}`, a split that is not built in: it must be registered in `tokenization.WORD_SPLITTERS` "
            "(or importable) where the tokenizer is loaded")


def _saved_word_split(config: Any) -> str | None:
    """The `word_split` of the tokenizer saved beside a config given as a folder or its config.json."""
    if isinstance(config, (PretrainedConfig, Mapping)):
        return None
    folder = Path(config)
    folder = folder if folder.is_dir() else folder.parent
    try:
        value = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("word_split")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _input_ids(config: ElmoConfig) -> str:
    """The code example's comment on `input_ids`: what one row per token holds."""
    if config.token_encoder != "word_char":
        return (f"(batch, tokens, {config.max_characters_per_token}) character ids, <S> and </S> added around every "
                "sentence")
    parts = [f"{config.max_characters_per_token} character ids"] if config.char_embedding_dim > 0 else []
    parts += ["1 word id"] if config.word_input_embedding_dim > 0 else []
    return (f"(batch, tokens, {config.token_row_width}) dictionary ids ({' + '.join(parts)} per word), <bos> and "
            "<eos> added around every sentence")


def _tokenizer(config: ElmoConfig, word_split: str | None) -> str:
    """What the tokenizer does with raw text for this model: the split, then the ids of each word."""
    split = f"Raw text is split into words by {_describe_split(word_split)}; vectors are per word, not per sub-word."
    cut = config.max_characters_per_token - 2
    if config.token_encoder != "word_char":
        return (f"{split} Each word becomes {config.max_characters_per_token} character ids: its UTF-8 bytes (the "
                f"first {cut}) between begin- and end-of-word markers, as in the original ELMo, so no word is out of "
                "vocabulary. `<S>` and `</S>` are added around every sentence.")
    parts = []
    if config.char_embedding_dim > 0:
        parts.append(f"its first {cut} characters (Unicode code points) looked up in the model's character "
                     f"dictionary ({config.char_vocab_size - 1:,} entries; an unknown character is `<oov>`), between "
                     "begin- and end-of-word markers,")
    if config.word_input_embedding_dim > 0:
        parts.append(f"its id in the model's word dictionary ({config.word_input_vocab_size - 1:,} words; an "
                     "unknown word is `<oov>`)")
    return (f"{split} This is an ELMoForManyLangs model: each word becomes {' then '.join(parts)}. `<bos>` and "
            "`<eos>` are added around every sentence. The published models were trained on words as the Universal "
            "Dependencies treebanks segment them: pass words already split (`is_split_into_words=True`) or a split "
            "that matches them.")


def _fine_tuning(config: ElmoConfig, model_id: str) -> str:
    auto_map = getattr(config, "auto_map", None) or {}
    # the task heads of ELMO_CLASSES whose Auto class the auto_map names
    heads = [row for row in TASK_CLASSES.values() if row.auto_class in auto_map]
    if not heads:
        return (
            "Train a task model on the features above (the scalar-mix weights and gamma are learned with the task), "
            "or fine-tune the biLM end to end with your own head and `transformers.Trainer`."
        )
    listed = ", ".join(f"`{row.auto_class}` for {row.description}" for row in heads)
    example = next((row for row in heads if row.auto_class in CARD_EXAMPLES), None)
    mixing = "The head reads an ELMo scalar mix of the biLM layers, learned with the task, as in the paper."
    if hasattr(config, "freeze_bilm") and hasattr(config, "scalar_mix"):
        mixing = (
            f"The head reads an ELMo scalar mix of the biLM layers (`scalar_mix=\"{config.scalar_mix}\"`), and "
            + ("the biLM stays frozen, as in the paper (`freeze_bilm=True`; pass `freeze_bilm=False` to "
               "`from_pretrained` to fine-tune it too)." if config.freeze_bilm
               else "the biLM is fine-tuned with the head (`freeze_bilm=False`).")
        )
    if example is None:
        return f"The task heads load with the Auto classes: {listed}.\n\n{mixing}"
    code = CARD_EXAMPLES[example.auto_class].format(auto_class=example.auto_class, model_id=model_id)
    return f"""The task heads load with the Auto classes: {listed}. For {example.description}:

```python
{code}```

{mixing}"""


def _training(
    datasets: Sequence[str] | None, training: Mapping | None, parity: Mapping | None, base_models: list[str]
) -> str:
    parts = []
    if datasets:
        names = ", ".join(
            f"[{d}](https://huggingface.co/datasets/{d})" if "/" in d else f"`{d}`" for d in datasets
        )
        parts.append(f"**Data:** {names}.")
    training = dict(training or {})
    description = training.pop("description", None)
    if description:
        parts.append(str(description))
    if base_models:
        links = [f"[{m}](https://huggingface.co/{m})" if _HUB_ID.match(m) and not Path(m).exists() else f"`{m}`"
                 for m in base_models]
        parts.append("Starting point: " + ", ".join(links) + ".")
    if training:
        parts.append(_table([(_humanize(k), _fmt(v)) for k, v in training.items()], ("Setting", "Value")))
    if not parts:
        if parity:
            parts.append(
                "These weights were converted from the original ELMo weights (bilm-tf / allennlp hdf5); their "
                "training is described by their source (Peters et al., 2018: 10 epochs on the 1B Word Benchmark "
                "for the published small, medium and original models)."
            )
        else:
            parts.append("No training details were recorded for this model.")
    return "\n\n".join(parts)


def _split_results(results: Mapping | None) -> tuple[dict[str, int | float], dict[str, str]]:
    """Numeric metrics, and the context entries (`dataset`, `split`, ...) of a results mapping."""
    metrics, context = {}, {}
    for key, value in (results or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics[key] = value
        elif value is not None:
            context[key] = str(value)
    return metrics, context


def _evaluation(results: Mapping | None, parity: Mapping | None) -> str:
    parts = []
    metrics, context = _split_results(results)
    if metrics:
        where = context.get("dataset", "held-out text")
        if "split" in context:
            where += f" ({context['split']} split)"
        parts.append(f"Language-model evaluation on {where}:")
        parts.append(_table([(_humanize(k), _fmt(v)) for k, v in metrics.items()], ("Metric", "Value")))
        notes = {k: v for k, v in context.items() if k not in ("dataset", "split")}
        parts += [f"{_humanize(k)}: {v}" for k, v in notes.items()]
    if parity:
        parts.append(
            "**Conversion parity**: outputs of this model against the original implementation on the same "
            "inputs (maximum absolute differences):"
        )
        parts.append(_table([(_humanize(k), _fmt(v)) for k, v in parity.items()], ("Check", "Value")))
    if not parts:
        parts.append("No evaluation results were recorded for this model.")
    return "\n\n".join(parts)


def _eval_results(results: Mapping | None) -> list[EvalResult] | None:
    """The metrics of `results` as `EvalResult`s for `model-index` (counts such as `eval_tokens` stay out)."""
    metrics, context = _split_results(results)
    metrics = {k: v for k, v in metrics.items() if any(word in k.lower() for word in _METRIC_WORDS)}
    if not metrics:
        return None
    dataset = context.get("dataset")  # the evaluation data, named by `results`; not the training `datasets`
    out = []
    for key, value in metrics.items():
        metric_type = "perplexity" if "perplexity" in key else ("loss" if "loss" in key else key)
        out.append(
            EvalResult(
                task_type="text-generation",
                task_name="Bidirectional language modeling",
                dataset_type=dataset or "text",
                dataset_name=dataset or "Held-out text",
                dataset_split=context.get("split"),
                metric_type=metric_type,
                metric_name=_humanize(key),
                metric_value=round(float(value), 6),
            )
        )
    return out


def render_model_card(
    config: ElmoConfig | PretrainedConfig | Mapping | str | os.PathLike,
    *,
    model_id: str | None = None,
    base_model: str | Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    license: str = "apache-2.0",  # noqa: A002 (the Hub's metadata key)
    training: Mapping[str, Any] | None = None,
    results: Mapping[str, Any] | None = None,
    parity: Mapping[str, Any] | None = None,
    num_parameters: int | None = None,
    language: str | Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    template: str | os.PathLike | None = None,
    word_split: str | None = None,
) -> str:
    """The README.md (model card) of an ELMo model: YAML metadata, then the filled `model_card.md` template.

    Args:
        config: the model's `ElmoConfig` (or its dict, a config.json, or the folder holding it).
        model_id (`str`, *optional*): the repository id ("org/name") used in the code examples and in
            `model-index`; "path/to/model" when absent.
        base_model (`str` or `list[str]`, *optional*): the model this one continues from: Hub ids go into the
            metadata, a local folder is only named in the text.
        datasets (`list[str]`, *optional*): training data, as Hub dataset ids or names (metadata `datasets:`).
        license (`str`): a Hub license identifier.
        training (`dict`, *optional*): facts of the run, shown as a table (e.g. `{"steps": 1000, "batch_size": 128,
            "optimizer": "Adagrad, lr 0.2", "tokens_seen": 2.0e7, "hardware": "1 x H100"}`); the key `description`
            is shown as a paragraph of its own.
        results (`dict`, *optional*): evaluation of the language model: numeric entries are shown (e.g.
            `{"average_perplexity": 41.2, "forward_perplexity": 40.1, "backward_perplexity": 42.3, "eval_tokens":
            10000}`), string entries give the context (`"dataset"`, `"split"`). Those named like a metric
            (perplexity, loss, accuracy, f1, ...) also go into `model-index` as `EvalResult`s.
        parity (`dict`, *optional*): for converted weights, the comparison with the original implementation (e.g.
            `{"reference": "bilm-tf outputs", "max_abs_diff_top_layer": 1.2e-6, "max_abs_diff_token_embeddings":
            7.2e-7}`), shown as a table.
        num_parameters (`int`, *optional*): parameters of the saved checkpoint (the biLM and softmax counts are
            computed from the configuration in any case).
        language (`str` or `list[str]`, *optional*): metadata `language:` (e.g. "en").
        tags (`list[str]`, *optional*): tags added to the default ones (elmo, bilm, ...).
        template (path, *optional*): another template file instead of `model_card.md`.
        word_split (`str`, *optional*): the tokenizer's word split, described in "Words and tokens"; by default
            read from the tokenizer_config.json beside a config given as a folder.

    Returns:
        The model card text. Its metadata parses with `huggingface_hub.ModelCard`.
    """
    word_split = word_split or _saved_word_split(config)
    config = _as_config(config)
    datasets = [datasets] if isinstance(datasets, str) else (list(datasets) if datasets else None)
    base_model = list(base_model) if base_model is not None and not isinstance(base_model, str) else base_model
    base_models = [] if base_model is None else ([base_model] if isinstance(base_model, str) else base_model)
    base_models = [str(m) for m in base_models]
    # Only Hub ids go into the metadata (the Hub rejects anything else); a local folder is named in the text only.
    hub_bases = [m for m in base_models if _HUB_ID.match(m) and not Path(m).exists()]
    if len(hub_bases) != len(base_models):
        logger.info("base_model %s is not a Hub model id: it is named in the card's text, not in its metadata",
                    [m for m in base_models if m not in hub_bases])
    shown_id = model_id or "path/to/model"
    counts = count_parameters(config)

    card_data = ModelCardData(
        language=language,
        license=license,
        library_name="transformers",
        pipeline_tag="feature-extraction",
        tags=list(dict.fromkeys([*DEFAULT_TAGS, *(tags or [])])),
        datasets=datasets,
        base_model=(hub_bases[0] if len(hub_bases) == 1 else hub_bases) or None,
        model_name=model_id or "elmo",
        eval_results=_eval_results(results),
    )
    preset = _preset_name(config)
    size = f"the `{preset}` size" if preset else f"{config.num_layers} layers of {config.cell_size} cells"
    if parity:
        origin = ("converted from an ELMoForManyLangs model (HIT-SCIR)" if config.token_encoder == "word_char"
                  else "converted from the original weights")
    elif base_models:
        origin = "trained further from " + ", ".join(f"`{m}`" for m in base_models)
    else:
        origin = "pretrained with this project"
    values = {
        "card_data": card_data.to_yaml(),
        "title": f"ELMo: {model_id.split('/')[-1]}" if model_id else "ELMo",
        "summary": (
            f"An ELMo bidirectional language model ({size}, {_millions(counts['bilm'])} biLM parameters), "
            f"{origin}, for `transformers`."
        ),
        "model_id": shown_id,
        "input_ids": _input_ids(config),
        "tokenizer": _tokenizer(config, word_split),
        "fine_tuning": _fine_tuning(config, shown_id),
        "architecture": _architecture(config, counts, num_parameters),
        "training": _training(datasets, training, parity, base_models),
        "evaluation": _evaluation(results, parity),
    }

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"the model card template uses an unknown placeholder {{{{ {name} }}}}; "
                             f"known: {sorted(values)}")
        return values[name]

    text = re.sub(r"<!--.*?-->\n*", "", _load_template(template), flags=re.DOTALL)  # the template's own notes
    text = _PLACEHOLDER.sub(fill, text)
    ModelCard(text, ignore_metadata_errors=False)  # raises if the metadata does not parse
    return text


def write_model_card(
    folder: str | os.PathLike,
    config: ElmoConfig | PretrainedConfig | Mapping | str | os.PathLike | None = None,
    **kwargs,
) -> Path:
    """Write README.md into `folder` (a saved model) and return its path.

    `config` defaults to the folder's config.json; the other arguments are those of `render_model_card`.
    """
    folder = Path(folder)
    text = render_model_card(folder if config is None else config, **kwargs)
    path = folder / "README.md"
    path.write_text(text, encoding="utf-8")
    logger.debug("wrote the model card %s", path)
    return path


__all__ = ["count_parameters", "find_model_card_template", "render_model_card", "write_model_card"]
