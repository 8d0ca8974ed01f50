"""Question answering: `ElmoForQuestionAnswering` (BiDAF-style attention over the two sentences' ELMo vectors), the
windows of long passages and the answers mapped back to characters, SQuAD's scores, the SQuAD-format files, and the
whole path on held-out files: `elmo-finetune-qa` trains a head on templated passages (whose answers are names)
that scores well above chance, `Trainer` used directly scores the same, and the pipeline in fresh interpreters (the
project installed; and hidden, through remote code) answers as the command's predictions do."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import clean_env, run_cli, run_command, run_isolated, tiny_config
from tolerances import REORDERED, assert_close

from elmo_hf.modeling_elmo import ElmoForQuestionAnswering
from elmo_hf.modeling_elmo.modeling_elmo_qa import NOT_IN_PASSAGE
from elmo_hf.modeling_elmo.question_answering_elmo import (
    answer_words,
    best_answers,
    encode_windows,
    word_spans,
)
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.train.tasks.squad_data import read_squad_file
from elmo_hf.train.tasks.squad_metrics import f1, normalize_answer, squad_scores

pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")

NAMES = ["Ada", "Boris", "Chen", "Dara", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lena", "Milo",
         "Nora", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq"]
CITIES = ["Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Dublin", "Quito", "Perth", "Riga", "Accra", "Hanoi", "Bern"]


def passage(rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    """Three people, each born in a city in a year, and the question where each was born: (question, answer)."""
    people, cities = rng.sample(NAMES, 3), rng.sample(CITIES, 3)
    sentences = [f"{name} was born in {city} in {rng.randint(1900, 1999)} ." for name, city in zip(people, cities)]
    return " ".join(sentences), [(f"Where was {name} born ?", city) for name, city in zip(people, cities)]


def squad_examples(count: int, seed: int) -> list[dict]:
    """`count` passages' questions as flat records (id, question, context, answers)."""
    rng, examples = random.Random(seed), []
    for p in range(count):
        context, questions = passage(rng)
        for q, (question, answer) in enumerate(questions):
            start = context.index(f" {answer} ") + 1 if f" {answer} " in context else context.index(answer)
            examples.append({"id": f"s{seed}-p{p}-q{q}", "question": question, "context": context,
                             "answers": {"text": [answer], "answer_start": [start]}})
    return examples


def write_squad_json(path: Path, examples: list[dict]) -> Path:
    """SQuAD v1.1's layout: one paragraph per passage, its questions under it; v2.0's, with `is_impossible`, where
    some question has no answer."""
    paragraphs: dict[str, list] = {}
    version_2 = any(not example["answers"]["text"] for example in examples)
    for example in examples:
        answers = [{"text": t, "answer_start": s}
                   for t, s in zip(example["answers"]["text"], example["answers"]["answer_start"])]
        paragraphs.setdefault(example["context"], []).append(
            {"id": example["id"], "question": example["question"], "answers": answers,
             **({"is_impossible": not answers} if version_2 else {})})
    data = [{"title": "people", "paragraphs": [{"context": c, "qas": qas} for c, qas in paragraphs.items()]}]
    path.write_text(json.dumps({"version": "2.0" if version_2 else "1.1", "data": data}))
    return path


def write_json_lines(path: Path, examples: list[dict]) -> Path:
    path.write_text("".join(json.dumps(example) + "\n" for example in examples))
    return path


@pytest.fixture(scope="module")
def tok() -> ElmoTokenizer:
    return ElmoTokenizer()


def qa_model(**overrides) -> ElmoForQuestionAnswering:
    """A tiny span head in eval mode, its head weights moved off their initial values."""
    torch.manual_seed(0)
    model = ElmoForQuestionAnswering(tiny_config(**overrides)).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if not name.startswith("elmo."):
                parameter.add_(0.1 * torch.randn_like(parameter))
    return model


# --------------------------------------------------------------------------------------------------
# The head
# --------------------------------------------------------------------------------------------------
QUESTIONS = ["Where was Ada born ?", "Who works as a pilot in this town ?"]
PASSAGES = ["Ada was born in Lisbon in 1990 .", "Boris works as a pilot ."]


