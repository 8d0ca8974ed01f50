"""The model on the kernels of older CPUs than this one: every path gives the reference's results there too.

torch picks its CPU kernels by what the processor has (`tests/cpu_levels.py`). A test machine runs only its own, so
each case caps them below this CPU in a fresh interpreter (`tests/cpu_paths.py`): on an AVX-512 machine it runs the
AVX2 code and that of a CPU without AVX2, on an AVX2 machine the latter. There, the fast paths, the token cache, bfloat16, int8 and a training step are held to the
reference of the same process (the tolerances of test_fast_paths and test_int8), and every layer to this process's
vectors within 1e-5 (the converted weights' tolerance): a sentence's vectors do not depend on the CPU beyond rounding.

Two choices torch makes from the CPU's own flags, which no variable caps, are set as such a CPU would have them:
bfloat16 without oneDNN's packed weights (`cpu_paths.results`), and, without AVX2, no int8 at all (torch offers
fbgemm only from AVX2 on; test_int8 tests that refusal), so the capped run still runs fbgemm's AVX2 kernels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import clean_env
from cpu_levels import BELOW_HERE, HERE, LEVELS
from cpu_paths import VARIANTS, results

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def native() -> dict:
    return results()


def forced_results(level: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{level}.pt"
    env = {**clean_env(), **LEVELS[level], "OMP_NUM_THREADS": "1"}
    script = Path(__file__).with_name("cpu_paths.py")
    subprocess.run([sys.executable, str(script), str(out)], env=env, cwd=tmp_path, check=True, timeout=300)
    return torch.load(out)


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp(min=1)).item()


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


@pytest.mark.skipif(not BELOW_HERE, reason=f"no older x86 kernel level than this CPU's ({HERE}) to force")
@pytest.mark.parametrize("level", BELOW_HERE)
def test_every_path_on_an_older_cpus_kernels(level, native, tmp_path):
    forced = forced_results(level, tmp_path)
    assert forced["capability"] == level  # the caps took effect
    for variant in VARIANTS:
        got, here = forced[variant], native[variant]
        within = 1e-6 if variant == "clipped" else 1e-5  # torch's fused LSTM kernel rounds differently
        for path in ("fast", "token_cache"):
            assert relative_difference(got[path], got["reference"]) <= within, (variant, path)
        for path in ("reference", "fast", "token_cache"):
            assert relative_difference(got[path], here[path]) <= 1e-5, (variant, path, "against this CPU")
        assert 0 < (got["bfloat16"] - got["reference"]).abs().max() < 0.1  # bfloat16 ran, and stayed close
        assert cosines(got["bfloat16"], got["reference"]).min() > 0.99, variant
        if "int8" in here:
            assert "int8" in got
            int8 = cosines(got["int8"], got["reference"])
            assert int8.min() >= 0.999 and int8.mean() >= 0.9995, (variant, int8.min().item())
        train, train_reference = forced[f"{variant}.train.fast"], forced[f"{variant}.train.reference"]
        for name, value in train_reference.items():
            assert relative_difference(train[name], value) <= 1e-5, (variant, name)
            assert relative_difference(value, native[f"{variant}.train.reference"][name]) <= 1e-5, (variant, name)

