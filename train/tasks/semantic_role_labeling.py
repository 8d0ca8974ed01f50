"""Fine-tune ELMo to label the arguments of predicates (`ElmoForSemanticRoleLabeling`, He et al. 2017's BIO tagger
given a marked predicate, at small scale) with `transformers.Trainer`, and label new sentences: the task
"semantic-role-labeling" (`TASK`, its options, and `PARTS`, its `Task`).

    elmo-finetune semantic-role-labeling --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file conll05/train.txt --validation_file conll05/dev.txt --output_dir out/srl
    elmo-finetune semantic-role-labeling --model_name_or_path out/srl --do_predict --test_file new.txt \\
        --output_dir out/new

Files: CoNLL-2005/2012-style predicate-argument columns, a word a line and a blank line between sentences: the word
first, then a column of predicate marks (the predicate's lemma or sense where the word is a predicate, `-` where it is
not, or CoNLL-2009's `_`), then one column of argument tags per predicate of the sentence, in the order of the
predicates: BIO tags (`B-ARG0`, `I-ARG0`, `B-V`, `O`) or CoNLL-2005's brackets (`(A0*`, `*`, `*)`, `(V*)`); a column
that tags the verb (`B-V`) tags it at its own predicate. Columns between the word and the marks are not read
(`--predicate_column`: default 1, the column after the word). A sentence with N predicates is N examples; a test file's
sentences without a predicate are written back (words and marks). Reports span precision, recall and F1 over the
labelled argument spans, the predicate's own `V` span left out (as CoNLL-2005's srl-eval.pl), and tag accuracy.
`--do_predict` reads the same columns (tags not needed) and writes each word line with its predicate mark and one
predicted BIO column per predicate (`predictions.txt`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elmo_hf.tools.core.arguments import at_least
from elmo_hf.tools.core.errors import FileFormatError, InputError

from . import MIN_SEQ_LENGTH, FineTuningTask, Task
from .common_data import tag_list, warn_if_cut, whole_sentences
from .token_classification import (
    check_crf_training_tags,
    crf_constraints_option,
    crf_head_options,
    use_crf_option,
)

logger = logging.getLogger(__name__)
# A word that is not a predicate: `-` (CoNLL-2005/2012) or `_` (CoNLL-2009's PRED column); anything else is one.
NOT_A_PREDICATE = ("-", "_")


@dataclass
class SemanticRoleLabelingDataArguments:
    train_file: str | None = field(default=None, metadata={
        "help": "Predicate-argument columns: word, predicate marks (- or _ where none), a BIO (or CoNLL-2005 bracket) "
                "column per predicate; a blank line between sentences."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; span F1 is reported on it."})
    test_file: str | None = field(default=None, metadata={
        "help": "Sentences to label with --do_predict: the same columns, the tag columns not needed."})
    word_split: str | None = field(default=None, metadata={
        "help": "Not used: the files give the words (accepted as every task's option)."})
    predicate_column: int = field(default=1, metadata={
        "help": "The column of predicate marks (0 is the word); the tag columns follow it.", "type": at_least(1)})
    max_seq_length: int = field(default=256, metadata={
        "help": "Longest input in tokens, <S> and </S> included.", "type": at_least(MIN_SEQ_LENGTH)})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N training examples.", "type": at_least(1)})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N validation examples.", "type": at_least(1)})
    use_crf: bool | None = use_crf_option()
    crf_constraints: str | None = crf_constraints_option()


TASK = FineTuningTask(
    name="semantic-role-labeling",
    data_options=SemanticRoleLabelingDataArguments,
    labels="tags",
    examples="predicates",
    head_option="token_classifier_encoder",
    head_default="lstm",  # He et al. 2017: biLSTM layers over [word ; predicate indicator]
    head_help="none (linear) or lstm (biLSTM)",
    training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 20.0,
                                        "per_device_train_batch_size": 8, "warmup_steps": 0.1}),
    description="Fine-tune ELMo to label the arguments of predicates (`ElmoForSemanticRoleLabeling`: BIO tags given "
                "a marked\npredicate) with `transformers.Trainer`, and label new sentences.",
)


# ---------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------
class BracketError(FileFormatError):
    """A bracket column that does not parse, at `word` (1-based)."""

    def __init__(self, word: int, message: str):
        super().__init__(message)
        self.word = word


def bracket_tags(column: Sequence[str]) -> list[str]:
    """CoNLL-2005's bracket notation of one predicate's arguments -> BIO: `(A0*` opens A0, `*` continues what is
    open (or is outside), `*)` closes it, `(V*)` is a one-word V."""
    tags, open_label = [], None
    for number, cell in enumerate(column, start=1):
        if cell.startswith("("):
            if open_label is not None:
                raise BracketError(number, f"{cell!r} opens an argument inside {open_label}")
            label = cell[1:].split("*", 1)[0]
            tags.append(f"B-{label}")
            open_label = label
        elif cell.startswith("*"):
            tags.append(f"I-{open_label}" if open_label is not None else "O")
        else:
            raise BracketError(number, f"{cell!r} is neither a BIO tag nor CoNLL-2005's (X*, * or *)")
        if cell.endswith(")"):
            if open_label is None:
                raise BracketError(number, f"{cell!r} closes no argument")
            open_label = None
    if open_label is not None:
        raise BracketError(len(column), f"the argument {open_label} is never closed")
    return tags


def _sentences(path: str, encoding: str) -> list[list[tuple[int, list[str]]]]:
    """The sentences of a file of columns: each a list of (line number, columns)."""
    sentences, current = [], []
    with open(path, encoding=encoding) as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                current.append((number, line.split()))
            elif current:
                sentences.append(current)
                current = []
    if current:
        sentences.append(current)
    if not sentences:
        raise FileFormatError("no sentences (a word a line, a blank line between sentences)")
    return sentences


def read_examples(path: str, encoding: str, data_args, tagged: bool = True) -> list[dict]:
    """`[{"tokens", "predicate", "mark", "marks", "tags", "sentence", "line"}, ...]`: an example per predicate of each
    sentence (`tags` None where not `tagged`: a test file's tag columns are not read; `marks`: the sentence's column
    of marks as written). Not `tagged` (a test file), a sentence without a predicate is an example too, with
    `predicate` None: its words and marks are written back, so that the predictions line up with the file."""
    marks = data_args.predicate_column  # 1 or more: the word is column 0 (its option's converter)
    examples = []
    for index, sentence in enumerate(_sentences(path, encoding)):
        first = sentence[0][0]
        widths = {len(columns) for _, columns in sentence}
        if len(widths) > 1:
            width = len(sentence[0][1])
            line, other = next((number, columns) for number, columns in sentence if len(columns) != width)
            raise FileFormatError(f"line {line}: {len(other)} columns where the sentence's first line (line {first}) "
                                  f"has {width}: every line of a sentence needs as many")
        width = widths.pop()
        if width <= marks:
            raise FileFormatError(f"line {first}: {width} columns, no predicate marks at --predicate_column {marks}")
        words = [columns[0] for _, columns in sentence]
        written = [columns[marks] for _, columns in sentence]
        predicates = [i for i, mark in enumerate(written) if mark not in NOT_A_PREDICATE]
        columns = width - marks - 1
        if tagged and columns != len(predicates):
            raise FileFormatError(f"line {first}: {len(predicates)} predicates but {columns} tag columns (one per "
                                  f"predicate; in the column of marks, --predicate_column {marks}, a predicate is a "
                                  "word's lemma or sense, - or _ a word that is not one)")
        if not tagged and not predicates:
            examples.append({"tokens": words, "predicate": None, "mark": None, "marks": written, "tags": None,
                             "sentence": index, "line": first})
        for k, predicate in enumerate(predicates):
            tags = None
            if tagged:  # a test file's tag columns, if any, are not read: they may be another scheme's gold
                tags = _tag_column([row[marks + 1 + k] for _, row in sentence], sentence, k)
                _check_verb_at_predicate(tags, predicate, sentence, k)
            examples.append({"tokens": words, "predicate": predicate, "mark": written[predicate], "marks": written,
                             "tags": tags, "sentence": index, "line": first})
    return examples


def _tag_column(column: list[str], sentence: list[tuple[int, list[str]]], k: int) -> list[str]:
    """The BIO tags of the k-th predicate's column (BIO as written, or CoNLL-2005's brackets read); a bracket error
    names its own line."""
    if any("*" in cell for cell in column):
        try:
            return bracket_tags(column)
        except BracketError as error:
            line = sentence[min(error.word, len(sentence)) - 1][0]
            raise FileFormatError(f"line {line}, predicate {k + 1}: {error}") from error
    for (line, _), tag in zip(sentence, column):
        if tag != "O" and not (tag[:2] in ("B-", "I-") and len(tag) > 2):
            # "ARG0" alone was a class of its own, which the span scores read as no argument
            raise FileFormatError(f"line {line}, predicate {k + 1}: the tag {tag!r} is neither BIO (B-ARG0, I-ARG0, "
                                  "O) nor CoNLL-2005's brackets ((A0*, *, *))")
    return column


def _check_verb_at_predicate(tags: list[str], predicate: int, sentence: list[tuple[int, list[str]]], k: int) -> None:
    """A column that tags the verb (`B-V`, `I-V`) tags its own predicate (the mark may be on any word of a verb of
    several): elsewhere, the columns are in another order than the predicates (or another column was read as the
    marks), and the head would learn the wrong words' roles."""
    verbs = [i for i, tag in enumerate(tags) if tag in ("B-V", "I-V")]
    if verbs and predicate not in verbs:
        raise FileFormatError(
            f"line {sentence[verbs[0]][0]}: the tag column of predicate {k + 1} (line {sentence[predicate][0]}, "
            f"{sentence[predicate][1][0]!r}) has its B-V at {sentence[verbs[0]][1][0]!r}: the tag columns follow the "
            "predicates in their order (or give the column of marks: --predicate_column)")


