"""`elmo-pretrain` across machines, played by two torchrun "nodes" on 127.0.0.1: two launchers started together
(`--nnodes 2 --nproc_per_node 1`, a c10d rendezvous, gloo on the CPU) against one launcher with two processes
(`accelerate launch`, so that the two launchers users start DDP with are held to the same bits).

The same two ranks read the same shards and add the same two gradients, so the parameters are expected bit for bit
(`torch.equal`), and so after a worker is killed and torchrun restarts both nodes from the last checkpoint: the
checkpoint restores every state exactly and the arithmetic after it is the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from app_browser import free_port
from conftest import REPO, _descendants, clean_env
from test_pretrain import ACCELERATE, COMMON, losses, parameters, pretrain, write_corpus

pytestmark = pytest.mark.slow

# 8 steps, a checkpoint every 2; dropout, so that the RNG states of both processes must be restored too. A time
# budget never reached: the processes agree on the time spent at every step (a collective), changing no bit. A linear
# schedule with a warm-up, counted in optimizer steps whatever the number of processes.
RUN = [*COMMON, "--max_steps", "8", "--save_steps", "2", "--dropout", "0.2", "--ddp_timeout", "120",
       "--max_train_time", "1h", "--lr_scheduler_type", "linear", "--warmup_steps", "2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    return write_corpus(folder / "train.txt", 400, 0), write_corpus(folder / "valid.txt", 40, 1)


@pytest.fixture(scope="module")
def single_node(corpus, tmp_path_factory) -> Path:
    """The reference: one launcher, two processes. The launcher is Accelerate's (`accelerate launch --multi_gpu`
    on a machine without GPUs: the script asks for CPU DDP itself), so that the two nodes of torchrun below also
    prove it trains as torchrun does, bit for bit."""
    out = tmp_path_factory.mktemp("single") / "out"
    pretrain("--train_file", str(corpus[0]), "--validation_file", str(corpus[1]), "--output_dir", str(out), *RUN,
             launcher=ACCELERATE)
    return out


def start_nodes(out: Path, *args: str, max_restarts: int = 0) -> list[tuple[subprocess.Popen, Path]]:
    """Two torchrun launchers, as two machines would start them, meeting at a c10d rendezvous on 127.0.0.1 (c10d
    numbers the launchers itself, so either may hold rank 0). Their output goes to files beside `out`."""
    port = free_port()
    # Without this, torch 2.13's launchers share one store between restarts, and the restarted workers read the
    # previous attempt's addresses from it (gloo: "connection refused"); pytorch/pytorch#135712.
    env = {**clean_env(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    nodes = []
    for node in (0, 1):
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
                   "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", out.name,
                   "--local_addr", "127.0.0.1", "--max_restarts", str(max_restarts), "-m", "elmo_hf.cli", "pretrain",
                   *args, "--output_dir", str(out)]
        log = out.parent / f"{out.name}-node{node}.log"
        with open(log, "w") as handle:
            process = subprocess.Popen(command, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                       text=True, start_new_session=True)
        nodes.append((process, log))
    return nodes


def wait_for_nodes(nodes, timeout: float = 300) -> str:
    """Both launchers' exit, which must be 0; returns their output."""
    deadline = time.monotonic() + timeout
    for process, _ in nodes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    output = "\n".join(f"--- node {i}:\n{log.read_text()[-6000:]}" for i, (_, log) in enumerate(nodes))
    if any(process.poll() is None for process, _ in nodes):
        for process, _ in nodes:
            for pid in [*_descendants(process.pid), process.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the two nodes did not finish in {timeout} s:\n{output}")
    assert [process.returncode for process, _ in nodes] == [0, 0], output
    return output


def worker_of_rank(nodes, rank: int) -> int:
    """The process id of the training process of global rank `rank`, under either launcher."""
    for process, _ in nodes:
        for pid in _descendants(process.pid):
            with contextlib.suppress(OSError):
                if (b"elmo_hf.cli\0pretrain" in Path(f"/proc/{pid}/cmdline").read_bytes()
                        and f"RANK={rank}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")):
                    return pid
    raise AssertionError(f"no training process of rank {rank} is running")


def assert_same_run(out: Path, expected: Path) -> None:
    """The same parameters, bit for bit, the same loss at every step (each logged once) and the same evaluation."""
    ours, theirs = parameters(out), parameters(expected)
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert torch.equal(ours[name], theirs[name]), name
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))
    assert losses(out) == losses(expected)
    assert (out / "eval_results.json").read_text() == (expected / "eval_results.json").read_text()
    summary = json.loads((out / "train_results.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 8
    assert summary["parameters_identical_across_processes"] is True


def test_two_nodes_train_as_one_node_with_two_processes(corpus, single_node, tmp_path):
    records = [json.loads(line) for line in (single_node / "train_log.jsonl").read_text().splitlines()]
    schedule = {step: 3e-3 * (step / 2 if step < 2 else (8 - step) / 6) for step in range(1, 9)}
    assert {r["step"]: r["learning_rate"] for r in records} == pytest.approx(schedule)  # two processes, one schedule
    out = tmp_path / "two-nodes"
    nodes = start_nodes(out, "--train_file", str(corpus[0]), "--validation_file", str(corpus[1]), *RUN)
    wait_for_nodes(nodes)
    assert_same_run(out, single_node)


def test_a_killed_worker_restarts_both_nodes_from_the_last_checkpoint(corpus, single_node, tmp_path):
    """SIGKILL (no checkpoint of its own, no goodbye) to the rank-0 worker once the first checkpoint is written:
    torchrun (`--max_restarts 1`) restarts the workers of both nodes with the same command line, which
    `--resume_from_checkpoint auto` turns into a resume from the newest checkpoint."""
    out = tmp_path / "killed"
    nodes = start_nodes(out, "--train_file", str(corpus[0]), "--validation_file", str(corpus[1]), *RUN,
                        "--resume_from_checkpoint", "auto", max_restarts=1)
    deadline = time.monotonic() + 240
    while not (out / "checkpoints" / "step-00000002").is_dir():
        assert all(p.poll() is None for p, _ in nodes) and time.monotonic() < deadline, wait_for_nodes(nodes, 1)
        time.sleep(0.05)
    os.kill(worker_of_rank(nodes, 0), signal.SIGKILL)
    output = wait_for_nodes(nodes)
    assert "failed (exitcode: -9)" in output  # torchrun saw the kill...
    assert output.count("resumed from") == 1, output  # ...and the new rank 0 went on from a checkpoint
    assert_same_run(out, single_node)
