"""`--max_train_time`: a run stops at a step boundary once its time is spent, with a checkpoint of that step, its
evaluation and its model folder, and a run resumed from that checkpoint goes on as one never stopped would.

The runs are in-process on the tiny preset; a budget of about a second ends them after some steps (how many
depends on the machine's load, so the tests read the step reached rather than expect one)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest
from conftest import run_cli
from tolerances import Bound, assert_close

from elmo_hf.train.time_budget import format_duration, parse_duration

# The resumed run against the run never stopped, in one process with the same threads: the same arithmetic on the
# same restored state (as tests/test_pretrain.py's RESUMED).
RESUMED = Bound("resumed run", 1e-6, scaled=False,
                rule="1e-6 absolute: 2 ulps of a loss below 8; the resumed run repeats the same arithmetic")


@pytest.mark.parametrize("text, seconds", [("90", 90.0), ("90s", 90.0), ("20m", 1200.0), ("1h30m", 5400.0),
                                           ("1.5h", 5400.0), ("2d", 172800.0), ("0.25s", 0.25), ("2:30:00", 9000.0),
                                           ("0:20", 1200.0), (" 20M ", 1200.0), ("1h 5s", 3605.0)])
def test_durations_are_read_as_a_command_line_writes_them(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0m", "-5m", "20 minutes", "m", "1:75", "nan", "inf", "5x"])
def test_a_duration_that_is_not_one_is_refused_in_one_line(text):
    with pytest.raises(ValueError, match=r"^--max_train_time must be a positive duration .*got") as error:
        parse_duration(text)
    assert "\n" not in str(error.value)


def test_durations_are_said_in_their_largest_units():
    assert [format_duration(s) for s in (3, 45.25, 60, 1200, 5405, 3600)] == ["3s", "45.2s", "1m", "20m", "1h30m5s",
                                                                              "1h"]


def test_elmo_pretrain_refuses_a_bad_budget_before_anything_is_written(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("a b c\n")
    result = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", tmp_path / "out",
                                       "--max_train_time", "ten"])
    assert result.returncode == 2
    assert "--max_train_time: must be a positive duration" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_finetuning_command_refuses_a_bad_budget_before_anything_is_written(tmp_path):
    data = write_sst2(tmp_path / "train.tsv")
    result = run_cli("elmo-finetune-classification", ["--model_name_or_path", "tiny", "--train_file", data,
                                                      "--output_dir", tmp_path / "out", "--max_train_time", "0"])
    assert result.returncode == 2
    assert "--max_train_time: must be a positive duration" in result.stderr
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------
# elmo-pretrain
# --------------------------------------------------------------------------------------------------


def write_corpus(path: Path, lines: int, seed: int) -> Path:
    rng = random.Random(seed)
    nouns, verbs = ["cat", "dog", "fish", "bird"], ["sat", "slept", "ran", "swam"]
    path.write_text("".join(f"the {rng.choice(nouns)} {rng.choice(verbs)} on the mat .\n" for _ in range(lines)))
    return path


@pytest.fixture
def pretrain(tmp_path):
    """`elmo_hf.train.pretrain_run.train` in this process on a small corpus, Accelerate's process-wide state reset after
    each run: returns the run's summary."""
    from accelerate.state import AcceleratorState

    from elmo_hf.train.pretrain_args import PretrainArguments
    from elmo_hf.train.pretrain_run import train

    corpus = write_corpus(tmp_path / "train.txt", 300, 0), write_corpus(tmp_path / "valid.txt", 20, 1)

    def run(output_dir: Path, **fields) -> dict:
        try:
            return train(PretrainArguments(**{
                "train_file": [str(corpus[0])], "validation_file": [str(corpus[1])], "output_dir": str(output_dir),
                "preset": "tiny", "per_device_batch_size": 4, "unroll_steps": 8, "report_to": "none",
                "disable_tqdm": True, "logging_steps": 1, "shuffle_buffer": 50, "dropout": 0.2, "use_cpu": True,
                **fields}))
        finally:
            AcceleratorState._reset_state(reset_partial_state=True)

    return run


def losses(folder: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records}


