"""Speed of ElmoModel and of `elmo-embed` at the original size, as a fraction of the machine's matmul peak.

Usage:
    python benchmarks/bench_speed.py                            # all CPU sections, 2 threads
    python benchmarks/bench_speed.py --sections model --repeats 7
    python benchmarks/bench_speed.py --device cuda --sections gpu   # GPU inference and training tokens/s

The model is the original size (2 x 4096 cell / 512 projection, 2048 char filters, 2 highway): random weights in
the published hdf5 layout (`tests/original_layout.py OUT --size original`) converted with
`elmo-convert`, written once to `--work_dir` and reused (`--model` takes an existing folder instead).

FLOPs: 204 MFLOP per token at the original size (counted below from the shapes; `<S>` and `</S>` count as tokens):
char CNN 17.6, highways 33.6, projection 2.1, biLSTM 151 (input and recurrent matrices and projections of both
directions and layers).

Peak: the GFLOP/s of a 2048 x 2048 float32 `torch.mm` measured in the same process, right before and right after
each timed model call (interleaved, so that load on a shared machine hits both alike); each ratio is the model's
GFLOP/s over the mean of the two, and the figures are medians over `--repeats`. torch.mm runs MKL; on the AMD EPYC
machines of this project oneDNN's kernels (which the model's CPU inference path uses) run the same float32 matmul
over twice as fast, so the script also measures a 2048 x 2048 oneDNN matmul and reports the ratio to that stricter
peak.

Sections:
    model    32 sentences of 16-24 words (PTB validation sentences when ../shared/data is there), reference
             implementation (the code before issue 8: plain loop, conv1d, MKL) vs the default fast path, with and
             without the token cache.
    fused    clipping switched off: torch's fused LSTM kernel vs the loop, inference and a training step.
    bulk     the elmo-embed path (`Embedder` on length-bucketed batches of 128 sentences / 4096 tokens with the
             token cache, as the command runs), reference vs fast.
    command  the whole `elmo-embed` command (reading, batching, HDF5 writing and merging) on PTB validation lines.
    scaling  time per token and peak extra memory over batch sizes x sentence lengths (fast path).
    anchor   allennlp 2.10.1's own `Elmo` (the optional anchor, `make anchors`) against this model's default path on
             the same weights and batch as `model`, interleaved, with the largest difference of their top layers.
    gpu      (--device cuda) inference tokens/s at batches of 32, 128 (what elmo-embed picks) and 512 sentences,
             float32 and bfloat16: the packed step loop against the "graph" kernel (CUDA graphs) with the torch
             step and with Triton's, each as a share of the same run's matmul peak in its dtype; training tokens/s
             (forward + backward of a loss-free sum of the top layer, no softmax).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import json
import logging
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tests" / "original_layout.py"  # random weights in the original layout, any preset size
PTB = REPO.parent / "shared" / "data" / "ptb" / "ptb.valid.txt"
sys.path.insert(0, str(REPO))

logger = logging.getLogger("bench_speed")


def flops_per_token(config) -> float:
    """Multiply-adds x 2 of one token through the whole biLM (the <S>/</S> positions are tokens too)."""
    d, width = config.char_embedding_dim, config.max_characters_per_token
    conv = sum(2 * d * w * n * (width - w + 1) for w, n in config.char_cnn_filters)
    f, p, c = config.num_char_filters, config.projection_dim, config.cell_size
    highway = config.num_highway_layers * 2 * (2 * f * f)
    projection = 2 * f * p if f != p else 0
    lstm = config.num_layers * 2 * (2 * p * 4 * c + 2 * p * 4 * c + (2 * c * p if c != p else 0))
    return float(conv + highway + projection + lstm)


# --------------------------------------------------------------------------------------------------
# Machine and peak
# --------------------------------------------------------------------------------------------------


def machine() -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads()}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in lscpu.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "L3 cache"):
                info[key.strip()] = value.strip()
    with contextlib.suppress(OSError):
        info["load_average"] = os.getloadavg()
    return info


class Peak:
    """GFLOP/s of a 2048 x 2048 float32 matmul: torch.mm (the definition of the peak), and oneDNN's."""

    def __init__(self, device: torch.device):
        self.device = device
        generator = torch.Generator().manual_seed(0)
        self.a = torch.randn(2048, 2048, generator=generator).to(device)
        self.b = torch.randn(2048, 2048, generator=generator).to(device)
        self.packed = None
        if device.type == "cpu":
            with contextlib.suppress(AttributeError, RuntimeError):
                self.packed = torch.ops.mkldnn._reorder_linear_weight(self.b.t().contiguous(), None)
        for _ in range(2):
            self.mm()
            self.onednn()

    def _time(self, fn) -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return 2 * 2048**3 / (time.perf_counter() - start) / 1e9

    def mm(self, runs: int = 3) -> float:
        return statistics.median(self._time(lambda: torch.mm(self.a, self.b)) for _ in range(runs))

    def onednn(self, runs: int = 3) -> float | None:
        if self.packed is None:
            return None
        call = lambda: torch.ops.mkldnn._linear_pointwise(self.a, self.packed, None, "none", [], "")  # noqa: E731
        return statistics.median(self._time(call) for _ in range(runs))


def sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# --------------------------------------------------------------------------------------------------
# Model and data
# --------------------------------------------------------------------------------------------------


def original_model_dir(work_dir: Path) -> Path:
    folder = work_dir / "original"
    if (folder / "model.safetensors").exists():
        return folder
    raw = work_dir / "raw"
    if not (raw / "weights.hdf5").exists():
        if not TOOL.exists():
            raise SystemExit(f"{TOOL} is absent: pass --model with an original-size folder")
        subprocess.run([sys.executable, str(TOOL), str(raw), "--size", "original"], check=True)
    subprocess.run(
        [sys.executable, "-m", "elmo_hf.cli", "convert", "--options_file", str(raw / "options.json"),
         "--weight_file", str(raw / "weights.hdf5"), "--output_dir", str(folder)],
        check=True, cwd=REPO,
    )
    return folder


def sentences(min_words: int, max_words: int, count: int, seed: int = 0) -> list[list[str]]:
    """PTB validation sentences of min..max words (or random words when the data is absent)."""
    rng = random.Random(seed)
    if PTB.exists():
        pool = [line.split() for line in PTB.read_text().splitlines() if min_words <= len(line.split()) <= max_words]
        return [rng.choice(pool) for _ in range(count)] if len(pool) < count else rng.sample(pool, count)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        ["".join(rng.choice(letters) for _ in range(rng.randint(1, 9)))
         for _ in range(rng.randint(min_words, max_words))]
        for _ in range(count)
    ]


def corpus(count: int) -> list[list[str]]:
    """The first `count` lines of PTB validation (all lengths), or generated ones."""
    if PTB.exists():
        return [line.split() for line in PTB.read_text().splitlines()[:count]]
    return sentences(1, 40, count, seed=1)


# --------------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------------


def timed_ratio(run, tokens: int, flops: float, peak: Peak) -> dict:
    """One interleaved measurement: peak, the call, peak."""
    before = peak.mm()
    sync()
    start = time.perf_counter()
    run()
    sync()
    seconds = time.perf_counter() - start
    after = peak.mm()
    onednn = peak.onednn()
    gflops = tokens * flops / seconds / 1e9
    return {
        "tokens_per_s": tokens / seconds,
        "gflops": gflops,
        "peak_mm": (before + after) / 2,
        "ratio_mm": gflops / ((before + after) / 2),
        "ratio_onednn": gflops / onednn if onednn else None,
    }


def summarize(samples: list[dict]) -> dict:
    out = {}
    for key in samples[0]:
        values = [s[key] for s in samples if s[key] is not None]
        out[key] = statistics.median(values) if values else None
    out["ratio_mm_range"] = (min(s["ratio_mm"] for s in samples), max(s["ratio_mm"] for s in samples))
    return out