@pytest.mark.parametrize("modeling", ["lstm", "none"])
def test_logits_cover_every_position_and_only_passage_words_and_no_answer_score(tok, modeling):
    model = qa_model(qa_modeling_layer=modeling)
    batch = tok(QUESTIONS, PASSAGES, padding=True, return_tensors="pt")
    output = model(**batch)
    assert output.start_logits.shape == output.end_logits.shape == batch["attention_mask"].shape
    for row in range(2):
        words = torch.tensor([s == 1 and w is not None for s, w in zip(batch.sequence_ids(row), batch.word_ids(row))])
        for logits in (output.start_logits[row], output.end_logits[row]):
            assert (logits[1:][~words[1:]] == NOT_IN_PASSAGE).all()  # question, boundaries, padding
            assert (logits[words] > NOT_IN_PASSAGE / 2).all() and logits[0] > NOT_IN_PASSAGE / 2
    # each row as it is alone: padding and the other row change nothing
    for row in range(2):
        alone = model(**tok(QUESTIONS[row], PASSAGES[row], return_tensors="pt"))
        length = alone.start_logits.shape[1]
        assert_close(output.start_logits[row, :length], alone.start_logits[0], REORDERED)
        assert_close(output.end_logits[row, :length], alone.end_logits[0], REORDERED)


def test_loss_is_transformers_mean_of_start_and_end_cross_entropy_and_ignores_positions_past_the_row(tok):
    model = qa_model()
    batch = tok(QUESTIONS, PASSAGES, padding=True, return_tensors="pt")
    starts, ends = torch.tensor([9, 0]), torch.tensor([9, 500])  # row 1: "no answer" start, an end past the row
    output = model(**batch, start_positions=starts, end_positions=ends)
    start = F.cross_entropy(output.start_logits, starts)
    end = F.cross_entropy(output.end_logits[:1], ends[:1])  # the end past the row is ignored
    assert_close(output.loss, (start + end) / 2, REORDERED)  # eval mode: no L2 on the mix
    output.loss.backward()
    assert model.similarity.weight.grad.abs().sum() > 0


def test_a_batch_without_passage_or_token_types_is_refused_in_one_line(tok):
    model = qa_model()
    single = tok(PASSAGES, padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="give token_type_ids"):
        model(single["input_ids"], single["attention_mask"])
    with pytest.raises(ValueError, match="row 0 of the batch has no passage"):
        model(single["input_ids"], single["attention_mask"], torch.zeros_like(single["attention_mask"]))


# --------------------------------------------------------------------------------------------------
# Windows, characters, scores, files
# --------------------------------------------------------------------------------------------------
def test_answers_round_trip_through_words_positions_and_characters(tok):
    examples = squad_examples(6, seed=3)
    windows = encode_windows(tok, [e["question"] for e in examples], [e["context"] for e in examples],
                             max_length=24, stride=6)
    assert len(windows) > len(examples)  # the passages are cut
    held = 0
    for w, index in enumerate(windows.example):
        example = examples[index]
        text, start = example["answers"]["text"][0], example["answers"]["answer_start"][0]
        spans = windows.spans[index]
        words = answer_words(spans, start, start + len(text))
        assert example["context"][spans[words[0]][0]: spans[words[1]][1]] == text
        first, last = windows.answer_positions(w, words)
        if (first, last) != (0, 0):
            held += 1
            row = tok(*[[x] for x in (tok.tokenize(example["question"]),
                                      [example["context"][a:b] for a, b in spans[windows.first_word[w]:
                                                                                 windows.first_word[w]
                                                                                 + windows.num_words[w]]])],
                      is_split_into_words=True)
            assert row.tokens(0)[first: last + 1] == tok.tokenize(text)
    assert held >= len(examples)  # every answer is whole in at least one window
    text = "  Ada,  born in Lisbon!"
    assert word_spans(tok, text) == [(2, 5), (5, 6), (8, 12), (13, 15), (16, 22), (22, 23)]

    class WordsOnly:  # a tokenizer without an offsets mapping: its words are found in the text
        def __call__(self, *args, **kwargs):
            raise NotImplementedError("return_offsets_mapping")

        def tokenize(self, text):
            return tok.tokenize(text)

    assert word_spans(WordsOnly(), text) == word_spans(tok, text)


