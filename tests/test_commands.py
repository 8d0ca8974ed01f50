"""The command layer (`elmo_hf.cli`): one row per console script, and what only the scripts' own processes show:
`--help`, usage errors and bad paths answer before torch, transformers or the model are imported, in one line with
exit status 2 and no traceback; a signal while the run is imported is one line and exit status 130.

What each command does with good and bad inputs is tested through the same frame in this process
(tests/test_bad_inputs.py and each command's own test file)."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
import types
from pathlib import Path

import pytest
import tomllib
from conftest import REPO, clean_env, run_cli, run_command

from elmo_hf.cli import COMMANDS
from elmo_hf.train.tasks import TASKS

HEAVY = ("torch", "transformers", "accelerate", "datasets", "elmo_hf.modeling_elmo", "elmo_hf.tokenization")
# An option each command's --help must show.
HELP_SHOWS = {"elmo-embed": "--resume", "elmo-analyze": "--min_count", "elmo-convert": "--manylangs_dir",
              "elmo-app": "--trust_remote_code", "elmo-pretrain": "--unroll_steps", "elmo-demo": "--language",
              "elmo-finetune": "question-answering", "elmo-finetune-classification": "--text_pair_column",
              "elmo-finetune-ner": "--crf_constraints", "elmo-finetune-qa": "--doc_stride", "elmo-export": "--int8"}


def test_the_console_scripts_are_the_rows_of_the_table():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(COMMANDS) == set(HELP_SHOWS)
    for name, entry in scripts.items():
        assert entry == f"elmo_hf.cli:{name.removeprefix('elmo-').replace('-', '_')}", name


def _fresh(code: str, cwd: Path) -> tuple[str, str]:
    """`code` in a fresh interpreter that imports `elmo_hf.cli` as the console scripts do; returns its stdout and
    stderr, after checking that it ended well and imported nothing heavy."""
    program = (f"import sys\nfrom elmo_hf.cli import run\n{code}\n"
               f"print('loaded:', sorted(set({HEAVY!r}) & set(sys.modules)))")
    result = run_command([sys.executable, "-c", program], cwd=cwd, env={**clean_env(), "PYTHONPATH": str(REPO)},
                         timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "loaded: []", result.stdout
    return result.stdout, result.stderr


@pytest.mark.slow
def test_help_and_usage_errors_answer_without_loading_torch(tmp_path):
    """Every command's `--help` (exit 0, its options), and a usage error of each kind (a mistyped option, a value
    a field refuses, an encoding the readers refuse: exit 2), in one fresh interpreter."""
    calls = [(name, ["--help"], 0) for name in COMMANDS] + [
        ("elmo-embed", ["corpus.txt", "out.h5", "--model", "tiny", "--windw", "3"], 2),
        ("elmo-analyze", ["c.txt", "--model", "tiny", "--output_dir", "out", "--encoding", "utf-16"], 2),
        ("elmo-app", ["--port", "0"], 2),
        ("elmo-pretrain", ["--train_file", "a.txt", "--output_dir", "o", "--softmax", "huge"], 2),
        ("elmo-finetune", ["no-such-task"], 2),
        # a missing input file or model folder: refused in the run's words before torch (it took 8 s after it)
        ("elmo-convert", ["--options_file", "missing.json", "--weight_file", "w.hdf5", "--output_dir", "o"], 2),
        ("elmo-export", ["./no-such-model"], 2),
        # counts that cannot be (issue 67): refused as a --train_file error, or after the model had loaded
        ("elmo-finetune", ["semantic-role-labeling", "--model", "tiny", "--train_file", "a.txt", "--output_dir", "o",
                           "--predicate_column", "0"], 2),
        ("elmo-finetune-qa", ["--model", "tiny", "--train_file", "a.json", "--output_dir", "o", "--max_seq_length",
                              "2"], 2),
    ]
    said = "".join(_fresh(f"for name, argv, expected in {calls!r}:\n    assert run(name, argv) == expected, "
                          "(name, argv)", tmp_path))
    assert all(option in said for option in HELP_SHOWS.values()), said
    assert "options file missing.json does not exist" in said and "model ./no-such-model not found" in said, said
    for line in ("unrecognized arguments: --windw 3", "encoding 'utf-16'", "--port must be between 1 and 65535",
                 "--softmax: invalid choice: 'huge'", "unknown task 'no-such-task'",
                 "--predicate_column: must be a positive integer, got 0", "--max_seq_length: must be 3 or more, got 2"):
        assert line in said


def test_help_and_help_all_answer_on_every_command():
    """`--help` answers (exit 0) on every command, and so does `--help_all`: on the fine-tuning commands (each task
    of `elmo-finetune TASK`) it lists every `TrainingArguments` option, with transformers' own help and the task's
    defaults; a command with no option of transformers' takes it as its `--help` (accepted, not refused)."""
    from transformers import TrainingArguments

    every = {f"--{item.name} " for item in dataclasses.fields(TrainingArguments) if item.init}
    for name in COMMANDS:
        for words in ([task] for task in TASKS) if name == "elmo-finetune" else [[]]:
            short, full = (run_cli(name, [*words, asked]) for asked in ("--help", "--help_all"))
            assert short.returncode == full.returncode == 0, (name, words, short.stderr, full.stderr)
            if not name.startswith("elmo-finetune"):
                assert full.stdout == short.stdout and f"usage: {name}" in short.stdout, name
                continue
            row = TASKS[words[0] if words else next(task for task in TASKS if TASKS[task].command == name)]
            assert every <= set(re.findall(r"--\w+ ", full.stdout)), sorted(every - set(full.stdout.split()))
            assert "--gradient_checkpointing" not in short.stdout and "--gradient_checkpointing" in full.stdout
            assert f"for the optimizer. (default {row.training_defaults['learning_rate']:g})" in \
                " ".join(full.stdout.split())
    for asked in ("--help", "--help_all"):  # elmo-finetune without a task: the tasks
        listed = run_cli("elmo-finetune", [asked])
        assert listed.returncode == 0 and "TASK is one of: " in listed.stdout


