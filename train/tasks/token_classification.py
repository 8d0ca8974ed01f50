"""Fine-tune an ELMo tagger (`ElmoForTokenClassification`), e.g. for NER, with `transformers.Trainer`, and tag new
sentences with it: the task "token-classification" (`TASK`, its options, and `PARTS`, its `Task`).

    elmo-finetune-ner --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file conll2003/train.txt --validation_file conll2003/valid.txt --output_dir out/conll
    elmo-finetune-ner --model_name_or_path out/conll --do_predict --test_file conll2003/test.txt --output_dir out/test
    torchrun --nproc_per_node 2 -m elmo_hf.cli finetune-ner ... --use_cpu                # DDP, also on CPU

Files: CoNLL columns (`word POS chunk NER`, blank line between sentences, `-DOCSTART-` skipped; the tag is the
last column) or JSON lines with `tokens` and `tags`. Tags in IOB1, IOB2 or IOBES. Labels are aligned to the
tokenizer's positions with `word_ids()`: `<S>`, `</S>` and padding get -100. Reports entity-level precision,
recall and F1 (conlleval rules, or strict IOB2 with `--strict_iob2`) and token accuracy. Writes the model and
tokenizer (they load with `AutoModelForTokenClassification` / `AutoTokenizer`), `train_results.json`,
`eval_results.json`, `all_results.json`, and with `--do_predict` the tags of the test file (`predictions.txt`: a
CoNLL file's lines with the predicted tag appended as a last column, CoNLL-2003's layout plus the prediction, what
conlleval reads when the file had the gold tags; for JSON lines or sentences one a line, each word beside its tag,
a word a line, a blank line after each sentence) to `--output_dir`. Which layout a text test file has is told by
`elmo_hf.train.tasks.tagging_inputs.test_file_layout` and said (`--test_format` chooses); the word split is checked
against the training file's words (`check_word_units`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elmo_hf.tools.core.arguments import at_least
from elmo_hf.tools.core.config_choices import CHOICES
from elmo_hf.tools.core.errors import InputError

from . import MIN_SEQ_LENGTH, FineTuningTask, Task
from .common_data import (
    check_word_not_space,
    column_fields,
    entity_scores,
    read_tagging_file,
    read_words_file,
    split_text,
    tag_list,
    warn_if_cut,
    whole_sentences,
)
from .tagging_inputs import CONLL, LAYOUTS, LINES, split_mismatch, test_file_layout

logger = logging.getLogger(__name__)
# A biLSTM tagger predicts only O until it has had some thousand updates (benchmarks/bench_finetune.md): on a small
# training set the epochs are raised until it has (`--min_train_steps`).
MIN_TAGGING_STEPS = 2000


def use_crf_option():
    """--crf (--use_crf): the taggers' option (named entities, semantic roles)."""
    return field(default=None, metadata={
        "help": "End the tagger in a linear-chain CRF (Viterbi decoding, transitions the tags' scheme forbids never "
                "taken); default: none for a new head, the saved one's choice for a fine-tuned folder.",
        "aliases": ["--crf"]})


def crf_constraints_option():
    """--crf_constraints: the taggers' option beside --crf."""
    return field(default=None, metadata={
        "help": "Transitions the CRF never takes: auto (from the tag names: BIO or BIOES; the default), bio, bioes or "
                "none (IOB1 tags, where I- may open an entity).", "choices": CHOICES["crf_constraints"]})


@dataclass
class TokenClassificationDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines with tokens/tags."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; entity F1 is reported on it."})
    test_file: str | None = field(
        default=None, metadata={"help": "Sentences to tag with --do_predict: CoNLL columns (the word first; tags not "
                                "needed), JSON lines with tokens, or one sentence a line (.txt)."}
    )
    word_split: str | None = field(
        default=None, metadata={"help": "How a .txt --test_file's lines are cut into words (a name in "
                                "tokenization.WORD_SPLITTERS); default: the tokenizer's own. Checked against the "
                                "training file's words."}
    )
    test_format: str | None = field(
        default=None, metadata={"help": "How --test_file is read: conll (a word a line, a blank line between "
                                "sentences) or lines (a sentence a line); default: told from the file, and said."}
    )
    max_seq_length: int = field(default=256, metadata={
        "help": "Longest input in tokens, <S> and </S> included.", "type": at_least(MIN_SEQ_LENGTH)})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N training sentences.", "type": at_least(1)})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N validation sentences.", "type": at_least(1)})
    min_train_steps: int = field(
        default=MIN_TAGGING_STEPS, metadata={"help": "Train at least this many optimizer steps: when the epochs give "
                                             "fewer (a small training set), more whole epochs, as few as reach it "
                                             f"(default {MIN_TAGGING_STEPS}; 0: the epochs alone; --max_steps "
                                             "overrides both).", "type": at_least(0)}
    )
    strict_iob2: bool = field(default=False, metadata={"help": "Score entities in seqeval's strict IOB2 mode."})
    use_crf: bool | None = use_crf_option()
    crf_constraints: str | None = crf_constraints_option()



