"""Fine-tune an ELMo tagger (`ElmoForTokenClassification`), e.g. for NER, with `transformers.Trainer`, and tag new
sentences with it: the parts of the task "token-classification" (`train.finetune_run.TaskParts`; its row of
`elmo_tools.tasks.TASKS` holds its names and defaults).

    elmo-finetune-ner --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file conll2003/train.txt --validation_file conll2003/valid.txt --output_dir out/conll
    elmo-finetune-ner --model_name_or_path out/conll --do_predict --test_file conll2003/test.txt --output_dir out/test
    torchrun --nproc_per_node 2 -m train.finetune_ner ... --use_cpu                # DDP, also on CPU

Files: CoNLL columns (`word POS chunk NER`, blank line between sentences, `-DOCSTART-` skipped; the tag is the
last column) or JSON lines with `tokens` and `tags`. Tags in IOB1, IOB2 or IOBES. Labels are aligned to the
tokenizer's positions with `word_ids()`: `<S>`, `</S>` and padding get -100. Reports entity-level precision,
recall and F1 (conlleval rules, or strict IOB2 with `--strict_iob2`) and token accuracy. Writes the model and
tokenizer (they load with `AutoModelForTokenClassification` / `AutoTokenizer`), `train_results.json`,
`eval_results.json`, `all_results.json`, and with `--do_predict` the tags of the test file (`predictions.txt`: a
CoNLL file's lines with the predicted tag appended as a last column, CoNLL-2003's layout plus the prediction, what
conlleval reads when the file had the gold tags; for JSON lines or sentences one a line, each word beside its tag,
a word a line, a blank line after each sentence) to `--output_dir`. Which layout a text test file has is told by
`train.tagging_inputs.test_file_layout` and said (`--test_format` chooses); the word split is checked against the
training file's words (`check_word_units`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Sequence

import datasets

from modeling_elmo.configuration_elmo import CRF_CONSTRAINTS
from modeling_elmo.crf_elmo import allowed_transitions, scheme_of
from tokenization import LABEL_PAD_ID

from .collators import ElmoDataCollatorForTokenClassification
from .finetune_cli import InputError, run_command_line
from .finetune_data import (
    entity_scores,
    read_tagging_file,
    read_words_file,
    split_text,
    tag_list,
    warn_if_cut,
)
from .finetune_run import run
from .predict import predict_tags
from .tagging_inputs import CONLL, LAYOUTS, LINES, split_mismatch, test_file_layout

logger = logging.getLogger("train.finetune_ner")  # also as __main__ (python -m)
TASK = "token-classification"


def read_file(path: str, encoding: str, data_args) -> list[dict]:
    """`[{"tokens": [...], "tags": [...]}, ...]` of CoNLL columns or JSON lines (`read_tagging_file`)."""
    return read_tagging_file(path, encoding)


def labels_of(example: dict) -> Sequence[str]:
    return example["tags"]


def words_of(example: dict, tokenizer, data_args) -> Sequence[str]:
    return example["tokens"]


def sorted_labels(labels: Iterable[str]) -> list[str]:
    """"O" first, then by entity type and prefix (`tag_list`)."""
    return tag_list(labels)


def head_options(data_args) -> dict:
    """The config fields --crf (--use_crf) and --crf_constraints set (they win over a saved head's)."""
    options = {}
    if data_args.use_crf is not None:
        options["use_crf"] = data_args.use_crf
    if data_args.crf_constraints is not None:
        if data_args.crf_constraints not in CRF_CONSTRAINTS:
            raise InputError(f"--crf_constraints must be one of {', '.join(CRF_CONSTRAINTS)}, got "
                             f"{data_args.crf_constraints!r}")
        options["crf_constraints"] = data_args.crf_constraints
    return options


def check_training_examples(config, sentences: list[dict], data_args, tokenizer=None) -> None:
    """A CRF head, new (--crf) or a saved one trained further, must be able to learn every training sentence: a gold
    sequence its scheme forbids is never learned (each forbidden step costs FORBIDDEN in its score, so the loss is
    in the thousands and says nothing), so it is refused in one line naming the sentence and the way out.
    With the `tokenizer`: the word split saved with the tagger (which cuts the text it tags later) must cut the
    training sentences into the file's words (`check_word_units`)."""
    if tokenizer is not None:
        check_word_units(sentences, tokenizer, data_args)
    if config.use_crf:
        labels = [config.id2label[i] for i in range(config.num_labels)]
        check_crf_tags(sentences, labels, config.crf_constraints, f"--train_file {data_args.train_file}",
                       "--crf" if data_args.use_crf else "the saved head's CRF")


def check_word_units(sentences: list[dict], tokenizer, data_args) -> None:
    """A word split that cuts the training text into other units than the file's words (characters under jieba, say)
    makes a tagger that tags units it never learned: refused in one line when --word_split names it, a warning when
    it is the tokenizer's own (the split a training run saves, and the pipeline and --test_file use)."""
    split = data_args.word_split or getattr(tokenizer, "word_split", None) or "punctuation"
    mismatch = split_mismatch(sentences, split)
    if mismatch is None:
        return
    if data_args.word_split:
        raise InputError(f"--word_split {split}: --train_file {data_args.train_file}: {mismatch}")
    logger.warning("--train_file %s: %s", data_args.train_file, mismatch)


def check_crf_tags(sentences: list[dict], labels: list[str], constraints: str, where: str, crf: str) -> None:
    """One line (`InputError`) for the first sentence whose tags take a transition the CRF's scheme forbids."""
    scheme = scheme_of(labels, constraints)
    start, follow, end = allowed_transitions(labels, constraints)
    index = {label: i for i, label in enumerate(labels)}
    for number, sentence in enumerate(sentences, 1):
        ids = [index[tag] for tag in sentence["tags"]]
        steps = [("starts with", None, ids[0]) if ids and not start[ids[0]] else None]
        steps += [("has", a, b) for a, b in zip(ids, ids[1:]) if not follow[a][b]]
        steps += [("ends with", ids[-1], None) if ids and not end[ids[-1]] else None]
        wrong = next((step for step in steps if step), None)
        if wrong:
            verb, before, after = wrong
            what = (f"{labels[after]} after {labels[before]}" if verb == "has"
                    else labels[after if after is not None else before])
            raise InputError(f"{crf}: sentence {number} of {where} {verb} {what}, which {scheme.upper()} tags "
                             "forbid; give IOB2 or BIOES tags, or --crf_constraints none (IOB1 tags)")


def encode(sentences: list[dict], tokenizer, tag2id: dict[str, int], data_args):
    """Sentences -> a `datasets.Dataset` of `input_ids` [tokens, row width], `attention_mask` and aligned `labels`."""

    room = data_args.max_seq_length - 2  # words beside <S> and </S>
    if room < 1:
        raise InputError(f"--max_seq_length {data_args.max_seq_length} leaves no room for words: <S> and </S> take 2 "
                         "tokens; give at least 3 (default 256)")

    def tokenize(batch):
        encoded = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True,
                            max_length=data_args.max_seq_length)
        labels = []
        for row, tags in enumerate(batch["tags"]):
            word_ids = encoded.word_ids(row)  # None at <S>, </S>
            labels.append([LABEL_PAD_ID if w is None else tag2id[tags[w]] for w in word_ids])
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": labels}

    features = datasets.Features(
        {
            "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),  # character (and word) ids
            "attention_mask": datasets.Sequence(datasets.Value("int8")),
            "labels": datasets.Sequence(datasets.Value("int64")),
        }
    )
    dataset = datasets.Dataset.from_list(sentences)
    dataset = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names, features=features,
                          desc="Tokenizing")
    warn_if_cut(sentences, [len(sentence["tokens"]) for sentence in sentences], room,
                "each is cut to its first {room} words, the rest neither tagged nor scored")
    return dataset


