"""Where a command writes: checked before any work, so that a mistyped or unwritable path costs one line, not a
traceback after the work is done (or a folder made somewhere by accident)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .errors import InputError


class OutputPathError(InputError):
    """An output path a command cannot write; the message is one line naming the option and the path."""


def paths_within(folder: Path, paths: Iterable[str | Path | None]) -> list[str | Path]:
    """The `paths` that are `folder` or lie inside it (what emptying or replacing `folder` would delete); None and
    paths that do not exist here (a Hub id, a preset name) are skipped."""
    root = Path(folder).resolve()
    return [each for each in paths if each is not None and Path(each).exists()
            and (Path(each).resolve() == root or root in Path(each).resolve().parents)]


def check_writable_folder(folder: Path, option: str) -> None:
    """`folder` takes new files: it exists, or its parent exists and takes new files (the command makes `folder`
    itself, never the folders above it: a mistyped path would make them anywhere)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputPathError(f"{option} {folder} exists and is not a folder")
    _check_takes_files(folder if folder.is_dir() else folder.parent, f"{option} {folder}")


def check_writable_file(path: Path, option: str) -> None:
    """`path` can be written as a new file: its folder exists and takes new files."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{option} {path} is a folder, not a file")
    _check_takes_files(path.parent, f"{option} {path}")


def _check_takes_files(where: Path, named: str) -> None:
    if where.exists() and not where.is_dir():
        raise OutputPathError(f"{named}: {where} is a file, not a folder")
    if not where.is_dir():
        raise OutputPathError(f"{named}: the folder {where} does not exist")
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as error:
        raise OutputPathError(f"{named}: cannot write in {where} ({error.strerror or error})") from error


def as_ordinary(path: str | os.PathLike) -> None:
    """Give `path`, written through `tempfile` (which makes files 0600 and folders 0700: private), the mode any
    other file or folder the user makes gets (0666 or 0777 less the umask), so that another user of the machine reads
    an output as they read the rest. Call it before renaming the temporary into place."""
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~umask())


def umask() -> int:
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