# ---------------------------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------------------------
def argument_spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The labelled argument spans (label, first word, last word) of one predicate's BIO tags, its own `V` span left
    out. An `I-X` that continues no `X` opens a span of its own (as conlleval reads IOB)."""
    spans, label, start = set(), None, 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, name = tag.partition("-")
        if label is not None and (prefix != "I" or name != label):
            spans.add((label, start, i - 1))
            label = None
        if prefix == "B" or (prefix == "I" and label is None):
            label, start = name, i
    return {span for span in spans if span[0] != "V"}


def span_scores(references: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision, recall and F1 of the argument spans (a span counts when its label, start and end all match),
    and the tag accuracy."""
    gold = predicted = correct = same = words = 0
    for reference, prediction in zip(references, predictions):
        ours, theirs = argument_spans(prediction), argument_spans(reference)
        gold, predicted, correct = gold + len(theirs), predicted + len(ours), correct + len(ours & theirs)
        same += sum(a == b for a, b in zip(reference, prediction))
        words += len(reference)
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "accuracy": same / words if words else 0.0}


# ---------------------------------------------------------------------------------------------------------------
# The task
# ---------------------------------------------------------------------------------------------------------------
class PredicateCollator:
    """Pads a batch as the tagger's collator does, and its `predicate_mask` with zeros. Holds the tokenizer, which
    `Trainer` saves with the model."""

    def __init__(self, tokenizer):
        from .common_collators import ElmoDataCollatorForTokenClassification

        self.tokenizer = tokenizer
        self.tags = ElmoDataCollatorForTokenClassification(tokenizer)

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        batch = self.tags([{key: value for key, value in row.items() if key != "predicate_mask"} for row in rows])
        marks = torch.zeros(batch["attention_mask"].shape, dtype=torch.long)
        for r, row in enumerate(rows):
            marks[r, : len(row["predicate_mask"])] = torch.as_tensor(row["predicate_mask"], dtype=torch.long)
        batch["predicate_mask"] = marks
        return batch


