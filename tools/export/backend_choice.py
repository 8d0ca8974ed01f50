"""`--backend auto` / `--dtype auto`: the fastest path on this CPU whose vectors stay within cosine 0.9999 of float32.

The paths (a backend of the table's rows marked `automatic`, `core/backend_registry.py`, and one of its row's
`automatic_dtypes`: those whose vectors for a sentence do not depend on its batch; the cosine below is measured on one
batch and cannot see that) are measured once per CPU and model size, on a batch of
sentences shaped as `elmo-embed` cuts them (wikitext-like lengths), one path after the other, against torch's float32
vectors of the same batch: tokens/s, and the smallest cosine between a vector and its float32 counterpart over every
token of every layer. The measurements are remembered in `$ELMO_HF_CACHE/backend_choice.json` (default
`~/.cache/elmo-hf`), keyed by the CPU (its model name and instruction flags), the thread count, the versions of torch
and the runtimes, and the model's sizes (not its weights: speed does not depend on them; the cosines are measured on
the first model of that size and are the user's to re-check on theirs, `benchmarks/bench_backends.py`).

Without `auto`, `elmo-embed` runs float32 on the torch backend, unless a measurement remembered for this CPU and size
found another float32 backend faster (ONNX Runtime or OpenVINO: the same vectors to 1e-5): then that one, named in one
INFO line. Nothing is measured without `auto`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..core.backend_registry import AUTO, AUTOMATIC_BACKENDS, DEFAULT, backend_row
from .backends import unavailable_reason

logger = logging.getLogger(__name__)

COSINE_FLOOR = 0.9999
MEMORY_NAME = "backend_choice.json"
ROUNDS = 3
SAMPLE_SENTENCES = 48  # one batch: enough rows for the multiplies' shapes of a real run, a few seconds at full size


@dataclass
class Measurement:
    backend: str
    dtype: str
    tokens_per_s: float
    cosine_min: float  # to torch float32, over every vector of every layer

    @property
    def name(self) -> str:
        return f"{self.backend} {self.dtype}"

    @property
    def accurate(self) -> bool:
        return self.cosine_min >= COSINE_FLOOR


@dataclass
class Choice:
    backend: str
    dtype: str
    line: str  # the INFO line that names it (empty when nothing was chosen for the user)


def memory_path() -> Path:
    from ..conversion.download import default_cache_dir

    return default_cache_dir() / MEMORY_NAME


def cpu_key() -> str:
    """The CPU as its model name and instruction flags (Linux's /proc/cpuinfo; the platform's name elsewhere)."""
    name, flags = platform.processor() or platform.machine(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name":
                name = value
            elif key == "flags":
                flags = value
                break  # the first processor's: they are all alike
    except OSError:
        pass
    return f"{name} [{hashlib.sha256(flags.encode()).hexdigest()[:12]}]"


def _versions() -> str:
    import importlib.metadata

    parts = []
    for package in (backend_row(name).packages[0] for name in AUTOMATIC_BACKENDS):  # each runtime itself
        try:
            parts.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(parts)


def size_key(config) -> str:
    return (f"L{config.num_layers} C{config.cell_size} P{config.projection_dim} F{config.num_char_filters} "
            f"H{config.num_highway_layers} {config.token_encoder}")


def memory_key(config, threads: int) -> str:
    return f"{cpu_key()} | {threads} threads | {_versions()} | {size_key(config)}"


def remembered(config, threads: int) -> list[Measurement] | None:
    try:
        entry = json.loads(memory_path().read_text()).get(memory_key(config, threads))
    except (OSError, ValueError):
        return None
    if not entry:
        return None
    return [Measurement(**m) for m in entry["measurements"]]


def remember(config, threads: int, measurements: list[Measurement]) -> Path:
    path = memory_path()
    try:
        memory = json.loads(path.read_text())
    except (OSError, ValueError):
        memory = {}
    memory[memory_key(config, threads)] = {"measurements": [asdict(m) for m in measurements],
                                           "date": time.strftime("%Y-%m-%d %H:%M")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(memory, indent=1))
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------------------------------
# Candidates and their measurement
# --------------------------------------------------------------------------------------------------


def candidates(backend: str | None, dtype: str | None, torch_reason) -> list[tuple[str, str]]:
    """The (backend, dtype) paths `auto` chooses among: every backend marked `automatic` for `backend` "auto" (or None
    with dtype "auto"), every dtype of its row's `automatic_dtypes` for `dtype` "auto", those that can run here.
    Only batch-invariant paths, even where a dtype is named: `--backend auto --dtype int8` chooses among the backends
    whose int8 keeps a sentence's vectors independent of its batch. `torch_reason(dtype)` says why the model itself
    cannot run a dtype (None when it can)."""
    backends = AUTOMATIC_BACKENDS if backend in (None, AUTO) else (backend,)
    paths = []
    for name in backends:
        row = backend_row(name)
        dtypes = row.automatic_dtypes if dtype == AUTO else (dtype or "float32",)
        for each in dtypes:
            if each not in row.automatic_dtypes:
                logger.debug("not chosen automatically: %s %s (a sentence's vectors depend on its batch)", name, each)
                continue
            reason = unavailable_reason(name, each) if row.graph else torch_reason(each)
            if reason is None:
                paths.append((name, each))
            else:
                logger.debug("not measured: %s %s (%s)", name, each, reason)
    return paths


def no_path_reason(backend: str | None, dtype: str | None) -> str:
    """The one line for an `auto` with nothing to choose from: a named backend that cannot run here, or a dtype that
    no batch-invariant path runs here (bfloat16: none does)."""
    if dtype in (None, AUTO):
        return unavailable_reason(backend, "float32") or f"--backend {backend} --dtype auto: nothing runs here"
    named = [name for name in AUTOMATIC_BACKENDS if dtype in backend_row(name).dtypes]
    return (f"--backend auto --dtype {dtype}: auto chooses only paths whose vectors do not depend on the batch, and "
            f"none runs {dtype} here (docs/embedding.md); name the backend: "
            + " or ".join(f"--backend {name}" for name in named))


def sample_sentences(count: int = SAMPLE_SENTENCES, seed: int = 0) -> list[list[str]]:
    """Wikitext-like sentences (lengths drawn around 22 words, 4 to 60) of made-up words of 1 to 12 letters:
    the shapes of real text, without shipping any."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    sentences = []
    for _ in range(count):
        length = int(np.clip(rng.lognormal(3.0, 0.5), 4, 60))
        words = ["".join(rng.choice(letters, size=int(rng.integers(1, 13)))) for _ in range(length)]
        sentences.append(words)
    return sentences