def section_model(model, tokenizer, peak: Peak, repeats: int, device) -> dict:
    flops = flops_per_token(model.config)
    batch = tokenizer(sentences(16, 24, 32), is_split_into_words=True, padding=True, return_tensors="pt").to(device)
    tokens = int(batch["attention_mask"].sum())
    variants = {
        "reference (before: plain loop, conv1d, MKL)": ("reference", False, torch.float32),
        "fast path (after, default)": ("auto", False, torch.float32),
        "fast path + warm token cache": ("auto", True, torch.float32),
        "fast path, bfloat16 autocast (not float32: ratio for scale only)": ("auto", False, torch.bfloat16),
    }
    samples = {name: [] for name in variants}

    def call(implementation, cache, dtype):
        model.config.lstm_implementation = implementation
        if cache:
            model.enable_token_cache(50_000)
        else:
            model.disable_token_cache()
        autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
        with torch.inference_mode(), autocast:
            model(**batch)

    for variant in variants.values():  # warm-up (packs weights, fills the cache)
        call(*variant)
    for _ in range(repeats):
        for name, variant in variants.items():
            samples[name].append(timed_ratio(lambda v=variant: call(*v), tokens, flops, peak))
    model.config.lstm_implementation = "auto"
    model.disable_token_cache()
    return {"tokens_per_batch": tokens, **{name: summarize(s) for name, s in samples.items()},
            "fast path: its multiplies alone": multiply_ceiling(model, batch, peak, repeats)}


@contextlib.contextmanager
def multiply_timer():
    """Time spent in the fast path's multiplies while the block runs, and their FLOPs: {"seconds": ..., "flops": ...}.
    Every CPU fast-path multiply calls oneDNN's `torch.ops.mkldnn._linear_pointwise`; MKL's `torch.addmm` /
    `torch.mm` are timed too, so that a path routing some multiplies there is still counted whole."""
    totals = {"seconds": 0.0, "flops": 0.0}

    def timer(original, inputs):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            out = original(*args, **kwargs)
            totals["seconds"] += time.perf_counter() - start
            x = inputs(args)
            totals["flops"] += 2.0 * x.numel() * out.shape[-1]
            return out
        return timed

    patches = [(torch.ops.mkldnn, "_linear_pointwise", lambda args: args[0]),
               (torch, "addmm", lambda args: args[1]), (torch, "mm", lambda args: args[0])]
    originals = [(namespace, name, getattr(namespace, name)) for namespace, name, _ in patches]
    for (namespace, name, inputs), (_, _, original) in zip(patches, originals):
        setattr(namespace, name, timer(original, inputs))
    try:
        yield totals
    finally:
        for namespace, name, original in originals:
            setattr(namespace, name, original)


def memory_read_gb_s(mib: int = 512, repeats: int = 5) -> float:
    """GB/s of a `sum` over `mib` MiB of float32 (far larger than any cache): the machine's sustained read bandwidth
    from torch at the benchmark's threads, the roofline's other side (a 32-row recurrent multiply reads its 32 MiB
    weight once per step)."""
    data = torch.ones(mib * 2**18)
    data.sum()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        data.sum()
        seconds.append(time.perf_counter() - start)
    return data.numel() * 4 / statistics.median(seconds) / 1e9


def multiply_ceiling(model, batch, peak: Peak, repeats: int) -> dict:
    """How far the default path is from the peak because of the multiplies themselves: the GFLOP/s of its
    multiplies at the shapes they run at (rows = sentences for the recurrent ones), timed inside a real forward.
    That is the most the path could reach if everything between the multiplies were free."""
    samples = []
    with torch.inference_mode():
        for _ in range(repeats):
            with multiply_timer() as totals:
                start = time.perf_counter()
                model(**batch)
                seconds = time.perf_counter() - start
            onednn, mm = peak.onednn(), peak.mm()
            gflops = totals["flops"] / totals["seconds"] / 1e9
            samples.append({"share_of_time_in_multiplies": totals["seconds"] / seconds, "multiply_gflops": gflops,
                            "multiply_ratio_mm": gflops / mm,
                            "multiply_ratio_onednn": gflops / onednn if onednn else None})
    return {key: statistics.median(s[key] for s in samples) for key in samples[0] if samples[0][key] is not None}