@pytest.mark.slow
def test_pretraining_stops_when_the_time_is_spent_and_resumes_as_if_never_stopped(pretrain, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="elmo-pretrain")
    timed, whole = tmp_path / "timed", tmp_path / "whole"
    summary = pretrain(timed, max_train_time="1s", max_steps=100_000)
    step = summary["steps"]
    assert 1 <= step < 100_000
    assert summary["train_seconds"] >= 1.0
    assert f"--max_train_time 1s is spent at step {step}" in caplog.text
    # saved, evaluated and written as at the end of any run
    assert (timed / "checkpoints" / f"step-{step:08d}").is_dir()
    assert json.loads((timed / "eval_results.json").read_text())["eval_tokens"] > 0
    assert json.loads((timed / "train_results.json").read_text())["steps"] == step
    assert (timed / "model.safetensors").exists()

    # The budget counts the whole run, as --max_steps does: resumed with the same one, it stops at once.
    again = pretrain(timed, max_train_time="1s", max_steps=100_000, resume_from_checkpoint="latest")
    assert again["steps"] == step
    # With more time (here: none given) it goes on, and its steps are those of a run never stopped.
    pretrain(timed, max_steps=step + 3, resume_from_checkpoint="latest")
    pretrain(whole, max_steps=step + 3)
    expected, got = losses(whole), losses(timed)
    assert sorted(got) == list(range(1, step + 4))
    for k in range(step + 1, step + 4):
        assert_close(got[k], expected[k], RESUMED, what=f"loss of step {k}")


def test_a_schedule_under_a_budget_is_read_at_the_later_of_the_steps_and_the_time():
    import torch

    from elmo_hf.train.lr_schedule import make_scheduler

    share = [0.0]
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizers = torch.optim.SGD([parameter], lr=1.0), torch.optim.SGD([parameter], lr=1.0)
    with_time = make_scheduler("linear", optimizers[0], 10, 1000, time_share=lambda: share[0])
    steps_only = make_scheduler("linear", optimizers[1], 10, 1000)
    rates = {}
    for step in range(1, 31):
        share[0] = 0.5 if step > 20 else 0.0  # half the time spent after step 20
        for optimizer, scheduler in zip(optimizers, (with_time, steps_only)):
            optimizer.step()
            scheduler.step()
        rates[step] = with_time.get_last_lr()[0], steps_only.get_last_lr()[0]
    assert rates[3] == (0.3, 0.3)  # the warm-up stays in steps
    assert rates[15][0] == rates[15][1] == pytest.approx(985 / 990)  # no time spent: the steps' schedule
    assert rates[25][0] == pytest.approx(0.5, abs=1e-3)  # half the time: half the decay, at step 25 of 1000
    assert rates[25][1] == pytest.approx(975 / 990)


@pytest.mark.parametrize("name, said", [
    ("bogus", "--lr_scheduler_type bogus: bogus is not a valid SchedulerType"),
    ("warmup_stable_decay", "--lr_scheduler_type warmup_stable_decay: get_wsd_schedule() missing 1 required"),
    ("reduce_lr_on_plateau", "--lr_scheduler_type reduce_lr_on_plateau is stepped with a metric"),
])
def test_elmo_pretrain_refuses_a_schedule_it_cannot_step_before_anything_is_written(tmp_path, name, said):
    corpus = write_corpus(tmp_path / "train.txt", 20, 0)
    result = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", tmp_path / "out", "--preset", "tiny",
                                       "--lr_scheduler_type", name])
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "out").exists()


def test_a_decaying_schedule_ends_when_the_time_does(pretrain, tmp_path):
    """With epochs enough for hours, a 2-second budget still takes the linear schedule to its end."""
    summary = pretrain(tmp_path / "timed", max_train_time="2s", num_train_epochs=1000, lr_scheduler_type="linear",
                       learning_rate=1e-2)
    records = [json.loads(line) for line in (tmp_path / "timed" / "train_log.jsonl").read_text().splitlines()]
    rates = [r["learning_rate"] for r in records]
    assert summary["steps"] == len(records) >= 5
    assert rates[0] > 0.5e-2 and rates[-1] < 0.2e-2, rates
    assert rates == sorted(rates, reverse=True)


# --------------------------------------------------------------------------------------------------
# The fine-tuning commands (Trainer)
# --------------------------------------------------------------------------------------------------


