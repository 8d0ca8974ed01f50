"""flair 0.15.1 and spacy-transformers 1.4 on an ELMo folder, each in its own environment (tests/compat/environments.py;
`make test` builds them): tests/compat/flair_checks.py and spacy_checks.py run there, and so do the flair and
spaCy blocks of docs/ecosystem.md, as pasted. A library whose environment is not built is skipped in one line.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import REPO, clean_env, tiny_model
from test_readme import code_blocks

pytestmark = [pytest.mark.slow, pytest.mark.compat]

_spec = importlib.util.spec_from_file_location("compat_environments", REPO / "tests" / "compat" / "environments.py")
environments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(environments)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder holding a tiny model (seed 0) with its tokenizer where docs/ecosystem.md finds the demo's."""
    from elmo_hf.tokenization import ElmoTokenizer

    root = tmp_path_factory.mktemp("ecosystem")
    torch.manual_seed(0)
    folder = root / "outputs" / "demo" / "model"
    tiny_model().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return root


def run_in(name: str, arguments: list[str], workdir: Path, project: bool) -> subprocess.CompletedProcess:
    """`python ARGUMENTS` in the environment `name`, from `workdir`; the project importable only with `project`."""
    python = environments.python_of(name)
    if python is None:
        pytest.skip(f"the environment {name} is not built: make test builds it (pip, from the registry)")
    env = {**clean_env(), "HF_MODULES_CACHE": str(workdir / f"modules-{name}")}
    if project:  # a folder whose `elmo_hf` is the checkout: the installed project's packages (elmo_hf.<folder>)
        site = workdir / "project-site"
        if not (site / "elmo_hf").exists():
            site.mkdir(exist_ok=True)
            (site / "elmo_hf").symlink_to(REPO, target_is_directory=True)
        env["PYTHONPATH"] = str(site)
    result = subprocess.run([str(python), *arguments], cwd=workdir, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{name}:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def page_blocks(library: str) -> list[str]:
    """The blocks of docs/ecosystem.md that only the environment of `library` can run (their not-run reason says so)."""
    return [block["code"] for block in code_blocks(REPO / "docs" / "ecosystem.md")
            if block["not_run"] and f"needs {library}" in block["not_run"]]


def test_flair_embeds_sentences_with_elmos_vectors_and_trains_a_tagger(workdir):
    out = workdir / "flair-out"
    run_in("flair-0.15.1", [str(REPO / "tests" / "compat" / "flair_checks.py"), "outputs/demo/model", str(out),
                            "--repo", str(REPO)], workdir, project=False)
    results = json.loads((out / "results.json").read_text())
    assert results["remote"]["embedding_length"] == results["installed"]["embedding_length"] == 32
    assert results["remote"]["all_layers"] == [0, 1, 2]  # flair's layers="all": the token layer and both LSTM layers
    assert results["installed"]["saved_and_loaded"]
    # the drop-in for flair's ELMoEmbeddings: 3 layers of 2 x 16 end to end ("all"), or one of them
    assert results["installed"]["drop_in"]["embedding_length"] == {"all": 96, "top": 32, "average": 32}
    # ModelTrainer.train() with its defaults ran to its end without the project (it loads best-model.pt back), and
    # a second process without the project loads that tagger and tags as the first did.
    trained = results["remote"]["trainer"]
    run_in("flair-0.15.1", [str(REPO / "tests" / "compat" / "flair_checks.py"), "outputs/demo/model", str(out),
                            "--load", str(out / "trainer" / "best-model.pt")], workdir, project=False)
    assert json.loads((out / "loaded.json").read_text()) == trained["tags"]


def test_flair_blocks_of_the_page_run_as_pasted(workdir):
    remote, drop_in = page_blocks("flair")
    result = run_in("flair-0.15.1", ["-c", remote], workdir, project=False)
    assert "('The', torch.Size([32]))" in result.stdout
    result = run_in("flair-0.15.1", ["-c", drop_in], workdir, project=True)
    assert result.stdout.split() == ["96", "torch.Size([96])"]  # 3 layers of 2 x 16, end to end


def test_spacy_fills_trf_data_with_one_aligned_row_per_token_for_every_document_of_a_batch(workdir):
    out = workdir / "spacy-out"
    run_in("spacy-transformers-1.4", [str(REPO / "tests" / "compat" / "spacy_checks.py"), "outputs/demo/model",
                                      str(out), "--repo", str(REPO)], workdir, project=False)
    results = json.loads((out / "results.json").read_text())
    assert results["saved_and_loaded"] and sum(doc["tokens_not_one_word"] for doc in results["docs"]) > 0


def test_spacy_block_of_the_page_runs_as_pasted(workdir):
    (block,) = page_blocks("spacy-transformers")
    result = run_in("spacy-transformers-1.4", ["-c", block], workdir, project=True)
    lines = result.stdout.splitlines()
    assert len(lines) == 2  # the two documents, one batch
    assert lines[0].split()[0] == "12"  # spaCy's tokens of the first (I do n't think it 's a well - known bank .)
