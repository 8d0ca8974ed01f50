"""Every console command x every class of bad input that applies to it: exit status 2, one line naming the file or
option (no traceback), and nothing left behind. A command joins by one row of `COMMANDS`; a class of bad input by one
entry of `CASES`; a pair that cannot apply is listed in `NOT_APPLICABLE` with its reason, and is not a test.

Each case runs the command through its own frame (`elmo_hf.cli.run`, what the console script runs), in this process,
from an empty folder whose good input files the case spoils in its own way; what the folder holds afterwards must be
what it held before (no output, no work folder, no partial file). The scripts themselves, in fresh interpreters, are
tested in tests/test_commands.py (one bad input each: exit status 2 and one line, before torch is imported).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import run_cli

from elmo_hf.tools.core.output_folders import run_lock

pytestmark = pytest.mark.slow

GOOD_TEXT = "the bank raised its rates .\nwe sat on the river bank .\n"
GOOD = object()  # a case that keeps the command's good input
CONVERT_OPTIONS = json.dumps({  # elmo-convert's good input: options.json of a tiny biLM in the original layout
    "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 1, "cell_clip": 3, "proj_clip": 3,
             "use_skip_connections": True},
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 4]], "n_highway": 1, "activation": "relu",
                 "n_characters": 262, "max_characters_per_token": 50}})


def _original_weights(folder: Path) -> dict[str, Path]:
    """elmo-convert's second input: a tiny model's weights in the original layout (the options are its {input})."""
    from original_layout import write_weights

    path = folder / "weights.hdf5"
    write_weights(path, json.loads(CONVERT_OPTIONS))
    return {"weights": path}


@dataclass(frozen=True)
class Command:
    """How a command is called on good inputs: `args` with {input} (a file of the folder holding `good`; with
    `input_is_model`, the model the command loads) and {output} (a path in the folder that does not exist yet).
    `more_inputs` writes the command's other good inputs into the folder, by placeholder; `weights` names the one
    that "truncated weights" cuts (default: the saved model that replaces the preset "tiny")."""

    args: tuple[str, ...]
    good: str = GOOD_TEXT
    input_is_model: bool = False
    more_inputs: Callable[[Path], dict[str, Path]] | None = None
    weights: str | None = None


SQUAD = json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    "context": "Ada was born in Lisbon .", "qas": [{"id": "q1", "question": "Where was Ada born ?",
                                                 "answers": [{"text": "Lisbon", "answer_start": 16}]}]}]}]})
FINE_TUNING = ("--model_name_or_path", "tiny", "--train_file", "{input}", "--output_dir", "{output}", "--max_steps",
               "1", "--per_device_train_batch_size", "2", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true")


COMMANDS = {
    "elmo-embed": Command(("{input}", "{output}", "--model", "tiny", "--quiet")),
    "elmo-analyze": Command(("{input}", "--model", "tiny", "--output_dir", "{output}", "--quiet")),
    "elmo-pretrain": Command(("--train_file", "{input}", "--output_dir", "{output}", "--preset", "tiny", "--max_steps",
                              "1", "--per_device_batch_size", "2", "--unroll_steps", "4", "--use_cpu",
                              "--disable_tqdm")),
    "elmo-finetune-classification": Command(FINE_TUNING, "label\ttext\n1\tthe bank raised its rates\n"
                                                         "0\twe sat on the river bank\n"),
    "elmo-finetune-ner": Command(FINE_TUNING, "EU B-ORG\nrejects O\nit O\n\nPeter B-PER\nBlackburn I-PER\n"),
    "elmo-finetune-qa": Command(FINE_TUNING, SQUAD),
    "elmo-convert": Command(("--options_file", "{input}", "--weight_file", "{weights}", "--output_dir", "{output}"),
                            CONVERT_OPTIONS, more_inputs=_original_weights, weights="weights"),
    "elmo-demo": Command(("--train_file", "{input}", "--output_dir", "{output}", "--max_steps", "1",
                          "--per_device_batch_size", "2", "--unroll_steps", "4", "--disable_tqdm", "true")),
    # elmo-app serves nothing here: every case stops it before the server starts
    "elmo-app": Command(("--model", "{input}", "--port", "7999"), input_is_model=True),
}


@dataclass(frozen=True)
class Case:
    """A bad input: what is spoiled (`input` text or bytes, None: the file is missing, "<folder>": a folder;
    `output`: another output path, "{tmp}" for the case's folder), more options, and what the one line must say.
    `extra` and `says` may differ by command: a dict by command name, "*" for the others."""

    says: str | dict[str, str]
    input: str | bytes | object | None = GOOD
    output: str | None = None
    extra: tuple[str, ...] | dict[str, tuple[str, ...]] = ()
    truncated_weights: bool = False  # the model is a saved folder whose model.safetensors is cut in half
    corrupted_config: bool = False  # the model is a saved folder whose config.json is cut short
    output_holds: str | None = None  # the output folder exists and holds this file of another run
    locked: bool = False  # another run holds the output's lock while the command runs

    def of(self, command: str) -> tuple[str, tuple[str, ...]]:
        says = self.says if isinstance(self.says, str) else self.says.get(command, self.says.get("*"))
        extra = self.extra if isinstance(self.extra, tuple) else self.extra.get(command, self.extra.get("*", ()))
        return says, extra


FT = ("elmo-finetune-classification", "elmo-finetune-ner", "elmo-finetune-qa")
NOT_JSON = "is not valid JSON"  # elmo-convert's input: the options file
NO_MODEL = "a file, not a folder"  # elmo-app's input: a model folder
CASES = {
    "missing input": Case({"elmo-pretrain": "no file matches", "elmo-demo": "no file matches",
                           **dict.fromkeys(FT, "no such file"), "elmo-convert": "does not exist", "*": "not found"},
                          input=None),
    "empty input": Case({"elmo-pretrain": "holds no words", "elmo-demo": "holds no words",
                         "elmo-finetune-classification": "no examples", "elmo-finetune-ner": "no sentences",
                         "elmo-finetune-qa": "holds no questions",
                         "elmo-convert": NOT_JSON, "elmo-app": NO_MODEL, "*": "empty"}, input=""),
    "input is a folder": Case({"elmo-pretrain": "is a directory", "elmo-demo": "is a directory",
                               **dict.fromkeys(FT, "is a folder"), "elmo-convert": "is a folder",
                               "elmo-app": "has no config.json", "*": "{input}"}, input="<folder>"),
    "binary input (NUL byte)": Case({"elmo-convert": NOT_JSON, "elmo-app": NO_MODEL, "*": "NUL byte"},
                                    input=b"a line\nbinary \x00 data\n"),
    "undecodable input": Case({"elmo-convert": NOT_JSON, "elmo-app": NO_MODEL, "*": "not valid utf-8"},
                              input=b"caf\xe9 au lait\n"),
    "every line left out": Case("every line", input=b"caf\xe9\n\xff\n", extra=("--encoding_errors", "skip")),
    "unknown option": Case("unrecognized arguments: --frobnicate", extra=("--frobnicate",)),
    "non-positive number": Case(
        {"elmo-pretrain": "--per_device_batch_size must be positive, got 0",
         "elmo-demo": "--per_device_batch_size must be at least 1, got 0",
         **dict.fromkeys(FT, "--per_device_train_batch_size must be a positive integer, got 0"),
         "elmo-app": "--port must be between 1 and 65535, got 0", "*": "must be a positive integer, got 0"},
        extra={"elmo-pretrain": ("--per_device_batch_size", "0"), "elmo-demo": ("--per_device_batch_size", "0"),
               **dict.fromkeys(FT, ("--per_device_train_batch_size", "0")), "elmo-app": ("--port", "0"),
               "*": ("--batch_size", "0")}),
    "nothing to train": Case(
        {"elmo-pretrain": "give --max_steps or a positive --num_train_epochs",
         "elmo-demo": "--max_steps must be at least 1, got 0", "*": "trains nothing"},
        extra={"elmo-pretrain": ("--max_steps", "0", "--num_train_epochs", "0"), "elmo-demo": ("--max_steps", "0"),
               "*": ("--max_steps", "-1", "--num_train_epochs", "0")}),
    "corrupted config": Case("is not a valid JSON file", corrupted_config=True),
    "truncated weights": Case({"elmo-convert": "not an HDF5 file, or truncated",
                               "*": "the file is damaged or incomplete"}, truncated_weights=True),
    "unwritable output": Case("cannot write in /proc", output="/proc/elmo-out"),
    "output in a missing folder": Case("does not exist", output="{tmp}/no/such/folder/out"),
    "output is the input": Case("is the input file", output="{input}", extra=("--overwrite",)),
    "output named for another format": Case("writes HDF5 (.hdf5, .h5) or Parquet (.parquet), not .txt",
                                            output="{tmp}/vectors.txt"),
    "tags the CRF forbids": Case("sentence 2 of --train_file {input} starts with I-PER, which BIO tags forbid",
                                 input="EU B-ORG\nrejects O\n\nPeter I-PER\nBlackburn I-PER\n",
                                 extra=("--crf", "true")),
    # issue 55: the CRF read lowercase tags as a scheme of no rules while the scorer read them as IOB
    "lowercase tags the CRF forbids": Case("sentence 2 of --train_file {input} starts with i-per, which BIO tags "
                                           "forbid", input="EU b-org\nrejects o\n\nPeter i-per\nBlackburn i-per\n",
                                           extra=("--crf", "true")),
    # question answering's files
    "not SQuAD JSON": Case("is neither SQuAD JSON", input='{"questions": []}'),
    # the output belongs to one run (elmo_hf.tools.core.output_folders)
    "output folder of another run": Case(
        {"elmo-pretrain": "exists and is not empty; use --overwrite_output_dir",
         "*": "holds the files of another run (eval_results.json): give another folder, or --overwrite_output_dir"},
        output_holds="eval_results.json"),
    "output locked by another run": Case("is being written by another run (elmo-test, process", locked=True),
    "answer_start not at the answer": Case("the answer 'Lisbon' is not in the context at answer_start 3",
                                           input=SQUAD.replace('"answer_start": 16', '"answer_start": 3')),
    "no questions": Case("holds no questions", input=json.dumps({"version": "1.1", "data": [{"paragraphs": []}]})),
    **{  # issue 46: inputs that trained silently; tests/test_silent_results.py has these and more, with the results
        "empty label":
            Case("line 3: the label (column 'label') is empty", input="label\ttext\n1\tgood film\n\tno label\n"),
        "duplicate question ids": Case("the question id 'q1' is at article 1, paragraph 1, question 1 and again at "
                                       "article 1, paragraph 1, question 2",
                                       input=SQUAD.replace('"qas": [', '"qas": [' + json.dumps(
                                           json.loads(SQUAD)["data"][0]["paragraphs"][0]["qas"][0]) + ", ")),
        "Latin-1 text": Case("is not valid utf-8; the file reads as cp1252: --encoding cp1252",
                             input="label\ttext\n1\tune crème brûlée naïve\n".encode("latin-1")),
    },
}
ISSUE_46_CASES = {"empty label": "elmo-finetune-classification", "duplicate question ids": "elmo-finetune-qa",
                  "Latin-1 text": "elmo-finetune-classification"}  # each on the command whose reader it meets
QA_CASES = ("not SQuAD JSON", "answer_start not at the answer", "no questions")
# A case that does not apply to a command, and why.
NO_ERRORS_OPTION = "reads with --encoding only (no --encoding_errors)"
NOT_APPLICABLE = {
    **{(command, "every line left out"): f"{command} {NO_ERRORS_OPTION}"
       for command in ("elmo-analyze", "elmo-pretrain", "elmo-demo", *FT)},
    **{(command, "every line left out"): f"{command} reads no text lines" for command in ("elmo-convert", "elmo-app")},
    **{(command, "nothing to train"): f"{command} trains nothing"
       for command in ("elmo-embed", "elmo-analyze", "elmo-convert", "elmo-app")},
    ("elmo-convert", "non-positive number"): "elmo-convert takes no number",
    **{(command, case): f"{command} has no CRF" for command in COMMANDS if command != "elmo-finetune-ner"
       for case in ("tags the CRF forbids", "lowercase tags the CRF forbids")},
    **{(command, case): f"{command} reads no SQuAD file" for command in COMMANDS if command != "elmo-finetune-qa"
       for case in QA_CASES},
    **{(command, case): f"{command} writes a folder, never over a file"
       for command in COMMANDS if command != "elmo-embed"
       for case in ("output is the input", "output named for another format")},
    **{(command, case): f"{command} writes nothing" for command in ("elmo-app",)
       for case in ("unwritable output", "output in a missing folder", "output locked by another run")},
    **{(command, "output folder of another run"): reason for command, reason in (
        ("elmo-embed", "elmo-embed writes a file (its own --overwrite and --resume: tests/test_embed.py)"),
        ("elmo-analyze", "elmo-analyze writes two files into a folder, and refuses only those (--overwrite)"),
        ("elmo-convert", "elmo-convert refuses a non-empty folder in its own words (tests/test_convert.py)"),
        ("elmo-demo", "elmo-demo keeps what a folder holds and refuses only a model of other settings"),
        ("elmo-app", "elmo-app writes nothing"))},
    **{(command, case): f"{command} loads no saved model" for command in ("elmo-convert", "elmo-demo")
       for case in ("corrupted config",) + (("truncated weights",) if command == "elmo-demo" else ())},
}
NOT_APPLICABLE.update({(command, case): f"run on {only}, whose reader it meets (issue 46)"
                       for case, only in ISSUE_46_CASES.items() for command in COMMANDS if command != only})
# The fine-tuning commands are rows of one task table that parse their options, load the model and check the output
# folder in one shared `elmo_hf.train.finetune_run.run`: a case that only that shared code sees runs on one of them, in
# turn, and each of them still meets the cases of its own file reader.
SHARED_FT_CASES = ("unknown option", "non-positive number", "nothing to train", "corrupted config",
                   "truncated weights", "unwritable output", "output in a missing folder",
                   "output folder of another run", "output locked by another run")
NOT_APPLICABLE.update({
    (command, case): f"the fine-tuning commands share the code this case meets (train/finetune_run.py): run on "
                     f"{FT[i % len(FT)]}"
    for i, case in enumerate(SHARED_FT_CASES) for command in FT if command != FT[i % len(FT)]})


def _saved_model(folder: Path) -> Path:
    from conftest import tiny_model

    from elmo_hf.tokenization import ElmoTokenizer

    tiny_model().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def _cut(path: Path, keep: int | None = None) -> None:
    """`path` as an interrupted copy leaves it: its first `keep` bytes (default: half of them)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if keep is None else keep])