def write_sst2(path: Path, rows: int = 96) -> Path:
    rng = random.Random(0)
    filler = "the a of movie film story plot actor scene".split()
    lines = ["label\tsentence"]
    for _ in range(rows):
        label = rng.randint(0, 1)
        words = [rng.choice(filler) for _ in range(rng.randint(2, 6))] + ["great" if label else "awful"]
        lines.append(f"{label}\t{' '.join(words)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def finetune(tmp_path: Path, output_dir: Path, *options: str) -> str:
    """`elmo-finetune-classification` in this process on a small SST-2-like file: what it wrote to stderr."""
    data = write_sst2(tmp_path / "train.tsv")
    result = run_cli("elmo-finetune-classification", [
        "--model_name_or_path", "tiny", "--train_file", str(data), "--validation_file", str(data),
        "--max_eval_samples", "16", "--output_dir", str(output_dir), "--use_cpu", "--report_to", "none",
        "--disable_tqdm", "true", "--per_device_train_batch_size", "8", "--learning_rate", "2e-2",
        "--lr_scheduler_type", "constant", "--warmup_steps", "0", "--logging_steps", "1", "--save_strategy", "no",
        "--word_split", "whitespace", "--seed", "3", *options])
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def logged(folder: Path) -> dict[int, float]:
    state = json.loads((folder / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


@pytest.mark.slow
def test_finetuning_stops_when_the_time_is_spent_and_resumes_from_its_checkpoint(tmp_path):
    """The callback stops Trainer at a step boundary with a checkpoint of it (even with --save_strategy no), the
    command evaluates, and a run resumed from the checkpoint trains the steps a run never stopped trains."""
    timed, whole = tmp_path / "timed", tmp_path / "whole"
    said = finetune(tmp_path, timed, "--max_train_time", "1s", "--max_steps", "100000")
    state = json.loads((timed / "trainer_state.json").read_text())
    step = state["global_step"]
    assert 1 <= step < 100_000
    assert f"--max_train_time 1s is spent at step {step}: saving and evaluating" in said
    checkpoint = timed / f"checkpoint-{step}"
    assert checkpoint.is_dir() and [p.name for p in timed.glob("checkpoint-*")] == [checkpoint.name]
    spent = json.loads((checkpoint / "trainer_state.json").read_text())["stateful_callbacks"]["TimeBudgetCallback"]
    assert spent["attributes"]["seconds_spent"] >= 1.0
    assert "eval_accuracy" in json.loads((timed / "eval_results.json").read_text())

    resumed = tmp_path / "resumed"
    finetune(tmp_path, resumed, "--max_steps", str(step + 3), "--resume_from_checkpoint", str(checkpoint))
    finetune(tmp_path, whole, "--max_steps", str(step + 3))
    expected, got = logged(whole), logged(resumed)
    assert sorted(got) == list(range(1, step + 4))  # the checkpoint's log history, then the steps trained
    for k in range(step + 1, step + 4):
        assert_close(got[k], expected[k], RESUMED, what=f"loss of step {k}")


def test_the_callback_counts_the_time_of_the_checkpoint_it_resumes_from():
    """A resumed run's TrainerState holds the seconds its checkpoint recorded: with the budget spent, the callback
    stops at once; with time left, at its end."""
    from transformers import TrainerControl, TrainerState

    from elmo_hf.train.time_budget_callback import TimeBudgetCallback

    saved = TimeBudgetCallback(60.0, seconds_spent=61.0).state()
    state, control = TrainerState(global_step=7, stateful_callbacks={"TimeBudgetCallback": saved}), TrainerControl()
    callback = TimeBudgetCallback(60.0)
    callback.on_train_begin(None, state, control)
    assert control.should_training_stop and control.should_save
    assert callback.state()["attributes"]["seconds_spent"] >= 61.0

    state, control = TrainerState(global_step=7, stateful_callbacks={"TimeBudgetCallback": {
        "args": {"seconds": 60.0}, "attributes": {"seconds_spent": 30.0}}}), TrainerControl()
    callback = TimeBudgetCallback(60.0)
    callback.on_train_begin(None, state, control)
    callback.on_step_end(None, state, control)
    assert not control.should_training_stop
    callback.seconds_spent = 60.0  # as if 30 more seconds had passed
    callback.on_step_end(None, state, control)
    assert control.should_training_stop and control.should_save
