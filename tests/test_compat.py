"""The compatibility matrix: ELMo folders saved by the pinned stack, used on transformers 4.46, 4.53, 5.3, 5.16 and the
pinned 5.23, as remote code (the project hidden) and installed, each stack in an interpreter of its own environment
(tests/compat/environments.py; `make test-compat` builds them, then runs this file).

Every stack answers AutoTokenizer, AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification, the
feature-extraction, text-classification and token-classification pipelines, transformers' SQuAD windows, a Trainer
step, save and reload (tests/compat/stack_checks.py), and gives the pinned stack's vectors, logits, pipeline outputs
and windows to the bit (same torch, same weights). A stack whose environment is not built is skipped in one line.
`make test` builds and runs 4.46 and 5.16 (the tests marked `in_suite`); `make test-compat` every one.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, clean_env, tiny_model

pytestmark = [pytest.mark.slow, pytest.mark.compat]

_spec = importlib.util.spec_from_file_location("compat_environments", REPO / "tests" / "compat" / "environments.py")
environments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(environments)

PINNED = "pinned"  # this interpreter: the versions of constraints.txt
STACKS = {"transformers-4.46": "4.46.3", "transformers-4.53": "4.53.2", "transformers-5.3": "5.3.0",
          "transformers-5.16": "5.16.1"}
# `make test` runs these: the oldest supported (the one flair's and spaCy's ranges share) and a 5.x below 5.17
IN_SUITE = {"transformers-4.46", "transformers-5.16"}
# Where stacks may differ: the loss of two Trainer steps on a head initialised from each version's random draws.
NOT_COMPARED = {"transformers", "training_loss"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """A base model, a classifier and a tagger (tiny, seed 0), each saved with its tokenizer by the pinned stack."""
    from elmo_hf.modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
    from elmo_hf.tokenization import ElmoTokenizer

    root = tmp_path_factory.mktemp("compat") / "folders"
    torch.manual_seed(0)
    heads = {
        "base": (None, {}),
        "classifier": (ElmoForSequenceClassification, {"id2label": {0: "neg", 1: "pos"}}),
        "tagger": (ElmoForTokenClassification, {"id2label": {0: "O", 1: "B-X", 2: "I-X"}}),
    }
    for name, (head, labels) in heads.items():
        if labels:
            labels = {**labels, "label2id": {label: i for i, label in labels["id2label"].items()}}
        tiny_model(head, **labels).save_pretrained(root / name)
        ElmoTokenizer().save_pretrained(root / name)
    return root


_RUNS: dict[str, tuple[dict, dict]] = {}


def run_stack(stack: str, folders: Path, scratch: Path) -> tuple[dict, dict]:
    """The results of tests/compat/stack_checks.py on `stack` (remote code, installed), run once per module."""
    if stack not in _RUNS:
        python = sys.executable if stack == PINNED else environments.python_of(stack)
        if python is None:
            pytest.skip(f"the environment {stack} is not built: make test-compat builds it (pip, from the registry)")
        out = scratch / stack
        env = {**clean_env(), "HF_MODULES_CACHE": str(out / "modules")}  # remote code of this stack only
        result = subprocess.run([str(python), str(REPO / "tests" / "compat" / "stack_checks.py"), str(folders),
                                 str(out), "--repo", str(REPO)], cwd=scratch, env=env, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, f"{stack}:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
        _RUNS[stack] = tuple(torch.load(out / f"{mode}.pt", weights_only=False) for mode in ("remote", "installed"))
    return _RUNS[stack]


def differences(reference, other, where: str = "") -> list[str]:
    """Where `other` is not `reference`: tensors to the bit, everything else by value."""
    if isinstance(reference, torch.Tensor):
        return [] if isinstance(other, torch.Tensor) and torch.equal(reference, other) else [where]
    if isinstance(reference, dict):
        if not isinstance(other, dict) or reference.keys() != other.keys():
            return [where]
        return [d for key in reference if key not in NOT_COMPARED for d in differences(reference[key], other[key],
                                                                                   f"{where}.{key}")]
    if isinstance(reference, (list, tuple)):
        if not isinstance(other, (list, tuple)) or len(reference) != len(other):
            return [where]
        return [d for i, (a, b) in enumerate(zip(reference, other)) for d in differences(a, b, f"{where}[{i}]")]
    return [] if reference == other else [where]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compat-runs")


@pytest.mark.in_suite
def test_the_pinned_stack_gives_the_same_as_remote_code_and_installed(folders, scratch):
    remote, installed = run_stack(PINNED, folders, scratch)
    assert remote["transformers"] == installed["transformers"] == __import__("transformers").__version__
    assert differences(installed, remote) == []


@pytest.mark.parametrize("stack", [pytest.param(stack, marks=[pytest.mark.in_suite] if stack in IN_SUITE else [])
                                   for stack in sorted(STACKS)])
def test_every_transformers_gives_the_pinned_stacks_results_to_the_bit(stack, folders, scratch):
    reference = run_stack(PINNED, folders, scratch)[1]
    for mode, results in zip(("remote code", "installed"), run_stack(stack, folders, scratch)):
        assert results["transformers"] == STACKS[stack], mode
        assert differences(reference, results) == [], f"{stack}, {mode}"


DATASETS_STACK = "datasets-3.6"  # datasets before 4.7 (with transformers 4.46): they blank a tokenizer's `cache`


def test_datasets_3_6_maps_with_the_tokenizer_and_runs_the_recipes(folders, scratch):
    """Issue 54: on datasets 3.6 `Dataset.map` with the ELMo tokenizer failed (`KeyError: 'rows'`): their fingerprint
    replaced the tokenizer's attribute `cache`, where the rows lived; as remote code the class was pickled by value,
    with its module's globals (`cannot pickle '_thread._local'` once one held a thread-local, and fingerprints that
    depended on the classes loaded). tests/compat/datasets_checks.py maps with the
    tokenizer as remote code and installed, and runs the SQuAD and GLUE blocks of docs/ecosystem.md as written."""
    python = environments.python_of(DATASETS_STACK)
    if python is None:
        pytest.skip(
            f"the environment {DATASETS_STACK} is not built: make test-compat builds it (pip, from the registry)")
    out = scratch / DATASETS_STACK
    env = {**clean_env(), "HF_MODULES_CACHE": str(out / "modules"), "HF_DATASETS_CACHE": str(out / "datasets")}
    result = subprocess.run([str(python), str(REPO / "tests" / "compat" / "datasets_checks.py"), str(folders / "base"),
                             str(out), "--repo", str(REPO)], cwd=scratch, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{DATASETS_STACK}:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    results = json.loads(result.stdout.strip().splitlines()[-1])
    for mode in ("remote", "installed", "installed_fast"):
        assert results[mode] == {"datasets": "3.6.0", "class_found_by_name": True, "rows_equal": True,
                                 "fingerprint_held": True}, mode
    printed = results["recipes"]
    assert [line.split(":")[0] for line in printed if line.startswith("SQuAD")] == ["SQuAD v1", "SQuAD v2"], printed
    assert any("eval_accuracy" in line for line in printed), printed  # the GLUE block's trainer.evaluate()