def test_best_answers_pick_the_best_span_over_windows_and_no_answer_when_asked(tok):
    windows = encode_windows(tok, ["q ?"], ["a b c d e f g h"], max_length=10, stride=1)  # 4 words a window
    assert windows.first_word == [0, 3, 6] and windows.offset == [5, 5, 5]  # <S> q ? </S> <S>
    rows = np.full((3, 10), -5.0), np.full((3, 10), -5.0)
    rows[0][1, 5 + 2], rows[1][1, 5 + 2] = 4.0, 4.0  # window 1's third word, "f": a strong start and end
    rows[0][0, 0] = rows[1][0, 0] = 6.0  # "no answer" strong in window 0 only
    rows[0][2, 0] = rows[1][2, 0] = -9.0  # and weak in window 2: the lowest is the example's
    best = best_answers(*rows, windows, top_k=2)[0]
    assert best[0]["answer"] == "f" and (best[0]["start"], best[0]["end"]) == (10, 11)
    assert best[0]["score"] > best[1]["score"] > 0
    assert "" not in [answer["answer"] for answer in best_answers(*rows, windows, top_k=40)[0]]
    # "no answer" scores its lowest window's probability (start times end, softmax over it and the window's words)
    ranked = best_answers(*rows, windows, top_k=40, handle_impossible_answer=True)[0]
    null = [answer for answer in ranked if answer["answer"] == ""]
    e = np.exp
    windows_null = [e(6) / (e(6) + 4 * e(-5)), e(-5) / (4 * e(-5) + e(4)), e(-9) / (e(-9) + 2 * e(-5))]
    assert len(null) == 1 and null[0]["score"] == pytest.approx(min(windows_null) ** 2)
    for window in range(3):  # "no answer" strong in every window: it wins
        rows[0][window, 0] = rows[1][window, 0] = 9.0
    assert best_answers(*rows, windows, handle_impossible_answer=True)[0][0]["answer"] == ""
    too_long = best_answers(*rows, windows, max_answer_words=1)[0][0]
    assert too_long["end"] - too_long["start"] == 1


def test_squad_normalisation_exact_match_and_f1_on_hand_checked_answers():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert f1("in Lisbon Portugal", "Lisbon") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))  # 0.5
    assert f1("", "") == 1.0 and f1("Lisbon", "") == 0.0 and f1("Oslo", "Lisbon") == 0.0
    scores = squad_scores({"a": "the Lisbon", "b": "Porto city", "c": ""},
                          {"a": ["Lisbon"], "b": ["Porto", "Oporto"], "c": []})
    assert scores["exact_match"] == pytest.approx(100 * 2 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 3)


def test_squad_json_and_flat_json_lines_read_the_same_and_bad_answers_are_refused(tmp_path):
    examples = squad_examples(3, seed=1)
    examples[0] = {**examples[0], "answers": {"text": [], "answer_start": []}}  # unanswerable (SQuAD 2.0)
    assert read_squad_file(write_squad_json(tmp_path / "a.json", examples)) == examples
    assert read_squad_file(write_json_lines(tmp_path / "a.jsonl", examples)) == examples
    # the layout of transformers' SQuAD sample (tests/fixtures/tests_samples/SQUAD): flat records under "data"
    (tmp_path / "flat.json").write_text(json.dumps({"version": 2.0, "data": examples}))
    assert read_squad_file(tmp_path / "flat.json") == examples
    wrong = [{**examples[1], "answers": {"text": ["Oslo"], "answer_start": [0]}}]
    with pytest.raises(ValueError, match="the answer 'Oslo' is not in the context at answer_start 0"):
        read_squad_file(write_json_lines(tmp_path / "b.jsonl", wrong))
    (tmp_path / "c.json").write_text(json.dumps({"version": "2.0", "data": []}))
    with pytest.raises(ValueError, match="holds no questions"):
        read_squad_file(tmp_path / "c.json")


