"""Shared pieces of the fine-tuning commands (`train.finetune_classification`, `train.finetune_ner`).

* Readers of the task files: SST-2 style TSV (`label<TAB>sentence`, a header line, CRLF or LF), CSV and JSON lines
  with `text`/`label` columns for classification; CoNLL columns (`word POS chunk NER`, a blank line between
  sentences, `-DOCSTART-` skipped) and JSON lines with `tokens`/`tags` for tagging.
* Metrics: accuracy, and entity-level precision/recall/F1 of IOB1/IOB2/IOBES tag sequences, scored as
  conlleval and seqeval (default mode) do, plus seqeval's strict IOB2 mode. No dependency on seqeval.
* `ModelArguments`, and the loading of a head and its tokenizer (folder, Hub id or preset name) through
  `modeling_elmo.tools.loading.load_elmo`.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from modeling_elmo.tools.loading import ModelLoadError, load_elmo
from tokenization import split_words

logger = logging.getLogger(__name__)

TEXT_COLUMNS = ("text", "sentence", "content", "review")
TOKEN_COLUMNS = ("tokens", "words")
TAG_COLUMNS = ("tags", "ner_tags", "labels", "label")


class InputError(ValueError):
    """Bad input to a fine-tuning command (a file, a model name, an option's value): `run_command_line` reports it
    as one line and exits with status 2, before anything is written."""


# ---------------------------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------------------------
def read_input_file(reader, path: str, option: str) -> list[dict]:
    """`reader(path)`, with whatever is wrong with the file (absent, not UTF-8 text, not in the format) raised as an
    `InputError` that names the option and the file."""
    if not os.path.isfile(path):
        raise InputError(f"--{option} {path}: no such file")
    try:
        return reader(path)
    except UnicodeDecodeError as error:
        raise InputError(f"--{option} {path}: not UTF-8 text (byte {error.start} is {error.object[error.start]:#04x}); "
                         "give a text file") from None
    except (ValueError, TypeError, KeyError, csv.Error) as error:
        message = str(error)
        message = message if message.startswith(str(path)) else f"{path}: {message}"
        raise InputError(f"--{option} {message}") from None


def _file_format(path: str | os.PathLike) -> str:
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".json", ".jsonl"):
        return "json"
    if suffixes and suffixes[-1] == ".csv":
        return "csv"
    return "tsv"


def _read_json_lines(path: str | os.PathLike) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    if text.startswith("["):  # a JSON array of records also works
        rows = json.loads(text)
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not a JSON object ({error})") from error
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: record {number} is not a JSON object: {row!r:.100}")
    return rows


def _pick(columns: Iterable[str], wanted: str | None, candidates: Sequence[str], what: str, path) -> str:
    columns = list(columns)
    if wanted is not None:
        if wanted not in columns:
            raise ValueError(f"{path}: no {what} column {wanted!r}; columns are {columns}")
        return wanted
    for name in candidates:
        if name in columns:
            return name
    raise ValueError(f"{path}: cannot tell the {what} column among {columns}; name it with --{what}_column")


def read_classification_file(
    path: str | os.PathLike, text_column: str | None = None, label_column: str | None = None
) -> list[dict]:
    """Read sentences and labels: `[{"text": str, "label": str}, ...]` (labels as strings).

    TSV (any suffix but .csv/.json/.jsonl) has a header line naming the columns (SST-2: `label<TAB>sentence`);
    fields are not quoted. CSV follows the csv module's dialect. JSON lines hold one object per line.
    The text column is `text_column` or the first of `text`, `sentence`, `content`, `review`, or the only column
    besides the label; the label column is `label_column` or `label`.
    """
    kind = _file_format(path)
    if kind == "json":
        rows = _read_json_lines(path)
        columns = list(rows[0]) if rows else []
    else:
        with open(path, encoding="utf-8", newline="") as f:
            if kind == "csv":
                reader = csv.DictReader(f)
            else:  # SST-2 sentences contain quote characters: no quoting at all
                reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            rows = list(reader)
            columns = list(reader.fieldnames or [])
    columns = [c.strip() if isinstance(c, str) else c for c in columns]
    if not rows:
        raise ValueError(f"{path}: no examples")
    label_name = _pick(columns, label_column, ("label",), "label", path)
    others = [c for c in columns if c != label_name]
    text_name = _pick(columns, text_column, (*TEXT_COLUMNS, *(others if len(others) == 1 else [])), "text", path)
    examples = []
    for number, row in enumerate(rows, start=1):
        row = {k.strip() if isinstance(k, str) else k: v for k, v in row.items()}
        text, label = row.get(text_name), row.get(label_name)
        if text is None or label is None:
            raise ValueError(f"{path}: example {number} lacks {text_name!r} or {label_name!r}: {row!r:.200}")
        examples.append({"text": str(text).strip(), "label": str(label).strip()})
    return examples


def read_conll_file(path: str | os.PathLike, tag_column: int = -1) -> list[dict]:
    """Read CoNLL columns: `[{"tokens": [...], "tags": [...]}, ...]`.

    One token per line (`word POS chunk NER` in CoNLL-2003: the word is the first column, the tag the last, or
    `tag_column`), a blank line between sentences, `-DOCSTART-` lines skipped.
    """
    sentences, tokens, tags = [], [], []
    columns, first = None, 0  # every token line has the same columns: a file of sentences (a TSV) is refused
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if tokens:
                    sentences.append({"tokens": tokens, "tags": tags})
                    tokens, tags = [], []
                continue
            if len(fields) < 2:
                raise ValueError(f"{path}:{number}: expected a word and a tag, got {line.rstrip()!r}")
            if columns is None:
                columns, first = len(fields), number
            elif len(fields) != columns:
                raise ValueError(
                    f"{path}:{number}: {len(fields)} columns where line {first} has {columns}; not CoNLL columns "
                    f"(one token per line: the word first, the tag last; a blank line between sentences)"
                )
            tokens.append(fields[0])
            tags.append(fields[tag_column])
    if tokens:
        sentences.append({"tokens": tokens, "tags": tags})
    if not sentences:
        raise ValueError(f"{path}: no sentences")
    return sentences


def read_tagging_file(path: str | os.PathLike) -> list[dict]:
    """CoNLL columns, or JSON lines with `tokens` (or `words`) and `tags` (or `ner_tags`, `labels`) as lists."""
    if _file_format(path) != "json":
        return read_conll_file(path)
    rows = _read_json_lines(path)
    if not rows:
        raise ValueError(f"{path}: no examples")
    token_name = _pick(rows[0], None, TOKEN_COLUMNS, "tokens", path)
    tag_name = _pick(rows[0], None, TAG_COLUMNS, "tags", path)
    sentences = []
    for number, row in enumerate(rows, start=1):
        tokens, tags = row[token_name], row[tag_name]
        if len(tokens) != len(tags):
            raise ValueError(f"{path}: example {number} has {len(tokens)} tokens but {len(tags)} tags")
        sentences.append({"tokens": [str(t) for t in tokens], "tags": [str(t) for t in tags]})
    return sentences


def label_list(labels: Iterable[str]) -> list[str]:
    """Sorted distinct labels: numerically when they all are integers (SST-2's "0", "1"), else as strings."""
    distinct = set(labels)
    try:
        return sorted(distinct, key=int)
    except ValueError:
        return sorted(distinct)


def tag_list(tags: Iterable[str]) -> list[str]:
    """Distinct tags, "O" first, then by entity type and prefix (B- before I-)."""
    distinct = set(tags)
    rest = sorted(distinct - {"O"}, key=lambda t: (t[2:], t[:2]) if t[1:2] == "-" else (t, ""))
    return (["O"] if "O" in distinct else []) + rest


# ---------------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------------
def accuracy(predictions: Sequence[int], references: Sequence[int]) -> float:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if not references:
        return 0.0
    return sum(int(p == r) for p, r in zip(predictions, references)) / len(references)


def _split_tag(tag: str) -> tuple[str, str]:
    """"B-PER" -> ("B", "PER"); "O" -> ("O", ""); a tag without prefix, e.g. "PER", counts as "I-PER"."""
    if tag in ("O", ""):
        return "O", ""
    if len(tag) > 1 and tag[1] in "-_" and tag[0] in "BIESLU":
        prefix = {"L": "E", "U": "S"}.get(tag[0], tag[0])
        return prefix, tag[2:]
    return "I", tag


def get_entities(tags: Sequence[str], strict: bool = False) -> list[tuple[str, int, int]]:
    """The chunks of one tag sequence as `(type, start, end)` with `end` inclusive.

    Default: conlleval's rules (seqeval's default mode), which read IOB1, IOB2 and IOBES alike: a chunk starts at
    B-/S-, at I-/E- after O or after a chunk of another type, and at I-/E- after E-/S-; it ends before O, before
    a B-/S-, or before a tag of another type.
    `strict=True`: seqeval's strict IOB2 mode: a chunk is exactly B-X followed by I-X...; an I-X that does not
    continue a B-X/I-X chunk of type X belongs to no chunk.
    """
    entities = []
    if strict:
        start, kind = None, None
        for i, tag in enumerate([*tags, "O"]):
            prefix, label = _split_tag(tag)
            if start is not None and not (prefix == "I" and label == kind):
                entities.append((kind, start, i - 1))
                start, kind = None, None
            if prefix == "B":
                start, kind = i, label
        return entities

    prev_prefix, prev_label, start = "O", "", None
    for i, tag in enumerate([*tags, "O"]):
        prefix, label = _split_tag(tag)
        ends = prev_prefix in ("E", "S") or (prev_prefix != "O" and (prefix in ("B", "S", "O") or label != prev_label))
        if start is not None and ends:
            entities.append((prev_label, start, i - 1))
            start = None
        begins = prefix in ("B", "S") or (prefix in ("I", "E") and (prev_prefix in ("O", "E", "S") or label != prev_label))
        if begins:
            start = i
        prev_prefix, prev_label = prefix, label
    return entities


def entity_scores(
    references: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]], strict: bool = False
) -> dict[str, float]:
    """Entity-level micro precision, recall and F1 over sentences (an entity counts when type, start and end all
    match), per-type F1 and token accuracy. Same numbers as seqeval's `classification_report` (default mode, or
    strict IOB2 with `strict=True`) and conlleval's overall line."""
    if len(references) != len(predictions):
        raise ValueError(f"{len(references)} reference sentences but {len(predictions)} predicted")
    true_total = pred_total = correct = 0
    per_type: dict[str, list[int]] = {}  # type -> [correct, predicted, true]
    tokens = tokens_correct = 0
    for number, (ref, pred) in enumerate(zip(references, predictions)):
        if len(ref) != len(pred):
            raise ValueError(f"sentence {number}: {len(ref)} reference tags but {len(pred)} predicted")
        tokens += len(ref)
        tokens_correct += sum(int(a == b) for a, b in zip(ref, pred))
        true_set = set(get_entities(ref, strict))
        pred_set = set(get_entities(pred, strict))
        hits = true_set & pred_set
        true_total, pred_total, correct = true_total + len(true_set), pred_total + len(pred_set), correct + len(hits)
        for entities, slot in ((hits, 0), (pred_set, 1), (true_set, 2)):
            for kind, _, _ in entities:
                per_type.setdefault(kind, [0, 0, 0])[slot] += 1

    def prf(hit: int, predicted: int, true: int) -> tuple[float, float, float]:
        precision = hit / predicted if predicted else 0.0
        recall = hit / true if true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    precision, recall, f1 = prf(correct, pred_total, true_total)
    scores = {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": tokens_correct / tokens if tokens else 0.0,
        "num_entities": float(true_total),
    }
    for kind in sorted(per_type):
        scores[f"{kind}_f1"] = prf(*per_type[kind])[2]
    return scores