def _truncated_model(folder: Path) -> Path:
    """A saved tiny model whose weight file lost its second half."""
    _cut(_saved_model(folder) / "model.safetensors")
    return folder


def _corrupted_model(folder: Path) -> Path:
    """A saved tiny model whose config.json stops in the middle."""
    _cut(_saved_model(folder) / "config.json", keep=40)
    return folder


def _with_model(args: list[str], model: Path) -> list[str]:
    """The command line with the folder `model` where it names the preset "tiny" (pretraining: --init_from)."""
    out: list[str] = []
    for arg in args:
        if arg == "tiny" and out and out[-1] == "--preset":
            out[-1:] = ["--init_from", str(model)]
        else:
            out.append(str(model) if arg == "tiny" else arg)
    return out


def _folder_state(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


APPLICABLE = [(command, case) for command in COMMANDS for case in CASES if (command, case) not in NOT_APPLICABLE]


@pytest.mark.parametrize("command, case", APPLICABLE)
def test_a_bad_input_is_one_line_exit_2_and_nothing_left(command, case, tmp_path):
    spec, bad = COMMANDS[command], CASES[case]
    says, extra = bad.of(command)
    source = tmp_path / ("input.tsv" if command == "elmo-finetune-classification" else "input.txt")
    if bad.input is GOOD and spec.input_is_model:
        source = _saved_model(tmp_path / "good_model")
    elif bad.input is GOOD:
        source.write_text(spec.good, encoding="utf-8")
    elif bad.input == "<folder>":
        source.mkdir()
    elif isinstance(bad.input, bytes):
        source.write_bytes(bad.input)
    elif isinstance(bad.input, str):
        source.write_text(bad.input, encoding="utf-8")
    output = (bad.output or "{tmp}/out").replace("{tmp}", str(tmp_path)).replace("{input}", str(source))
    inputs = spec.more_inputs(tmp_path) if spec.more_inputs else {}
    if bad.truncated_weights and spec.weights:  # the command's own weight file, cut in half
        _cut(inputs[spec.weights])
    model = _truncated_model(tmp_path / "model") if bad.truncated_weights and not spec.weights else \
        _corrupted_model(tmp_path / "model") if bad.corrupted_config else None
    if model is not None and spec.input_is_model:
        source = model
    args = [a.format(input=source, output=output, **inputs) for a in spec.args] + list(extra)
    if model is not None and not spec.input_is_model:
        args = _with_model(args, model)
    if bad.output_holds:
        Path(output).mkdir()
        (Path(output) / bad.output_holds).write_text("{}")
    before = _folder_state(tmp_path)
    with run_lock(Path(output), "elmo-test") if bad.locked else contextlib.nullcontext():
        result = run_cli(command, args, cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.strip() and " WARNING " not in f" {line} "]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert says.format(input=source) in lines[-1], result.stderr[-3000:]
    assert _folder_state(tmp_path) == before, result.stderr[-3000:]
    if output == str(source):  # the input kept, as it was
        assert source.read_text(encoding="utf-8") == spec.good
    elif not bad.output_holds:
        assert not Path(output).exists()


def test_a_lock_taken_on_a_removed_lock_file_is_taken_again_on_the_file_there(tmp_path):
    """A run removes its lock file once it released it; a process that had opened that file before may then lock a
    file no longer there. `_acquire` checks that the file it locked is the one at the path, so two runs never both
    hold the folder."""
    from filelock import FileLock, Timeout

    from elmo_hf.tools.core.output_folders import _acquire

    path = tmp_path / ".out.lock"
    stale = FileLock(path, timeout=0)
    stale.acquire()  # opened and locked the file of the run before
    path.unlink()  # that run removes it
    fresh = FileLock(path, timeout=0)
    _acquire(fresh, path)  # locks the new file
    try:
        with pytest.raises(Timeout):
            _acquire(stale, path)  # holds the removed file only: let go, and the file there now is held
    finally:
        fresh.release()
        stale.release()


@pytest.mark.parametrize("command", ["elmo-embed", "elmo-analyze"])
def test_an_unreadable_input_is_bad_input_not_a_failed_write(command, tmp_path, monkeypatch):
    """An input this process may not read ends with exit status 2 and a line naming it (it used to be reported as a
    failure to write the output, status 1). Root reads every file, so the permission is denied here by `os.access`."""
    import os

    corpus = tmp_path / "in.txt"
    corpus.write_text("the bank .\n")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == corpus else real_access(path, mode))
    argv = [corpus, tmp_path / "out.h5", "--model", "tiny"] if command == "elmo-embed" else \
        [corpus, "--model", "tiny", "--output_dir", tmp_path / "out"]
    done = run_cli(command, argv)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(f"input {corpus} cannot be read (permission denied)")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


