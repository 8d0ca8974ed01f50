"""`elmo-embed` resolves its frozen options once into a frozen `EmbedPlan` (tools/embedding/embed_plan.py): the same
fields with what the options left to the run settled (the format from OUTPUT's suffix, the tokenizer's word split,
the backend and dtype), recorded in the output; the caller's `EmbedOptions` stay as they were given. The options module
is light: the command layer parses and checks them before torch is imported."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import h5py
import pytest

from elmo_hf.tools.core.arguments import parse_options
from elmo_hf.tools.embedding import embed as embed_module
from elmo_hf.tools.embedding.embed_plan import EmbedError, EmbedOptions, EmbedPlan, check_options, resolve


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
    assert {name: value for name, value in dataclasses.asdict(plan).items() if before[name] is not None} == \
        {name: value for name, value in before.items() if value is not None}  # the rest as given
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.dtype = "int8"
    with h5py.File(tmp_path / "out.h5") as handle:
        assert handle.attrs["split"] == "punctuation" and handle.attrs["dtype"] == "float32"
        assert json.loads(handle.attrs["settings"])["format"] == "hdf5"


def test_the_plan_is_the_options_settled_and_survives_a_copy_and_pickle():
    """What Ray's actors receive: the plan itself, pickled (it was flattened to a dict and rebuilt as a Namespace)."""
    import copy
    import pickle

    options = EmbedOptions(input="in.txt", output="out.parquet", model="tiny")
    plan = resolve(options, format="parquet", word_split="whitespace", backend="onnxruntime", dtype="int8")
    assert isinstance(plan, EmbedPlan) and (plan.window, plan.input, plan.mode) == (options.window, "in.txt", "all")
    assert (plan.format, plan.word_split, plan.backend, plan.dtype) == ("parquet", "whitespace", "onnxruntime", "int8")
    for again in (copy.copy(plan), pickle.loads(pickle.dumps(plan))):
        assert again == plan and type(again) is EmbedPlan
    for frozen in (options, plan):
        with pytest.raises(dataclasses.FrozenInstanceError):
            frozen.window = 3
    with pytest.raises(ValueError, match="unsettled: format, backend"):
        resolve(options, word_split="whitespace", dtype="float32")
    with pytest.raises(ValueError, match="unsettled: dtype"):
        resolve(options, format="hdf5", word_split="whitespace", backend="torch", dtype="auto")


@pytest.mark.parametrize("given, says", [
    (dict(batch_size=0), "--batch_size: must be a positive integer, got 0"),
    (dict(max_lines=-1), "--max_lines: must be 0 or more, got -1"),
    (dict(commit_seconds=0), "--commit_seconds: must be a positive number of seconds, got 0"),
    (dict(mode="sum"), "--mode must be one of all, top, average, got 'sum'"),
])
def test_options_made_in_python_are_held_to_the_command_lines_rules(given, says):
    with pytest.raises(ValueError, match=f"^{says}$"):
        EmbedOptions(input="in.txt", output="out.h5", model="tiny", **given)


@pytest.mark.parametrize("given, says", [
    (dict(batch_tokens=100, max_tokens=99), "--batch_tokens (100) must hold one piece of --max_tokens (99) words"),
    (dict(overwrite=True, resume=True), "--overwrite and --resume contradict each other"),
    (dict(num_workers=2), "--num_workers is an option of --engine ray: add --engine ray"),
    (dict(ray_address="auto"), "--ray_address is an option of --engine ray"),
])
def test_options_that_contradict_each_other_are_one_line(given, says):
    with pytest.raises(EmbedError, match=f"^{re.escape(says)}"):
        check_options(EmbedOptions(input="in.txt", output="out.h5", model="tiny", **given))


def test_the_options_module_is_light():
    """The command layer imports it to parse and check (`cli/table.py`): importing it brings neither torch nor
    transformers nor numpy."""
    code = ("import sys\nimport elmo_hf.tools.embedding.embed_plan\n"
            "print(sorted({'torch', 'transformers', 'numpy'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