# ---------------------------------------------------------------------------------------------------------------
# Model and tokenizer
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class ModelArguments:
    """Which biLM to start from and how the head uses it. Options left unset keep the model's saved config."""

    model_name_or_path: str = field(
        metadata={"help": "A model folder, a Hub id, or a preset name (tiny, small, medium, original) for a "
                  "randomly initialised biLM."}
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer folder or Hub id, if not the model's."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow the model's own code from the Hub."})
    freeze_bilm: bool | None = field(default=None, metadata={"help": "Keep the biLM fixed (default) or fine-tune it."})
    scalar_mix: str | None = field(default=None, metadata={"help": "learned, top, average or fixed."})
    scalar_mix_parameters: list[float] | None = field(
        default=None, metadata={"help": "L + 1 pre-softmax layer weights for --scalar_mix fixed."}
    )
    scalar_mix_layer_norm: bool | None = field(default=None, metadata={"help": "Layer norm before mixing."})
    scalar_mix_l2_coef: float | None = field(default=None, metadata={"help": "L2 on the mix weights (0.001)."})
    representation_dropout: float | None = field(default=None, metadata={"help": "Dropout on the ELMo vectors (0.5)."})
    keep_sentence_boundaries: bool | None = field(default=None, metadata={"help": "Pool over <S>/</S> too."})
    word_embedding_dim: int | None = field(
        default=None, metadata={"help": "Concatenate a trainable hashed word embedding of this size (0 = none)."}
    )
    word_embedding_buckets: int | None = field(default=None, metadata={"help": "Rows of the hashed word embedding."})
    head_hidden_size: int | None = field(default=None, metadata={"help": "Size of the head's biLSTM / attention."})
    bilm_dropout: float | None = field(default=None, metadata={"help": "biLM dropout while fine-tuning it."})
    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "Re-initialise a saved classifier whose number of labels differs."}
    )

    def config_overrides(self) -> dict:
        names = ("freeze_bilm", "scalar_mix", "scalar_mix_parameters", "scalar_mix_layer_norm", "scalar_mix_l2_coef",
                 "representation_dropout", "keep_sentence_boundaries", "word_embedding_dim",
                 "word_embedding_buckets", "head_hidden_size")
        overrides = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if self.scalar_mix is not None and self.scalar_mix != "fixed" and self.scalar_mix_parameters is None:
            overrides["scalar_mix_parameters"] = None  # a saved fixed mix does not leak into another kind
        if self.bilm_dropout is not None:
            overrides["dropout"] = self.bilm_dropout
        return overrides


def load_model(model_args: ModelArguments, task: str, head_overrides: dict, seed: int | None = None):
    """`(model, tokenizer)`: the head of `task` ("sequence-classification", "token-classification") on the biLM of
    `model_name_or_path` (a folder, a Hub id, or a preset: a random biLM), by `modeling_elmo.tools.loading.load_elmo`;
    `head_overrides` (labels, pooling, ...) win over the options and the saved config. `seed`: of a preset's
    random weights (None: the generators as `set_seed` left them)."""
    try:
        return load_elmo(
            model_args.model_name_or_path,
            task,
            seed=seed,
            config_overrides={**model_args.config_overrides(), **head_overrides},
            trust_remote_code=model_args.trust_remote_code,
            tokenizer_name=model_args.tokenizer_name,
            ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
        )
    except ModelLoadError as error:
        raise InputError(f"--model_name_or_path: {error}") from None


def load_task_model(model_args: ModelArguments, training_args, task: str, label2id: dict[str, int],
                    head_option: str, head_value, logger):
    """The head of `task` for the labels of `label2id` (with `head_option` set to `head_value` when given, e.g.
    the pooling) and its tokenizer, logged with its size; and DDP's `find_unused_parameters` default for it when
    none was given."""
    head = {"id2label": {i: label for label, i in label2id.items()}, "label2id": label2id}
    if head_value is not None:
        head[head_option] = head_value
    model, tokenizer = load_model(model_args, task, head)  # the command has seeded every generator (set_seed)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info(
        "%s: %d parameters, %d trainable (biLM %s, %s %s, mix %s)", type(model).__name__, model.num_parameters(),
        trainable, "frozen" if model.config.freeze_bilm else "fine-tuned", head_option,
        getattr(model.config, head_option), model.config.scalar_mix,
    )
    if training_args.ddp_find_unused_parameters is None:  # DDP: only extra, unused mixes leave parameters idle
        training_args.ddp_find_unused_parameters = model.config.num_output_representations > 1
    return model, tokenizer