# --------------------------------------------------------------------------------------------------
# Learning on held-out files: the command, Trainer, the pipeline
# --------------------------------------------------------------------------------------------------
# Chance: a span of the passage's words drawn at random scores an F1 of a few percent on these passages (the
# answer is one word of 24); answering the passage's first city (or any one of its three) scores 33. The head must
# find the person the question names. Measured: 98.9 (seed 0; 70 passages instead of 100 stay near 37: the head
# learns the matching at once after some 300 steps, not gradually).
HELD_OUT_F1 = 80.0
TRAINING = ["--use_cpu", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true",
            "--word_embedding_dim", "16", "--word_embedding_buckets", "512", "--representation_dropout", "0.1",
            "--head_hidden_size", "32", "--learning_rate", "1e-2", "--per_device_train_batch_size", "16",
            "--num_train_epochs", "10", "--seed", "0", "--max_seq_length", "32", "--doc_stride", "12"]
# Windows of 23 passage words for these questions: a passage of 24 is read in two, and the window that lacks a
# question's answer learns "no answer" (so that, later, a window without the person asked about scores low).


def run_qa_command(args: list[str], cwd: Path):
    """`elmo-finetune-qa ARGS` through its frame, in this process."""
    result = run_cli("elmo-finetune-qa", args, cwd=cwd)
    if result.returncode != 0:
        raise AssertionError(f"{args} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    return result


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory, tiny_model_dir):
    """A span head fine-tuned by the command on a SQuAD v1.1 JSON file, scored on a held-out file of JSON lines (other
    passages and questions), and its predictions of a third file by the command's predict-only mode."""
    root = tmp_path_factory.mktemp("qa")
    train = write_squad_json(root / "train-v1.1.json", squad_examples(100, seed=10))
    held_out = write_json_lines(root / "dev.jsonl", squad_examples(30, seed=11))
    test = write_json_lines(root / "test.jsonl", squad_examples(8, seed=12))
    out = root / "model"
    trained = run_qa_command(["--model_name_or_path", str(tiny_model_dir), "--train_file", str(train),
                              "--validation_file", str(held_out), "--output_dir", str(out), *TRAINING], root)
    predicted = run_qa_command(["--model_name_or_path", str(out), "--do_predict", "--test_file", str(test),
                                "--output_dir", str(root / "predictions"), "--use_cpu", "--report_to", "none"], root)
    return {"root": root, "model": out, "train": train, "held_out": held_out, "test": test,
            "stderr": trained.stderr + predicted.stderr,
            "predictions": json.loads((root / "predictions" / "predictions.json").read_text())}


@pytest.mark.slow
def test_the_command_fine_tunes_a_head_that_answers_held_out_questions(fine_tuned):
    metrics = json.loads((fine_tuned["model"] / "eval_results.json").read_text())
    assert metrics["eval_f1"] >= HELD_OUT_F1 and metrics["eval_exact_match"] >= HELD_OUT_F1 - 5, metrics
    assert (metrics["eval_samples"], metrics["eval_windows"]) == (90, 180)  # two windows for each of the 90 questions
    config = json.loads((fine_tuned["model"] / "config.json").read_text())
    assert config["architectures"] == ["ElmoForQuestionAnswering"] and config["qa_null_answer"] is False
    for noise in ("WARNING", "LOAD REPORT", "Traceback"):
        assert noise not in fine_tuned["stderr"], fine_tuned["stderr"][-3000:]
    assert "predictions.json" in fine_tuned["stderr"]
    test = read_squad_file(fine_tuned["test"])
    predicted = fine_tuned["predictions"]
    assert sorted(predicted) == sorted(e["id"] for e in test)
    right = squad_scores(predicted, {e["id"]: e["answers"]["text"] for e in test})
    assert right["f1"] >= HELD_OUT_F1 - 10, (right, predicted)


PIPELINE = """
import json, sys
from transformers import pipeline
examples = [json.loads(line) for line in open({test!r})]
qa = pipeline("question-answering", model={model!r}, trust_remote_code=True)
print(type(qa).__name__, type(qa.model).__module__.split(".")[0] == "transformers_modules", file=sys.stderr)
answers = qa([{{"question": e["question"], "context": e["context"]}} for e in examples])
print(json.dumps({{e["id"]: a["answer"] for e, a in zip(examples, answers)}}))
"""


