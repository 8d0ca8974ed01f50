"""What the converters share: the error they raise, the check of the output folder, and the writing of a converted
folder (staged beside it, checked, put in place in one step), with its model card.

`convert_allennlp_elmo.py` (bilm-tf / AllenNLP weights) and `convert_elmoformanylangs.py` (HIT-SCIR's models) both
import this module and never each other; `convert.py` is the `elmo-convert` command that dispatches to them. None of
these files travels as remote code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from ..configuration_elmo import ElmoConfig
from ..modeling_elmo import ElmoModel

logger = logging.getLogger(__name__)

# The files every converted folder holds, so that remote code loads it where this project is not installed.
REQUIRED_FILES = (
    "model.safetensors",
    "configuration_elmo.py",
    "modeling_elmo.py",
    "tokenizer_config.json",
    "tokenization_elmo.py",
)


class ConversionError(ValueError):
    """The inputs of a converter cannot be converted; the message names the file, dataset or field."""


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------


def build_model(config: ElmoConfig, state: dict[str, torch.Tensor]) -> ElmoModel:
    """An `ElmoModel` whose parameters *are* the tensors of `state` (no copy, no random init)."""
    with torch.device("meta"):
        model = ElmoModel(config)
    expected = set(model.state_dict())
    if expected != set(state):  # a bug in a converter, not in the user's files
        raise RuntimeError(
            f"converted weights do not match ElmoModel: missing {sorted(expected - set(state))}, "
            f"unexpected {sorted(set(state) - expected)}"
        )
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


# --------------------------------------------------------------------------------------------------
# The output folder
# --------------------------------------------------------------------------------------------------


def check_output_dir(
    output_dir: str | os.PathLike, overwrite: bool, inputs: Iterable[str | os.PathLike | None] = ()
) -> Path:
    """The absolute `output_dir`, once it is known that writing it is allowed (checked before any work).

    Raises:
        ConversionError: it is a file; or it is a non-empty folder and `overwrite` is False; or `overwrite`
            would delete one of the `inputs`.
    """
    output_dir = Path(output_dir).absolute()
    if output_dir.exists() and not output_dir.is_dir():
        raise ConversionError(f"output_dir {output_dir} exists and is not a folder")
    if _is_nonempty_dir(output_dir):
        if not overwrite:
            raise ConversionError(
                f"output_dir {output_dir} exists and is not empty; pass --overwrite to replace it"
            )
        for source in inputs:
            if source is not None and output_dir.resolve() in Path(source).resolve().parents:
                raise ConversionError(
                    f"output_dir {output_dir} holds the input {source}, which --overwrite would delete; "
                    "choose another output_dir"
                )
    return output_dir


def write_converted(output_dir: Path, model: ElmoModel, tokenizer, card: Mapping, parity: Mapping,
                    required_files: Iterable[str] = ()) -> Path:
    """Write a converted model into `output_dir` (already checked by `check_output_dir`): the weights, config and
    remote code (`save_pretrained`), the tokenizer files and the model card README.md (`card`: the card's
    `training` section; `parity`: how closely the converter reproduces the original outputs). Staged: nothing is
    left half-written. `required_files` are checked besides `REQUIRED_FILES`."""
    with staged_output_dir(output_dir, required_files) as tmp:
        model.save_pretrained(tmp)
        _write_tokenizer(tmp, tokenizer)
        write_card(tmp, model.config, card, parity)
    return output_dir


def _write_tokenizer(folder: Path, tokenizer) -> None:
    tokenizer.save_pretrained(folder)


@contextlib.contextmanager
def staged_output_dir(output_dir: Path, required_files: Iterable[str] = ()):
    """A temporary folder beside `output_dir` for a converter to write into. When the block ends without error,
    the folder is checked (`check_written`), made an ordinary shared folder and put in place of `output_dir`; on
    any error it is deleted, so a failed conversion leaves nothing half-written."""
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.tmp-", dir=output_dir.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the output is an ordinary folder
        yield tmp
        check_written(tmp, required_files)
        for file in tmp.iterdir():  # some writers create private (0600) files; the output is shared like any
            os.chmod(file, 0o666 & ~_umask())
        _place(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_written(folder: Path, required_files: Iterable[str] = ()) -> None:
    """The files a remote-code user needs; a missing one is a bug of this package, not of the inputs."""
    with open(folder / "config.json", encoding="utf-8") as handle:
        auto_map = json.load(handle).get("auto_map") or {}
    missing = [name for name in ("AutoConfig", "AutoModel") if name not in auto_map]
    missing += [name for name in (*REQUIRED_FILES, *required_files) if not (folder / name).is_file()]
    if missing:
        raise RuntimeError(f"the converted folder lacks {missing}; remote code would not load")


def write_card(folder: Path, config: ElmoConfig, training: Mapping, parity: Mapping) -> None:
    """README.md of the converted folder (model_card.md filled in); a card problem never fails a conversion."""
    try:
        from .hub_utils import write_model_card

        write_model_card(folder, config=config, training=dict(training), parity=dict(parity))
    except Exception as error:  # noqa: BLE001
        logger.warning("could not write the model card: %s", error)


def _place(tmp: Path, output_dir: Path) -> None:
    """Move the finished folder `tmp` to `output_dir`, replacing what is there (already allowed by the caller)."""
    if not output_dir.exists():
        os.replace(tmp, output_dir)
        return
    # os.replace cannot put a folder over a non-empty one: move the old one aside, then delete it.
    old = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.old-", dir=output_dir.parent))
    os.replace(output_dir, old / output_dir.name)
    try:
        os.replace(tmp, output_dir)
    except BaseException:
        os.replace(old / output_dir.name, output_dir)
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask alone must set it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())
