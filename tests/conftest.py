"""Shared helpers for the test suite."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import resource
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

# Under pytest-xdist (`make test` runs three workers) each worker, and every command it starts, computes on one
# thread: two workers on two cores, instead of OpenMP threads spinning against each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
SHARED_DATA = REPO.parent / "shared" / "data"


# The files of few, long tests (clusters, several processes, training runs, other environments) first, the others after
# in their order: `make test` gives xdist this order (--no-loadscope-reorder; by default it hands out the files with
# the most tests first, so these ran last, and the suite ended on one worker running them alone). test_embed_ray.py
# leads: each of its tests starts a Ray cluster, and beside a CPU-bound process the file ran alone for the last ten
# minutes of a 35-minute rehearsal.
LONG_FILES_FIRST = ("test_embed_ray.py", "test_readme.py", "test_pretrain.py", "test_compat.py",
                    "test_pretrain_nodes.py", "test_embed.py", "test_hub.py", "test_matrix.py", "test_ecosystem.py",
                    "test_question_answering.py", "test_finetune.py", "test_heads.py", "test_onnx_export.py",
                    "test_resave_remote.py", "test_demo.py", "test_convert.py", "test_transformers_common.py")


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {name: position for position, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the order inside a file is kept


# A file above this many lines is named at the end of the run: a reminder to read it again, not a rule. A file that is
# one concept may grow past it; one that mixes concepts is split whatever its size (docs/architecture.md).
LONG_FILE_LINES = 800


def pytest_terminal_summary(terminalreporter) -> None:
    long = {str(path.relative_to(REPO)): lines for folder in ("modeling_elmo", "tokenization", "train", "tools", "cli")
            for path in sorted((REPO / folder).rglob("*.py"))
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > LONG_FILE_LINES}
    for name, lines in long.items():
        terminalreporter.write_line(f"{name} has {lines} lines (above {LONG_FILE_LINES}): one concept, or several "
                                    "to split?")


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for (commands, fresh interpreters, servers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_CPU_AT_SETUP = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    item.stash[_CPU_AT_SETUP] = _cpu_seconds()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call) -> None:
    """Each test's CPU seconds (set-up and teardown included) go to the JUnit report beside its wall time: on two cores
    the suite's length follows the CPU it needs, which wall times taken under load overstate (tests/suite_profile.py
    --cpu)."""
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        item.user_properties.append(("cpu_seconds", round(_cpu_seconds() - item.stash[_CPU_AT_SETUP], 2)))


class RecordedSleeps:
    """A module's `time` whose `sleep` records the seconds instead of waiting (everything else is `time`'s): a test
    asserts on the waits a command would make, not on a clock that the machine's load moves."""

    def __init__(self):
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def __getattr__(self, name: str):
        return getattr(time, name)


def record_sleeps(monkeypatch, module) -> list[float]:
    """The waits `module` asks `time.sleep` for during the test, recorded, not slept."""
    recorder = RecordedSleeps()
    monkeypatch.setattr(module, "time", recorder)
    return recorder.waits


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


def tiny_config(**overrides):
    """The configuration of the `tiny` preset (a few thousand parameters), with `overrides`: the tests' model size."""
    from elmo_hf.modeling_elmo import ElmoConfig

    return ElmoConfig.from_preset("tiny", **overrides)


def tiny_model(model_class=None, **overrides):
    """A freshly initialised tiny model in eval mode: `ElmoModel`, or the Elmo class given."""
    from elmo_hf.modeling_elmo import ElmoModel

    return (model_class or ElmoModel)(tiny_config(**overrides)).eval()


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A saved tiny model (seed 0) with its tokenizer: the folder the commands and loaders are tested on."""
    from elmo_hf.tokenization import ElmoTokenizer

    folder = tmp_path_factory.mktemp("elmo") / "tiny"
    torch.manual_seed(0)
    tiny_model().save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def clean_env() -> dict[str, str]:
    """Environment for a fresh Python that cannot import this project and never reaches a network."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONNOUSERSITE="1")
    return env