@pytest.mark.slow
def test_the_pipeline_answers_as_the_command_predicted_in_fresh_interpreters(fine_tuned):
    code = PIPELINE.format(test=str(fine_tuned["test"]), model=str(fine_tuned["model"]))
    hidden = run_isolated(code, cwd=fine_tuned["root"])  # the project cannot be imported: remote code
    assert json.loads(hidden.stdout) == fine_tuned["predictions"]
    assert "ElmoQuestionAnsweringPipeline True" in hidden.stderr
    installed = run_command([sys.executable, "-c", code], cwd=fine_tuned["root"], env=clean_env(), timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert json.loads(installed.stdout) == fine_tuned["predictions"]


@pytest.mark.slow
def test_a_long_passage_in_windows_gives_the_answer_of_the_whole_passage(fine_tuned):
    from transformers import pipeline

    from elmo_hf.modeling_elmo.pipeline_question_answering_elmo import ElmoQuestionAnsweringPipeline

    qa = pipeline("question-answering", model=str(fine_tuned["model"]), pipeline_class=ElmoQuestionAnsweringPipeline)
    examples = [e for e in read_squad_file(fine_tuned["held_out"])][:12]
    for example in examples:
        whole = qa(question=example["question"], context=example["context"], max_seq_len=256)
        windows = qa(question=example["question"], context=example["context"], max_seq_len=32, doc_stride=12)
        assert len(encode_windows(qa.tokenizer, [example["question"]], [example["context"]], 32, 12)) > 1
        assert (windows["start"], windows["end"], windows["answer"]) == (whole["start"], whole["end"],
                                                                          whole["answer"]), example
        assert example["context"][whole["start"]: whole["end"]] == whole["answer"]


@pytest.mark.slow
def test_trainer_directly_evaluates_as_the_command_did(fine_tuned):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, Trainer, TrainingArguments

    from elmo_hf.train.tasks.common_collators import ElmoDataCollatorForQuestionAnswering
    from elmo_hf.train.tasks.squad_data import evaluate_answers, question_answering_features

    model = AutoModelForQuestionAnswering.from_pretrained(fine_tuned["model"])
    tokenizer = AutoTokenizer.from_pretrained(fine_tuned["model"])
    examples = read_squad_file(fine_tuned["held_out"])
    dataset = question_answering_features(examples, tokenizer, max_length=32, stride=12)  # as the command's
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(fine_tuned["root"] / "trainer"),
                                                          use_cpu=True, report_to="none",
                                                          per_device_eval_batch_size=7),
                      data_collator=ElmoDataCollatorForQuestionAnswering(tokenizer))
    scores = evaluate_answers(trainer.predict(dataset).predictions, dataset, examples)
    metrics = json.loads((fine_tuned["model"] / "eval_results.json").read_text())
    assert scores["f1"] == pytest.approx(metrics["eval_f1"]) and scores["exact_match"] == pytest.approx(
        metrics["eval_exact_match"])


def test_unanswerable_questions_train_a_head_for_no_answer_that_predictions_follow(tmp_path, tiny_model_dir):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from elmo_hf.train.tasks.question_answering import PARTS, QuestionAnsweringDataArguments

    examples = squad_examples(4, seed=5)
    for example in examples[::3]:  # SQuAD 2.0: about a person the passage does not name
        example.update(question="Where was Zoltan born ?", answers={"text": [], "answer_start": []})
    data = write_json_lines(tmp_path / "v2.jsonl", examples)
    out = tmp_path / "model"
    run_qa_command(["--model_name_or_path", str(tiny_model_dir), "--train_file", str(data), "--validation_file",
                    str(data), "--do_predict", "--test_file", str(data), "--output_dir", str(out), "--max_steps", "2",
                    *TRAINING[:7]], tmp_path)
    assert json.loads((out / "config.json").read_text())["qa_null_answer"] is True
    assert {"eval_exact_match", "eval_f1"} <= set(json.loads((out / "eval_results.json").read_text()))
    assert sorted(json.loads((out / "predictions.json").read_text())) == sorted(e["id"] for e in examples)
    model, tokenizer = AutoModelForQuestionAnswering.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    spans_only = QuestionAnsweringDataArguments(version_2_with_negative=False, max_seq_length=32, doc_stride=12)
    lines, count = PARTS.prediction_lines(model, tokenizer, examples, spans_only, batch_size=4)
    assert count == len(examples) and "" not in json.loads("\n".join(lines)).values()  # never "no answer"
