"""`elmo-embed --engine ray`: the windows of a corpus embedded by a pool of Ray actors, on one machine or a cluster.

Imported only when `--engine ray` is chosen (Ray is the optional extra `elmo-hf[ray]`). The engine reuses the
single-process machinery unchanged: the driver (the `elmo-embed` process) reads the input in the same windows,
prepares and checks the same work folder `OUTPUT.partial/`, and merges the same chunk files into OUTPUT; only the
embedding of each window moves into an actor, which loads the model once and runs the same `WindowEmbedder` (the
same batches, the same chunk and part files). So the output is the one a single process writes, and a run of either
engine resumes a run of the other.

Fault tolerance: an actor that dies (a killed process, a lost node) is restarted by Ray and its unfinished windows are
sent again; a window is tried at most `WINDOW_TRIES` times (one that kills its actor each time, out of memory say, ends
the run with exit status 1 rather than going round for ever). A window embedded again starts from its committed parts,
as a resumed run does, and a chunk is renamed into place only when complete, so a death never leaves a chunk that counts
as done. The driver itself is the one process that must live: if it dies, rerun the command with `--resume`.

The work folder must be reachable under the same path by the driver and every actor: on one machine, always; on a
cluster (`--ray_address`), a shared file system (NFS, a mounted bucket). See docs/scaling.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import ray
import ray.exceptions

from ..core.interrupts import handlers_kept, signals_held
from .embed_io import Counts, EmbedError, EmbedFailed
from .embed_plan import EmbedPlan

logger = logging.getLogger("elmo-embed")

# Test-only: a folder where each actor leaves a file named by its process id when it has loaded the model, so that a
# test can SIGKILL a worker in the middle of a run.
PID_FOLDER_VARIABLE = "ELMO_EMBED_RAY_PID_FOLDER"
# Windows sent ahead to each actor: one being embedded, one waiting, so that an actor never idles between windows.
WINDOWS_AHEAD = 2
# How many times a window is sent to an actor before the run gives up on it: each try that ends with the actor's
# death (a killed process, a lost node, memory exhausted) restarts the actor and sends the window again.
WINDOW_TRIES = 3
# The longest the driver waits inside Ray at a time: a Ctrl-C is acted on between two waits (`_wait`).
WAIT_SECONDS = 0.5


class WindowWorker:
    """One actor: loads the model once (`build`: `embed.window_embedder_for_worker`, passed in by the driver), then
    embeds the windows it is sent into their chunk files. Returns each window's counts (the driver adds them up)."""

    def __init__(self, build, plan: EmbedPlan, work: str, is_dataset: bool, pid_folder: str | None):
        self.window_embedder = build(plan, work, is_dataset)
        if pid_folder:
            Path(pid_folder, str(os.getpid())).touch()

    def ready(self) -> bool:
        return True

    def embed(self, window: int, items: list) -> Counts:
        self.window_embedder.counts = Counts()
        self.window_embedder(window, items)
        return self.window_embedder.counts


def start(plan: EmbedPlan) -> None:
    """Connect to `--ray_address`, or start a local Ray with room for `--num_workers` actors. The command's own SIGINT
    and SIGTERM handlers are kept (`ray.init` replaces SIGTERM's)."""
    threads = plan.threads or 1
    options = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": True}
    with handlers_kept():
        if plan.ray_address:
            ray.init(address=plan.ray_address, **options)
        else:
            ray.init(num_cpus=plan.num_workers * threads, **options)


def embed_windows(windows: Iterator[tuple[int, list]], plan: EmbedPlan, done: set[int], work: Path, is_dataset: bool,
                  progress_bar, build) -> tuple[int, int, Counts]:
    """Embed the windows not done on `--num_workers` actors, each holding the window embedder `build(plan, work,
    is_dataset)` makes. Returns the input's windows and lines, and the counts of what the actors embedded. The
    chunk files are complete when it returns."""
    started = time.perf_counter()
    start(plan)
    try:
        workers = _start_workers(plan, work, is_dataset, build)
        loaded = [worker.ready.remote() for worker in workers]
        _wait(loaded, len(loaded), block=True)  # the model loaded in each
        try:
            with signals_held():
                ray.get(loaded)
        except ray.exceptions.RayActorError as error:  # its constructor failed: no restart would do better
            lines = [line for line in str(error).splitlines() if line.strip()]
            raise EmbedError(f"a Ray actor could not start: {lines[-1] if lines else error}") from error
        ready = time.perf_counter()
        n_windows, lines_read, sent, counts = _deal_out(windows, done, workers, progress_bar)
        logger.info("%d window(s) embedded by %d Ray actor(s) in %.1f s, after %.1f s starting Ray and the actors",
                    sent, len(workers), time.perf_counter() - ready, ready - started)
        return n_windows, lines_read, counts
    finally:
        ray.shutdown()