def section_anchor(model, tokenizer, raw_dir: Path, peak: Peak, repeats: int) -> dict:
    """allennlp's Elmo (num_output_representations=1, as users call it) and ours, alternately on one batch."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from allennlp_anchor import allennlp_char_ids, load_allennlp_elmo

    allennlp_elmo = load_allennlp_elmo()
    if allennlp_elmo is None:
        raise SystemExit("the anchor section needs allennlp: make anchors (pip install --no-deps allennlp==2.10.1)")
    if not (raw_dir / "weights.hdf5").exists():
        raise SystemExit(f"the anchor section needs the hdf5 pair the model was converted from: --raw_dir ({raw_dir})")
    theirs = allennlp_elmo.Elmo(str(raw_dir / "options.json"), str(raw_dir / "weights.hdf5"), 1, dropout=0.0).eval()
    batch = tokenizer(sentences(16, 24, 32), is_split_into_words=True, padding=True, return_tensors="pt")
    mask = batch["attention_mask"].bool()
    their_ids = allennlp_char_ids(batch["input_ids"], batch["attention_mask"])
    flops, tokens = flops_per_token(model.config), int(mask.sum())

    def call_theirs():
        theirs._elmo_lstm._elmo_lstm.reset_states()  # allennlp carries each row's state into the next call
        return theirs(their_ids)

    with torch.inference_mode():
        top_theirs = theirs._elmo_lstm(their_ids)["activations"][-1]
        theirs._elmo_lstm._elmo_lstm.reset_states()
        top_ours = model(**batch).last_hidden_state
        samples = {"ours (default fast path)": [], "allennlp Elmo": []}
        for _ in range(repeats + 1):  # the first round warms both up and is dropped
            ours = timed_ratio(lambda: model(**batch), tokens, flops, peak)
            allennlp = timed_ratio(call_theirs, tokens, flops, peak)
            samples["ours (default fast path)"].append(ours)
            samples["allennlp Elmo"].append(allennlp)
    speedups = [o["tokens_per_s"] / a["tokens_per_s"]
                for o, a in zip(samples["ours (default fast path)"][1:], samples["allennlp Elmo"][1:])]
    return {
        "tokens_per_batch": tokens,
        "max_abs_difference_top_layer": (top_ours[mask] - top_theirs[mask]).abs().max().item(),
        **{name: summarize(s[1:]) for name, s in samples.items()},
        "speedup_median": statistics.median(speedups),
        "speedup_range": (min(speedups), max(speedups)),
    }


def section_fused(model, tokenizer, peak: Peak, repeats: int, device) -> dict:
    """An unclipped model (clipping switched off on the live layers): torch's fused LSTM kernel against the loop,
    for inference and for a training step (forward + backward of a loss on all layers, no optimizer)."""
    flops = flops_per_token(model.config)
    batch = tokenizer(sentences(16, 24, 32), is_split_into_words=True, padding=True, return_tensors="pt").to(device)
    tokens = int(batch["attention_mask"].sum())
    saved = [(layer.cell_clip, layer.proj_clip) for layer in model.bilm.layers]
    for layer in model.bilm.layers:
        layer.cell_clip = layer.proj_clip = None
    results = {}
    try:
        for name, implementation in (("inference, loop", "loop"), ("inference, fused", "fused")):
            model.config.lstm_implementation = implementation

            def infer():
                with torch.inference_mode():
                    model(**batch)

            infer()
            results[name] = summarize([timed_ratio(infer, tokens, flops, peak) for _ in range(repeats)])
        model.requires_grad_(True)
        for name, implementation in (("training step, reference loop", "reference"), ("training step, fused", "fused")):
            model.config.lstm_implementation = implementation

            def train():
                out = model(**batch, output_hidden_states=True)
                sum(h.pow(2).mean() for h in out.hidden_states).backward()
                model.zero_grad(set_to_none=True)

            train()
            # forward + backward is about 3x the forward's FLOPs
            results[name] = summarize([timed_ratio(train, tokens, 3 * flops, peak)
                                       for _ in range(max(1, repeats // 2))])
    finally:
        for layer, (cell_clip, proj_clip) in zip(model.bilm.layers, saved):
            layer.cell_clip, layer.proj_clip = cell_clip, proj_clip
        model.config.lstm_implementation = "auto"
    return results


def section_bulk(model, tokenizer, peak: Peak, repeats: int, device, lines: int) -> dict:
    from elmo_hf.tools.embedding.embed import Embedder, Piece, _batches

    flops = flops_per_token(model.config)
    text = [words for words in corpus(lines) if words]
    pieces = [Piece(i, 0, words) for i, words in enumerate(text)]
    batches = [[p.words for p in batch] for batch in _batches(pieces, 128, 4096)]
    tokens = sum(len(words) + 2 for words in text)
    embedder = Embedder(model, tokenizer, "all", device, torch.float32)
    results = {"sentences": len(text), "tokens": tokens, "batches": len(batches)}
    variants = (
        ("reference, no token cache (before)", "reference", False),
        ("fast path, no token cache", "auto", False),
        ("fast path + token cache (elmo-embed's default, after)", "auto", True),
    )
    for name, implementation, cache in variants:
        model.config.lstm_implementation = implementation
        if cache:
            model.enable_token_cache(50_000)
        embedder(batches[0])  # warm-up
        runs = [timed_ratio(lambda: [embedder(b) for b in batches], tokens, flops, peak)
                for _ in range(max(1, repeats // 2))]
        results[name] = summarize(runs)
        results[name]["token_cache"] = model.token_cache_info()
        model.disable_token_cache()
    model.config.lstm_implementation = "auto"
    return results


def section_command(model_dir: Path, lines: int, threads: int) -> dict:
    """The whole `elmo-embed` command (reading, batching, writing HDF5, merging) on PTB validation lines."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.txt"
        source.write_text("".join(" ".join(words) + "\n" for words in corpus(lines)))
        out = Path(tmp) / "out.hdf5"
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "elmo_hf.cli", "embed", str(source), str(out), "--model", str(model_dir), "--all",
             "--threads", str(threads), "--quiet"],
            capture_output=True, text=True, cwd=REPO,
        )
        seconds = time.perf_counter() - start
        line = next((x for x in result.stderr.splitlines() if "wrote" in x), result.stderr[-500:])
        return {"command": "elmo-embed in.txt out.hdf5 --model ORIGINAL --all", "wall_s_with_startup": seconds,
                "log": line.split("elmo-embed: ")[-1],
                "output_mb": out.stat().st_size / 2**20 if out.exists() else None}


