"""Fine-tune ELMo for extractive question answering (`ElmoForQuestionAnswering`) on SQuAD-format files with
`transformers.Trainer`, and answer new questions with it: the parts of the task "question-answering"
(`train.finetune_run.TaskParts`; its row of `elmo_tools.tasks.TASKS` holds its names and defaults).

    elmo-finetune-qa --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file train-v1.1.json --validation_file dev-v1.1.json --output_dir out/squad
    elmo-finetune-qa --model_name_or_path out/squad --do_predict --test_file questions.jsonl --output_dir out/test

Files: SQuAD v1.1 / v2.0 JSON, or JSON lines with id, question, context and answers {text, answer_start}
(`train.squad_data`). Long passages are read in overlapping windows of words (`--max_seq_length`, `--doc_stride`).
Reports SQuAD's exact match and F1 (percent) on the validation file; with unanswerable questions in the data (SQuAD
2.0) or `--version_2_with_negative`, "no answer" competes with the best span. Writes the model and tokenizer (they
load with `AutoModelForQuestionAnswering` / `AutoTokenizer`, and answer through `pipeline("question-answering",
model=folder, trust_remote_code=True)`), the metrics files, and with `--do_predict` `predictions.json` (id -> answer
text) to `--output_dir`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Sequence

import torch

from modeling_elmo.question_answering_elmo import best_answers, encode_windows

from .collators import ElmoDataCollatorForQuestionAnswering
from .finetune_cli import InputError, run_command_line
from .finetune_run import run
from .squad_data import evaluate_answers, question_answering_features, read_squad_file
from .squad_metrics import SCORING_NAMES, scoring_for

logger = logging.getLogger("train.finetune_qa")  # also as __main__ (python -m)
TASK = "question-answering"
# The one "label" of every question: the run's label machinery (a fine-tuned head continues on data of its labels)
# sees a head that extracts spans.
SPAN = "span"
PREDICTIONS_FILE = "predictions.json"


def read_file(path: str, encoding: str, data_args) -> list[dict]:
    return read_squad_file(path, encoding, data_args.version_2_with_negative)


def labels_of(example: dict) -> Sequence[str]:
    return (SPAN,)


def words_of(example: dict, tokenizer, data_args) -> Sequence[str]:
    return tokenizer.tokenize(example["context"])


def sorted_labels(labels: Iterable[str]) -> list[str]:
    return sorted(set(labels))


def unanswerable(examples: Sequence[dict]) -> bool:
    return any(not example["answers"]["text"] for example in examples)


def encode(examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
    """The windows of the questions' passages (`question_answering_features`)."""
    check_windows(examples, tokenizer, data_args)
    return question_answering_features(examples, tokenizer, max_length=data_args.max_seq_length,
                                       stride=data_args.doc_stride, max_question_words=data_args.max_question_length)


def check_windows(examples: Sequence[dict], tokenizer, data_args) -> None:
    """Every question leaves a window room for passage words, more than `--doc_stride` of them: one line naming the
    option and the question with the longest question otherwise."""
    for name in ("max_seq_length", "max_question_length", "max_answer_length"):
        if getattr(data_args, name) < 1:
            raise InputError(f"--{name} must be a positive integer, got {getattr(data_args, name)}")
    if data_args.doc_stride < 0:
        raise InputError(f"--doc_stride must be 0 or more, got {data_args.doc_stride}")
    asked, example = max((min(len(tokenizer.tokenize(e["question"])), data_args.max_question_length), -i)
                         for i, e in enumerate(examples))
    example = examples[-example]
    room = data_args.max_seq_length - asked - 4  # the question's words, and <S> and </S> around each sentence
    named = f"question {example['id']!r} ({asked} words, and 4 <S>/</S>)"
    if room < 1:
        raise InputError(f"--max_seq_length {data_args.max_seq_length} leaves no room for the passage beside {named}: "
                         f"give at least {asked + 5}, or a smaller --max_question_length")
    if data_args.doc_stride >= room:
        raise InputError(f"--doc_stride {data_args.doc_stride} must be less than the {room} passage words a window of "
                         f"--max_seq_length {data_args.max_seq_length} holds beside {named}: give a smaller "
                         "--doc_stride or a larger --max_seq_length")


def collator(tokenizer) -> ElmoDataCollatorForQuestionAnswering:
    return ElmoDataCollatorForQuestionAnswering(tokenizer)


def with_null(data_args, config, examples: Sequence[dict] = ()) -> bool:
    """Whether "no answer" competes with the best span: `--version_2_with_negative`, else whether the head was
    trained with unanswerable questions (`config.qa_null_answer`) or `examples` have some."""
    chosen = data_args.version_2_with_negative
    if chosen is not None:
        return chosen
    return bool(getattr(config, "qa_null_answer", None)) or unanswerable(examples)


def metrics(config, data_args):
    """Scores need the questions behind the windows: `example_metrics`."""
    return None, None


def example_metrics(config, data_args, examples: list[dict], dataset):
    """Exact match and F1 of the best answers over each question's windows, on words (SQuAD) or, for passages
    mostly of CJK characters or with `--scoring characters`, on characters (CMRC 2018), said in the results
    (`scoring`) and in a line."""
    null = with_null(data_args, config, examples)
    try:
        scoring = scoring_for((example["context"] for example in examples), data_args.scoring)
    except ValueError as error:
        raise InputError(str(error)) from None
    if data_args.scoring in (None, "auto") and scoring == "characters":
        logger.info("answers are scored on %s: the validation passages are mostly CJK characters (--scoring words "
                    "scores them on words)", SCORING_NAMES[scoring])

    def compute_metrics(eval_prediction) -> dict:
        scores = evaluate_answers(eval_prediction.predictions, dataset, examples, data_args.max_answer_length, null,
                                  scoring)
        return {**scores, "scoring": SCORING_NAMES[scoring]}

    return compute_metrics, None


def read_test_file(path: str, encoding: str, data_args) -> list[dict]:
    return read_squad_file(path, encoding, answers_needed=False)


def prepare_test(model, tokenizer, examples: list[dict], data_args) -> list[dict]:
    """Every question of the test file fits a window (`check_windows`), before anything is trained or written."""
    check_windows(examples, tokenizer, data_args)
    return examples


@torch.no_grad()
def predict_answers(model, tokenizer, examples: Sequence[dict], data_args, batch_size: int) -> list[dict]:
    """The best answer (`{"score", "start", "end", "answer"}`) of each question, its windows run by batches."""
    model.eval()
    windows = encode_windows(tokenizer, [e["question"] for e in examples], [e["context"] for e in examples],
                             max_length=data_args.max_seq_length, stride=data_args.doc_stride,
                             max_question_words=data_args.max_question_length)
    pad = ElmoDataCollatorForQuestionAnswering(tokenizer)
    rows = [dict(zip(windows.encodings, values)) for values in zip(*windows.encodings.values())]
    starts, ends = [], []
    for first in range(0, len(rows), batch_size):
        batch = {key: value.to(model.device) for key, value in pad(rows[first: first + batch_size]).items()}
        output = model(**batch)
        starts += list(output.start_logits.float().cpu().numpy())
        ends += list(output.end_logits.float().cpu().numpy())
    best = best_answers(starts, ends, windows, max_answer_words=data_args.max_answer_length,
                        handle_impossible_answer=with_null(data_args, model.config))
    return [answers[0] for answers in best]


def prediction_lines(model, tokenizer, examples: list[dict], data_args, batch_size: int) -> tuple[list[str], int]:
    """`predictions.json`: id -> answer text ("" for "no answer"), as SQuAD's evaluation script reads it."""
    answers = predict_answers(model, tokenizer, examples, data_args, batch_size)
    predicted = {example["id"]: answer["answer"] for example, answer in zip(examples, answers)}
    return json.dumps(predicted, ensure_ascii=False, indent=1).splitlines(), len(predicted)


def head_settings(examples: list[dict], data_args) -> dict:
    """A head trained with unanswerable questions says so in its config: predictions then let "no answer" win."""
    chosen = data_args.version_2_with_negative
    return {"qa_null_answer": unanswerable(examples) if chosen is None else chosen}


def main(argv: list[str] | None = None, guard=None) -> dict:
    """The command in this process (`python -m train.finetune_qa`, tests, benchmarks)."""
    return run(TASK, argv, guard)


def cli() -> int:
    """The command line: bad input is one line on stderr and exit status 2; SIGINT/SIGTERM one line, 130/143.
    (The console script starts at `train.finetune_cli.qa`, which answers --help before torch loads.)"""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())
