"""Which files travel to the Hub as remote code, and their copying into a saved folder: the one answer to both.

Every file of this folder but `__init__.py` travels: `save_pretrained` of an Elmo model copies them all next to the
weights (transformers alone copies only the file of the class saved and what it imports), so that a folder saved
from any one class opens with every Auto class of its `auto_map` through `trust_remote_code=True`, and with
sentence-transformers' pooling module (`elmo_sentence_pooling.py`). The Hub push (`elmo_hf.tools.hub_push`) and the
sentence-transformers export (`elmo_hf.tools.sentence_vectors`) take their lists from here too.

A model that was itself loaded as remote code has only the files transformers fetched for it, in a folder of its own
per class loaded; `code_folders` says where the files are looked for then, and `copy_model_code` reports the files
it found nowhere (their Auto classes are left out of the saved `auto_map`, with a warning).

This file travels too: it imports only the standard library and transformers.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from transformers.dynamic_module_utils import get_relative_import_files
from transformers.utils import TRANSFORMERS_DYNAMIC_MODULE_NAME, logging

logger = logging.get_logger(__name__)

HERE = Path(__file__).resolve().parent


def is_remote_code(cls: type) -> bool:
    """Whether `cls` was loaded as remote code (from the module transformers makes of a folder's files)."""
    return cls.__module__.startswith(TRANSFORMERS_DYNAMIC_MODULE_NAME + ".")


def model_code_files(folder: Path = HERE) -> list[Path]:
    """The files of `folder` that travel: every `.py` but the package's `__init__.py`, sorted by name."""
    return sorted(path for path in folder.glob("*.py") if path.name != "__init__.py")


def module_with_siblings(module: str, folders: Iterable[Path]) -> list[Path] | None:
    """`module`'s file and the siblings it imports (`from .x import`, transitively), from the first of `folders`
    that holds them all; None where none does."""
    for folder in folders:
        source = Path(folder) / f"{module}.py"
        try:  # reads every file it follows: fails on the first one absent
            return [source, *map(Path, get_relative_import_files(str(source)))]
        except OSError:
            continue
    return None


def code_folders(origin: str | os.PathLike | None = None) -> list[Path]:
    """Where the model's files may be, first found first: this file's folder (the package, or the folder remote code
    was loaded into); the folders of the other modules loaded as the same remote code (transformers puts the files
    of each class loaded from a local folder into a folder of its own); `origin` (the folder a model was loaded
    from), when it holds this very file."""
    folders = [HERE]
    package = __name__.rsplit(".", 2)[0] + "."  # transformers_modules.<repository>. where loaded as remote code
    for name, module in reversed(list(sys.modules.items())):  # the latest loaded first
        file = getattr(module, "__file__", None)
        if name.startswith(package) and file:
            folders.append(Path(file).resolve().parent)
    mine = Path(str(origin or "/nonexistent")) / Path(__file__).name
    if mine.is_file() and mine.read_bytes() == Path(__file__).read_bytes():
        folders.append(mine.parent.resolve())
    return list(dict.fromkeys(folders))


def copy_code(files: Iterable[Path], target: Path) -> None:
    """Copy `files` into the folder `target` (a file already there, the same one, is left alone)."""
    target.mkdir(parents=True, exist_ok=True)
    for file in files:
        destination = target / file.name
        if not (destination.exists() and os.path.samefile(file, destination)):
            shutil.copyfile(file, destination)


def copy_model_code(target: Path, auto_map: Mapping[str, str], origin: str | os.PathLike | None = None) -> set[str]:
    """Copy every travelling file into `target`, and the file of every class `auto_map` names (with the siblings
    it imports) from wherever it is found (`code_folders`). Returns the Auto classes whose files were found
    nowhere, after a warning naming them; an entry naming another repository's code (`owner/repo--module.Class`)
    needs no file here."""
    folders = code_folders(origin)
    copy_code(model_code_files(), target)
    missing: dict[str, str] = {}  # Auto class -> its module's file
    for auto, reference in auto_map.items():
        if "--" in str(reference):
            continue
        module = str(reference).rsplit(".", 1)[0]
        files = module_with_siblings(module, [*folders, target])
        if files is None:
            missing[auto] = f"{module}.py"
        else:
            copy_code(files, target)
    if missing:
        logger.warning(
            f"{target}/config.json leaves {sorted(missing)} out of its auto_map: {sorted(set(missing.values()))} (or "
            f"a file they import) found in none of {[str(f) for f in folders]}, where the model's code was looked for"
        )
    return set(missing)