class RssSampler:
    """Peak RSS above the level at start, sampled every millisecond in a thread (Linux)."""

    def __enter__(self):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        self.start = self.peak = self._rss()
        self.running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _loop(self):
        while self.running:
            self.peak = max(self.peak, self._rss())
            time.sleep(0.001)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.extra_mb = (self.peak - self.start) / 2**20


def section_scaling(model, tokenizer, device, repeats: int) -> list[dict]:
    rows = []
    flops = flops_per_token(model.config)
    for words in (10, 20, 40, 80):
        for batch_size in (1, 8, 32, 128):
            text = sentences(words, words, batch_size, seed=words) if words <= 40 else [
                s + s for s in sentences(40, 40, batch_size, seed=words)
            ]
            batch = tokenizer(text, is_split_into_words=True, padding=True, return_tensors="pt").to(device)
            tokens = int(batch["attention_mask"].sum())
            with torch.inference_mode():
                model(**batch)  # warm-up
                times = []
                for _ in range(repeats):
                    sync()
                    start = time.perf_counter()
                    model(**batch)
                    sync()
                    times.append(time.perf_counter() - start)
                with RssSampler() as memory:
                    model(**batch)
            seconds = statistics.median(times)
            rows.append({"words": words, "batch": batch_size, "tokens": tokens, "seconds": seconds,
                         "ms_per_token": 1e3 * seconds / tokens, "tokens_per_s": tokens / seconds,
                         "gflops": tokens * flops / seconds / 1e9, "peak_extra_mb": memory.extra_mb})
            logger.info("scaling %s", rows[-1])
    return rows


def matmul_tflops(dtype: torch.dtype, device: torch.device, size: int = 8192, repeats: int = 10) -> float:
    """TFLOP/s of a size^3 `torch.mm` in `dtype` (random data; float32 without TF32, as the model runs it): the
    median of `repeats` products after 3 warm-ups, each synchronized."""
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    times = []
    for i in range(3 + repeats):
        sync()
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        if i >= 3:
            times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e12


# The routes of the gpu section: (name, lstm_implementation, Triton's fused step on, the CNN's kernel). The first
# is the reference of the last column; issue 49 measured the graph kernel's torch step (slower than Triton's).
GPU_ROUTES = (("loop, cuDNN CNN", "loop", False, "reference"), ("loop, window CNN", "loop", False, "windows"),
              ("graph + Triton, cuDNN CNN", "graph", True, "reference"),
              ("graph + Triton, window CNN", "graph", True, "windows"))


