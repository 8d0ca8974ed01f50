"""Outputs are files like any other the user makes: readable by whoever may read the rest of the folder. `tempfile`
makes private files (0600) and safetensors writes its weights private too; what the project writes through either
gets the mode of an ordinary file (0666 less the umask), under the umask the test sets."""

from __future__ import annotations

import os
import stat

import pytest
from conftest import tiny_model

from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.train.tasks.common_predict import write_atomically

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX's")


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    try:
        yield 0o644
    finally:
        os.umask(previous)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_saved_models_weights_are_as_readable_as_its_configuration(tmp_path, umask_022):
    tiny_model().save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    weights = list(tmp_path.glob("*.safetensors"))
    assert weights
    assert {_mode(path) for path in tmp_path.iterdir() if path.is_file()} == {umask_022}


def test_predictions_written_whole_are_an_ordinary_file(tmp_path, umask_022):
    path = tmp_path / "predictions.txt"
    write_atomically(str(path), ["B-PER O", "O"])
    assert path.read_text(encoding="utf-8") == "B-PER O\nO\n"
    assert _mode(path) == umask_022
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.txt"]  # no temporary left beside it
