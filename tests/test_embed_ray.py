"""`elmo-embed --engine ray` on a real local Ray (started by the command on 127.0.0.1, two actors on two CPUs).

The engine embeds the same windows into the same chunk files as one process (tools/embedding/embed_ray.py), so its
output is compared with the default engine's for equality of the bits: both on one thread per process, without the token
cache (with it, a token's layer 0 may come from a batch of another window: equal to rounding, as in
tests/test_embed.py). Each Ray run starts its own cluster (seconds on two cores): the cases share runs where one run
shows two things.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import REPO, clean_env, cli, run_cli, run_command
from test_embed import SENTENCES, generated_lines, read_hdf5, read_tokens, write_corpus

from elmo_hf.tools.embedding.embed_io import done_windows

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed (pip install 'elmo-hf[ray]')")
COMMON = ("--window", "10", "--batch_size", "4", "--token_cache_size", "0")
LINES = SENTENCES + generated_lines(150, seed=7)  # 16 windows of 10


def embed_main(*args) -> int:
    """The default engine in this process on one thread, this process's thread count put back after it."""
    return cli("elmo-embed", [*args, "--threads", "1", "--quiet"])


def ray_command(*args) -> list[str]:
    """The installed script with the Ray engine: Ray's actors, and the signals the tests send, need a process."""
    return [str(Path(sys.executable).parent / "elmo-embed"), *map(str, args), "--engine", "ray", "--threads", "1",
            "--quiet"]


def ray_env(**more: str) -> dict[str, str]:
    """The commands' environment: no usage report, and Ray's workers at the test's own priority (Ray nices them to
    15: beside a CPU-bound process its actors got almost nothing of the CPU, minutes for a window)."""
    return {**clean_env(), "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "RAY_worker_niceness": "0",
            **more}


def run_ray(*args, timeout: int = 240) -> subprocess.CompletedProcess:
    """One that hangs fails with the stacks of its processes (the driver's and the actors')."""
    return run_command(ray_command(*args), cwd=REPO, env=ray_env(), timeout=timeout)


