"""The model on the kernels of older CPUs than this one: every path gives the reference's results there too.

torch picks its CPU kernels by what the processor has (`tests/cpu_levels.py`). A test machine runs only its own, so
each case caps them below this CPU in a fresh interpreter (`tests/cpu_paths.py`): on an AVX-512 machine it runs the
AVX2 code and that of a CPU without AVX2, on an AVX2 machine the latter. There, the fast paths, the token
cache, bfloat16, int8 and a training step are held to the reference of the same process (the named bounds of
`tests/tolerances.py`: REORDERED for vectors and the loss, GRADIENT for gradients; bfloat16's and int8's,
which are lossy, from test_fast_paths and test_int8), and every layer, loss and gradient to this process's
within REORDERED and GRADIENT: a sentence's vectors do not depend on the CPU beyond rounding.

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
from test_fast_paths import BFLOAT16_COSINE, BFLOAT16_FROM_FLOAT32
from test_int8 import INT8_COSINE_MEAN, INT8_COSINE_MIN
from tolerances import GRADIENT, REORDERED, assert_close

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


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


@pytest.mark.skipif(not BELOW_HERE, reason=f"no older x86 kernel level than this CPU's ({HERE}) to force")
@pytest.mark.parametrize("level", BELOW_HERE)
def test_every_path_on_an_older_cpus_kernels(level, native, tmp_path):
    forced = forced_results(level, tmp_path)
    assert forced["capability"] == level  # the caps took effect
    for variant in VARIANTS:
        got, here = forced[variant], native[variant]
        for path in ("fast", "token_cache"):
            assert_close(got[path], got["reference"], REORDERED, what=f"{level}, {variant}: {path}, reference")
        for path in ("reference", "fast", "token_cache"):
            assert_close(got[path], here[path], REORDERED, what=f"{level}, {variant}: {path}, this CPU's")
        bfloat16 = (got["bfloat16"] - got["reference"]).abs().max()
        assert 0 < bfloat16 < BFLOAT16_FROM_FLOAT32, variant  # bfloat16 ran, and stayed close
        assert cosines(got["bfloat16"], got["reference"]).min() >= BFLOAT16_COSINE, variant
        if "int8" in here:
            assert "int8" in got
            int8 = cosines(got["int8"], got["reference"])
            assert int8.min() >= INT8_COSINE_MIN, (variant, int8.min().item())
            assert int8.mean() >= INT8_COSINE_MEAN, (variant, int8.mean().item())
        train, train_reference = forced[f"{variant}.train.fast"], forced[f"{variant}.train.reference"]
        for name, value in train_reference.items():
            bound = REORDERED if name == "loss" else GRADIENT
            what = f"{level}, {variant}: training {name}"
            assert_close(train[name], value, bound, what=f"{what}, fast against the reference")
            assert_close(value, native[f"{variant}.train.reference"][name], bound, what=f"{what}, this CPU's")

