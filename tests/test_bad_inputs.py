"""Every console command x every class of bad input, run as users run them: exit status 2, one line naming the file or
option (no traceback), and nothing left behind. A command joins by one row of `COMMANDS`; a class of bad input by one
entry of `CASES`.

Each case runs the installed console script in a fresh interpreter, from an empty folder whose good input files the
case spoils in its own way; what the folder holds afterwards must be what it held before (no output, no work
folder, no partial file).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import clean_env, run_command

pytestmark = pytest.mark.slow

GOOD_TEXT = "the bank raised its rates .\nwe sat on the river bank .\n"


@dataclass(frozen=True)
class Command:
    """How a command is called on good inputs: `args` with {input} (a text file of the folder) and {output} (a path
    in the folder that does not exist yet)."""

    args: tuple[str, ...]
    output_option: str  # how its message names the output ("output", "--output_dir")


COMMANDS = {
    "elmo-embed": Command(("{input}", "{output}", "--model", "tiny", "--quiet"), "output"),
    "elmo-analyze": Command(("{input}", "--model", "tiny", "--output_dir", "{output}", "--quiet"), "--output_dir"),
    "elmo-pretrain": Command(("--train_file", "{input}", "--output_dir", "{output}", "--preset", "tiny", "--max_steps",
                              "1", "--per_device_batch_size", "2", "--unroll_steps", "4", "--use_cpu",
                              "--disable_tqdm"), "--output_dir"),
}


@dataclass(frozen=True)
class Case:
    """A bad input: what is spoiled (`input` text or bytes, None: the file is missing, "<folder>": a folder;
    `output`: another output path, "{tmp}" for the case's folder), more options, and what the one line must say.
    `extra` and `says` may differ by command: a dict by command name, "*" for the others."""

    says: str | dict[str, str]
    input: str | bytes | None = GOOD_TEXT
    output: str | None = None
    extra: tuple[str, ...] | dict[str, tuple[str, ...]] = ()

    def of(self, command: str) -> tuple[str, tuple[str, ...]]:
        says = self.says if isinstance(self.says, str) else self.says.get(command, self.says.get("*"))
        extra = self.extra if isinstance(self.extra, tuple) else self.extra.get(command, self.extra.get("*", ()))
        return says, extra


CASES = {
    "missing input": Case({"elmo-pretrain": "no file matches", "*": "not found"}, input=None),
    "empty input": Case({"elmo-pretrain": "holds no words", "*": "empty"}, input=""),
    "input is a folder": Case({"elmo-pretrain": "is a directory", "*": "{input}"}, input="<folder>"),
    "binary input (NUL byte)": Case("NUL byte", input=b"a line\nbinary \x00 data\n"),
    "undecodable input": Case("not valid utf-8", input=b"caf\xe9 au lait\n"),
    "every line left out": Case("every line", input=b"caf\xe9\n\xff\n", extra=("--encoding_errors", "skip")),
    "unknown option": Case("unrecognized arguments: --frobnicate", extra=("--frobnicate",)),
    "non-positive number": Case({"elmo-pretrain": "--per_device_batch_size must be positive, got 0",
                                 "*": "must be a positive integer, got 0"},
                                extra={"elmo-pretrain": ("--per_device_batch_size", "0"), "*": ("--batch_size", "0")}),
    "unwritable output": Case("cannot write in /proc", output="/proc/elmo-out"),
    "output in a missing folder": Case("does not exist", output="{tmp}/no/such/folder/out"),
}
# A case that does not apply to a command, and why.
NOT_APPLICABLE = {
    ("elmo-analyze", "every line left out"): "elmo-analyze reads with --encoding only (no --encoding_errors)",
    ("elmo-pretrain", "every line left out"): "elmo-pretrain reads with --encoding only (no --encoding_errors)",
}


def _folder_state(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_input_is_one_line_exit_2_and_nothing_left(command, case, tmp_path):
    if (command, case) in NOT_APPLICABLE:
        pytest.skip(NOT_APPLICABLE[command, case])
    spec, bad = COMMANDS[command], CASES[case]
    says, extra = bad.of(command)
    source = tmp_path / "input.txt"
    if bad.input == "<folder>":
        source.mkdir()
    elif isinstance(bad.input, bytes):
        source.write_bytes(bad.input)
    elif isinstance(bad.input, str):
        source.write_text(bad.input, encoding="utf-8")
    output = (bad.output or "{tmp}/out").replace("{tmp}", str(tmp_path))
    before = _folder_state(tmp_path)
    args = [a.format(input=source, output=output) for a in spec.args] + list(extra)
    script = shutil.which(command, path=str(Path(sys.executable).parent))
    result = run_command([script, *args], cwd=tmp_path, env=clean_env(), timeout=300)
    lines = [line for line in result.stderr.splitlines() if line.strip() and " WARNING " not in f" {line} "]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert says.format(input=source) in lines[-1], result.stderr[-3000:]
    assert _folder_state(tmp_path) == before, result.stderr[-3000:]
    assert not Path(output).exists()
