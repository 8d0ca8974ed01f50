"""`InterruptGuard`: SIGINT/SIGTERM become `Interrupted`, held back inside `deferred()`, and never swallowed by a
library's `except Exception` (logging's among them)."""

from __future__ import annotations

import io
import logging
import os
import signal
import weakref

import pytest

from elmo_hf.tools.core.interrupts import (
    Interrupted,
    InterruptGuard,
    handlers_kept,
    one_line_if_interrupted_while_starting,
)


class _SignallingStream(io.StringIO):
    """A console whose write is where the signal lands (Python runs the handler inside it)."""

    def write(self, text: str) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return super().write(text)


def test_a_signal_while_logging_writes_a_line_stops_the_command():
    logger = logging.getLogger("test_interrupts.console")
    logger.propagate = False
    handler = logging.StreamHandler(_SignallingStream())
    logger.addHandler(handler)
    try:
        with pytest.raises(Interrupted) as stop, InterruptGuard().installed():
            logger.warning("a line")
    finally:
        logger.removeHandler(handler)
    assert stop.value.exit_code == 143 and stop.value.name == "SIGTERM"


def test_a_signal_lost_in_a_weakref_callback_is_raised_at_the_next_check(capsys):
    """Python drops an exception raised inside a weakref callback (printing "Exception ignored in ..."): the
    command must still stop, at its next check, and print no traceback."""

    class Thing:
        pass

    def callback(_):
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, inside the callback
        for _ in range(1000):  # bytecodes for the handler to run between
            pass

    guard, steps = InterruptGuard(), []
    with pytest.raises(Interrupted) as stop, guard.installed():
        thing = Thing()
        reference = weakref.ref(thing, callback)
        del thing  # the callback runs: the signal's exception is raised in it and dropped
        steps.append("went on")
        guard.check()
        steps.append("should not get here")
    assert reference() is None and steps == ["went on"] and stop.value.exit_code == 130
    assert "Traceback" not in capsys.readouterr().err


def test_a_signal_inside_deferred_waits_for_the_block_to_end():
    guard, done = InterruptGuard(), []
    before = signal.getsignal(signal.SIGINT)  # Python's own handler, or SIG_IGN where the suite was started in the
    with pytest.raises(Interrupted) as stop, guard.installed():  # background of a shell
        with guard.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the write finished")
    assert done == ["the write finished"] and stop.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is before  # the guard put the handler back


def test_a_signal_while_a_command_starts_ends_it_in_one_line(capsys):
    """The seconds of importing torch, before any guard is installed: one line and 128 + the signal's number, and
    the handler that was there before comes back after the block."""
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as end, one_line_if_interrupted_while_starting():
        os.kill(os.getpid(), signal.SIGTERM)
    assert end.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "interrupted by SIGTERM while starting: nothing was written\n"
    assert signal.getsignal(signal.SIGTERM) is before


def _fails_after_a_signal(options, guard):
    """A run whose library turns the interruption into an error of its own (as Ray's wait does: a SystemError)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the handler raises Interrupted here ...
        for _ in range(1000):  # (bytecodes for the handler to run between)
            pass
    except BaseException:  # ... and the library swallows it, as a C extension's wait does
        pass
    raise SystemError("<built-in method wait> returned a result with an exception set")


def test_an_error_after_a_signal_is_told_as_the_interruption_in_one_line(capsys):
    """Exit 130 and one line naming the signal and the error that came of it, no traceback (it was silent before)."""
    from types import SimpleNamespace

    from elmo_hf.cli.frame import Command, run

    command = Command(name="elmo-test", parse=lambda argv: SimpleNamespace(verbose=False),
                      run="test_interrupts:_fails_after_a_signal", logger="elmo-test")
    assert run(command, []) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "WARNING elmo-test: interrupted by SIGINT (the run then stopped with SystemError: <built-in method wait> "
        "returned a result with an exception set)"], err


def test_a_library_that_sets_its_own_handlers_on_start_does_not_take_the_signals_from_the_command():
    """As `ray.init` does (SIGTERM: a handler that exits with status 15): inside `handlers_kept()` the library's
    handler is set, after it the command's guard has both signals again."""
    def library_handler(signum, frame):
        raise SystemExit(signum)

    guard = InterruptGuard()
    with guard.installed():
        with handlers_kept():
            signal.signal(signal.SIGTERM, library_handler)
            assert signal.getsignal(signal.SIGTERM) is library_handler
        assert signal.getsignal(signal.SIGTERM) == guard._handler == signal.getsignal(signal.SIGINT)
        with pytest.raises(Interrupted) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # bytecodes for the handler to run between
                pass
    assert stop.value.exit_code == 143