TASK = FineTuningTask(
    name="token-classification",
    data_options=TokenClassificationDataArguments,
    labels="tags",
    examples="sentences",
    head_option="token_classifier_encoder",
    head_default="lstm",
    head_help="none (linear) or lstm (biLSTM)",
    # a tagger's biLSTM needs more updates before it tags anything but O: 20 epochs of 8 sentences
    training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 20.0,
                                        "per_device_train_batch_size": 8, "warmup_steps": 0.1}),
    epochs_note="; more on a small training set: --min_train_steps",
    description="Fine-tune an ELMo tagger (`ElmoForTokenClassification`), e.g. for NER, with "
                "`transformers.Trainer`, and tag new\nsentences with it.",
    command="elmo-finetune-ner",
)


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


def check_crf_tags(sentences: list[dict], labels: list[str], constraints: str, where: str, crf: str,
                   unit: str = "sentence", locate=None) -> None:
    """One line (`InputError`) for the first sentence (or other `unit` of tags) whose tags take a transition the CRF's
    scheme forbids; `locate(example)`, where given, says where the file has it."""
    from elmo_hf.modeling_elmo.crf_elmo import allowed_transitions, scheme_of

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
            if locate is not None:
                number = f"{number} ({locate(sentence)})"
            raise InputError(f"{crf}: {unit} {number} of {where} {verb} {what}, which {scheme.upper()} tags "
                             "forbid; give IOB2 or BIOES tags, or --crf_constraints none (IOB1 tags)")


def make_compute_metrics(id2label: dict[int, str], strict: bool):
    from elmo_hf.tokenization import LABEL_PAD_ID

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


def warn_if_unsegmented_lines(sentences: list[list[str]], tokenizer, data_args) -> None:
    """One warning when the word split leaves runs of CJK characters as words in the lines to tag (a tagger from a
    biLM pretrained with whitespace on Chinese without spaces): each run would get one tag, a sentence one tag."""
    from ..pretrain_word_split import UNSEGMENTED_CJK

    runs = [word for words in sentences for word in words if UNSEGMENTED_CJK.search(word)]
    if runs:
        lines = sum(any(UNSEGMENTED_CJK.search(word) for word in words) for words in sentences)
        split = data_args.word_split or getattr(tokenizer, "word_split", None) or "punctuation"
        logger.warning("--test_file %s: the word split %s leaves %d words of six or more CJK characters in %d of "
                       "%d lines (%r, ...), each tagged as one word; give --word_split punctuation (a tag per "
                       "character) or jieba (Chinese words)", data_args.test_file, split, len(runs), lines,
                       len(sentences), runs[0][:20])


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


