"""The suite's own guard (`conftest._same_process_state_for_every_test`): it sees each kind of process-wide change a
test could leave behind, and puts it back, so that a test file passes alone and in any order."""

from __future__ import annotations

import logging
import os
import warnings

import pytest
import torch
import transformers
from conftest import _process_state, _restore_process_state

import elmo_hf.tools.loading  # noqa: F401  (its logger exists before the test changes its level)
from elmo_hf.modeling_elmo import matmul_elmo
from elmo_hf.modeling_elmo.configuration_elmo import TASK_CLASSES
from elmo_hf.modeling_elmo.kernels_elmo import ALL_LSTM_FUNCTIONS
from elmo_hf.tokenization import WORD_SPLITTERS


def _threads():
    torch.set_num_threads(1 if torch.get_num_threads() != 1 else 2)


CHANGES = {
    "torch threads": _threads,
    "torch default dtype": lambda: torch.set_default_dtype(torch.float64),
    "matmul_elmo._ONEDNN": lambda: matmul_elmo._ONEDNN.__setitem__(torch.float32, "changed"),
    "LSTM kernels": lambda: ALL_LSTM_FUNCTIONS.register("left-behind", ALL_LSTM_FUNCTIONS["reference"]),
    "word splits": lambda: WORD_SPLITTERS.register("left-behind", str.split),
    "task heads": lambda: TASK_CLASSES.__setitem__("left-behind", TASK_CLASSES["token-classification"]),
    "environment": lambda: os.environ.__setitem__("ELMO_LEFT_BEHIND", "1"),
    # what a command run in this process sets for itself (its console) and must put back
    "logging: a level": lambda: logging.getLogger("elmo_hf.tools.loading").setLevel(logging.DEBUG),
    "logging: a handler": lambda: logging.getLogger().addHandler(logging.NullHandler()),
    "logging: a warnings filter": lambda: warnings.filterwarnings("ignore", message="left behind"),
    "logging: transformers' verbosity": lambda: transformers.logging.set_verbosity(
        transformers.logging.get_verbosity() + 10),
}


@pytest.mark.parametrize("kind", CHANGES)
def test_the_guard_sees_a_change_and_puts_it_back(kind):
    before = _process_state()
    CHANGES[kind]()
    after = _process_state()
    compared = [name for name in before if name != "modules imported"]
    assert [name for name in compared if after[name] != before[name]] == [kind.split(":")[0]]
    _restore_process_state(before)
    restored = _process_state()
    assert all(restored[name] == before[name] for name in compared)
