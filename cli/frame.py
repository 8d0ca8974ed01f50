"""The one frame every console command runs in (`run`), and the row that describes a command (`Command`).

    parse the options   the command's dataclasses (`elmo_hf.tools.core.arguments`): --help and a usage error answer here
    console logging     one format, the first process says INFO, libraries say only warnings unless --verbose
    early checks        missing inputs, unwritable outputs: one line, exit 2, before torch is imported
    import the run      seconds (torch, transformers); a signal meanwhile ends with one line
    run it              under the interrupt guard: SIGINT/SIGTERM raise `Interrupted` where nothing is half-written
    exit status         0; 2 and one line for bad input (`InputError`); 1 and one line for `RunFailed` (a failed
                        write of an output included); 128 + the signal for an interruption, with the line the run
                        attached (or, where a library's error came of it, a line naming the signal and the error);
                        1 and the traceback for any other exception (`elmo_hf.tools.core.errors`: a plain
                        `ValueError` or `OSError` from inside the run is a bug, never bad input), returned to a
                        caller in Python like every other status
    --verbose           a handled error's line is followed by its traceback

The frame puts back what it changed in the process (handlers and levels of the loggers, transformers' verbosity and
progress bars, warnings filters, signal handlers), so a command run in-process (`run(name, argv)`: tests,
notebooks) leaves nothing behind. Standard library only at import.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from elmo_hf.tools.core.errors import InputError, RunFailed
from elmo_hf.tools.core.interrupts import Interrupted, InterruptGuard, one_line_if_interrupted_while_starting

# Libraries whose INFO lines and progress bars only --verbose shows.
LIBRARIES = ("transformers", "accelerate", "datasets", "huggingface_hub", "httpx", "httpcore", "httpx2", "httpcore2",
             "urllib3", "gradio", "uvicorn", "uvicorn.error", "uvicorn.access", "torch", "ray", "jieba", "matplotlib",
             "PIL")
# Libraries whose DEBUG lines say nothing a user can act on (filelock: each lock taken and released).
ALWAYS_QUIET = ("filelock",)
# The project's own loggers: DEBUG with --verbose.
PROJECT = ("elmo_hf",)


@dataclass(frozen=True)
class Command:
    """One console command: how its options are parsed and checked, and what runs it.

    `parse(argv)` returns the options (a dataclass; argparse exits 2 for a usage error and 0 after --help, and a
    `ValueError` from a field's own check is a usage error too). `checks(options)` refuses bad paths before the run is
    imported (`ValueError`, one line). `run` names the function, "module:function", called as `run(options, guard)`;
    an int it returns is the exit status (the app's), anything else (the output's path, the metrics) means 0; only
    `InputError` (exit 2) and `RunFailed` (exit 1) from the run are one line (`elmo_hf.tools.core.errors`)."""

    name: str
    parse: Callable[[list[str]], object]
    run: str
    logger: str
    checks: Callable[[object], None] | None = None
    timestamps: bool = False  # training commands: each line with its time
    quiet: bool = False  # only warnings, errors and the logger's own notices unless --verbose (elmo-convert)
    download_bars: bool = False  # huggingface_hub's progress bars stay on (the run turns them off after its downloads)
    help: str = ""  # one line for `python -m elmo_hf.cli --help`


def run(command: Command, argv: Sequence[str] | None = None) -> int:
    """Run `command` with `argv` (default: the process's command line) and return its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    logger = logging.getLogger(command.logger)
    try:
        options = command.parse(argv)
    except SystemExit as end:  # --help (0) or argparse's usage error (2), already written
        return _status(end)
    except (ValueError, OSError) as error:  # a field's own check, or a JSON options file that cannot be read
        with console(command, verbose=False):
            logger.error("%s", _one_line(error))
        return 2
    verbose = command_verbose(options)
    with console(command, verbose=verbose) as terminal:
        if command.checks is not None:
            try:
                command.checks(options)
            except (ValueError, OSError) as error:  # the checks of the paths given, before the run
                logger.error("%s", _one_line(error), exc_info=verbose)
                return 2
        try:
            with one_line_if_interrupted_while_starting():  # importing torch and transformers takes seconds
                module, _, function = command.run.partition(":")
                work = getattr(importlib.import_module(module), function)
        except SystemExit as end:  # a signal while starting: its one line is written
            return _status(end)
        terminal.quiet_libraries()  # those the run's imports set up
        guard = InterruptGuard()
        group_before = distributed_initialized()  # a caller's own process group is the caller's to end
        try:
            with guard.installed(), transformers_console(verbose, command.download_bars):
                result = work(options, guard)
            return result if type(result) is int else 0  # a run returns its exit status, or what it made
        except SystemExit as end:  # transformers' argument parser inside the run: its usage line is written
            return _status(end)
        except Interrupted as stop:
            report = getattr(stop, "report", f"interrupted by {stop.name}")
            if report:  # None: the run said it already
                logger.warning("%s", report)
            return stop.exit_code
        except InputError as error:
            logger.error("%s", _one_line(error), exc_info=verbose)
            return 2
        except RunFailed as error:
            logger.error("%s", _one_line(error), exc_info=verbose)
            return 1
        except Exception as error:  # not anticipated: a bug to report with its traceback, never blaming the input
            if guard.received:  # stopped by the signal all the same: a library's wait turned our `Interrupted` into
                # an error of its own, or another process of the group stopped and this one failed waiting for it.
                # The interruption, in one line from the first process (the others are told by theirs).
                if terminal.first:
                    logger.warning("interrupted by %s (the run then stopped with %s: %s)",
                                   signal.Signals(guard.received).name, type(error).__name__, _one_line(error),
                                   exc_info=verbose)
                return 128 + guard.received
            logger.exception("%s failed with an error it did not expect: the traceback follows", command.name)
            return 1
        finally:
            if not group_before:
                end_distributed()


def command_verbose(options) -> bool:
    """--verbose, in whichever of the command's option dataclasses holds it."""
    parts = options if isinstance(options, (tuple, list)) else (options,)
    return any(bool(getattr(part, "verbose", False)) for part in parts)


def _status(end: SystemExit) -> int:
    """The exit status a process would have had; a message given as the code is written, as Python writes it."""
    if isinstance(end.code, int) or end.code is None:
        return end.code or 0
    sys.stderr.write(f"{end.code}\n")
    return 1


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class Console:
    """The command's console, from `open()` to `close()`: one handler on stderr; INFO from the first process of a
    multi-process run, warnings from the others; the libraries' INFO lines only with `verbose`, which also shows the
    project's DEBUG lines. `quiet_libraries()` sets the libraries' loggers that exist now, again after the run's
    imports (a library sets its own logger up when it is first imported); `close()` puts back what was set."""

    def __init__(self, command: Command, verbose: bool):
        self.first = os.environ.get("RANK", "0") == "0"
        self.verbose = verbose
        rank = f" [rank {os.environ['RANK']}]" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
        stamp = "%(asctime)s " if command.timestamps else ""
        self.handler = logging.StreamHandler(sys.stderr)
        self.handler.setFormatter(logging.Formatter(f"{stamp}%(levelname)s{rank} %(name)s: %(message)s"))
        self.levels = {"": logging.INFO if self.first else logging.WARNING}
        if command.quiet and not verbose:
            self.levels[""] = logging.WARNING
            self.levels[command.logger] = logging.INFO  # the command's own notices ("wrote ...")
        if verbose:
            self.levels.update(dict.fromkeys(PROJECT, logging.DEBUG if self.first else logging.WARNING))
        self.saved: dict[str, int] = {}
        self.warnings = warnings.catch_warnings()

    def open(self) -> None:
        self.warnings.__enter__()
        logging.getLogger().addHandler(self.handler)
        for name, level in self.levels.items():
            self._set(name, level)
        self.quiet_libraries()

    def quiet_libraries(self) -> None:
        # Only loggers that exist: one made before its library's import would be set up again by it (jieba adds its
        # own handler and level), a change the caller never asked for.
        existing = logging.root.manager.loggerDict  # a library imported: its logger, or a placeholder for its modules'
        for name in LIBRARIES:
            if name in existing:
                self._set(name, logging.DEBUG if self.verbose and self.first else logging.WARNING)
        for name in ALWAYS_QUIET:  # set before its first import too: a lock is taken when the run begins
            self._set(name, logging.WARNING)

    def _set(self, name: str, level: int) -> None:
        logger = logging.getLogger(name)
        self.saved.setdefault(name, logger.level)
        logger.setLevel(level)

    def close(self) -> None:
        logging.getLogger().removeHandler(self.handler)
        for name, level in self.saved.items():
            logging.getLogger(name).setLevel(level)
        self.warnings.__exit__(None, None, None)


@contextlib.contextmanager
def console(command: Command, verbose: bool) -> Iterator[Console]:
    """`Console` for the block."""
    terminal = Console(command, verbose)
    terminal.open()
    try:
        yield terminal
    finally:
        terminal.close()


@contextlib.contextmanager
def transformers_console(verbose: bool, bars: bool = False) -> Iterator[None]:
    """transformers' own verbosity and progress bars (huggingface_hub's too: off unless `verbose` or `bars`) for the
    block, where the run imported transformers, put back afterwards."""
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is None:
        yield
        return
    verbosity, enabled = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_info() if verbose else hf_logging.set_verbosity_error()
    if not (verbose or bars):
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar() if enabled else hf_logging.disable_progress_bar()


def distributed_initialized() -> bool:
    dist = sys.modules.get("torch.distributed")
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def end_distributed() -> None:
    """Destroy torch.distributed's process group, if any, once the run's objects are gone: then the group's
    destructor runs while the interpreter is fully alive, not at exit, where a gloo worker thread still freeing
    tensors can hang or crash it. Nothing to do where torch was never imported."""
    if "torch.distributed" not in sys.modules:
        return
    gc.collect()
    if distributed_initialized():
        sys.modules["torch.distributed"].destroy_process_group()