def section_gpu(model_dir: Path, repeats: int, batch_sizes=(32, 128, 512), train_batches=(128,),
                device: str = "cuda", peak_size: int = 8192) -> dict:
    """Inference tokens/s of the clipped original-size model on the GPU: the packed step loop against the graph
    kernel with Triton's step (issue 49), each with cuDNN's convolutions and with the one-multiply character CNN
    (issue 57), float32 and bfloat16, at each batch size (128 is what `elmo-embed` picks for 16-24 words: its
    defaults are 128 sentences and 4096 tokens), each as a share of the same run's matmul peak in its dtype; the
    largest difference of the top layer to the first route's in the same dtype; training (forward + backward + SGD
    step of a loss-free sum of the top layer) tokens/s with each CNN."""
    import elmo_hf.modeling_elmo.char_cnn_kernels_elmo as char_cnn
    import elmo_hf.modeling_elmo.lstm_graph_elmo as graph
    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    device = torch.device(device)
    kernels_before = char_cnn.CUDA_INFERENCE_KERNEL, char_cnn.CUDA_TRAINING_KERNEL  # put back at the end
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    peaks = {name: matmul_tflops(dtype, device, peak_size) for name, dtype in dtypes.items()}
    name = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu"
    results: dict = {"device": name, "matmul_peak_tflops": peaks, "inference": [],
                     "training": []}
    logger.info("matmul peak TFLOP/s: %s", peaks)
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    model = ElmoModel.from_pretrained(model_dir).to(device).eval()
    flops = flops_per_token(model.config)
    for batch_size in batch_sizes:
        batch = tokenizer(sentences(16, 24, batch_size), is_split_into_words=True, padding=True,
                          return_tensors="pt").to(device)
        tokens = int(batch["attention_mask"].sum())
        for dtype_name, dtype in dtypes.items():
            reference = None
            for route, implementation, use_triton, cnn in GPU_ROUTES:
                model.config.lstm_implementation = implementation
                graph.USE_TRITON = use_triton
                char_cnn.CUDA_INFERENCE_KERNEL = cnn
                autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
                with torch.inference_mode(), autocast:
                    top = model(**batch).last_hidden_state.float()  # warm-up: captures the graphs
                    model(**batch)
                    sync()
                    start = time.perf_counter()
                    for _ in range(repeats):
                        model(**batch)
                    sync()
                seconds = (time.perf_counter() - start) / repeats
                reference = top if reference is None else reference
                row = {"batch": batch_size, "tokens": tokens, "dtype": dtype_name, "route": route,
                       "tokens_per_s": tokens / seconds, "ms_per_batch": 1e3 * seconds,
                       "share_of_peak": tokens / seconds * flops / (peaks[dtype_name] * 1e12),
                       "max_difference_to_first": float((top - reference).abs().max())}
                results["inference"].append(row)
                logger.info("inference %s", row)
    model.config.lstm_implementation = "auto"
    graph.USE_TRITON = True
    char_cnn.CUDA_INFERENCE_KERNEL = kernels_before[0]
    for batch_size in train_batches:
        batch = tokenizer(sentences(16, 24, batch_size), is_split_into_words=True, padding=True,
                          return_tensors="pt").to(device)
        tokens = int(batch["attention_mask"].sum())
        for (dtype_name, dtype), cnn in itertools.product(dtypes.items(), ("reference", "windows")):
            char_cnn.CUDA_TRAINING_KERNEL = cnn
            model.train()
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
            autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
            for step in range(repeats + 1):
                if step == 1:
                    sync()
                    start = time.perf_counter()
                with autocast:
                    loss = model(**batch).last_hidden_state.float().pow(2).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            sync()
            seconds = (time.perf_counter() - start) / repeats
            row = {"batch": batch_size, "tokens": tokens, "dtype": dtype_name, "tokens_per_s": tokens / seconds,
                   "cnn": "cuDNN CNN" if cnn == "reference" else "window CNN",
                   "share_of_peak": 3 * tokens / seconds * flops / (peaks[dtype_name] * 1e12)}
            results["training"].append(row)
            logger.info("training %s", row)
    char_cnn.CUDA_TRAINING_KERNEL = kernels_before[1]
    model.eval()
    return results


