"""One error vocabulary for every command (issue 53, item 2; `elmo_hf.tools.core.errors`): only `InputError` (exit 2)
and `RunFailed` (exit 1), raised where the code anticipated the condition, end a command with one line. Any other
exception from a run (a plain `ValueError`, an `OSError`, a shape error inside the optimizer's step) is a bug: exit
status 1 and its traceback, never a line that blames the input. With `--verbose` a handled error's line is followed
by its traceback.

The table test replaces each command's run module in `sys.modules` (as tests/test_commands.py does for a signal), so
every row of `COMMANDS` is checked in milliseconds, without torch; two tests run elmo-pretrain itself, through its
frame, up to a failure inside it."""

from __future__ import annotations

import errno
import sys
import types
from pathlib import Path

import pytest
from conftest import run_cli

from elmo_hf.cli import COMMANDS
from elmo_hf.tools.core.errors import InputError, RunFailed, reading, writing
from elmo_hf.train.tasks import TASKS

TRACEBACK = "Traceback (most recent call last):"


def _good_argv(name: str, folder: Path) -> list[str]:
    """A command line of `name` that its options and its checks accept (paths that exist, an output that can be
    written): what reaches the run."""
    corpus, table, out = folder / "corpus.txt", folder / "train.tsv", folder / "out"
    corpus.write_text("the bank raised its rates .\n")
    table.write_text("label\ttext\n1\ta fine film\n")
    finetune = ["--model_name_or_path", "tiny", "--train_file", str(table), "--output_dir", str(out)]
    return {
        "elmo-embed": [str(corpus), str(folder / "out.h5"), "--model", "tiny"],
        "elmo-analyze": [str(corpus), "--model", "tiny", "--output_dir", str(out)],
        "elmo-convert": ["--model", "small", "--output_dir", str(out)],
        "elmo-app": ["--model", "tiny"],
        "elmo-export": ["tiny", "--output", str(folder / "model.onnx")],
        "elmo-pretrain": ["--train_file", str(corpus), "--output_dir", str(out)],
        "elmo-demo": ["--train_file", str(corpus), "--output_dir", str(out)],
        "elmo-finetune": [next(iter(TASKS)), *finetune],
    }.get(name, finetune)  # the fine-tuning commands of the tasks


def _run_raising(monkeypatch, name: str, error: BaseException) -> list:
    """Replace the run of the command `name` by one that raises `error`; the list records its calls."""
    module_name, _, function = COMMANDS[name].run.partition(":")
    calls: list = []

    def run(options, guard):
        calls.append(options)
        raise error

    module = types.ModuleType(module_name)
    setattr(module, function, run)
    monkeypatch.setitem(sys.modules, module_name, module)
    return calls


UNEXPECTED = {
    "RuntimeError": RuntimeError("mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)"),
    "ValueError": ValueError("Expected input batch_size (3) to match target batch_size (2)."),
    "FileNotFoundError": FileNotFoundError(errno.ENOENT, "No such file or directory", "/some/internal/file"),
}


@pytest.mark.parametrize("kind", UNEXPECTED)
@pytest.mark.parametrize("name", COMMANDS)
def test_an_unexpected_error_in_any_run_is_a_traceback_and_exit_1(name, kind, monkeypatch, tmp_path):
    """Every row of the table: an exception the run did not anticipate (among them a plain `ValueError` and a
    `FileNotFoundError`, which elmo-pretrain and elmo-demo used to report as bad input) ends with exit status 1 and
    its traceback on stderr, not exit 2 and one line."""
    error = UNEXPECTED[kind]
    calls = _run_raising(monkeypatch, name, error)
    done = run_cli(name, _good_argv(name, tmp_path), cwd=tmp_path)
    assert calls, f"{name} stopped before its run: {done.stderr}"
    assert done.returncode == 1, done.stderr
    assert TRACEBACK in done.stderr, done.stderr
    assert done.stderr.rstrip().splitlines()[-1] == f"{kind}: {error}", done.stderr


@pytest.mark.parametrize("name", COMMANDS)
def test_an_anticipated_error_is_one_line(name, monkeypatch, tmp_path):
    """Every row: an `InputError` is one line and exit status 2, a `RunFailed` one line and exit status 1."""
    for error, status in ((InputError("--train_file x.txt: no such file"), 2),
                          (RunFailed("the model folder is in out, but the push failed: 403"), 1)):
        _run_raising(monkeypatch, name, error)
        done = run_cli(name, _good_argv(name, tmp_path), cwd=tmp_path)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == status, done.stderr
        assert TRACEBACK not in done.stderr and lines[-1].endswith(f": {error}"), done.stderr