# How long a test waits for a Ray run to reach the moment it acts on: a guard against a hang, not a measure. Starting
# a Ray cluster and its actors takes 20-40 s on two idle cores and minutes beside a CPU-bound process (a killed
# worker's run missed 120 s there); pytest's own timeout (600 s) is the last guard.
HANG_GUARD_S = 400


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = HANG_GUARD_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(
                f"the command ended ({process.returncode}) before {what}:\n{process.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"no {what} in {timeout} s")
        time.sleep(0.02)


def parquet_rows(path: Path) -> dict[int, tuple[list[str], object]]:
    table = pq.read_table(path)
    return {line: (tokens, embedding) for line, tokens, embedding in
            zip(*(table.column(name).to_pylist() for name in ("line", "tokens", "embedding")))}


def assert_same_hdf5(got: Path, expected: Path) -> None:
    want = read_hdf5(expected)
    have = read_hdf5(got)
    assert have.keys() == want.keys()
    assert all(np.array_equal(have[k], want[k]) and have[k].dtype == want[k].dtype for k in want)
    assert read_tokens(got) == read_tokens(expected)
    with h5py.File(got, "r") as a, h5py.File(expected, "r") as b:
        assert a.attrs.keys() == b.attrs.keys()  # the settings, the line count ...
        assert all(np.array_equal(a.attrs[key], b.attrs[key]) for key in a.attrs)


# --------------------------------------------------------------------------------------------------
# Options (no Ray needed)
# --------------------------------------------------------------------------------------------------


def test_ray_options_are_checked_in_one_line(tiny_model_dir, tmp_path, caplog, monkeypatch):
    corpus = write_corpus(tmp_path / "in.txt", SENTENCES)
    out = tmp_path / "out.hdf5"
    cases = {
        ("--engine", "ray", "--num_workers", "0"): "--num_workers: must be a positive integer, got 0",
        ("--num_workers", "2"): "--num_workers is an option of --engine ray",
        ("--ray_address", "auto"): "--ray_address is an option of --engine ray",
    }
    for extra, says in cases.items():
        caplog.clear()
        assert embed_main(corpus, out, "--model", tiny_model_dir, *extra) == 2
        assert says in caplog.text and len(caplog.records) == 1
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where Ray is not installed
    caplog.clear()
    assert embed_main(corpus, out, "--model", tiny_model_dir, "--engine", "ray") == 2
    assert "--engine ray needs Ray: pip install 'elmo-hf[ray]'" in caplog.text
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()


# --------------------------------------------------------------------------------------------------
# Ctrl-C while the driver waits inside Ray (Ray imported, no cluster started)
# --------------------------------------------------------------------------------------------------


def ray_like_wait(*args, **kwargs):
    """What Ray's wait does when a signal handler raises inside it: its C code checks for signals, cannot pass the
    exception on, and returns later with a SystemError (measured with Ray 2.60: 'returned a result with an exception
    set')."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs here
    except BaseException as error:
        raise SystemError("<cyfunction CoreWorker.wait> returned a result with an exception set") from error
    return [], []


@needs_ray
def test_ctrl_c_inside_a_ray_wait_is_the_interruption_not_a_system_error(monkeypatch):
    from elmo_hf.tools.core.interrupts import Interrupted, InterruptGuard
    from elmo_hf.tools.embedding import embed_ray

    monkeypatch.setattr(embed_ray.ray, "wait", ray_like_wait)
    guard = InterruptGuard()
    with guard.installed(), pytest.raises(Interrupted) as stopped:
        embed_ray._wait(["a window's result"], 1, block=True)
    assert stopped.value.name == "SIGINT" and guard.received == signal.SIGINT


@needs_ray
def test_a_run_that_fails_after_ctrl_c_reports_the_interruption_with_its_resume_line(tiny_model_dir, tmp_path,
                                                                                    monkeypatch):
    """Ray's processes get the terminal's Ctrl-C too: the driver may see a dead actor (or any error) before its own
    signal is raised. The command then says it was interrupted and how to resume, not that a window failed."""
    from elmo_hf.tools.embedding import embed_ray
    from elmo_hf.tools.embedding.embed_io import EmbedFailed

    def actors_stopped_by_ctrl_c(*args, **kwargs):
        with embed_ray.signals_held():  # the driver's own SIGINT, held while it waits inside Ray
            os.kill(os.getpid(), signal.SIGINT)
            raise EmbedFailed("the window of lines 0-9 (from 0) was sent 3 times and its Ray actor died each time")

    monkeypatch.setattr(embed_ray, "embed_windows", actors_stopped_by_ctrl_c)
    corpus = write_corpus(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    result = run_cli("elmo-embed", [corpus, out, "--model", tiny_model_dir, *COMMON, "--engine", "ray",
                                    "--num_workers", "2", "--quiet"])
    assert result.returncode == 130
    assert result.stderr.splitlines() == [
        f"WARNING elmo-embed: interrupted (SIGINT): 0 complete window(s) and 0 committed part(s) of windows in "
        f"progress are kept in {out}.partial; run the same command with --resume to continue"]


# --------------------------------------------------------------------------------------------------
# Two actors: a killed worker, an interrupted run resumed (each equal to one process)
# --------------------------------------------------------------------------------------------------


@needs_ray
@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_the_output_is_complete_and_equal(tiny_model_dir, tmp_path):
    """SIGKILL to one actor's process once a window is complete: Ray restarts it and sends its windows again."""
    corpus = write_corpus(tmp_path / "in.txt", LINES)
    single = tmp_path / "single.parquet"
    assert embed_main(corpus, single, "--model", tiny_model_dir, *COMMON) == 0

    out = tmp_path / "ray.parquet"
    partial = out.with_name(out.name + ".partial")
    pids = tmp_path / "pids"
    pids.mkdir()
    command = ray_command(corpus, out, "--model", tiny_model_dir, *COMMON, "--num_workers", "2",
                          "--debug_batch_delay", "0.2")
    env = ray_env(ELMO_EMBED_RAY_PID_FOLDER=str(pids))
    with subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) as process:
        wait_for(lambda: len(list(pids.iterdir())) == 2 and partial.is_dir() and done_windows(partial), process,
                 "two actors and a complete window")
        victim = int(sorted(pids.iterdir())[0].name)
        os.kill(victim, signal.SIGKILL)
        _, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-5000:]
    started = {int(path.name) for path in pids.iterdir()}
    assert victim in started and len(started) == 3  # the killed actor was started again, once
    assert not partial.exists()
    got, expected = parquet_rows(out), parquet_rows(single)
    assert sorted(got) == list(range(len(LINES)))
    assert got == expected  # float32 values as Python floats: equal bits
    assert pq.read_schema(out).metadata == pq.read_schema(single).metadata  # the settings recorded