def split_text(text: str, tokenizer, word_split: str | None) -> list[str]:
    """Words of `text`: with `word_split` (a name in `tokenization.WORD_SPLITTERS`), or the tokenizer's own rule."""
    return split_words(text, word_split or getattr(tokenizer, "word_split", "punctuation"))


def limit(examples: list, count: int | None) -> list:
    return examples if count is None else examples[:count]


def train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, logger) -> dict:
    """Train (unless only evaluation was asked), save the model, config and tokenizer, evaluate, write the metrics
    files, and say where everything went. The same steps for every fine-tuning command."""
    results = {}
    if training_args.do_train or not training_args.do_eval:  # training is the point of these commands
        train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        metrics = {**train_result.metrics, "train_samples": len(train_dataset), "world_size": training_args.world_size}
        trainer.save_model()  # model, config and tokenizer
        trainer.log_metrics("train", metrics)
        trainer.save_metrics("train", metrics)
        trainer.save_state()
        results.update(metrics)
    if eval_dataset is not None:
        metrics = trainer.evaluate()
        metrics["eval_samples"] = len(eval_dataset)
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
        results.update(metrics)
    if trainer.is_world_process_zero():
        logger.info("Wrote the model, the tokenizer and metrics (eval_results.json, all_results.json) to %s",
                    os.path.abspath(training_args.output_dir))
    return results


