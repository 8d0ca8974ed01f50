"""What the converters share: the error they raise, the check of the output folder, the writing of a converted
folder (staged beside it, checked, put in place in one step) with its model card, and how a conversion command
runs: quiet logging, one line per outcome, SIGINT/SIGTERM ending in one line with nothing half-written.

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
from transformers.utils import logging as hf_logging

from elmo_hf.modeling_elmo.compat_elmo import warn_dotted_folder
from elmo_hf.modeling_elmo.configuration_elmo import ElmoConfig
from elmo_hf.modeling_elmo.modeling_elmo import ElmoModel
from elmo_hf.tokenization import check_word_split, save_with_fast_twin

from ..core.early_checks import existing_file
from ..core.errors import InputError, writing
from ..core.interrupts import Interrupted, signals_held
from ..core.output_paths import as_ordinary, paths_within
from ..hub.model_card import render_model_card

logger = logging.getLogger(__name__)
# What a conversion command says without --verbose: where it wrote the model, and advice a user can act on.
notice = logging.getLogger("elmo_hf.tools.conversion.convert")

# The files every converted folder holds, so that remote code loads it where this project is not installed.
REQUIRED_FILES = (
    "model.safetensors",
    "configuration_elmo.py",
    "modeling_elmo.py",
    "tokenizer_config.json",
    "tokenization_elmo.py",
)


class ConversionError(InputError):
    """The inputs of a converter cannot be converted; the message names the file, dataset or field."""


def check_input_file(path: str | os.PathLike, what: str) -> Path:
    """`path` as a Path, once it is known to be a file: a missing one and a folder are refused by name (the check
    elmo-convert's early checks make before torch is imported)."""
    return existing_file(path, what, ConversionError)


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
        held = paths_within(output_dir, inputs)
        if held:
            raise ConversionError(
                f"output_dir {output_dir} holds the input {held[0]}, which --overwrite would delete; "
                "choose another output_dir"
            )
    return output_dir


def checked_word_split(word_split: str | None) -> str | None:
    """`word_split` (None: the tokenizer's default) once it is known to be registered and usable (its package
    installed): a `ConversionError` in one line otherwise, before any work."""
    if word_split is None:
        return None

    try:
        check_word_split(word_split, option="--word_split")
    except ValueError as error:  # WordSplitDependencyError is one too
        raise ConversionError(str(error)) from error
    return word_split


def write_converted(output_dir: Path, model: ElmoModel, tokenizer, card: Mapping, parity: Mapping,
                    required_files: Iterable[str] = ()) -> Path:
    """Write a converted model into `output_dir` (already checked by `check_output_dir`): the weights, config and
    remote code (`save_pretrained`), the tokenizer files and the model card README.md (`card`: the card's
    `training` section; `parity`: how closely the converter reproduces the original outputs). Staged: nothing is
    left half-written. `required_files` are checked besides `REQUIRED_FILES`."""
    with writing(output_dir, "--output_dir"), staged_output_dir(output_dir, required_files) as tmp:
        model.save_pretrained(tmp)
        _write_tokenizer(tmp, tokenizer)
        write_card(tmp, model.config, card, parity, getattr(tokenizer, "word_split", None))
    return output_dir


def _write_tokenizer(folder: Path, tokenizer) -> None:
    save_with_fast_twin(tokenizer, folder)  # transformers' example scripts ask the folder for a fast tokenizer


@contextlib.contextmanager
def staged_output_dir(output_dir: Path, required_files: Iterable[str] = ()):
    """A temporary folder beside `output_dir` for a converter to write into. When the block ends without error,
    the folder is checked (`check_written`), made an ordinary shared folder and put in place of `output_dir`; on
    any error (SIGINT/SIGTERM included) it is deleted, with the parent folder it had to create, so a failed
    conversion leaves nothing half-written. A signal that arrives while the folder is put in place waits for the
    end of it, and is then raised with `output_written` set on it."""
    made_parent = not output_dir.parent.exists()
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.tmp-", dir=output_dir.parent))
    placed = False
    try:
        as_ordinary(tmp)  # mkdtemp makes it private; the output is an ordinary folder
        with _save_lines_hidden():
            yield tmp
        check_written(tmp, required_files)
        for file in tmp.iterdir():  # some writers create private (0600) files; the output is shared like any
            as_ordinary(file)
        with signals_held():  # never half-placed: the old folder moved aside and the new one not yet in
            _place(tmp, output_dir)
            placed = True
        warn_dotted_folder(output_dir)  # the staging folder's name (hidden) was not the one users load
    except BaseException as error:
        if isinstance(error, Interrupted):
            error.output_written = placed
        if not placed:
            shutil.rmtree(tmp, ignore_errors=True)
            if made_parent:
                with contextlib.suppress(OSError):
                    output_dir.parent.rmdir()
        raise


@contextlib.contextmanager
def _save_lines_hidden():
    """transformers' "saved in ..." lines (shown with --verbose) would name the temporary folder, which is gone when
    the command ends; the command's own line names the folder the model is in."""
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity(max(verbosity, hf_logging.WARNING))
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def check_written(folder: Path, required_files: Iterable[str] = ()) -> None:
    """The files a remote-code user needs; a missing one is a bug of this package, not of the inputs."""
    with open(folder / "config.json", encoding="utf-8") as handle:
        auto_map = json.load(handle).get("auto_map") or {}
    missing = [name for name in ("AutoConfig", "AutoModel") if name not in auto_map]
    missing += [name for name in (*REQUIRED_FILES, *required_files) if not (folder / name).is_file()]
    if missing:
        raise RuntimeError(f"the converted folder lacks {missing}; remote code would not load")


def write_card(folder: Path, config: ElmoConfig, training: Mapping, parity: Mapping,
               word_split: str | None = None) -> None:
    """README.md of the converted folder (model_card.md filled in, describing the tokenizer's `word_split`); a card
    problem never fails a conversion."""
    try:
        text = render_model_card(config, training=dict(training), parity=dict(parity), word_split=word_split)
        (folder / "README.md").write_text(text, encoding="utf-8")  # written here: the log would name the temp folder
    except Interrupted:
        raise
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


# --------------------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------------------


def hide_write_progress() -> None:
    """No progress bar for writing the weights (one bar per shard of a file written in seconds). Called by the
    commands once their downloads are done: transformers' switch turns huggingface_hub's bars off too."""
    hf_logging.disable_progress_bar()


def interrupted_line(stop: Interrupted, output_dir: str | os.PathLike) -> str:
    """What an interrupted conversion kept: the output folder is whole (written, or as it was before), and a
    download in progress keeps its bytes for the next run (`download.py` sets `kept`)."""
    output_dir = Path(output_dir).absolute()
    if getattr(stop, "output_written", False):
        return f"interrupted ({stop.name}) after the model was written to {output_dir}"
    before = "left as it was" if output_dir.exists() else "not written"
    line = f"interrupted ({stop.name}): {output_dir} was {before}"
    kept = getattr(stop, "kept", None)
    return f"{line}; {kept}" if kept else f"{line}; run the same command again to convert"


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())