@contextlib.contextmanager
def _held_by_another_process(folder: Path, command: str):
    """`folder`'s run lock, held by another process (a running `command`) for the block: a lock this process takes
    itself counts as its own run's."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from elmo_hf.tools.core.output_folders import run_lock\n"
            f"with run_lock(Path({str(folder)!r}), {command!r}):\n    print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


@pytest.mark.parametrize("command", ["elmo-embed", "elmo-analyze"])
def test_a_command_writing_inside_a_folder_another_run_writes_is_refused(command, tmp_path):
    """Issue 55, case 6: elmo-embed wrote its file into the folder of a running fine-tuning run (both exit 0), while
    the other order was refused. A run now refuses a path inside a folder another run holds, naming the holder."""
    corpus, run = tmp_path / "in.txt", tmp_path / "run"
    corpus.write_text(GOOD_TEXT)
    run.mkdir()
    argv = [corpus, run / "vectors.h5", "--model", "tiny", "--quiet"] if command == "elmo-embed" else \
        [corpus, "--model", "tiny", "--output_dir", run / "analysis", "--quiet", "--min_count", "2"]
    with _held_by_another_process(run, "elmo-finetune-classification") as pid:
        done = run_cli(command, argv)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"is inside {run}, which another run is writing (elmo-finetune-classification, process {pid}" in \
        done.stderr.splitlines()[-1], done.stderr[-3000:]
    assert sorted(path.name for path in run.iterdir()) == []
    assert run_cli(command, argv).returncode == 0  # the run over, the same command writes there