@pytest.mark.slow
def test_bad_paths_answer_without_loading_torch(tmp_path):
    """Every command that reads or writes files refuses a missing or empty input and an output it cannot write
    before anything heavy is imported: one line, exit status 2, nothing written."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "corpus.txt").write_text("the bank .\n")
    tiny = ["--model", "tiny"]
    calls = {
        ("elmo-embed", "missing.txt", "out.h5", *tiny): "ERROR elmo-embed: input missing.txt not found",
        ("elmo-embed", "empty.txt", "out.h5", *tiny): "ERROR elmo-embed: input empty.txt is empty: nothing to embed",
        ("elmo-embed", "corpus.txt", "out.txt", *tiny): "ERROR elmo-embed: output out.txt: elmo-embed writes HDF5",
        ("elmo-embed", "corpus.txt", "no/out.h5", *tiny): "ERROR elmo-embed: output no/out.h5: the folder no does not",
        ("elmo-analyze", "missing.txt", "--output_dir", "out", *tiny):
            "ERROR elmo-analyze: input missing.txt not found",
        ("elmo-analyze", ".", "--output_dir", "out", *tiny): "ERROR elmo-analyze: input . is not a file",
        ("elmo-convert", "--model", "small", "--output_dir", "no/out"):
            "ERROR elmo_hf.tools.conversion.convert: --output_dir no/out",
        ("elmo-pretrain", "--train_file", "missing.txt", "--output_dir", "out"): "no file matches 'missing.txt'",
        ("elmo-demo", "--train_file", "corpus.txt", "--output_dir", "no/out"): "--output_dir no/out: the folder no",
        ("elmo-finetune-ner", "--model", "tiny", "--train_file", "missing.txt", "--output_dir", "out"):
            "--train_file missing.txt: no such file",
        ("elmo-finetune", "sequence-classification", "--model", "tiny", "--train_file", "corpus.txt", "--output_dir",
         "/proc/out"): "--output_dir /proc/out: cannot write in /proc",
    }
    before = sorted(tmp_path.iterdir())
    _, said = _fresh(f"for name, *argv in {list(calls)!r}:\n    assert run(name, argv) == 2, argv\n"
                     "    print(file=sys.stderr)", tmp_path)
    answers = said.split("\n\n")
    for (call, says), answer in zip(calls.items(), answers):
        assert answer.count("\n") == 0 and says in answer, (call, answer)
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.slow
def test_a_bad_encoding_is_refused_in_one_line_before_torch(tmp_path):
    """`--encoding bogus` (and a fine-tuning command's `--train_encoding` ...) is refused as the command line is
    parsed, in every command whose --help lists --encoding: one line, exit 2, nothing heavy imported, nothing
    written."""
    (tmp_path / "corpus.txt").write_text("the bank .\n")
    model, corpus, out = ["--model", "tiny"], "corpus.txt", "out"
    tuning = [*model, "--train_file", corpus, "--output_dir", out]
    takes = {"elmo-embed": [corpus, "out.h5", *model], "elmo-analyze": [corpus, *model, "--output_dir", out],
             "elmo-pretrain": ["--train_file", corpus, "--output_dir", out],
             **{name: tuning for name in COMMANDS if name.startswith("elmo-finetune-")},
             **{f"elmo-finetune {task}": [task, *tuning] for task in TASKS}}
    listed = {name for name in COMMANDS for words in ([[task] for task in TASKS] if name == "elmo-finetune" else [[]])
              if "--encoding" in run_cli(name, [*words, "--help"]).stdout}
    assert listed == {name.split()[0] for name in takes}
    calls = [(name.split()[0], [*argv, option, "bogus"]) for name, argv in takes.items()
             for option in ("--encoding", *(("--train_encoding", "--test_encoding") if "finetune" in name else ()))]
    _, said = _fresh(f"for name, argv in {calls!r}:\n    assert run(name, argv) == 2, argv\n"
                     "    print(file=sys.stderr)", tmp_path)
    answers = said.split("\n\n")
    assert len(answers) == len(calls) + 1 and not answers[-1].strip(), said
    for (name, argv), answer in zip(calls, answers):
        assert answer.count("\n") == 0 and f"{argv[-2]}: unknown encoding 'bogus'" in answer, (name, argv, answer)
    assert sorted(path.name for path in tmp_path.iterdir()) == [corpus]


@pytest.mark.slow
def test_a_value_the_configuration_refuses_is_refused_as_the_command_line_is_parsed(tmp_path):
    """The model options whose values are the configuration's choices (`--scalar_mix`, a task's head option:
    `--classifier_pooling`, `--token_classifier_encoder`, `--qa_modeling_layer`; `--crf_constraints`; pretraining's
    `--softmax`) are refused when the command line is parsed, before torch is imported, in one line listing the
    values ElmoConfig takes (one table, modeling_elmo/config_choices_elmo.py): they were refused after the model and
    the data had loaded, their values copied by hand into the help."""
    from elmo_hf.modeling_elmo.config_choices_elmo import CHOICES

    (tmp_path / "train.tsv").write_text("label\ttext\n1\ta fine film\n")
    tuning = ["--model", "tiny", "--train_file", "train.tsv", "--output_dir", "out"]
    calls = [("elmo-finetune", ["sequence-classification", *tuning, "--scalar_mix", "top5"], "scalar_mix"),
             ("elmo-finetune-classification", [*tuning, "--classifier_pooling", "sum"], "classifier_pooling"),
             ("elmo-finetune-ner", [*tuning, "--token_classifier_encoder", "gru"], "token_classifier_encoder"),
             ("elmo-finetune-ner", [*tuning, "--crf_constraints", "iobes"], "crf_constraints"),
             ("elmo-finetune", ["semantic-role-labeling", *tuning, "--token_classifier_encoder", "crf"],
              "token_classifier_encoder"),
             ("elmo-finetune-qa", [*tuning, "--qa_modeling_layer", "bidaf"], "qa_modeling_layer"),
             ("elmo-pretrain", ["--train_file", "train.tsv", "--output_dir", "out", "--softmax", "huge"],
              "softmax_type")]
    _, said = _fresh(f"for name, argv, _ in {calls!r}:\n    assert run(name, argv) == 2, argv\n"
                     "    print(file=sys.stderr)", tmp_path)
    answers = said.split("\n\n")
    assert len(answers) == len(calls) + 1, said
    for (name, argv, field), answer in zip(calls, answers):
        assert f"invalid choice: '{argv[-1]}'" in answer, (name, argv, answer)
        assert all(repr(value) in answer for value in CHOICES[field]), (name, argv, answer)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["train.tsv"]  # nothing written


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_each_installed_script_refuses_bad_input_in_one_line(name, tmp_path):
    """The installed script as users run it, in a fresh process: a bad input is one line on stderr, exit status 2,
    no traceback."""
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip(f"{name} is not installed next to this Python (pip install -e . installs it)")
    argv = ["--port", "70000"] if name == "elmo-app" else ["no-such-task"] if name == "elmo-finetune" else \
        ["./no-such-model"] if name == "elmo-export" else \
        ["missing.txt", "out.h5", "--model", "tiny"] if name == "elmo-embed" else \
        ["missing.txt", "--model", "tiny", "--output_dir", "out"] if name == "elmo-analyze" else \
        ["--options_file", "missing.json", "--weight_file", "w.hdf5", "--output_dir", "out"] \
        if name == "elmo-convert" else ["--train_file", "missing.txt", "--output_dir", "out"] \
        if name in ("elmo-pretrain", "elmo-demo") else \
        ["--model", "tiny", "--train_file", "missing.txt", "--output_dir", "out"]
    result = run_command([str(script), *argv], cwd=tmp_path, env=clean_env(), timeout=300)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert sorted(tmp_path.iterdir()) == []


def test_python_m_elmo_cli_runs_a_command_by_its_short_name(capsys):
    from elmo_hf.cli import main

    assert main(["embed", "--help"]) == 0
    assert "usage: elmo-embed" in capsys.readouterr().out
    assert main(["no-such-command"]) == 2
    assert "finetune-ner" in capsys.readouterr().err


def test_a_command_runs_past_its_checks(tmp_path):
    """Past the parse and the checks, the command's run itself: an unknown published model is its one-line
    refusal, and nothing is written."""
    result = run_cli("elmo-convert", ["--model", "no-such-model", "--output_dir", tmp_path / "out"])
    assert result.returncode == 2
    assert "valid names: small, medium, original, original-5.5b" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["elmo-embed", "elmo-analyze"])
def test_a_signal_while_a_command_imports_its_run_is_one_line(name, monkeypatch, capsys, tmp_path):
    """SIGINT in the seconds of importing torch (here: when the run's module is looked up): one line and exit
    status 130, not a KeyboardInterrupt traceback."""
    from elmo_hf.cli import run

    module = types.ModuleType("signalled")

    def attribute(attribute_name):  # `getattr(module, "run")`: the signal lands during the import
        os.kill(os.getpid(), signal.SIGINT)
        raise AttributeError(attribute_name)

    module.__getattr__ = attribute
    monkeypatch.setitem(sys.modules, COMMANDS[name].run.split(":")[0], module)
    corpus, out = tmp_path / "in.txt", tmp_path / "out"
    corpus.write_text("the bank .\n")  # good paths: the checks let them through to the import
    argv = [corpus, f"{out}.h5", "--model", "tiny"] if name == "elmo-embed" else [corpus, "--model", "tiny",
                                                                                 "--output_dir", out]
    assert run(name, list(map(str, argv))) == 130  # returned, as every other status: the caller decides to exit
    assert capsys.readouterr().err == "interrupted by SIGINT while starting: nothing was written\n"


def test_a_usage_error_found_inside_the_run_is_a_status_not_an_exception(tmp_path):
    """transformers' own parser reads the fine-tuning command's TrainingArguments inside the run, and exits through
    argparse: `elmo_hf.cli.run` returns its status 2 to a caller in Python, as for every other usage error."""
    train = tmp_path / "train.tsv"
    train.write_text("label\tsentence\n1\ta fine film\n0\ta dull film\n")
    done = run_cli("elmo-finetune-classification", ["--model_name_or_path", "tiny", "--train_file", train,
                                                    "--output_dir", tmp_path / "out", "--learning_rate", "abc"])
    assert done.returncode == 2
    assert "learning_rate" in done.stderr and "Traceback" not in done.stderr