def _descendants(pid: int) -> list[int]:
    """Process ids below `pid` (Linux /proc; empty elsewhere). torchrun starts its workers in sessions of
    their own, so signalling the launcher's process group does not reach them."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_command(args: list[str], *, cwd, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    """Run a real command and capture its output. One that does not finish in `timeout` seconds fails the test
    with the Python stacks of all its processes (faulthandler on SIGABRT), so that a hang can be diagnosed."""
    process = subprocess.Popen(args, cwd=cwd, env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [*_descendants(process.pid), process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
        try:
            stdout, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            for pid in [*_descendants(process.pid), process.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        raise AssertionError(
            f"{' '.join(map(str, args))} did not finish in {timeout} s. Its output and the stacks of its "
            f"processes:\n{stdout[-3000:]}\n{stderr[-30000:]}"
        ) from None
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


@contextlib.contextmanager
def _working_directory(path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def run_cli(name: str, args, *, cwd=None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A console command run in this process through its own frame (`elmo_hf.cli.run`: the options, the checks, the
    console, the exit status, as the installed script runs them), from `cwd`, with `env`'s variables set for it, and
    its output captured. For what a test checks of a command's work; what only a process shows (signals, start-up
    imports, several processes, loading without the project) runs in a fresh one (`run_command`)."""
    from elmo_hf.cli import run

    assert "--debug_kill_after_chunks" not in map(str, args), "a command that kills its process runs in its own"
    stdout, stderr = io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    saved_env = dict(os.environ)
    os.environ.update(env or {})
    try:
        with _working_directory(cwd or os.getcwd()), contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            code = run(name, [str(arg) for arg in args])
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        torch.set_num_threads(threads)  # --threads sets the process's
        if "accelerate.state" in sys.modules:  # Accelerate keeps its process-wide state (a run's device, ...)
            sys.modules["accelerate.state"].AcceleratorState._reset_state(reset_partial_state=True)
    return subprocess.CompletedProcess([name, *map(str, args)], code, stdout.getvalue(), stderr.getvalue())


def cli(name: str, args) -> int:
    """The exit status of `run_cli(name, args)`; its lines reach `caplog` (the records also go to the root logger)."""
    return run_cli(name, args).returncode


# The project is installed in the environment (editable) for its commands; a user who loads a saved model
# has none of it. This prologue makes the project's packages unimportable in the subprocess, then checks it.
_NO_PROJECT = """
import importlib.abc, sys
class _NoProject(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "elmo_hf":
            raise ModuleNotFoundError(f"No module named {name!r} (the project is hidden from this process)")
sys.meta_path.insert(0, _NoProject())
sys.path[:] = [p for p in sys.path if p not in ("", ".", "__REPO__")]
try:
    from elmo_hf import modeling_elmo
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


@pytest.fixture
def one_thread_unless_numerics(request):
    """One thread for a test of tiny models (faster, and no fight with other processes for the cores); a numerics
    test keeps the threads it is given (`make test-numerics` runs them on two, to find bounds that hold on one only).
    For a file: `pytestmark = pytest.mark.usefixtures("one_thread_unless_numerics")`."""
    if request.node.get_closest_marker("numerics"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


PYTEST_OWN_VARIABLE = "PYTEST_CURRENT_TEST"  # pytest sets it for each test, and removes it after


def _logging_state() -> dict:
    """The handlers and levels of the root logger and of every logger created so far, the `warnings` filters, and
    transformers' verbosity and progress bars: what a command run in this process (through `elmo_hf.cli.run`) sets for
    itself and must put back."""
    loggers = {name: logger for name, logger in logging.root.manager.loggerDict.items()
               if isinstance(logger, logging.Logger)}
    state = {name: (logger.level, _own_handlers(logger), logger.propagate, logger.disabled)
             for name, logger in loggers.items()}
    state[""] = (logging.root.level, _own_handlers(logging.root), True, logging.root.disabled)
    hf_logging = sys.modules.get("transformers.utils.logging")
    transformers_state = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()) if hf_logging else None
    return {"loggers": state, "warnings filters": list(warnings.filters), "transformers": transformers_state}


def _own_handlers(logger: logging.Logger) -> tuple:
    """The handlers of `logger` but pytest's own (it adds capturing handlers to the root for each phase of a test)."""
    return tuple(handler for handler in logger.handlers if not type(handler).__module__.startswith("_pytest"))