def min_cosine(got: np.ndarray, expected: np.ndarray, mask: np.ndarray) -> float:
    """The smallest cosine between a vector of `got` and the same one of `expected`, (B, K, T, D), over the real
    positions `mask` (B, T) of every layer K."""
    a = got.transpose(0, 2, 1, 3)[mask.astype(bool)].reshape(-1, got.shape[-1]).astype(np.float64)
    b = expected.transpose(0, 2, 1, 3)[mask.astype(bool)].reshape(-1, got.shape[-1]).astype(np.float64)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    both_zero = norms == 0
    cosine = np.where(both_zero, 1.0, (a * b).sum(-1) / np.where(both_zero, 1.0, norms))
    return float(cosine.min()) if cosine.size else 1.0


def path_runner(backend: str, dtype: str, model, folder, threads: int | None):
    """A function (input_ids, attention_mask) numpy -> hidden_states (B, L + 1, T, 2P) float32 for one path."""
    from .backends import runner_for

    return runner_for(backend, dtype, model, folder, threads).run


def measure(paths: list[tuple[str, str]], model, tokenizer, folder=None, threads: int | None = None,
            sentences: list[list[str]] | None = None, rounds: int = ROUNDS) -> list[Measurement]:
    """Tokens/s (the fastest of `rounds` calls after one warm-up call) and the smallest cosine to torch float32 of each
    path, on one batch of `sentences` (default `sample_sentences()`). One path at a time, each released before the
    next: at the original size every runtime holds its own copies of the weights (a gigabyte or more each)."""
    import gc

    sentences = sentences or sample_sentences()
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="np")
    ids, mask = encoded["input_ids"].astype(np.int64), encoded["attention_mask"].astype(np.int64)
    tokens = int(mask.sum())
    reference = path_runner(DEFAULT, "float32", model, folder, threads)(ids, mask)
    results = []
    for backend, dtype in paths:
        run = path_runner(backend, dtype, model, folder, threads)
        cosine = min_cosine(run(ids, mask), reference, mask)  # also the warm-up call
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            run(ids, mask)
            times.append(time.perf_counter() - start)
        # The fastest of the calls: on a shared machine other work only ever slows a call down.
        results.append(Measurement(backend, dtype, tokens / min(times), cosine))
        del run
        gc.collect()
    return results