class SemanticRoleLabeling(Task):
    """Examples are (sentence, predicate) pairs; their labels the BIO tags of the predicate's arguments."""

    row = TASK

    def splits_test_text(self, test) -> bool:
        return False  # the files give the words

    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        return read_examples(path, encoding, data_args)

    def labels_of(self, example: dict) -> Sequence[str]:
        return example["tags"]

    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        return example["tokens"]

    def sorted_labels(self, labels: Iterable[str]) -> list[str]:
        return tag_list(labels)

    def encode(self, examples: list[dict], tokenizer, label2id: dict[str, int], data_args) -> list[dict]:
        """Each example's `input_ids`, `attention_mask`, `predicate_mask` (1 at the predicate's token) and, when
        tagged, its `labels` aligned with `word_ids()` (-100 at `<S>`, `</S>`)."""
        from elmo_hf.tokenization import LABEL_PAD_ID

        if data_args.max_seq_length < 3:
            raise InputError(f"--max_seq_length {data_args.max_seq_length} leaves no room for words: <S> and </S> "
                             "take 2 tokens; give at least 3 (default 256)")
        warn_if_cut(examples, [len(example["tokens"]) for example in examples], data_args.max_seq_length - 2,
                    "each is cut to its first {room} words, the rest neither labelled nor scored")
        rows = []
        for example in examples:
            encoded = tokenizer(example["tokens"], is_split_into_words=True, truncation=True,
                                max_length=data_args.max_seq_length)
            word_ids = encoded.word_ids()
            row = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
                   "predicate_mask": [int(w is not None and w == example["predicate"]) for w in word_ids]}
            if example["tags"] is not None:
                row["labels"] = [LABEL_PAD_ID if w is None else label2id[example["tags"][w]] for w in word_ids]
            rows.append(row)
        return rows

    def evaluation_data_args(self, data_args):
        return whole_sentences(data_args)  # scored on every word, as --do_predict tags them

    def collator(self, tokenizer) -> PredicateCollator:
        return PredicateCollator(tokenizer)

    def head_options(self, data_args) -> dict:
        return crf_head_options(data_args)

    def check_training_examples(self, config, examples: list[dict], data_args, tokenizer=None) -> None:
        """A CRF head (--crf) must be able to learn every predicate's tags: one its BIO scheme forbids is refused."""
        check_crf_training_tags(config, examples, data_args, unit="predicate",
                                locate=lambda example: f"line {example['line']}, word {example['predicate'] + 1}")

    def metrics(self, config, data_args):
        """Span precision, recall and F1 (the V span left out) and tag accuracy, from each batch's argmax."""
        from elmo_hf.tokenization import LABEL_PAD_ID

        def compute_metrics(eval_prediction) -> dict[str, float]:
            predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
            references, predicted = [], []
            for pred_row, label_row in zip(predictions, labels):
                keep = label_row != LABEL_PAD_ID
                references.append([config.id2label[int(i)] for i in label_row[keep]])
                predicted.append([config.id2label[int(i)] for i in pred_row[keep]])
            return span_scores(references, predicted)

        def argmax_logits(logits, labels):
            return (logits[0] if isinstance(logits, tuple) else logits).argmax(-1)

        return compute_metrics, argmax_logits

    def read_test_file(self, path: str, encoding: str, data_args) -> list[dict]:
        return read_examples(path, encoding, data_args, tagged=False)

    def prediction_lines(self, model, tokenizer, test: list[dict], data_args, batch_size: int) -> tuple[list[str], int]:
        """Each word with its predicate mark as the file wrote it and a predicted BIO column per predicate, a blank
        line after each sentence, every sentence of the file in its order (one without a predicate: its words and
        marks alone, as srl-eval.pl reads it); how many predicates were labelled."""
        predicates = [example for example in test if example["predicate"] is not None]
        tags = iter(predict_roles(model, tokenizer, predicates, data_args, batch_size))
        lines, by_sentence = [], {}
        for example in test:
            row = next(tags) if example["predicate"] is not None else None
            by_sentence.setdefault(example["sentence"], []).append((example, row))
        for group in by_sentence.values():
            words, marks = group[0][0]["tokens"], group[0][0]["marks"]
            columns = [row for _, row in group if row is not None]
            for i, word in enumerate(words):
                lines.append(" ".join([word, marks[i], *(row[i] for row in columns)]))
            lines.append("")
        return lines, len(predicates)


def predict_roles(model, tokenizer, examples: list[dict], data_args, batch_size: int) -> list[list[str]]:
    """The predicted tags of every word of each example, by batches."""
    import torch

    rows = PARTS.encode([{**example, "tags": None} for example in examples], tokenizer, {},
                        whole_sentences(data_args))
    pad, predicted = PredicateCollator(tokenizer), []
    model.eval()
    for first in range(0, len(rows), batch_size):
        batch = {key: value.to(model.device) for key, value in pad(rows[first: first + batch_size]).items()}
        with torch.no_grad():
            decoded = model.decode(**batch)
        for example, ids in zip(examples[first: first + batch_size], decoded):
            tags = [model.config.id2label[i] for i in ids]
            predicted.append(tags + ["O"] * (len(example["tokens"]) - len(tags)))
    return predicted


PARTS = SemanticRoleLabeling()
