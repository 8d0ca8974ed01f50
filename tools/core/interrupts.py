"""Ctrl-C (SIGINT) and SIGTERM in a long command: one line and exit status 128 + the signal, not a traceback.

    guard = InterruptGuard()
    with guard.installed():          # the command's run (elmo_hf.cli's frame): the signals raise `Interrupted`
        ...
        with guard.deferred():       # a write that must not be cut in half: the signal waits for its end
            writer.write(rows)

A signal that arrives inside `deferred()` is raised when the block ends, so what was written is whole; anywhere else
it is raised at once (Python runs the handler between two bytecodes, so a long tensor operation ends first). Outside
`installed()` the guard changes nothing: Ctrl-C raises KeyboardInterrupt as usual.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The process received SIGINT or SIGTERM; `exit_code` is the shell's status for it (130, 143).

    A `BaseException`, as `KeyboardInterrupt` is: a library's `except Exception` must not swallow it (logging's
    handlers catch `Exception` around every line they write, and a signal often lands there)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class InterruptGuard:
    """Turns SIGINT/SIGTERM into `Interrupted` while installed, held back inside `deferred()` blocks. `received` is
    the last signal received: a training loop running inside `deferred()` sees a stop request there at its next step
    boundary (and agrees on it with its other processes: `elmo_hf.train.checkpoints.agreed_stop`)."""

    def __init__(self):
        self._pending: int | None = None
        self._raised: int | None = None
        self._depth = 0
        self.received: int | None = None

    def _handler(self, signum, frame) -> None:
        self.received = signum
        if self._depth:
            self._pending = signum
            return
        self._raised = signum
        raise Interrupted(signum)

    def check(self) -> None:
        """Raise `Interrupted` again if a signal's was lost. Python runs the handler between any two bytecodes, also
        inside a weakref callback or a `__del__`, where an exception is printed ("Exception ignored in ...") and
        dropped: the command would go on as if never signalled. A loop calls this at each step; a raise that was
        not lost has left the loop already."""
        if self._raised is not None:
            raise Interrupted(self._raised)

    @contextlib.contextmanager
    def installed(self) -> Iterator[InterruptGuard]:
        previous = {signum: signal.signal(signum, self._handler) for signum in SIGNALS}
        previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable_hook(sys.unraisablehook)
        _INSTALLED.append(self)
        try:
            yield self
        finally:
            _INSTALLED.remove(self)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            sys.unraisablehook = previous_hook
            self._pending = self._raised = None

    @staticmethod
    def _unraisable_hook(previous):
        """Python's report of an exception it had to drop, quiet for ours: `check()` raises it again, so the user
        sees the command's one line, not a traceback of a weakref callback."""
        def hook(unraisable) -> None:
            if not (isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type, Interrupted)):
                previous(unraisable)
        return hook

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if not self._depth and self._pending is not None:
            signum, self._pending = self._pending, None
            raise Interrupted(signum)


_INSTALLED: list[InterruptGuard] = []  # the guards installed now, innermost last


def signals_held() -> contextlib.AbstractContextManager:
    """`deferred()` of the guard installed now (a command's): a write in the block is whole, and a library's C code in
    it (Ray's wait, which cannot take an exception from a signal handler) never sees `Interrupted`; a plain block where
    none is installed (a caller in Python, whose Ctrl-C is its own)."""
    return _INSTALLED[-1].deferred() if _INSTALLED else contextlib.nullcontext()


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """The SIGINT and SIGTERM handlers of before the block, set again after it: for a library that installs its own when
    it starts. Ray's driver does (`ray.init`): a Python handler for SIGTERM that exits with status 15, and a C one that
    prints a stack and aborts the process; with them, SIGTERM ended `elmo-embed --engine ray` with neither its work
    committed nor its line naming --resume."""
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:  # None: a handler not set from Python, which Python cannot set again
                signal.signal(signum, handler)


@contextlib.contextmanager
def one_line_if_interrupted_while_starting() -> Iterator[None]:
    """Within the block (the seconds of importing torch and transformers, before anything is written), SIGINT and
    SIGTERM end the command with one line and exit status 128 + the signal's number, not a traceback."""
    previous = {signum: signal.signal(signum, _interrupted_while_starting) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupted_while_starting(signum, frame) -> None:
    name = signal.Signals(signum).name
    sys.stderr.write(f"interrupted by {name} while starting: nothing was written\n")
    raise SystemExit(128 + signum)