def _start_workers(plan: EmbedPlan, work: Path, is_dataset: bool, build) -> list:
    model = Path(plan.model)
    if model.exists():  # a local folder: the actors' working folder is not the driver's
        plan = dataclasses.replace(plan, model=str(model.resolve()))
    on_gpu = (plan.device or "").startswith("cuda")
    actor_class = ray.remote(WindowWorker).options(
        num_cpus=plan.threads or 1, num_gpus=1 if on_gpu else 0,
        # a killed actor comes back, as often as needed; each of its windows is sent again, up to WINDOW_TRIES times
        max_restarts=-1, max_task_retries=WINDOW_TRIES - 1,
    )
    pid_folder = os.environ.get(PID_FOLDER_VARIABLE)
    return [actor_class.remote(build, plan, str(work.resolve()), is_dataset, pid_folder)
            for _ in range(plan.num_workers)]


def _deal_out(windows: Iterator[tuple[int, list]], done: set[int], workers: list, progress_bar):
    """Send each window not done to the actor with the fewest windows waiting (at most WINDOWS_AHEAD each), as the
    input is read; collect the results as they come. Returns the windows and lines read, the windows sent, and the
    counts of what the actors embedded."""
    pending: dict = {}  # result ref -> (actor index, lines in the window, its first and last line numbers)
    load = [0] * len(workers)
    gathered = [Counts()]
    n_windows = lines_read = sent = 0

    def collect(block: bool) -> None:
        for ref in _wait(list(pending), 1, block):
            index, lines, span = pending.pop(ref)
            load[index] -= 1
            gathered.append(_result(ref, span))
            progress_bar.update(lines)

    for window, items in windows:
        n_windows += 1
        lines_read += len(items)
        if window in done:
            progress_bar.update(len(items))
            continue
        while min(load) >= WINDOWS_AHEAD:
            collect(block=True)
        index = load.index(min(load))
        pending[workers[index].embed.remote(window, items)] = (index, len(items), (items[0][0], items[-1][0]))
        sent += 1
        load[index] += 1
        if pending:
            collect(block=False)
    while pending:
        collect(block=True)
    return n_windows, lines_read, sent, Counts.of_processes(gathered)


def _wait(refs: list, num_returns: int, block: bool) -> list:
    """Those of `refs` that are ready: at least `num_returns` if `block`, else those ready now. SIGINT and SIGTERM
    are held while inside Ray: its wait checks for signals and cannot take the exception the command's handler raises
    (the wait would end only when its results are in, with a SystemError instead of the interruption, and the command
    without its line naming --resume); they are raised between two waits of at most WAIT_SECONDS."""
    while True:
        with signals_held():
            ready, _ = ray.wait(refs, num_returns=num_returns, timeout=WAIT_SECONDS if block else 0)
        if len(ready) >= num_returns or not block:
            return ready


def _result(ref, lines: tuple[int, int]) -> Counts:
    """A window's counts (its result is ready); a bad row found by an actor is the command's one-line error, as in
    one process, and a window whose actor died at each of its tries ends the run (`EmbedFailed`)."""
    try:
        with signals_held():
            return ray.get(ref)
    except ray.exceptions.RayActorError as error:
        said = [line for line in str(error).splitlines() if line.strip()]
        raise EmbedFailed(f"the window of lines {lines[0]}-{lines[1]} (from 0) was sent {WINDOW_TRIES} times and its "
                          f"Ray actor died each time ({said[-1] if said else type(error).__name__})") from error
    except ray.exceptions.RayTaskError as error:
        cause = error.cause if hasattr(error, "cause") else None
        if isinstance(cause, EmbedError):
            raise EmbedError(str(cause)) from error
        raise