class TokenClassification(Task):
    """Examples are sentences of words, each word with its tag."""

    row = TASK

    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        """`[{"tokens": [...], "tags": [...]}, ...]` of CoNLL columns or JSON lines (`read_tagging_file`)."""
        return read_tagging_file(path, encoding)

    def labels_of(self, example: dict) -> Sequence[str]:
        return example["tags"]

    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        return example["tokens"]

    def sorted_labels(self, labels: Iterable[str]) -> list[str]:
        """"O" first, then by entity type and prefix (`tag_list`)."""
        return tag_list(labels)

    def encode(self, sentences: list[dict], tokenizer, tag2id: dict[str, int], data_args):
        """Sentences -> a `datasets.Dataset` of `input_ids` [tokens, row width], `attention_mask` and aligned
        `labels`."""
        import datasets

        from elmo_hf.tokenization import LABEL_PAD_ID

        room = data_args.max_seq_length - 2  # words beside <S> and </S>
        if room < 1:
            raise InputError(f"--max_seq_length {data_args.max_seq_length} leaves no room for words: <S> and </S> "
                             "take 2 tokens; give at least 3 (default 256)")

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

    def splits_test_text(self, test: tuple[str, list]) -> bool:
        return test[0] == LINES  # CoNLL columns and JSON token lists give the words

    def evaluation_data_args(self, data_args):
        return whole_sentences(data_args)  # scored on every word, as --do_predict tags them

    def collator(self, tokenizer):
        from .common_collators import ElmoDataCollatorForTokenClassification

        return ElmoDataCollatorForTokenClassification(tokenizer)

    def metrics(self, config, data_args):
        """Entity-level precision, recall and F1 (`--strict_iob2`: seqeval's strict mode) and token accuracy, from the
        argmax of each evaluation batch."""
        return make_compute_metrics(config.id2label, data_args.strict_iob2), argmax_logits

    def read_test_file(self, path: str, encoding: str, data_args) -> tuple[str, list]:
        """`(kind, items)` of `read_words_file`: CoNLL columns, JSON lines with tokens, or sentences one a line (the
        layout of a text file is settled by `prepare_test`, which knows the tagger)."""
        return read_words_file(path, encoding)

    def prediction_lines(self, model, tokenizer, test: tuple[str, list], data_args,
                         batch_size: int) -> tuple[list[str], int]:
        """The CoNLL lines with the predicted tag appended, or each word and its tag on a line, a blank line after each
        sentence (module docstring), and how many sentences were tagged."""
        from .common_predict import predict_tags

        kind, items = test
        if kind == "conll":
            groups = _conll_sentences(items)
            sentences = [[column_fields(items[i])[0] for i in group] for group in groups]
        elif kind == "json":
            sentences = items
        else:
            sentences = [split_text(line, tokenizer, data_args.word_split) for line in items]
            warn_if_unsegmented_lines(sentences, tokenizer, data_args)
        tags = iter(predict_tags(model, tokenizer, [s for s in sentences if s], batch_size))
        predicted = [[model.config.id2label[t] for t in next(tags)] if words else [] for words in sentences]
        if kind != "conll":
            lines = [line for words, row in zip(sentences, predicted) for line in [*map(" ".join, zip(words, row)), ""]]
            return lines, sum(1 for words in sentences if words)
        appended = {i: tag for group, row in zip(groups, predicted) for i, tag in zip(group, row)}
        lines = [_append_column(line, appended.get(i, "O")) if line.strip() else line for i, line in enumerate(items)]
        return lines, len(groups)

    def head_options(self, data_args) -> dict:
        return crf_head_options(data_args)

    def check_training_examples(self, config, sentences: list[dict], data_args, tokenizer=None) -> None:
        """A CRF head, new (--crf) or a saved one trained further, must be able to learn every training sentence: a gold
        sequence its scheme forbids is never learned (each forbidden step costs FORBIDDEN in its score, so the loss is
        in the thousands and says nothing), so it is refused in one line naming the sentence and the way out.
        With the `tokenizer`: the word split saved with the tagger (which cuts the text it tags later) must cut the
        training sentences into the file's words (`check_word_units`)."""
        if tokenizer is not None:
            check_word_units(sentences, tokenizer, data_args)
        check_crf_training_tags(config, sentences, data_args)

    def prepare_test(self, model, tokenizer, test: tuple[str, list], data_args) -> tuple[str, list]:
        """The layout of a text --test_file: `--test_format`, or told from the file (`test_file_layout`: the
        tagger's tags and word split help), said in one line with its reason."""
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
        if layout == CONLL:
            for number, line in enumerate(items, start=1):
                if line.strip():
                    check_word_not_space(line, f"--test_file {data_args.test_file}: line {number}")
        logger.info("--test_file %s: read as %s (%s)%s", data_args.test_file,
                    "CoNLL columns, the word first" if layout == CONLL else "sentences, one a line", why,
                    "" if data_args.test_format else f"; --test_format {LINES if layout == CONLL else CONLL} reads it "
                    "the other way")
        return layout, items


def crf_head_options(data_args) -> dict:
    """The config fields --crf (--use_crf) and --crf_constraints set (they win over a saved head's): the taggers'.
    The command line refused any other value of --crf_constraints already (its choices: the configuration's)."""
    options = {}
    if data_args.use_crf is not None:
        options["use_crf"] = data_args.use_crf
    if data_args.crf_constraints is not None:
        options["crf_constraints"] = data_args.crf_constraints
    return options


def check_crf_training_tags(config, examples: list[dict], data_args, unit: str = "sentence", locate=None) -> None:
    """A CRF head (new with --crf, or a saved one) refuses training tags its scheme forbids (`check_crf_tags`)."""
    if config.use_crf:
        labels = [config.id2label[i] for i in range(config.num_labels)]
        check_crf_tags(examples, labels, config.crf_constraints, f"--train_file {data_args.train_file}",
                       "--crf" if data_args.use_crf else "the saved head's CRF", unit, locate)


PARTS = TokenClassification()