def _restore_logging_state(state: dict) -> None:
    for name, (level, handlers, propagate, disabled) in state["loggers"].items():
        logger = logging.getLogger(name) if name else logging.root
        logger.setLevel(level)
        pytest_own = [handler for handler in logger.handlers if handler not in _own_handlers(logger)]
        logger.handlers[:] = list(handlers) + pytest_own
        logger.propagate, logger.disabled = propagate, disabled
    warnings.filters[:] = state["warnings filters"]
    warnings._filters_mutated()
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging and state["transformers"]:
        verbosity, bars = state["transformers"]
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar() if bars else hf_logging.disable_progress_bar()


def _same_logging(before: dict, after: dict, imported: bool = False) -> list[str]:
    """What changed between two `_logging_state`s. Loggers created in between are new, not changed: a library sets
    up its own when first imported (datasets, transformers)."""
    changed = [name or "root" for name, value in before["loggers"].items() if after["loggers"].get(name) != value
               and not name.startswith("torch.")]  # torch sets its own up again at its first compile or export
    # a library first imported in between (`imported`) may add filters of its own (Ray, Selenium): not a leak
    if before["warnings filters"] != after["warnings filters"] and not imported:
        changed.append("warnings filters")
    if before["transformers"] is not None and before["transformers"] != after["transformers"]:
        changed.append("transformers verbosity")
    return changed


def _process_state() -> dict:
    """What one test could change for every test after it: torch's threads and global switches, the kernel switches
    and registries of the model, the word-split registry, the table of fine-tuning tasks, logging, the environment.
    (Not the random generators: every test starts from `torch.manual_seed(0)`.)"""
    from elmo_hf.modeling_elmo import matmul_elmo
    from elmo_hf.modeling_elmo.configuration_elmo import TASK_CLASSES
    from elmo_hf.modeling_elmo.kernels_elmo import ALL_CHAR_CNN_FUNCTIONS, ALL_LSTM_FUNCTIONS
    from elmo_hf.tokenization import WORD_SPLITTERS

    return {
        "task heads": dict(TASK_CLASSES),
        "logging": _logging_state(),
        "modules imported": len(sys.modules),  # not compared: whether a library was first imported in between
        "torch threads": torch.get_num_threads(),
        "torch default dtype": torch.get_default_dtype(),
        "torch grad enabled": torch.is_grad_enabled(),
        "torch deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch float32 matmul precision": torch.get_float32_matmul_precision(),
        "torch quantized engine": torch.backends.quantized.engine,
        "matmul_elmo._ONEDNN": dict(matmul_elmo._ONEDNN),
        "LSTM kernels": (dict(ALL_LSTM_FUNCTIONS._functions), list(ALL_LSTM_FUNCTIONS._choices)),
        "character CNN kernels": (dict(ALL_CHAR_CNN_FUNCTIONS._functions), list(ALL_CHAR_CNN_FUNCTIONS._choices)),
        "word splits": {name: dict(vars(WORD_SPLITTERS)[name]) for name in vars(WORD_SPLITTERS)
                        if isinstance(vars(WORD_SPLITTERS)[name], dict)},
        "environment": {k: v for k, v in os.environ.items() if k != PYTEST_OWN_VARIABLE},
    }