@needs_ray
@pytest.mark.slow
def test_a_window_whose_actor_dies_at_every_try_ends_the_run_in_one_line(tiny_model_dir, tmp_path):
    """Each actor SIGKILLed as soon as it has loaded the model (as memory exhausted at every window would): the
    first window is sent WINDOW_TRIES times, then the command ends with status 1 and one line, not a loop."""
    from elmo_hf.tools.embedding.embed_ray import WINDOW_TRIES

    corpus = write_corpus(tmp_path / "in.txt", LINES[:10])  # one window
    out = tmp_path / "ray.hdf5"
    pids = tmp_path / "pids"
    pids.mkdir()
    command = ray_command(corpus, out, "--model", tiny_model_dir, *COMMON, "--num_workers", "1",
                          "--debug_batch_delay", "1")
    killed: set[int] = set()
    with subprocess.Popen(command, cwd=REPO, env=ray_env(ELMO_EMBED_RAY_PID_FOLDER=str(pids)), stderr=subprocess.PIPE,
                          text=True) as process:
        deadline = time.monotonic() + HANG_GUARD_S  # three tries of a Ray actor's start: 200 s were missed under load
        while process.poll() is None and time.monotonic() < deadline:
            for pid in {int(path.name) for path in pids.iterdir()} - killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.05)
        process.kill()
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr[-5000:]
    # the last try's actor may be started again (Ray restarts it) before the command stops Ray
    assert WINDOW_TRIES <= len(killed) <= WINDOW_TRIES + 1
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and f"lines 0-9 (from 0) was sent {WINDOW_TRIES} times" in errors[0], stderr[-5000:]
    assert "--resume" in errors[0] and "Traceback" not in stderr
    assert not out.exists() and out.with_name(out.name + ".partial").is_dir()


@needs_ray
@pytest.mark.slow
def test_an_interrupted_run_resumes_without_redoing_its_windows(tiny_model_dir, tmp_path):
    """Ctrl-C in a terminal (SIGINT to the command's process group, Ray's processes with it): the command stops its
    actors, keeps its complete windows and says so in one line naming --resume; `--resume` embeds only the others
    (the driver's log says how many it sends) on two actors, and the output is the one process's, bit for bit, with
    nothing partial left (the plain two-actor run, without a test of its own: each Ray run costs a cluster's start)."""
    corpus = write_corpus(tmp_path / "in.txt", LINES)
    single = tmp_path / "single.hdf5"
    assert embed_main(corpus, single, "--model", tiny_model_dir, *COMMON) == 0

    out = tmp_path / "ray.hdf5"
    partial = out.with_name(out.name + ".partial")
    command = ray_command(corpus, out, "--model", tiny_model_dir, *COMMON, "--num_workers", "2",
                          "--debug_batch_delay", "0.2")
    with subprocess.Popen(command, cwd=REPO, env=ray_env(), stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        wait_for(lambda: partial.is_dir() and len(done_windows(partial)) >= 2, process, "two complete windows")
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-5000:]
    said = [line for line in stderr.splitlines() if "interrupted (SIGINT)" in line]
    assert len(said) == 1 and "run the same command with --resume" in said[0], stderr[-5000:]
    assert "Traceback" not in stderr and not out.exists()
    kept = done_windows(partial)
    assert 2 <= len(kept) < 16

    result = run_ray(corpus, out, "--model", tiny_model_dir, *COMMON, "--num_workers", "2", "--resume")
    assert result.returncode == 0, result.stderr[-5000:]
    # An actor stopped with the driver may still complete the window it was writing (its chunk is then whole):
    # the windows done are those the resumed run found.
    found = int(re.search(r"resuming: (\d+) window\(s\)", result.stderr).group(1))
    assert len(kept) <= found < 16
    assert f"{16 - found} window(s) embedded by 2 Ray actor(s)" in result.stderr  # the done ones are not
    assert_same_hdf5(out, single)
    assert not partial.exists()


@needs_ray
@pytest.mark.slow
def test_sigterm_to_the_driver_alone_stops_it_as_ctrl_c_does(tiny_model_dir, tmp_path):
    """SIGTERM to the command's process only (`kill PID`, a job scheduler's stop). `ray.init` installs handlers of its
    own for it in the driver (one exits with status 15, one prints a stack and aborts: exit -6 before the fix); the
    command keeps its own, so it stops as on Ctrl-C: exit 143, its complete windows kept, one line naming --resume."""
    corpus = write_corpus(tmp_path / "in.txt", LINES)
    out = tmp_path / "ray.hdf5"
    partial = out.with_name(out.name + ".partial")
    command = ray_command(corpus, out, "--model", tiny_model_dir, *COMMON, "--num_workers", "1",
                          "--debug_batch_delay", "0.2")
    with subprocess.Popen(command, cwd=REPO, env=ray_env(), stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        wait_for(lambda: partial.is_dir() and len(done_windows(partial)) >= 1, process, "a complete window")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-5000:]
    said = [line for line in stderr.splitlines() if "interrupted (SIGTERM)" in line]
    assert len(said) == 1 and "run the same command with --resume" in said[0], stderr[-5000:]
    assert "Traceback" not in stderr and "SIGTERM received" not in stderr and not out.exists()
    assert 1 <= len(done_windows(partial)) < 16