def best(measurements: list[Measurement]) -> tuple[Measurement, Measurement | None]:
    """The fastest accurate path, and the alternative: the next fastest accurate one, or the fastest rejected one."""
    accurate = sorted((m for m in measurements if m.accurate), key=lambda m: -m.tokens_per_s)
    if not accurate:  # cannot happen while torch float32 is measured (cosine 1)
        raise ValueError("no path stayed within cosine 0.9999 of float32")
    others = accurate[1:] or sorted((m for m in measurements if not m.accurate), key=lambda m: -m.tokens_per_s)
    return accurate[0], (others[0] if others else None)


def describe(m: Measurement) -> str:
    return f"{m.name} ({m.tokens_per_s:.0f} tokens/s, cosine to float32 >= {m.cosine_min:.6f})"


def choose_auto(backend: str | None, dtype: str | None, model, tokenizer, folder, threads: int,
                torch_reason) -> Choice:
    """The path for `--backend auto` and/or `--dtype auto`: measured once per CPU and size, remembered."""
    paths = candidates(backend, dtype, torch_reason)
    if not paths:
        from .backends import BackendError

        raise BackendError(no_path_reason(backend, dtype))
    known = remembered(model.config, threads) or []
    measured = {(m.backend, m.dtype): m for m in known}
    todo = [p for p in paths if p not in measured]
    if todo:
        if (DEFAULT, "float32") not in measured and (DEFAULT, "float32") not in todo:
            todo.insert(0, (DEFAULT, "float32"))
        logger.info("measuring %d path(s) once on this CPU for this model size: %s", len(todo),
                    ", ".join(f"{b} {d}" for b, d in todo))
        for m in measure(todo, model, tokenizer, folder, threads):
            measured[(m.backend, m.dtype)] = m
        where = remember(model.config, threads, list(measured.values()))
    else:
        where = memory_path()
    chosen, alternative = best([measured[p] for p in paths])
    line = (f"--backend/--dtype auto: {describe(chosen)}"
            + (f"; the alternative: {describe(alternative)}" if alternative else "")
            + f" (measured on this CPU, remembered in {where})")
    return Choice(chosen.backend, chosen.dtype, line)


def default_path(config, threads: int) -> Choice:
    """float32 on the backend a remembered measurement found fastest for this CPU and size (and installed), else
    torch; the line names a backend other than torch."""
    measurements = [m for m in remembered(config, threads) or []
                    if m.dtype == "float32"
                    and (m.backend == DEFAULT or unavailable_reason(m.backend, "float32") is None)]
    torch_float32 = next((m for m in measurements if m.backend == DEFAULT), None)
    if torch_float32 is None:
        return Choice(DEFAULT, "float32", "")
    fastest = max(measurements, key=lambda m: m.tokens_per_s)
    if fastest.backend == DEFAULT:
        return Choice(DEFAULT, "float32", "")
    line = (f"float32 on {fastest.backend}: measured {fastest.tokens_per_s / torch_float32.tokens_per_s:.2f}x torch's "
            f"float32 speed on this CPU ({memory_path()}); --backend torch runs PyTorch")
    return Choice(fastest.backend, "float32", line)


def resolve(backend: str | None, dtype: str, model, tokenizer, folder, threads: int, device_type: str,
            torch_reason) -> Choice:
    """The (backend, dtype) a run takes from its options: `auto` measured (once) and chosen, the default as
    `default_path` says, an explicit one checked (`BackendError` in one line when it cannot run here)."""
    from .backends import BackendError

    if backend == AUTO or dtype == AUTO:
        if device_type != "cpu":
            raise BackendError(f"--backend/--dtype auto choose among the CPU's paths: add --device cpu "
                               f"(on {device_type}, name the dtype)")
        return choose_auto(backend, dtype, model, tokenizer, folder, threads, torch_reason)
    if backend is None:
        if dtype == "float32" and device_type == "cpu":
            return default_path(model.config, threads)
        return Choice(DEFAULT, dtype, "")
    reason = unavailable_reason(backend, dtype, device_type) if backend_row(backend).graph else torch_reason(dtype)
    if reason is not None:
        raise BackendError(reason)
    return Choice(backend, dtype, "")