def _restore_process_state(state: dict) -> None:
    from elmo_hf.modeling_elmo import matmul_elmo
    from elmo_hf.modeling_elmo.configuration_elmo import TASK_CLASSES
    from elmo_hf.modeling_elmo.kernels_elmo import ALL_CHAR_CNN_FUNCTIONS, ALL_LSTM_FUNCTIONS
    from elmo_hf.tokenization import WORD_SPLITTERS

    TASK_CLASSES.clear()
    TASK_CLASSES.update(state["task heads"])
    _restore_logging_state(state["logging"])
    torch.set_num_threads(state["torch threads"])
    torch.set_default_dtype(state["torch default dtype"])
    torch.set_grad_enabled(state["torch grad enabled"])
    torch.use_deterministic_algorithms(state["torch deterministic algorithms"])
    torch.set_float32_matmul_precision(state["torch float32 matmul precision"])
    torch.backends.quantized.engine = state["torch quantized engine"]
    matmul_elmo._ONEDNN.clear()
    matmul_elmo._ONEDNN.update(state["matmul_elmo._ONEDNN"])
    for registry, key in ((ALL_LSTM_FUNCTIONS, "LSTM kernels"), (ALL_CHAR_CNN_FUNCTIONS, "character CNN kernels")):
        registry._functions, registry._choices = dict(state[key][0]), list(state[key][1])
    for name, table in state["word splits"].items():
        setattr(WORD_SPLITTERS, name, dict(table))
    own = os.environ.get(PYTEST_OWN_VARIABLE)
    os.environ.clear()
    os.environ.update(state["environment"])
    if own is not None:
        os.environ[PYTEST_OWN_VARIABLE] = own


@pytest.fixture(scope="session")
def _probes_filled() -> None:
    """Fill the caches that a first use fills (the oneDNN probe), and settle what a first use sets (jieba's log level,
    which the split sets when it first needs jieba), so that a later first use changes nothing: which test is the
    first of its worker to use them depends on how the files are dealt out."""
    from elmo_hf.modeling_elmo import matmul_elmo
    from elmo_hf.tokenization import WordSplitError, check_word_split

    for dtype in (torch.float32, torch.bfloat16):
        matmul_elmo.use_onednn(torch.device("cpu"), dtype)
    with contextlib.suppress(WordSplitError, ImportError):  # jieba is an optional extra
        check_word_split("jieba")


def _unchanged_since(before: dict, what: str, warnings_filters: bool = True) -> None:
    """Put back what changed since `before`; fail, naming it, unless only the environment changed (libraries set
    variables for themselves when first imported: tokenizers' TOKENIZERS_PARALLELISM, gradio's
    HF_HUB_DISABLE_TELEMETRY, OpenMP's KMP_*). `warnings_filters`: whether they count (pytest sets its own around
    each test, so a test file's start and end see different ones)."""
    after = _process_state()
    if not warnings_filters:
        after["logging"]["warnings filters"] = before["logging"]["warnings filters"]
    changed = [name for name, value in before.items()
               if name not in ("logging", "modules imported") and after[name] != value]
    logging_changes = _same_logging(before["logging"], after["logging"],
                                    imported=after["modules imported"] != before["modules imported"])
    if logging_changes:
        changed.append(f"logging ({', '.join(logging_changes)})")
    if changed:
        _restore_process_state(before)
        if changed != ["environment"]:
            pytest.fail(f"{what} left process-wide state changed for the tests after it: {changed}", pytrace=False)


@pytest.fixture(scope="module", autouse=True)
def _same_process_state_for_every_module(_probes_filled):
    """A test file may set up state for its own tests (a module-scoped fixture), and must put it back by its end."""
    before = _process_state()
    yield
    _unchanged_since(before, "the test file (a module-scoped fixture)", warnings_filters=False)


@pytest.fixture(autouse=True)
def _same_process_state_for_every_test(_probes_filled):
    """Every test leaves the process as it found it (a test that changes a switch uses `monkeypatch`)."""
    before = _process_state()
    torch.manual_seed(0)
    yield
    _unchanged_since(before, "the test")
