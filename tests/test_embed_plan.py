"""`elmo-embed` resolves its options once into a frozen `EmbedPlan` (tools/embedding/embed_plan.py) and leaves the
caller's `EmbedOptions` as they were given: the format from OUTPUT's suffix, the tokenizer's word split, the backend and
dtype are the plan's, recorded in the output."""

from __future__ import annotations

import dataclasses
import json

import h5py
import pytest

from elmo_hf.tools.core.arguments import parse_options
from elmo_hf.tools.core.command_options import EmbedOptions
from elmo_hf.tools.embedding import embed as embed_module
from elmo_hf.tools.embedding.embed_plan import EmbedPlan


def test_a_run_leaves_its_options_as_given_and_records_the_plan(tiny_model_dir, tmp_path, monkeypatch):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("the cat sat\n\nanother line here\n", encoding="utf-8")
    options = parse_options(EmbedOptions, [str(corpus), str(tmp_path / "out.h5"), "--model", str(tiny_model_dir),
                                           "--quiet", "--device", "cpu"])
    before = dataclasses.asdict(options)
    plans = []
    real = embed_module._run_plan
    monkeypatch.setattr(embed_module, "_run_plan", lambda plan, *rest: plans.append(plan) or real(plan, *rest))
    embed_module.run(options)
    assert dataclasses.asdict(options) == before  # format, word_split, backend, dtype: still None / as given
    (plan,) = plans
    assert (plan.format, plan.word_split, plan.dtype) == ("hdf5", "punctuation", "float32")
    assert plan.backend in ("torch", "onnxruntime", "openvino")  # the default: torch, or a remembered faster one
    assert plan.mode == options.mode and plan.options is options  # every other option reads through
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.dtype = "int8"
    with h5py.File(tmp_path / "out.h5") as handle:
        assert handle.attrs["split"] == "punctuation" and handle.attrs["dtype"] == "float32"
        assert json.loads(handle.attrs["settings"])["format"] == "hdf5"


def test_the_plan_flattens_for_ray_and_survives_a_copy():
    import copy
    import pickle

    options = EmbedOptions(input="in.txt", output="out.parquet", model="tiny")
    plan = EmbedPlan(options, "parquet", "whitespace", "onnxruntime", "int8")
    flat = plan.as_dict()
    assert flat == {**dataclasses.asdict(options), "format": "parquet", "word_split": "whitespace",
                    "backend": "onnxruntime", "dtype": "int8"}
    assert (flat["window"], flat["input"]) == (options.window, "in.txt")
    for again in (copy.copy(plan), pickle.loads(pickle.dumps(plan))):
        assert again == plan and again.window == options.window
    with pytest.raises(AttributeError):
        plan.no_such_option  # noqa: B018