def gpu_table(results: dict) -> str:
    """The gpu section as a markdown table (printed last, for the record)."""
    lines = [f"{results['device']}; matmul peak TFLOP/s: " + ", ".join(f"{k} {v:.0f}" for k, v in
                                                                       results["matmul_peak_tflops"].items()),
             "| batch | dtype | route | tokens/s | % of peak | max diff to the first route |",
             "|---|---|---|---|---|---|"]
    for r in results["inference"]:
        lines.append(f"| {r['batch']} | {r['dtype']} | {r['route']} | {r['tokens_per_s']:,.0f} | "
                     f"{100 * r['share_of_peak']:.1f}% | {r['max_difference_to_first']:.2g} |")
    for r in results["training"]:
        lines.append(f"| {r['batch']} | {r['dtype']} | training step, {r['cnn']} | {r['tokens_per_s']:,.0f} | "
                     f"{100 * r['share_of_peak']:.1f}% | |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="original-size model folder (default: build one)")
    parser.add_argument("--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-bench")
    parser.add_argument("--raw_dir", type=Path, default=None,
                        help="the hdf5 pair --model was converted from, for the anchor section (default: WORK_DIR/raw)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sections", default="model,fused,bulk,command,scaling",
                        help="comma-separated: model,fused,bulk,command,scaling,anchor,gpu")
    parser.add_argument("--bulk_lines", type=int, default=400, help="PTB validation lines for the bulk section")
    parser.add_argument("--command_lines", type=int, default=2000, help="PTB validation lines for the command")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gpu_batches", default="32,128,512",
                        help="gpu section: sentences per batch (training runs the second)")
    parser.add_argument("--peak_size", type=int, default=8192, help="gpu section: the matmul peak's size")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    model_dir = args.model or original_model_dir(args.work_dir)
    sections = args.sections.split(",")
    results = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"), "model": str(model_dir)}
    if "gpu" in sections:
        batches = [int(b) for b in args.gpu_batches.split(",")]
        results["gpu"] = section_gpu(model_dir, args.repeats, batches, batches[1:2] or batches, device,
                                     args.peak_size)
        print(gpu_table(results["gpu"]), file=sys.stderr)
    else:
        from elmo_hf.modeling_elmo import ElmoModel
        from elmo_hf.tokenization import ElmoTokenizer

        model = ElmoModel.from_pretrained(model_dir).to(device).eval()
        tokenizer = ElmoTokenizer.from_pretrained(model_dir)
        results["flops_per_token"] = flops_per_token(model.config)
        peak = Peak(device)
        results["peak_mm_gflops"] = peak.mm(5)
        results["peak_onednn_gflops"] = peak.onednn(5)
        if device.type == "cpu":
            results["memory_read_gb_s"] = memory_read_gb_s()
        if "model" in sections:
            results["model"] = section_model(model, tokenizer, peak, args.repeats, device)
            logger.info("model: %s", json.dumps(results["model"], indent=1))
        if "anchor" in sections:
            raw_dir = args.raw_dir or args.work_dir / "raw"
            results["anchor"] = section_anchor(model, tokenizer, raw_dir, peak, args.repeats)
            logger.info("anchor: %s", json.dumps(results["anchor"], indent=1))
        if "fused" in sections:
            results["fused"] = section_fused(model, tokenizer, peak, args.repeats, device)
            logger.info("fused: %s", json.dumps(results["fused"], indent=1))
        if "bulk" in sections:
            results["bulk"] = section_bulk(model, tokenizer, peak, args.repeats, device, args.bulk_lines)
            logger.info("bulk: %s", json.dumps(results["bulk"], indent=1))
        if "command" in sections:
            results["command"] = section_command(model_dir, args.command_lines, args.threads)
            logger.info("command: %s", results["command"])
        if "scaling" in sections:
            results["scaling"] = section_scaling(model, tokenizer, device, max(1, args.repeats // 2))
    results["machine"]["load_average_end"] = os.getloadavg()
    text = json.dumps(results, indent=1, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
