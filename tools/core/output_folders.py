"""An output folder belongs to one run: what a command that writes a folder checks before it writes (the fine-tuning
commands: `owned`; elmo-pretrain and the demo refuse a non-empty folder their own way) and holds while it writes
(every writing command: `run_lock`).

* A folder that holds another run's files is refused in one line naming them and `--overwrite_output_dir`, which
  empties it first, so that no file of the earlier run (its metrics, its checkpoints) is left beside the new ones
  to be read as this run's. A run resuming from its own checkpoint finds its files there: the caller says so
  (`resuming`).
* While the run writes, it holds a lock (`<parent>/.<folder>.lock`, beside the folder, so that a folder not made yet
  can be locked too): a second run of the same folder is refused in one line naming the holder's process. The lock
  is the operating system's (`filelock`: `fcntl`/`msvcrt`), released when the process ends however it ends, so a
  run killed with SIGKILL leaves no lock that would block the next; the holder's facts are in a JSON file beside it.

Under `torchrun` / `accelerate launch` the first process (RANK 0) checks, empties and holds the lock for all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from .errors import InputError
from .output_paths import paths_within

logger = logging.getLogger(__name__)

OVERWRITE_OPTION = "--overwrite_output_dir"
SHOWN = 4  # the files a refusal names


def lock_path(folder: Path) -> Path:
    folder = Path(folder).absolute()
    return folder.parent / f".{folder.name}.lock"


def _first_process() -> bool:
    return os.environ.get("RANK", "0") == "0"


def check_unused(folder: Path, option: str = "--output_dir", overwrite: bool = False,
                 overwrite_option: str = OVERWRITE_OPTION) -> list[str]:
    """The names of what `folder` holds; an `InputError` naming them when it holds something and `overwrite` is
    not given. Nothing is changed."""
    folder = Path(folder)
    held = sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []
    if held and not overwrite:
        more = f" and {len(held) - SHOWN} more" if len(held) > SHOWN else ""
        raise InputError(f"{option} {folder} holds the files of another run ({', '.join(held[:SHOWN])}{more}): give "
                         f"another folder, or {overwrite_option} to replace them")
    return held


def empty(folder: Path) -> None:
    """Remove what `folder` holds (the folder itself stays)."""
    for path in Path(folder).iterdir():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


@contextlib.contextmanager
def run_lock(folder: Path, command: str, option: str = "--output_dir") -> Iterator[None]:
    """Hold the lock of `folder` for the block: an `InputError` naming the holder when another run holds it. A folder
    whose parent does not exist is not locked (the run refuses it; a lock would make the parent)."""
    path = lock_path(folder)
    if not _first_process() or not path.parent.is_dir():
        yield
        return
    info = path.with_name(path.name + ".json")
    lock = FileLock(path, timeout=0)
    try:
        _acquire(lock, path)
    except Timeout:
        raise InputError(f"{option} {folder} is being written by another run ({_holder(info)}): wait for it to end, "
                         "or give another folder") from None
    except OSError:  # a folder that takes no file: the run's own check says so
        yield
        return
    held = Path(folder).absolute()
    try:
        info.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                    "started": time.strftime("%Y-%m-%d %H:%M:%S")}), encoding="utf-8")
        _refuse_inside_another_run(held, folder, option)
        _HELD.add(held)
        yield
    finally:
        _HELD.discard(held)
        info.unlink(missing_ok=True)
        lock.release()
        path.unlink(missing_ok=True)


# The folders this process's runs hold: a run inside one of them is this process's own (elmo-demo pretrains and
# fine-tunes inside its folder), not another run's.
_HELD: set[Path] = set()


def _refuse_inside_another_run(held: Path, folder: Path, option: str) -> None:
    """An `InputError` when a folder above `held` is being written by another run: elmo-embed writing its file into
    a fine-tuning run's output folder was not refused, while the fine-tuning run, started second, is (it finds the
    embedding's files there)."""
    for above in held.parents:
        path = lock_path(above)
        if above in _HELD or above == above.parent or not path.exists():
            continue
        probe = FileLock(path, timeout=0)
        try:
            _acquire(probe, path)
        except Timeout:
            raise InputError(f"{option} {folder} is inside {above}, which another run is writing "
                             f"({_holder(path.with_name(path.name + '.json'))}): wait for it to end, or give a path "
                             "outside that folder") from None
        except OSError:  # a lock file this process cannot open: not one a run of this user holds
            continue
        probe.release()  # nobody holds it: a lock file left by a run that is over


def _refuse_removing_inputs(folder: Path, reads: Iterable[str | os.PathLike | None], option: str) -> None:
    """--overwrite_output_dir empties `folder`: refused where that would remove what the run is about to read."""
    inside = paths_within(folder, reads)
    if inside:
        raise InputError(f"{OVERWRITE_OPTION} would remove {inside[0]}, which this run reads, from {option} "
                         f"{folder}: give another {option}")


def _acquire(lock: FileLock, path: Path, tries: int = 3) -> None:
    """`lock.acquire()`, on the file that is at `path` now: the run before removes its lock file once released, so a
    process that opened the file before that removal may lock a file no longer there, while a third locks the new
    one; such a lock is let go and taken again (a `Timeout` when the file there now is held)."""
    for _ in range(tries):
        lock.acquire()
        descriptor = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
        try:
            if descriptor is None or os.fstat(descriptor).st_ino == os.stat(path).st_ino:
                return
        except FileNotFoundError:
            pass
        lock.release()
    raise Timeout(str(path))


def _holder(info: Path) -> str:
    try:
        holder = json.loads(info.read_text(encoding="utf-8"))
        return f"{holder['command']}, process {holder['pid']} on {holder['host']}, since {holder['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said which yet"


@contextlib.contextmanager
def owned(folder: Path, command: str, overwrite: bool = False, resuming: bool = False,
          option: str = "--output_dir", reads: Iterable[str | os.PathLike | None] = ()) -> Iterator[None]:
    """`folder` for one run, for the block: locked against a second writer; refused if it holds another run's
    files, unless the run is `resuming` its own (they are kept) or `overwrite` is given (they are removed first,
    but never a file or folder the run `reads`: the model it loads, its input files)."""
    with run_lock(folder, command, option):
        if _first_process() and not resuming:
            held = check_unused(folder, option, overwrite)
            if held:
                _refuse_removing_inputs(folder, reads, option)
                logger.info("%s: removing the %d file(s) of the earlier run (%s)", folder, len(held), OVERWRITE_OPTION)
                empty(folder)
        yield
