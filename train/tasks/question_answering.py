"""Fine-tune ELMo for extractive question answering (`ElmoForQuestionAnswering`) on SQuAD-format files with
`transformers.Trainer`, and answer new questions with it: the task "question-answering" (`TASK`, its options, and
`PARTS`, its `Task`).

    elmo-finetune-qa --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file train-v1.1.json --validation_file dev-v1.1.json --output_dir out/squad
    elmo-finetune-qa --model_name_or_path out/squad --do_predict --test_file questions.jsonl --output_dir out/test

Files: SQuAD v1.1 / v2.0 JSON, or JSON lines with id, question, context and answers {text, answer_start}
(`elmo_hf.train.tasks.squad_data`). Long passages are read in overlapping windows of words (`--max_seq_length`,
`--doc_stride`). Reports SQuAD's exact match and F1 (percent) on the validation file; with unanswerable questions in the
data (SQuAD 2.0) or `--version_2_with_negative`, "no answer" competes with the best span. Writes the model and tokenizer
(they load with `AutoModelForQuestionAnswering` / `AutoTokenizer`, and answer through `pipeline("question-answering",
model=folder, trust_remote_code=True)`), the metrics files, and with `--do_predict` `predictions.json` (id -> answer
text) to `--output_dir`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elmo_hf.tools.core.arguments import at_least
from elmo_hf.tools.core.errors import InputError

from . import MIN_SEQ_LENGTH, FineTuningTask, Task
from .squad_metrics import SCORING_NAMES, scoring_for

logger = logging.getLogger(__name__)

@dataclass
class QuestionAnsweringDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "SQuAD v1.1/v2.0 JSON, or JSON lines with id, "
                                                            "question, context, answers {text, answer_start}."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; exact match and F1 are "
                                                                 "reported on it."})
    test_file: str | None = field(
        default=None, metadata={"help": "Questions to answer with --do_predict (same formats, answers not needed): "
                                "writes predictions.json, id -> answer text."}
    )
    word_split: str | None = field(
        default=None, metadata={"help": "How questions and passages are cut into words (a name in "
                                "tokenization.WORD_SPLITTERS); default: the tokenizer's own."}
    )
    max_seq_length: int = field(default=256, metadata={
        "help": "Tokens of a window: the question, a run of the passage's words, and 4 <S>/</S>.",
        "type": at_least(MIN_SEQ_LENGTH)})
    doc_stride: int = field(default=32, metadata={
        "help": "Words that consecutive windows of a long passage share.", "type": at_least(0)})
    max_question_length: int = field(default=64, metadata={
        "help": "Words of a question kept (its first).", "type": at_least(1)})
    max_answer_length: int = field(default=30, metadata={
        "help": "Longest answer predicted, in words.", "type": at_least(1)})
    scoring: str | None = field(
        default=None, metadata={"help": "How answers are scored: words (SQuAD's rule) or characters (CMRC 2018's, for "
                                "text without spaces between words); default auto: characters when the validation "
                                "passages are mostly CJK characters. Said in the results (eval_scoring)."}
    )
    version_2_with_negative: bool | None = field(
        default=None, metadata={"help": "Let \"no answer\" compete with the best span (SQuAD 2.0); default: when the "
                                "training data has unanswerable questions, or the fine-tuned head was trained so."}
    )
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N training questions.", "type": at_least(1)})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N validation questions.", "type": at_least(1)})



TASK = FineTuningTask(
    name="question-answering",
    data_options=QuestionAnsweringDataArguments,
    labels="answers",
    examples="questions",
    head_option="qa_modeling_layer",
    head_default="lstm",
    head_help="lstm (BiDAF's modelling biLSTM over the passage) or none",
    # measured with three seeds (benchmarks/results_quality.md, section 5): 1e-2 over ten epochs did best; 2e-3 and
    # 3e-2 did worse, and so did five epochs
    training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 10.0,
                                        "per_device_train_batch_size": 16, "warmup_steps": 0.1}),
    description="Fine-tune ELMo for extractive question answering (`ElmoForQuestionAnswering`, BiDAF-style "
                "attention between\nquestion and passage) on SQuAD v1.1/v2.0 JSON or JSON lines with "
                "`transformers.Trainer`, and answer new\nquestions with it (predictions.json: id -> answer text).",
    command="elmo-finetune-qa",
)
PREDICTIONS_FILE = "predictions.json"


def unanswerable(examples: Sequence[dict]) -> bool:
    return any(not example["answers"]["text"] for example in examples)


def warn_of_untrained_no_answer(config, data_args, examples: Sequence[dict]) -> None:
    """One warning where the validation file has unanswerable questions but the head was trained without any (its
    config's `qa_null_answer` false): its "no answer" score never learned, those questions are scored against it
    (EM 0 on them was given without a word)."""
    if data_args.version_2_with_negative is not None or getattr(config, "qa_null_answer", None) is not False:
        return
    missing = [example["id"] for example in examples if not example["answers"]["text"]]
    if missing:
        ids = ", ".join(repr(identifier) for identifier in missing[:5]) + (", ..." if len(missing) > 5 else "")
        logger.warning("%d of %d validation questions have no answer (questions %s), but the head was trained "
                       "without unanswerable questions: its \"no answer\" never learned, and these are scored against "
                       "it; train with unanswerable questions (SQuAD 2.0) for a head that answers them",
                       len(missing), len(examples), ids)


def warn_of_long_questions(examples: Sequence[dict], tokenizer, data_args) -> None:
    """One warning naming the questions longer than `--max_question_length` words, which are read as their first
    words (`encode_windows` cuts them): how many, their ids (the first few) and the longest."""
    limit = data_args.max_question_length
    long = [(len(tokenizer.tokenize(example["question"])), example["id"]) for example in examples]
    long = [(length, identifier) for length, identifier in long if length > limit]
    if not long:
        return
    longest = max(long, key=lambda item: item[0])
    ids = ", ".join(repr(identifier) for _, identifier in long[:5]) + (", ..." if len(long) > 5 else "")
    logger.warning("%d of %d questions have more than --max_question_length %d words: each is read as its first %d "
                   "(questions %s; the longest, %r, has %d words); a larger --max_question_length reads them whole",
                   len(long), len(examples), limit, limit, ids, longest[1], longest[0])


def warn_of_cut_answers(examples: Sequence[dict], tokenizer) -> None:
    """One warning naming the answers that start or end inside a word of the word split (北京 in jieba's 北京大学):
    the head answers whole words, so such an answer is trained as the words around it and can never be matched
    exactly. How many, their ids (the first few) and the first one with its words."""
    from elmo_hf.modeling_elmo.question_answering_elmo import word_spans

    cut, first, answered, spans_of = [], None, 0, {}  # SQuAD asks several questions of each passage
    for example in examples:
        answers = example["answers"]
        if not answers["text"]:
            continue
        answered += 1
        text = answers["text"][0]
        start = answers["answer_start"][0] + len(text) - len(text.lstrip())
        end = answers["answer_start"][0] + len(text.rstrip())
        context = example["context"]
        if context not in spans_of:
            spans = word_spans(tokenizer, context)
            spans_of[context] = spans, {a for a, _ in spans}, {b for _, b in spans}
        spans, starts, ends = spans_of[context]
        if start < end and not (start in starts and end in ends):
            cut.append(example["id"])
            if first is None:
                around = [context[a:b] for a, b in spans if a < end and b > start]
                first = (text.strip(), around)
    if not cut:
        return
    split = getattr(tokenizer, "word_split", None)
    ids = ", ".join(repr(identifier) for identifier in cut[:5]) + (", ..." if len(cut) > 5 else "")
    way_out = ("--word_split punctuation cuts Chinese and Japanese into characters, which such answers start and "
               "end on" if split != "punctuation" else "an answer of whole words can be matched")
    logger.warning("%d of %d answers start or end inside a word of the word split %s: the head answers whole words, "
                   "so these can never be matched exactly (questions %s; %r is inside %s); %s",
                   len(cut), answered, split if isinstance(split, str) else "given", ids, first[0], first[1], way_out)


def check_windows(examples: Sequence[dict], tokenizer, data_args) -> None:
    """Every question leaves a window room for passage words, more than `--doc_stride` of them: one line naming the
    option and the question with the longest question otherwise."""
    asked, example = max((min(len(tokenizer.tokenize(e["question"])), data_args.max_question_length), -i)
                         for i, e in enumerate(examples))
    example = examples[-example]
    room = data_args.max_seq_length - asked - 4  # the question's words, and <S> and </S> around each sentence
    named = f"question {example['id']!r} ({asked} words, and 4 <S>/</S>)"
    if room < 1:  # the least that runs: room for more passage words than --doc_stride, or the next line refuses it
        raise InputError(f"--max_seq_length {data_args.max_seq_length} leaves no room for the passage beside {named}: "
                         f"give at least {asked + 5 + data_args.doc_stride} (with --doc_stride "
                         f"{data_args.doc_stride}), or a smaller --max_question_length")
    if data_args.doc_stride >= room:
        raise InputError(f"--doc_stride {data_args.doc_stride} must be less than the {room} passage words a window of "
                         f"--max_seq_length {data_args.max_seq_length} holds beside {named}: give a smaller "
                         "--doc_stride or a larger --max_seq_length")


def with_null(data_args, config, examples: Sequence[dict] = ()) -> bool:
    """Whether "no answer" competes with the best span: `--version_2_with_negative`, else whether the head was
    trained with unanswerable questions (`config.qa_null_answer`) or `examples` have some."""
    chosen = data_args.version_2_with_negative
    if chosen is not None:
        return chosen
    return bool(getattr(config, "qa_null_answer", None)) or unanswerable(examples)


def predict_answers(model, tokenizer, examples: Sequence[dict], data_args, batch_size: int) -> list[dict]:
    """The best answer (`{"score", "start", "end", "answer"}`) of each question, its windows run by batches."""
    import torch

    from elmo_hf.modeling_elmo.question_answering_elmo import best_answers, encode_windows

    from .common_collators import ElmoDataCollatorForQuestionAnswering

    model.eval()
    warn_of_long_questions(examples, tokenizer, data_args)
    windows = encode_windows(tokenizer, [e["question"] for e in examples], [e["context"] for e in examples],
                             max_length=data_args.max_seq_length, stride=data_args.doc_stride,
                             max_question_words=data_args.max_question_length)
    pad = ElmoDataCollatorForQuestionAnswering(tokenizer)
    rows = [dict(zip(windows.encodings, values)) for values in zip(*windows.encodings.values())]
    starts, ends = [], []
    for first in range(0, len(rows), batch_size):
        batch = {key: value.to(model.device) for key, value in pad(rows[first: first + batch_size]).items()}
        with torch.no_grad():
            output = model(**batch)
        starts += list(output.start_logits.float().cpu().numpy())
        ends += list(output.end_logits.float().cpu().numpy())
    best = best_answers(starts, ends, windows, max_answer_words=data_args.max_answer_length,
                        handle_impossible_answer=with_null(data_args, model.config))
    return [answers[0] for answers in best]


class QuestionAnswering(Task):
    """Examples are questions on a passage; an answer is a span of the passage's own text."""

    row = TASK
    has_label_set = False  # the answer is a span of the example's own passage
    predictions_file = PREDICTIONS_FILE

    def evaluation_metrics(self, config, data_args, examples: list[dict], dataset):
        """Exact match and F1 of the best answers over each question's windows, on words (SQuAD) or, for passages
        mostly of CJK characters or with `--scoring characters`, on characters (CMRC 2018), said in the results
        (`scoring`) and in a line."""
        from .squad_data import evaluate_answers

        null = with_null(data_args, config, examples)
        warn_of_untrained_no_answer(config, data_args, examples)
        try:
            scoring = scoring_for((example["context"] for example in examples), data_args.scoring)
        except ValueError as error:
            raise InputError(str(error)) from error
        if data_args.scoring in (None, "auto") and scoring == "characters":
            logger.info("answers are scored on %s: the validation passages are mostly CJK characters (--scoring words "
                        "scores them on words)", SCORING_NAMES[scoring])

        def compute_metrics(eval_prediction) -> dict:
            scores = evaluate_answers(eval_prediction.predictions, dataset, examples, data_args.max_answer_length, null,
                                      scoring)
            return {**scores, "scoring": SCORING_NAMES[scoring]}

        return compute_metrics, None

    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        from .squad_data import read_squad_file

        return read_squad_file(path, encoding, data_args.version_2_with_negative)

    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        return tokenizer.tokenize(example["context"])

    def encode(self, examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
        """The windows of the questions' passages (`question_answering_features`)."""
        from .squad_data import question_answering_features

        check_windows(examples, tokenizer, data_args)
        warn_of_long_questions(examples, tokenizer, data_args)
        warn_of_cut_answers(examples, tokenizer)
        return question_answering_features(examples, tokenizer, max_length=data_args.max_seq_length,
                                           stride=data_args.doc_stride,
                                           max_question_words=data_args.max_question_length)

    def collator(self, tokenizer):
        from .common_collators import ElmoDataCollatorForQuestionAnswering

        return ElmoDataCollatorForQuestionAnswering(tokenizer)

    def metrics(self, config, data_args):
        """Scores need the questions behind the windows: `example_metrics`."""
        return None, None

    def read_test_file(self, path: str, encoding: str, data_args) -> list[dict]:
        from .squad_data import read_squad_file

        return read_squad_file(path, encoding, answers_needed=False)

    def prediction_lines(self, model, tokenizer, examples: list[dict], data_args,
                         batch_size: int) -> tuple[list[str], int]:
        """`predictions.json`: id -> answer text ("" for "no answer"), as SQuAD's evaluation script reads it."""
        answers = predict_answers(model, tokenizer, examples, data_args, batch_size)
        predicted = {example["id"]: answer["answer"] for example, answer in zip(examples, answers)}
        return json.dumps(predicted, ensure_ascii=False, indent=1).splitlines(), len(predicted)

    def head_settings(self, examples: list[dict], data_args) -> dict:
        """A head trained with unanswerable questions says so in its config: predictions then let "no answer" win."""
        chosen = data_args.version_2_with_negative
        return {"qa_null_answer": unanswerable(examples) if chosen is None else chosen}

    def prepare_test(self, model, tokenizer, examples: list[dict], data_args) -> list[dict]:
        """Every question of the test file fits a window (`check_windows`), before anything is trained or written."""
        check_windows(examples, tokenizer, data_args)
        return examples


PARTS = QuestionAnswering()