VERBOSE = [name for name in COMMANDS if name != "elmo-demo"]  # elmo-demo has no --verbose


@pytest.mark.parametrize("name", VERBOSE)
def test_with_verbose_a_handled_error_is_logged_with_its_traceback(name, monkeypatch, tmp_path):
    """--verbose: the one line of an `InputError` (or a `RunFailed`) is followed by its traceback, which names where
    it was raised; without --verbose the same error is the line alone."""
    error = InputError("--config_file c.json: not JSON")
    _run_raising(monkeypatch, name, error)
    done = run_cli(name, [*_good_argv(name, tmp_path), "--verbose"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    line = next(line for line in done.stderr.splitlines() if line.endswith(f": {error}"))
    after = done.stderr[done.stderr.index(line) + len(line):]
    assert after.lstrip("\n").startswith(TRACEBACK), done.stderr
    assert "in run" in after and after.rstrip().endswith(f"elmo_hf.tools.core.errors.InputError: {error}"), done.stderr

    _run_raising(monkeypatch, name, RunFailed("the push failed"))
    done = run_cli(name, [*_good_argv(name, tmp_path), "--verbose"], cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.rstrip().endswith("RunFailed: the push failed"), done.stderr


def test_a_failed_check_with_verbose_is_logged_with_its_traceback(tmp_path):
    """The checks before the run (a corpus that is not there) are handled errors too: one line, and with --verbose
    the traceback."""
    argv = ["--train_file", str(tmp_path / "missing.txt"), "--output_dir", str(tmp_path / "out")]
    quiet = run_cli("elmo-pretrain", argv)
    assert quiet.returncode == 2 and TRACEBACK not in quiet.stderr, quiet.stderr
    loud = run_cli("elmo-pretrain", [*argv, "--verbose"])
    assert loud.returncode == 2 and TRACEBACK in loud.stderr, loud.stderr
    assert loud.stderr.rstrip().endswith("InputError: no file matches " + repr(str(tmp_path / "missing.txt")))


def test_reading_and_writing_name_the_path_and_let_other_errors_through(tmp_path):
    """`reading`: an `OSError` reading a declared input is an `InputError` naming it (exit 2); `writing`: one writing
    a declared output is a `RunFailed` naming it (exit 1). Anything else passes through as it is."""
    missing = tmp_path / "vocab.txt"
    with pytest.raises(InputError, match=rf"^--vocab_file {missing}: cannot be read \(No such file or directory"):
        with reading(missing, "--vocab_file"):
            missing.read_text()
    with pytest.raises(RunFailed, match=rf"^could not write {tmp_path}: No space left on device$"):
        with writing(tmp_path):
            raise OSError(errno.ENOSPC, "No space left on device")
    for guard in (reading(missing), writing(tmp_path)):
        with pytest.raises(KeyError), guard:
            raise KeyError("not an OSError")


COMMON = ["--preset", "tiny", "--per_device_batch_size", "2", "--unroll_steps", "4", "--max_steps", "2",
          "--disable_tqdm", "--report_to", "none", "--use_cpu"]


@pytest.mark.slow
def test_a_shape_error_inside_the_optimizer_step_is_a_traceback_not_bad_input(tmp_path, monkeypatch):
    """The issue's reproduction: a `ValueError` raised inside the optimizer's step during elmo-pretrain (the kind a
    refactor makes) printed `ERROR elmo-pretrain: Expected input batch_size ...` and exited 2. Now: exit status 1,
    the traceback through the training step, and no folder left (nothing was checkpointed)."""
    import torch

    def step(self, *args, **kwargs):
        raise ValueError("Expected input batch_size (3) to match target batch_size (2).")

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    corpus = tmp_path / "train.txt"
    corpus.write_text("the bank raised its rates .\nwe sat on the river bank .\n" * 20)
    out = tmp_path / "out"
    done = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", out, "--optimizer", "adamw", *COMMON])
    assert done.returncode == 1, done.stderr[-3000:]
    assert TRACEBACK in done.stderr and "training_step" in done.stderr, done.stderr[-3000:]
    assert done.stderr.rstrip().endswith("ValueError: Expected input batch_size (3) to match target batch_size (2).")
    assert not out.exists()


@pytest.mark.slow
def test_a_full_disk_while_pretraining_writes_is_one_line_exit_1(tmp_path, monkeypatch):
    """A write into --output_dir that fails (here the vocabulary, on a disk that filled up) is a `RunFailed` naming
    the file: one line, exit status 1, and the folder the run made is removed."""
    from elmo_hf.train import pretrain_run

    def full_disk(words, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pretrain_run, "write_vocab", full_disk)
    corpus = tmp_path / "train.txt"
    corpus.write_text("the bank raised its rates .\n" * 10)
    out = tmp_path / "out"
    done = run_cli("elmo-pretrain", ["--train_file", corpus, "--output_dir", out, *COMMON])
    lines = [line for line in done.stderr.splitlines() if line.strip() and " WARNING " not in f" {line} "]
    assert done.returncode == 1 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    assert lines[-1].endswith(f"could not write {out / 'vocab.txt'}: No space left on device"), done.stderr[-3000:]
    assert not out.exists()


def test_an_onnx_graph_for_a_folder_that_is_not_there_is_bad_input(tmp_path):
    """elmo-export's --output in a folder that does not exist: refused in one line (exit 2) before the export, not
    an `OSError` from deep inside it."""
    target = tmp_path / "no" / "such" / "model.onnx"
    done = run_cli("elmo-export", ["tiny", "--output", target])
    assert done.returncode == 2 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].endswith(f"the folder {target.parent} does not exist"), done.stderr
    assert sorted(tmp_path.iterdir()) == []


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _internal_file_missing(*args, **kwargs):
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/some/internal/file")


def test_embed_says_a_failed_write_in_one_line_and_any_other_oserror_with_its_traceback(tmp_path, monkeypatch):
    """elmo-embed used to turn every `OSError` of its run into `could not write OUTPUT`: one raised while building
    the embedder (nothing to do with the output) read as a full disk. Now only a write into the output's work folder
    is that line (exit 1, with what is kept); any other `OSError` is a traceback."""
    from elmo_hf.tools.embedding import embed, embed_io

    argv = _good_argv("elmo-embed", tmp_path)
    monkeypatch.setattr(embed, "_embedder", _internal_file_missing)
    done = run_cli("elmo-embed", argv, cwd=tmp_path)
    assert done.returncode == 1 and TRACEBACK in done.stderr, done.stderr[-3000:]
    assert done.stderr.rstrip().endswith("FileNotFoundError: [Errno 2] No such file or directory: "
                                         "'/some/internal/file'"), done.stderr[-3000:]
    assert "could not write" not in done.stderr
    monkeypatch.undo()

    monkeypatch.setattr(embed_io, "open_chunk", _disk_full)
    output = tmp_path / "out.h5"
    done = run_cli("elmo-embed", [*argv, "--overwrite"], cwd=tmp_path)
    last = done.stderr.rstrip().splitlines()[-1]
    assert done.returncode == 1 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    assert f"could not write {output}.partial/chunk-" in last and "No space left on device" in last, last
    assert last.endswith(f"what is complete is kept in {output}.partial: run the same command with --resume to "
                         "continue"), last
    assert not output.exists()


def test_analyze_says_a_failed_write_in_one_line_and_any_other_oserror_with_its_traceback(tmp_path, monkeypatch):
    """elmo-analyze likewise: a full disk while it writes its outputs is one line naming --output_dir (exit 1,
    nothing left behind); an `OSError` while it computes is a traceback."""
    from elmo_hf.tools import analysis

    argv = _good_argv("elmo-analyze", tmp_path)
    out = tmp_path / "out"
    monkeypatch.setattr(analysis, "analyze", _internal_file_missing)
    done = run_cli("elmo-analyze", argv, cwd=tmp_path)
    assert done.returncode == 1 and TRACEBACK in done.stderr, done.stderr[-3000:]
    assert "could not write" not in done.stderr
    monkeypatch.undo()

    monkeypatch.setattr(analysis, "analyze", lambda *args, **kwargs: {})
    monkeypatch.setattr(analysis, "plot", _disk_full)
    done = run_cli("elmo-analyze", argv, cwd=tmp_path)
    assert done.returncode == 1 and TRACEBACK not in done.stderr, done.stderr[-3000:]
    assert done.stderr.rstrip().endswith(f"could not write --output_dir {out}: No space left on device"), done.stderr
    assert not any(out.iterdir()) if out.exists() else True


# --------------------------------------------------------------------------------------------------
# An unexpected error inside a head, a reader or the tokenizer's load is a bug, not bad input
# --------------------------------------------------------------------------------------------------


def _bug_in_the_head_constructor(self, *args, **kwargs):
    raise TypeError("__init__() got an unexpected keyword argument 'pooling' (a bug planted by the test)")


def _bug_in_the_reader(*args, **kwargs):
    raise KeyError("planted by the test in the table reader")


def _bug_in_the_tokenizer_load(self, *args, **kwargs):
    raise TypeError("planted by the test in the fast tokenizer's constructor")


def _saved_folder(tmp_path: Path) -> Path:
    import torch
    from conftest import tiny_model

    from elmo_hf.tokenization import ElmoTokenizer

    folder = tmp_path / "model"
    torch.manual_seed(0)
    tiny_model().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def _planted(tmp_path: Path, where: str, monkeypatch) -> tuple[str, list[str], str]:
    """A command line that reaches the planted bug `where`, and the name of the function that raises it."""
    from elmo_hf.modeling_elmo import ElmoForSequenceClassification
    from elmo_hf.tokenization import ElmoTokenizerFast
    from elmo_hf.train.tasks import common_data

    folder = _saved_folder(tmp_path)
    table = tmp_path / "train.tsv"
    table.write_text("label\ttext\n1\ta fine film\n0\ta dull film\n")
    finetune = ["sequence-classification", "--model_name_or_path", str(folder), "--train_file", str(table),
                "--output_dir", str(tmp_path / "out"), "--max_steps", "1", "--report_to", "none"]
    if where == "head":
        monkeypatch.setattr(ElmoForSequenceClassification, "__init__", _bug_in_the_head_constructor)
        return "elmo-finetune", finetune, _bug_in_the_head_constructor.__name__
    if where == "reader":
        monkeypatch.setattr(common_data, "_read_table", _bug_in_the_reader)
        return "elmo-finetune", finetune, _bug_in_the_reader.__name__
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\n")
    monkeypatch.setattr(ElmoTokenizerFast, "__init__", _bug_in_the_tokenizer_load)
    return "elmo-embed", [str(corpus), str(tmp_path / "out.h5"), "--model", str(folder)], \
        _bug_in_the_tokenizer_load.__name__


@pytest.mark.parametrize("where", ["head", "reader", "tokenizer"])
def test_a_bug_in_a_head_a_reader_or_the_tokenizer_load_is_a_traceback_not_bad_input(where, monkeypatch, tmp_path):
    """A TypeError or KeyError planted in a head's constructor, a reader and the tokenizer's constructor: the command
    ends with exit status 1 and the traceback down to the planted function, with and without --verbose. Loading used
    to read them as a model it cannot load (exit 2), the file reader as a bad file (exit 2), and the tokenizer's load
    went on with a default tokenizer (exit 0, another word split possible)."""
    name, argv, origin = _planted(tmp_path, where, monkeypatch)
    for extra in ([], ["--verbose"]):
        done = run_cli(name, [*argv, *extra], cwd=tmp_path)
        assert done.returncode == 1, done.stderr[-3000:]
        assert TRACEBACK in done.stderr and f"in {origin}" in done.stderr, done.stderr[-3000:]
        assert "planted by the test" in done.stderr.strip().splitlines()[-1], done.stderr[-3000:]


def test_with_verbose_a_refused_model_folder_shows_where_the_refusal_began(tmp_path):
    """A damaged config.json is bad input (one line, exit 2); with --verbose its traceback reaches the JSON error it
    came of (`raise ... from error`), not only the line that turned it into the command's refusal."""
    folder = _saved_folder(tmp_path)
    (folder / "config.json").write_text('{"model_type": "elmo", ')
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank raised its rates .\n")
    argv = [str(corpus), str(tmp_path / "out.h5"), "--model", str(folder)]
    quiet = run_cli("elmo-embed", argv, cwd=tmp_path)
    assert quiet.returncode == 2 and TRACEBACK not in quiet.stderr and "config.json" in quiet.stderr, quiet.stderr
    loud = run_cli("elmo-embed", [*argv, "--verbose"], cwd=tmp_path)
    assert loud.returncode == 2, loud.stderr
    assert "direct cause of the following exception" in loud.stderr and "JSONDecodeError" in loud.stderr, loud.stderr
