"""The front doors of the tool commands (`elmo_tools/commands.py`): `--help` and usage errors answer before torch,
transformers or the model package are imported (the door imports its package normally: `elmo_tools` imports nothing
at its top); then the command's own `main` runs with the same arguments."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import tomllib
from conftest import REPO, clean_env, run_command

from elmo_tools import commands

COMMANDS = {  # console script: (front door, an option its help must show)
    "elmo-embed": ("embed", "--resume"),
    "elmo-analyze": ("analyze", "--min_count"),
    "elmo-convert": ("convert", "--manylangs_dir"),
    "elmo-app": ("app", "--trust_remote_code"),
    "elmo-export": ("export", "--int8"),
}
HEAVY = ("torch", "transformers", "accelerate", "datasets", "modeling_elmo", "tokenization")


def test_the_console_scripts_start_at_the_front_doors():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    for script, (door, _) in COMMANDS.items():
        assert scripts[script] == f"elmo_tools.commands:{door}"


@pytest.mark.slow
def test_help_and_usage_errors_answer_without_loading_torch():
    """Every door's `--help` (exit 0, the options), and usage errors (a mistyped option, an encoding the readers
    refuse: exit 2), in a fresh interpreter, with nothing heavy imported."""
    calls = [(door, ["--help"], 0) for door, _ in COMMANDS.values()] + [
        ("embed", ["corpus.txt", "out.h5", "--model", "tiny", "--windw", "3"], 2),
        ("analyze", ["c.txt", "--model", "tiny", "--output_dir", "out", "--encoding", "utf-16"], 2),
    ]
    code = ("import sys\nfrom elmo_tools import commands\n"
            f"for door, argv, expected in {calls!r}:\n"
            "    try:\n        getattr(commands, door)(argv)\n"
            "    except SystemExit as end:\n        assert end.code == expected, (door, argv, end.code)\n"
            "    else:\n        raise AssertionError(f'{door} {argv} did not exit')\n"
            f"print('loaded:', sorted(set({HEAVY!r}) & set(sys.modules)))")
    result = run_command([sys.executable, "-c", code], cwd=REPO, env={**clean_env(), "PYTHONPATH": str(REPO)},
                         timeout=120)
    assert result.returncode == 0, result.stderr
    assert all(option in result.stdout for _, option in COMMANDS.values()), result.stdout
    assert "unrecognized arguments: --windw 3" in result.stderr and "encoding 'utf-16'" in result.stderr
    assert result.stdout.strip().splitlines()[-1] == "loaded: []"


@pytest.mark.slow
def test_installed_scripts_refuse_a_mistyped_option_in_one_line():
    """The installed script as users run it: a usage error is argparse's usage and one error line, exit 2."""
    script = Path(sys.executable).parent / "elmo-embed"
    if not script.exists() and not (script := shutil.which("elmo-embed")):
        pytest.skip("elmo-embed is not installed next to this Python (pip install -e . installs it)")
    result = run_command([str(script), "corpus.txt", "out.h5", "--model", "tiny", "--windw", "3"], cwd=REPO,
                         env=clean_env(), timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "elmo-embed: error: unrecognized arguments: --windw 3"
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_bad_paths_answer_without_loading_torch(tmp_path):
    """elmo-embed and elmo-analyze refuse a missing or empty input and an output they cannot write at the door: one
    line, exit status 2, nothing written, in a fresh interpreter with nothing heavy imported."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "corpus.txt").write_text("the bank .\n")
    calls = {
        ("embed", "missing.txt", "out.h5"): "ERROR elmo-embed: input missing.txt not found",
        ("embed", "empty.txt", "out.h5"): "ERROR elmo-embed: input empty.txt is empty: nothing to embed",
        ("embed", "corpus.txt", "out.txt"): "ERROR elmo-embed: output out.txt: elmo-embed writes HDF5",
        ("embed", "corpus.txt", "no/out.h5"): "ERROR elmo-embed: output no/out.h5: the folder no does not exist",
        ("analyze", "missing.txt", "--output_dir", "out"): "ERROR elmo-analyze: input missing.txt not found",
        ("analyze", ".", "--output_dir", "out"): "ERROR elmo-analyze: input . is not a file",
        ("analyze", "corpus.txt", "--output_dir", "no/out"): "ERROR elmo-analyze: --output_dir no/out: the folder no",
    }
    code = ("import sys\nfrom elmo_tools import commands\n"
            f"for door, *argv in {list(calls)!r}:\n"
            "    assert getattr(commands, door)([*argv, '--model', 'tiny']) == 2, argv\n"
            "    print(file=sys.stderr)\n"
            f"print('loaded:', sorted(set({HEAVY!r}) & set(sys.modules)))")
    before = sorted(tmp_path.iterdir())
    result = run_command([sys.executable, "-c", code], cwd=tmp_path, env={**clean_env(), "PYTHONPATH": str(REPO)},
                         timeout=120)
    assert result.returncode == 0, result.stderr
    answers = result.stderr.split("\n\n")
    for (call, says), answer in zip(calls.items(), answers):
        assert answer.count("\n") == 0 and answer.startswith(says), (call, answer)
    assert result.stdout.strip().splitlines()[-1] == "loaded: []"
    assert sorted(tmp_path.iterdir()) == before


def test_a_door_runs_its_command_with_the_same_arguments(tmp_path, caplog):
    """Past the light parse, the command itself runs: an unknown published model is its one-line refusal."""
    code = commands.convert(["--model", "no-such-model", "--output_dir", str(tmp_path / "out")])
    assert code == 2
    assert "valid names: small, medium, original, original-5.5b" in caplog.text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("door", ["embed", "analyze"])
def test_a_signal_while_a_door_imports_its_command_is_one_line(door, monkeypatch, capsys, tmp_path):
    """SIGINT in the seconds of importing torch (here: when the command's module is looked up): one line and exit
    status 130, not a KeyboardInterrupt traceback."""
    import os
    import signal
    import types

    module = types.ModuleType("signalled")

    def attribute(name):  # `from module import main` asks for `main`: the signal lands during the import
        os.kill(os.getpid(), signal.SIGINT)
        raise AttributeError(name)

    module.__getattr__ = attribute
    name = {"embed": "elmo_tools.embed", "analyze": "elmo_tools.analysis"}[door]
    monkeypatch.setitem(sys.modules, name, module)
    corpus, out = tmp_path / "in.txt", tmp_path / "out"
    corpus.write_text("the bank .\n")  # good paths: the door lets them through to the import
    argv = [corpus, f"{out}.h5", "--model", "tiny"] if door == "embed" else [corpus, "--model", "tiny",
                                                                             "--output_dir", out]
    with pytest.raises(SystemExit) as end:
        getattr(commands, door)(list(map(str, argv)))
    assert end.value.code == 130
    assert capsys.readouterr().err == "interrupted by SIGINT while starting: nothing was written\n"
