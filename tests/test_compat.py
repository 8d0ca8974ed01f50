"""The compatibility matrix: ELMo folders saved by the pinned stack, used on transformers 4.46, 4.53, 5.3, 5.16 and the
pinned 5.23, as remote code (the project hidden) and installed, each stack in an interpreter of its own environment
(tests/compat/environments.py; `make test` builds them before the suite runs).

Every stack answers AutoTokenizer, AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification, the
feature-extraction, text-classification and token-classification pipelines, transformers' SQuAD windows, a Trainer
step, save and reload (tests/compat/stack_checks.py), and gives the pinned stack's vectors, logits, pipeline outputs
and windows to the bit (same torch, same weights). A stack whose environment is not built is skipped in one line.
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
# Where stacks may differ: the loss of two Trainer steps on a head initialised from each version's random draws.
NOT_COMPARED = {"transformers", "training_loss"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """A base model, a classifier and a tagger (tiny, seed 0), each saved with its tokenizer by the pinned stack: the
    tagger's with its fast twin, as the project's own commands write a folder (`save_with_fast_twin`: its
    `auto_map` names `ElmoTokenizerFast`, which every stack then loads as remote code), the others' as
    `ElmoTokenizer` alone saves one."""
    from elmo_hf.modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
    from elmo_hf.tokenization import ElmoTokenizer, save_with_fast_twin

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
        if name == "tagger":
            save_with_fast_twin(ElmoTokenizer(), root / name)
        else:
            ElmoTokenizer().save_pretrained(root / name)
    return root


_RUNS: dict[str, tuple[dict, dict]] = {}


def run_stack(stack: str, folders: Path, scratch: Path) -> tuple[dict, dict]:
    """The results of tests/compat/stack_checks.py on `stack` (remote code, installed), run once per module."""
    if stack not in _RUNS:
        python = sys.executable if stack == PINNED else environments.python_of(stack)
        if python is None:
            pytest.skip(f"the environment {stack} is not built: make test builds it (pip, from the registry)")
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


def test_the_pinned_stack_gives_the_same_as_remote_code_and_installed(folders, scratch):
    remote, installed = run_stack(PINNED, folders, scratch)
    assert remote["transformers"] == installed["transformers"] == __import__("transformers").__version__
    assert differences(installed, remote) == []


@pytest.mark.parametrize("stack", sorted(STACKS))
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
            f"the environment {DATASETS_STACK} is not built: make test builds it (pip, from the registry)")
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


def run_check_script(stack: str, script: str, args: list[str], out: Path, python=None) -> dict:
    """tests/compat/SCRIPT ARGS in `stack`'s environment (or `python`), the project hidden from its start; returns the
    JSON of its last line. Skips, saying so, where the environment is not built."""
    python = python or environments.python_of(stack)
    if python is None:
        pytest.skip(f"the environment {stack} is not built: make test builds it (pip, from the registry)")
    env = {**clean_env(), "HF_MODULES_CACHE": str(out / "modules"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([str(python), str(REPO / "tests" / "compat" / script), *args, "--repo", str(REPO)],
                            cwd=out.parent, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{stack}:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


SENTENCE_TRANSFORMERS_STACK = "sentence-transformers-5.4"  # the oldest the `sentence-transformers` extra allows


def test_the_oldest_sentence_transformers_encodes_the_export_as_the_project_pools(scratch):
    """SentenceTransformer 5.4 on a folder `save_for_sentence_transformers` exported: as remote code, installed, and
    built in the library, each sentence's vector is the project's own pooled vector (its batches are sorted by length:
    REORDERED, tests/tolerances.py)."""
    import numpy as np
    from tolerances import REORDERED, assert_close

    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.tools.embedding.sentence_vectors import save_for_sentence_transformers, sentence_vectors

    folder = scratch / "sentence-transformers-export"
    torch.manual_seed(0)
    tiny_model().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    save_for_sentence_transformers(folder)
    out = scratch / SENTENCE_TRANSFORMERS_STACK
    results = run_check_script(SENTENCE_TRANSFORMERS_STACK, "sentence_transformers_checks.py",
                               [str(folder), str(out)], out)
    assert results["sentence_transformers"] == "5.4.0"
    assert results["modules"]["remote"].startswith("transformers_modules"), results
    expected = sentence_vectors(ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder),
                                results["sentences"])
    for mode in ("remote", "installed", "in_library"):
        assert_close(np.load(out / f"{mode}.npy"), expected, REORDERED, what=f"sentence-transformers 5.4, {mode}")


ACCELERATE_STACK = "accelerate-1.3"  # the oldest the `train` extra allows


def test_the_oldest_accelerate_pretrains_and_fine_tunes_as_the_pinned_one(scratch):
    """elmo-pretrain (its own Accelerator) and elmo-finetune sequence-classification (Trainer) on accelerate 1.3 and
    on the pinned stack, one thread each, same torch: every loss and metric equal (the data order, the dropout draws
    and the optimiser steps are the same; the runtimes are left out). On 1.1 and 1.2 transformers 5's Trainer fails
    (`unwrap_model(keep_torch_compile=...)`): the `train` extra asks for 1.3."""
    pinned = run_check_script(PINNED, "training_checks.py", [str(scratch / "training-pinned")],
                              scratch / "training-pinned", python=sys.executable)
    oldest = run_check_script(ACCELERATE_STACK, "training_checks.py", [str(scratch / ACCELERATE_STACK)],
                              scratch / ACCELERATE_STACK)
    assert oldest["accelerate"] == "1.3.0" and pinned["accelerate"] != "1.3.0"
    assert len(pinned["pretrain_losses"]) == 6 and oldest["pretrain_losses"] == pinned["pretrain_losses"]
    timing = ("runtime", "per_second", "flos")
    for part in ("finetune_train", "finetune_eval"):
        kept = [key for key in pinned[part] if not any(word in key for word in timing)]
        assert {key: oldest[part].get(key) for key in kept} == {key: pinned[part][key] for key in kept}, part