def run_command_line(main, logger) -> int:
    """Run a fine-tuning command's `main`: bad input is one line on stderr (no traceback) and exit status 2."""
    try:
        main()
    except InputError as error:
        logger.error("%s", error)
        return 2
    finally:
        end_distributed()
    return 0


def end_distributed() -> None:
    """Destroy torch.distributed's process group, if any, once the Trainer and its DDP wrapper are gone (call it
    after `main` returns): then the group's destructor runs while the interpreter is fully alive and with the GIL
    released, not at interpreter exit, where a gloo worker thread still freeing tensors can hang or crash it (the
    same teardown deadlock that `train.pretrain` avoids)."""
    import gc

    import torch.distributed as dist

    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def parse_arguments(dataclass_types, argv, logger) -> tuple:
    """Parse the command line (or a single JSON file) into the dataclasses, the last being `TrainingArguments`,
    and set up rank-aware logging; every process says its rank and the world size."""
    import sys

    from transformers import HfArgumentParser

    parser = HfArgumentParser(dataclass_types)
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].endswith(".json"):
        parsed = parser.parse_json_file(os.path.abspath(argv[0]))
    else:
        parsed = parser.parse_args_into_dataclasses(argv)
    training_args = parsed[-1]
    logging.basicConfig(
        format=f"%(asctime)s %(levelname)s [rank {training_args.process_index}] %(name)s: %(message)s",
        level=logging.INFO if training_args.should_log else logging.WARNING,
        force=True,
    )
    logger.warning(
        "Process rank %d of world size %d (device %s)",
        training_args.process_index, training_args.world_size, training_args.device,
    )
    return tuple(parsed)
