"""flair's `layers="all"` probe (`torch.tensor([[1]])`, issue 54): exactly that tensor runs as the empty sentence
`<S> </S>` with a warning, and every other input that is not character ids is still refused in one line. flair itself
is checked in its environment (tests/test_ecosystem.py)."""

from __future__ import annotations

import logging

import pytest
import torch
from conftest import tiny_model

from elmo_hf.tokenization import ElmoTokenizer


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_model().eval()


def test_the_probe_runs_as_the_empty_sentence_with_every_layer(model, caplog):
    with torch.no_grad(), caplog.at_level(logging.WARNING):
        probe = model(torch.tensor([[1]]), output_hidden_states=True)
        empty = model(**ElmoTokenizer()([[]], is_split_into_words=True, return_tensors="pt"),
                      output_hidden_states=True)
    assert len(probe.hidden_states) == model.config.num_layers + 1
    assert torch.equal(probe.last_hidden_state, empty.last_hidden_state)
    assert "layer count probe" in caplog.text


@pytest.mark.parametrize("input_ids", [torch.tensor([[2]]), torch.tensor([[1, 1]]), torch.tensor([[1], [1]]),
                                       torch.tensor([[1.0]])])
def test_other_inputs_that_are_not_character_ids_are_refused(model, input_ids):
    with pytest.raises(ValueError, match="input_ids must be"):
        model(input_ids)
