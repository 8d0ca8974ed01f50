"""Data-parallel training through Accelerate: two processes (torchrun), each on half the batch, give the gradients of
one process on the whole batch (tests/ddp_gradients.py runs both). On the CPU here; on one GPU shared by both
processes in tests/test_cuda.py."""

from __future__ import annotations

import sys

import pytest
import torch
from conftest import REPO, clean_env, run_command
from tolerances import GRADIENT, REORDERED, Bound, assert_close

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def ddp_step(device: str, tmp_path) -> dict:
    """The saved results of tests/ddp_gradients.py under torchrun with two processes on `device`."""
    out = tmp_path / "grads.pt"
    env = {**clean_env(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = run_command([*TORCHRUN, str(REPO / "tests" / "ddp_gradients.py"), device, str(out)], cwd=REPO, env=env,
                         timeout=300)
    assert result.returncode == 0, result.stderr[-6000:]
    return torch.load(out, weights_only=False)


def assert_ddp_equals_one_process(saved: dict, gradient_bound: Bound) -> None:
    assert saved["processes"] == 2 and saved["backend"] == "gloo"
    assert_close(saved["ddp_loss"], saved["single_loss"], REORDERED, what="mean of the two halves' losses")
    assert saved["ddp"].keys() == saved["single"].keys() and len(saved["single"]) > 10
    for name, grad in saved["single"].items():
        assert_close(saved["ddp"][name], grad, gradient_bound, what=f"gradient of {name}: DDP against one process")


@pytest.mark.slow
@pytest.mark.numerics
def test_ddp_gradients_equal_the_single_process_step_on_the_cpu(tmp_path):
    saved = ddp_step("cpu", tmp_path)
    assert saved["device"].startswith("cpu")
    assert_ddp_equals_one_process(saved, GRADIENT)