def collator(tokenizer) -> ElmoDataCollatorForTokenClassification:
    return ElmoDataCollatorForTokenClassification(tokenizer)


def make_compute_metrics(id2label: dict[int, str], strict: bool):
    def compute_metrics(eval_prediction) -> dict[str, float]:
        predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
        if predictions.ndim == 3:  # logits, unless preprocess_logits_for_metrics took the argmax
            predictions = predictions.argmax(-1)
        references, predicted = [], []
        for pred_row, label_row in zip(predictions, labels):
            keep = label_row != LABEL_PAD_ID
            references.append([id2label[int(i)] for i in label_row[keep]])
            predicted.append([id2label[int(i)] for i in pred_row[keep]])
        return entity_scores(references, predicted, strict=strict)

    return compute_metrics


def argmax_logits(logits, labels):
    """Keep only the predicted ids of the evaluation batches (not the logits) in memory."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(-1)


def metrics(config, data_args):
    """Entity-level precision, recall and F1 (`--strict_iob2`: seqeval's strict mode) and token accuracy, from the
    argmax of each evaluation batch."""
    return make_compute_metrics(config.id2label, data_args.strict_iob2), argmax_logits


def read_test_file(path: str, encoding: str, data_args) -> tuple[str, list]:
    """`(kind, items)` of `read_words_file`: CoNLL columns, JSON lines with tokens, or sentences one a line (the
    layout of a text file is settled by `prepare_test`, which knows the tagger)."""
    return read_words_file(path, encoding)


def prepare_test(model, tokenizer, test: tuple[str, list], data_args) -> tuple[str, list]:
    """The layout of a text --test_file: `--test_format`, or told from the file (`test_file_layout`: the tagger's tags
    and word split help), said in one line with its reason."""
    kind, items = test
    if kind == "json":
        return test
    if data_args.test_format is not None:
        if data_args.test_format not in LAYOUTS:
            raise InputError(f"--test_format must be one of {', '.join(LAYOUTS)}, got {data_args.test_format!r}")
        layout, why = data_args.test_format, "--test_format"
    else:
        split = data_args.word_split or getattr(tokenizer, "word_split", None) or "punctuation"
        layout, why = test_file_layout(items, split, list(model.config.label2id))
    logger.info("--test_file %s: read as %s (%s)%s", data_args.test_file,
                "CoNLL columns, the word first" if layout == CONLL else "sentences, one a line", why,
                "" if data_args.test_format else f"; --test_format {LINES if layout == CONLL else CONLL} reads it "
                "the other way")
    return layout, items


def prediction_lines(model, tokenizer, test: tuple[str, list], data_args, batch_size: int) -> tuple[list[str], int]:
    """The CoNLL lines with the predicted tag appended, or each word and its tag on a line, a blank line after each
    sentence (module docstring), and how many sentences were tagged."""
    kind, items = test
    if kind == "conll":
        groups = _conll_sentences(items)
        sentences = [[items[i].split()[0] for i in group] for group in groups]
    elif kind == "json":
        sentences = items
    else:
        sentences = [split_text(line, tokenizer, data_args.word_split) for line in items]
    tags = iter(predict_tags(model, tokenizer, [s for s in sentences if s], batch_size))
    predicted = [[model.config.id2label[t] for t in next(tags)] if words else [] for words in sentences]
    if kind != "conll":
        lines = [line for words, row in zip(sentences, predicted) for line in [*map(" ".join, zip(words, row)), ""]]
        return lines, sum(1 for words in sentences if words)
    appended = {i: tag for group, row in zip(groups, predicted) for i, tag in zip(group, row)}
    lines = [_append_column(line, appended.get(i, "O")) if line.strip() else line for i, line in enumerate(items)]
    return lines, len(groups)


def _conll_sentences(lines: list[str]) -> list[list[int]]:
    """Indices of the token lines of each sentence (blank lines and `-DOCSTART-` end one)."""
    groups, current = [], []
    for i, line in enumerate(lines):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                groups.append(current)
            current = []
        else:
            current.append(i)
    if current:
        groups.append(current)
    return groups


def _append_column(line: str, tag: str) -> str:
    return f"{line}{chr(9) if chr(9) in line else ' '}{tag}"


def main(argv: list[str] | None = None, guard=None) -> dict:
    """The command in this process (`python -m train.finetune_ner`, tests, benchmarks)."""
    return run(TASK, argv, guard)


def cli() -> int:
    """The command line: bad input is one line on stderr and exit status 2; SIGINT/SIGTERM one line, 130/143.
    (The console script starts at `train.finetune_cli.ner`, which answers --help before torch loads.)"""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())
