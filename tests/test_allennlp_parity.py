"""Ours against allennlp 2.10.1's own `Elmo` (the implementation most ELMo users ran), on the same weights.

allennlp is an optional test anchor, installed without its dependencies (`make anchors`); it runs through
`benchmarks/allennlp_anchor.py`, which executes allennlp's own ELMo files unchanged. Without it these tests skip.
Both models read the same `options.json` + hdf5 pair: random weights of the original layout at the `small`
published size (`original_layout.py`), whose large values reach the clips, and the trained bilm-tf fixture, kept
beside the checkout (its cases skip without it).

Bounds (tests/tolerances.py): the trained fixture to PARITY (1e-5 absolute, the converter's promise); the random
weights to PARITY_SCALED, 1e-5 of the largest value: their layer 0 reaches 11.0 (layers 1, 2: 1.4, 1.9; the mix 3.3),
where float32 rounding of another summation order alone moves a value by about 1e-6 of it.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import REPO, shared_file
from original_layout import write_original_layout
from tolerances import PARITY, PARITY_SCALED, assert_close

from elmo_hf.modeling_elmo import ElmoModel
from elmo_hf.tokenization import ElmoTokenizer
from elmo_hf.tools.conversion.convert_allennlp_elmo import convert

SENTENCES = [
    "The bank of the river was steep .".split(),
    "She deposited the cheque at the bank on Monday morning before work .".split(),
    "Unbelievably , zxqvk !".split(),
    ["a"],
]


def load_anchor():
    """benchmarks/allennlp_anchor.py (a script folder, not a package)."""
    spec = importlib.util.spec_from_file_location("allennlp_anchor", REPO / "benchmarks" / "allennlp_anchor.py")
    anchor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(anchor)
    return anchor


ANCHOR = load_anchor()


@pytest.fixture(scope="module")
def allennlp_elmo():
    module = ANCHOR.load_allennlp_elmo()
    if module is None:
        pytest.skip("allennlp is not installed (the optional anchor: `make anchors`, i.e. "
                    "pip install --no-deps allennlp==2.10.1)")
    return module


def weight_pair(name: str, tmp_path_factory):
    """The options.json and hdf5 files of the weights called `name`."""
    if name == "random small":
        return write_original_layout(tmp_path_factory.mktemp("small"), "small", seed=3)
    fixture = shared_file("elmo-fixtures/allennlp/options.json").parent
    return fixture / "options.json", fixture / "lm_weights.hdf5"


@pytest.fixture(scope="module", params=["random small", "bilm-tf fixture"])
def models(request, allennlp_elmo, tmp_path_factory):
    """[(name, allennlp's Elmo, our ElmoModel)] for one pair of files, both in eval mode, no dropout."""
    name = request.param
    options, weights = weight_pair(name, tmp_path_factory)
    folder = convert(options, weights, tmp_path_factory.mktemp("converted") / "model")
    theirs = allennlp_elmo.Elmo(str(options), str(weights), num_output_representations=1, dropout=0.0,
                                scalar_mix_parameters=[0.2, -0.5, 1.0]).eval()
    return [(name, theirs, ElmoModel.from_pretrained(folder).eval())]


def parity_bound(name: str):
    """PARITY on the trained weights (O(1) vectors); PARITY_SCALED on the random ones (layer 0 reaches 11)."""
    return PARITY_SCALED if name == "random small" else PARITY


def fresh(theirs):
    """allennlp's Elmo carries each row's LSTM state into the next call; ours starts every call from zeros."""
    theirs._elmo_lstm._elmo_lstm.reset_states()
    return theirs


@pytest.mark.numerics
def test_every_layer_matches_allennlp(models):
    """All three biLM layers, with <S>/</S>, of a padded batch of mixed lengths, to the parity bound."""
    batch = ElmoTokenizer()(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    for name, theirs, ours in models:
        with torch.no_grad():
            expected = fresh(theirs)._elmo_lstm(ANCHOR.allennlp_char_ids(ids, mask))  # adds <S>/</S>
            got = ours(**batch, output_hidden_states=True).hidden_states
        assert torch.equal(expected["mask"].bool(), mask.bool()), name
        assert len(got) == len(expected["activations"]) == 3, name
        for layer, (mine, reference) in enumerate(zip(got, expected["activations"])):
            keep = mask.bool()
            assert_close(mine[keep], reference[keep], parity_bound(name), what=f"{name}, layer {layer}")
            assert reference[keep].abs().max() > 0.05, name  # a comparison of real values, not of zeros


@pytest.mark.numerics
def test_scalar_mix_matches_allennlp(models):
    """allennlp's fixed-weight scalar mix (sentence boundaries removed) from our layers, to the parity bound."""
    batch = ElmoTokenizer()(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    weights = torch.softmax(torch.tensor([0.2, -0.5, 1.0]), dim=0)
    for name, theirs, ours in models:
        with torch.no_grad():
            expected = fresh(theirs)(ANCHOR.allennlp_char_ids(ids, mask))["elmo_representations"][0]
            layers = torch.stack(ours(**batch, output_hidden_states=True).hidden_states)
        mixed = (weights.view(-1, 1, 1, 1) * layers).sum(0)[:, 1:-1]  # drop <S>; the last column is padding
        for row, n in enumerate((mask.sum(1) - 2).tolist()):
            assert_close(mixed[row, :n], expected[row, :n], parity_bound(name), what=f"{name}, sentence {row}")
