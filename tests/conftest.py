"""Shared helpers for the test suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_file(relative: str) -> Path:
    """A file under ../shared/data, or skip the test with a message naming it."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent (it lives beside the checkout, in ../shared/data)")
    return path


def random_char_ids(lengths: list[int], seed: int = 0, max_chars: int = 50) -> torch.Tensor:
    """A right-padded batch of random character ids (B, max(lengths), 50); padding tokens are all zeros."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), max(lengths), max_chars, dtype=torch.long)
    for row, n in enumerate(lengths):
        for t in range(n):
            k = int(torch.randint(1, 12, (1,), generator=generator))
            word = torch.randint(1, 257, (k,), generator=generator)
            ids[row, t, : k + 2] = torch.cat([torch.tensor([259]), word, torch.tensor([260])])
            ids[row, t, k + 2 :] = 261
    return ids


def clean_env() -> dict[str, str]:
    """Environment for a fresh Python that cannot import this project and never reaches a network."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONNOUSERSITE="1")
    return env


# The project is installed in the environment (editable) for its commands; a user who loads a saved model
# has none of it. This prologue makes the project's packages unimportable in the subprocess, then checks it.
_NO_PROJECT = """
import importlib.abc, sys
class _NoProject(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"modeling_elmo", "tokenization", "train"}:
            raise ModuleNotFoundError(f"No module named {name!r} (the project is hidden from this process)")
sys.meta_path.insert(0, _NoProject())
sys.path[:] = [p for p in sys.path if p not in ("", ".", "__REPO__")]
try:
    import modeling_elmo
except ImportError:
    pass
else:
    raise SystemExit("the project is importable in the isolated subprocess")
""".replace("__REPO__", str(REPO))


def run_isolated(code: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter, from `cwd`, where the project cannot be imported."""
    result = subprocess.run(
        [sys.executable, "-c", _NO_PROJECT + code],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield
