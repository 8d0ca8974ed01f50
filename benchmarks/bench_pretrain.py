"""Pretraining benchmarks on CPU: training tokens/s at the `small` preset, and PTB perplexity after a fixed budget.

    python -m benchmarks.bench_pretrain speed      # tokens/s of elmo-pretrain, preset small, 2 threads
    python -m benchmarks.bench_pretrain compare    # two variants alternating (default: auto against reference)
    python -m benchmarks.bench_pretrain compare --variants auto,baseline --baseline_repo /tmp/elmo_before
                                                   # this checkout against another (a `git worktree` of a commit)
    python -m benchmarks.bench_pretrain compare --config demo [--data demo]   # train/demo_run.py's model [and corpus]
    python -m benchmarks.bench_pretrain ptb        # validation perplexity on Penn Treebank after --steps steps
    python -m benchmarks.bench_pretrain optimizer  # one optimizer step, torch's default against its fused CPU kernel
    python -m benchmarks.bench_pretrain profile    # a step's time by part, small and demo, 1 and 2 threads
                                                   # (--profile_data ptb: the demo's model on PTB's 10k words too)
    python -m benchmarks.bench_pretrain batches    # a stream window's character ids: table gather against nested lists

`speed` and `compare` run the real command (`elmo-pretrain`, through its frame) in a subprocess that times every
call of its `training_step` (forward, backward, optimizer step; not the data loading, logging or saving) in
wall-clock and CPU seconds, and report tokens/s from the steps after two warm-up steps: the median step's, the
fastest step's (on a shared machine the least disturbed) and tokens per CPU-second. `ptb` reads what the command
wrote (`eval_results.json`, `train_results.json`). Results go to `benchmarks/results_pretrain.md` by hand, with the
command and the machine.

Variants of `compare` (the model's `lstm_implementation` and how the LSTM trains):
    reference      every reference layer (the character CNN on every token, the autograd LSTM loop, the plain
                   softmax);
    autograd_lstm  the default fast paths except the LSTM's training function: clipped layers train through the
                   autograd loop, as before issue 15 (the dispatch is wrapped in the subprocess, nothing else changes);
    auto           the default;
    bf16           the default under `--mixed_precision bf16` (autocast: the LSTM trains through the autograd loop);
    unclipped      the same model without the LSTM's clipping (`cell_clip` and `proj_clip` None): "auto" then trains
                   it with torch's own LSTM kernel (`lstm_fused`), one call a layer and direction;
    baseline       the default settings of another checkout (`--baseline_repo`): the same command and
                   configuration, that checkout's code (`code_path`; a checkout of the elmo_hf layout, 5ef945f or
                   later; the timed process refuses to run if elmo_hf is imported from elsewhere).

FLOPs of a training step, per token (`flops_per_training_token`, counted from the shapes as `flops_per_token` of
bench_speed.py counts inference): 3 x the forward multiply-adds x 2 (the backward pass computes the gradients of
the inputs and of the weights, each as many as the forward), with the character CNN over all 50 positions counted
once per stream (stream mode feeds each direction its own stream) before deduplication, and the softmax of both
directions over the vocabulary (full) or over the `num_sampled` negatives and the true word (sampled): the work of
the reference. The fraction of peak is the run's GFLOP/s by that count over the faster of `torch.mm` and oneDNN's
packed linear (2048 x 2048, float32, the run's thread count), measured in this process right before and after
each training run; above 1 when the fast paths skip work the reference does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PTB = REPO.parent / "shared" / "data" / "ptb"


# Runs elmo-pretrain (through its frame), timing every call of its `training_step` (forward, backward, optimizer step:
# no data loading, logging or saving) in wall-clock and process CPU seconds, written as JSON to the file named by
# argv[1]. With argv[2] == "autograd_lstm", the dispatch is as before issue 15: "training" (the written-out LSTM
# backward) -> "reference", nothing else changes.
TIMED_PRETRAIN = """
import json, os, sys, time
from pathlib import Path
import elmo_hf.modeling_elmo.modeling_elmo as modeling
from elmo_hf.cli import run
import elmo_hf.train.pretrain_run as pretrain_run  # the run's loop calls training_step from here
times_file, variant, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
code_from = Path(os.environ["BENCH_CODE_FROM"])
if not Path(modeling.__file__).resolve().is_relative_to(code_from):
    sys.exit(f"elmo_hf was imported from {modeling.__file__}, not from {code_from}")
if variant == "autograd_lstm":
    choose = modeling.lstm_implementation
    modeling.lstm_implementation = lambda *args: "reference" if choose(*args) == "training" else choose(*args)
step, steps = pretrain_run.training_step, []
def timed_step(run, batch):
    wall, cpu = time.perf_counter(), time.process_time()
    out = step(run, batch)
    tokens = int(out.forward_tokens)
    steps.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "tokens": tokens})
    return out
pretrain_run.training_step = timed_step
code = run("elmo-pretrain", argv)
json.dump(steps, open(times_file, "w"))
sys.exit(code)
"""


def run_pretrain(args: list[str], threads: int, variant: str = "auto", repo: Path = REPO) -> list[dict]:
    """`elmo-pretrain` with `args` and the code of the checkout `repo` (this one by default); returns the wall-clock
    and CPU seconds and the tokens of every training step (`profile`: the seconds of each part of every step,
    profile_pretrain.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": code_path(repo, Path(tmp)),
               "BENCH_CODE_FROM": str(repo.resolve())}
        times = Path(tmp) / "steps.json"
        if variant == "profile":
            command = [sys.executable, str(REPO / "benchmarks" / "profile_pretrain.py"), str(times), *args]
        else:
            command = [sys.executable, "-c", TIMED_PRETRAIN, str(times), variant, *args]
        subprocess.run(command, cwd=repo, env=env, check=True)
        return json.loads(times.read_text())


def code_path(repo: Path, tmp: Path) -> str:
    """A PYTHONPATH under which `import elmo_hf` is `repo`'s code. This checkout is installed (editable) as the
    namespace package elmo_hf, whose finder would map another checkout's imports back here: that checkout's folders
    are linked into an `elmo_hf` folder that comes first."""
    if repo.resolve() == REPO:
        return str(REPO)
    package = tmp / "code" / "elmo_hf"
    package.mkdir(parents=True)
    for folder in ("cli", "modeling_elmo", "tokenization", "tools", "train"):
        (package / folder).symlink_to((repo / folder).resolve(), target_is_directory=True)
    return os.pathsep.join([str(package.parent), str(repo)])


def flops_per_training_token(config, softmax: str, streams: int = 2) -> float:
    """FLOPs of one token of a training step: forward and backward (3 x the forward's multiply-adds x 2) of the
    character CNN once per stream, the biLSTM, and the softmax of both directions."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_speed import flops_per_token

    d, width = config.char_embedding_dim, config.max_characters_per_token
    f, p = config.num_char_filters, config.projection_dim
    char = sum(2 * d * w * n * (width - w + 1) for w, n in config.char_cnn_filters)
    char += config.num_highway_layers * 2 * (2 * f * f) + (2 * f * p if f != p else 0)
    lstm = flops_per_token(config) - char
    classes = config.vocab_size if softmax == "full" else min(config.num_sampled + 1, config.vocab_size)
    return 3.0 * (streams * char + lstm + 2 * 2 * p * classes)


def peak_gflops(threads: int) -> float:
    """The faster of torch.mm and oneDNN's packed linear (2048 x 2048 float32) at `threads` threads, now."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import torch
    from bench_speed import Peak

    torch.set_num_threads(threads)
    peak = Peak(torch.device("cpu"))
    return max(peak.mm(), peak.onednn() or 0.0)


def machine() -> str:
    model = ""
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model or platform.processor()}, {os.cpu_count()} cores, {platform.python_version()}"


def model_config(name: str, implementation: str, clipped: bool = True):
    """The `small` preset, or (`demo`) the configuration of train/demo_run.py; without the LSTM's clipping unless
    `clipped`."""
    from elmo_hf.modeling_elmo import ElmoConfig

    clips = {} if clipped else {"cell_clip": None, "proj_clip": None}
    if name == "demo":
        from elmo_hf.train.demo_run import DEMO_CONFIG

        return ElmoConfig(**DEMO_CONFIG, lstm_implementation=implementation, **clips)
    return ElmoConfig.from_preset(name, lstm_implementation=implementation, **clips)


def training_corpus(data: str, folder: Path) -> Path:
    """PTB's training text, or (`demo`) the corpus `python -m elmo_hf.cli demo` generates (20,000 sentences, 222
    words)."""
    if data == "demo":
        from elmo_hf.train.sense_corpus import generate_corpus

        path = folder / "demo_train.txt"
        path.write_text("\n".join(generate_corpus(20000, seed=0)) + "\n", encoding="utf-8")
        return path
    path = PTB / "ptb.train.txt"
    if not path.exists():
        sys.exit(f"{path} is absent")
    return path


def speed(steps: int, threads: int, batch: int, softmax: str, implementation: str = "auto",
          preset: str = "small", baseline_repo: Path | None = None, data: str = "ptb") -> dict:
    """Training tokens/s of elmo-pretrain at the `small` preset (or `demo`), from the time of each training step after
    the first two (warm-up): the median step's, the fastest step's (on a shared machine, the least disturbed), and
    tokens per CPU-second of the process (both threads). `implementation` is the config's `lstm_implementation`,
    "autograd_lstm", "bf16" or "baseline" (see the module's docstring)."""
    timed, trained = timed_steps(steps, threads, batch, softmax, implementation, preset, baseline_repo, data)
    rates = [s["tokens"] / s["wall"] for s in timed]
    flops = flops_per_training_token(trained, softmax)
    return {"preset": preset, "data": data, "lstm_implementation": implementation, "threads": threads,
            "flops_per_token": flops, "vocab_size": trained.vocab_size,
            "batch": f"{batch} x 20 tokens", "softmax": softmax, "steps": len(timed),
            "median_tokens_per_second": round(statistics.median(rates), 1), "best": round(max(rates), 1),
            "tokens_per_cpu_second": round(sum(s["tokens"] for s in timed) / sum(s["cpu"] for s in timed), 1),
            "load_average": round(os.getloadavg()[0], 1), "machine": machine()}


def timed_steps(steps: int, threads: int, batch: int, softmax: str, implementation: str, preset: str,
                baseline_repo: Path | None, data: str) -> tuple[list[dict], object]:
    """`steps` timed training steps after two warm-up steps (`run_pretrain`'s records; `implementation` "profile":
    the auto variant with each step split by part), and the trained model's config (its vocabulary)."""
    from elmo_hf.modeling_elmo import ElmoConfig

    repo, variant = REPO, implementation
    if implementation == "baseline":
        if baseline_repo is None:
            sys.exit("the variant `baseline` needs --baseline_repo (a checkout of the code to compare with)")
        repo, implementation = baseline_repo, "auto"
    elif implementation in ("autograd_lstm", "bf16", "profile", "unclipped"):
        implementation = "auto"
    precision = ["--mixed_precision", "bf16"] if variant == "bf16" else []
    with tempfile.TemporaryDirectory() as tmp:
        train = training_corpus(data, Path(tmp))
        config = Path(tmp) / "config.json"
        model_config(preset, implementation, clipped=variant != "unclipped").to_json_file(config)
        out = Path(tmp) / "out"
        # the demo's optimizer on its corpus (train/demo_run.py), else elmo-pretrain's defaults
        optimizer = ["--optimizer", "adamw", "--learning_rate", "3e-3"] if data == "demo" else []
        timed = run_pretrain(["--train_file", str(train), "--output_dir", str(out), "--config_file", str(config),
                              "--max_steps", str(steps + 2), "--per_device_batch_size", str(batch),
                              "--unroll_steps", "20", "--softmax", softmax, "--logging_steps", "1000",
                              "--report_to", "none", "--disable_tqdm", *optimizer, *precision], threads, variant, repo)
        trained = ElmoConfig.from_json_file(next(out.rglob("config.json")))  # with the corpus's vocabulary
    return timed[2:], trained


def profile(steps: int, threads_list: list[int], configs: list[str], batch: int, softmax: str,
            data: str | None = None) -> dict:
    """Each config (`small` on PTB, `demo` on the demo's corpus with its optimizer, or both on `data`) at each thread
    count: the step's tokens/s and share of the GEMM peak measured right before and after, and each part's median
    milliseconds and share of the steps' total time (profile_pretrain.py names the parts), with the load average
    before and after."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from profile_pretrain import PARTS

    results = []
    for preset in configs:
        corpus = data or ("demo" if preset == "demo" else "ptb")
        for threads in threads_list:
            load_before = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
            before = peak_gflops(threads)
            timed, trained = timed_steps(steps, threads, batch, softmax, "profile", preset, None, corpus)
            peak = (before + peak_gflops(threads)) / 2
            load_after = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
            total = sum(s["step"] + s["data_loading"] for s in timed)
            flops = flops_per_training_token(trained, softmax)
            rate = statistics.median(s["tokens"] / (s["step"] + s["data_loading"]) for s in timed)
            results.append({
                "config": preset, "data": corpus, "threads": threads, "steps": len(timed),
                "vocab_size": trained.vocab_size,
                "median_step_ms": round(statistics.median(s["step"] for s in timed) * 1e3, 1),
                "median_tokens_per_second": round(rate, 1), "flops_per_token": flops,
                "peak_gflops": round(peak, 1), "fraction_of_peak": round(rate * flops / 1e9 / peak, 4),
                "parts_ms": {part: round(statistics.median(s[part] for s in timed) * 1e3, 2) for part in PARTS},
                "parts_share": {part: round(sum(s[part] for s in timed) / total, 3) for part in PARTS},
                "load_before": load_before, "load_after": load_after})
    return {"runs": results, "batch": f"{batch} x 20 tokens", "softmax": softmax, "machine": machine()}


def compare(steps: int, threads: int, batch: int, softmax: str, rounds: int, variants: list[str] | None = None,
            preset: str = "small", baseline_repo: Path | None = None, data: str = "ptb") -> dict:
    """The first variant (default "auto": distinct tokens once) against the second (default "reference": every
    token), alternating, in one run: the ratios of the medians of each run's median step, best step and tokens per
    CPU-second, and each run's fraction of the matmul peak measured right before and after it."""
    variants = variants or ["auto", "reference"]
    keys = ("median_tokens_per_second", "best", "tokens_per_cpu_second")
    runs = {variant: {key: [] for key in keys} for variant in variants}
    fractions = {variant: [] for variant in variants}
    peaks, loads, flops = [], [], None
    for _ in range(rounds):
        for implementation in runs:
            before = peak_gflops(threads)
            result = speed(steps, threads, batch, softmax, implementation, preset=preset, baseline_repo=baseline_repo,
                           data=data)
            peak = (before + peak_gflops(threads)) / 2
            flops = result["flops_per_token"]
            for key in keys:
                runs[implementation][key].append(result[key])
            fractions[implementation].append(round(result["median_tokens_per_second"] * flops / 1e9 / peak, 4))
            peaks.append(round(peak, 1))
            loads.append(result["load_average"])
    medians = {variant: {key: statistics.median(values) for key, values in run.items()} for variant,
               run in runs.items()}
    first, second = variants[:2]
    return {"runs": runs, "median": medians,
            "speed-up": {key: round(medians[first][key] / medians[second][key], 2) for key in keys},
            "fraction_of_peak": fractions,
            "median_fraction_of_peak": {k: statistics.median(v) for k, v in fractions.items()},
            "peak_gflops_per_run": peaks, "flops_per_token": flops, "load_average_per_run": loads,
            "preset": preset, "data": data, "steps_per_run": steps, "batch": f"{batch} x 20 tokens", "softmax": softmax,
            "threads": threads, "machine": machine()}


def optimizer_steps(threads: int, steps: int = 15) -> dict:
    """Milliseconds of one optimizer step (median of `steps`) on the parameters of ElmoForPreTraining at the `small`
    preset (10,002-word softmax) and at the demo size (222 words): Adagrad and AdamW as elmo-pretrain makes them,
    torch's default implementation against `fused=True`."""
    import torch

    from elmo_hf.modeling_elmo import ElmoForPreTraining

    torch.set_num_threads(threads)
    results = {}
    for name, vocab in (("small", 10_002), ("demo", 225)):
        config = model_config(name, "auto")
        config.vocab_size = vocab
        params = list(ElmoForPreTraining(config).parameters())
        for param in params:
            param.grad = torch.randn_like(param) * 1e-3
        makers = {"adagrad": (torch.optim.Adagrad, {"lr": 0.2, "initial_accumulator_value": 1.0}),
                  "adamw": (torch.optim.AdamW, {"lr": 3e-3})}
        for optimizer_name, (make, settings) in makers.items():
            for label, options in (("default", {}), ("fused", {"fused": True})):
                optimizer = make(params, **settings, **options)
                for _ in range(3):
                    optimizer.step()
                times = []
                for _ in range(steps):
                    start = time.perf_counter()
                    optimizer.step()
                    times.append(time.perf_counter() - start)
                results[f"{name}, {optimizer_name}, {label}"] = round(statistics.median(times) * 1e3, 2)
    return {"ms_per_step": results, "threads": threads, "machine": machine(), "load_average": os.getloadavg()}


def batches(windows: int = 60, rounds: int = 3) -> dict:
    """Milliseconds to make one stream window's character ids (32 x 20 tokens of the demo's corpus, both directions),
    the median of `windows` windows, in alternating rounds: `BatchEncoder.char_id_tensor` (a gather from a table of the
    distinct tokens' rows) against building the tensor from the nested lists of `char_ids`, as before."""
    import torch

    from elmo_hf.tokenization import ElmoTokenizer
    from elmo_hf.train.data import BatchEncoder, StreamBatcher
    from elmo_hf.train.sense_corpus import generate_corpus

    torch.set_num_threads(1)
    corpus = [line.split() for line in generate_corpus(4000, seed=0)]
    tokenizer = ElmoTokenizer()
    class NestedLists:
        """The encoder before: each token's list of ids kept in a dict, the window's tensor built from nested lists."""

        def __init__(self):
            self.lists = {}

        def __call__(self, rows):
            for token in {t for row in rows for t in row} - self.lists.keys():
                self.lists[token] = tokenizer.convert_tokens_to_char_ids(token)
            return torch.tensor([[self.lists[token] for token in row] for row in rows])

    ways = {"table gather (now)": lambda: BatchEncoder(tokenizer).char_id_tensor,
            "nested lists (before)": NestedLists}
    results = {name: [] for name in ways}
    for _ in range(rounds):
        for name, encoder in ways.items():
            batcher, make, times = StreamBatcher(iter(corpus), 32, 20), encoder(), []
            for _ in range(windows):
                fwd, bwd, _, _ = batcher.next_windows()
                start = time.perf_counter()
                make(fwd), make(bwd)
                times.append(time.perf_counter() - start)
            results[name].append(round(statistics.median(times[5:]) * 1e3, 2))  # after the first words are seen
    medians = {name: statistics.median(values) for name, values in results.items()}
    return {"ms_per_window": results, "median": medians,
            "speed-up": round(medians["nested lists (before)"] / medians["table gather (now)"], 1),
            "machine": machine(), "load_average": os.getloadavg()}


def ptb(steps: int, threads: int, output_dir: str, extra: list[str]) -> dict:
    train, valid = PTB / "ptb.train.txt", PTB / "ptb.valid.txt"
    if not train.exists():
        sys.exit(f"{train} is absent")
    run_pretrain(["--train_file", str(train), "--validation_file", str(valid), "--output_dir", output_dir,
                  "--overwrite_output_dir", "--max_steps", str(steps), "--report_to", "none", "--disable_tqdm",
                  "--logging_steps", "50", *extra], threads)
    results = json.loads((Path(output_dir) / "eval_results.json").read_text())
    summary = json.loads((Path(output_dir) / "train_results.json").read_text())
    return {**results, **summary, "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["speed", "compare", "ptb", "optimizer", "profile", "batches"])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of `compare`")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--softmax", default="full")
    parser.add_argument("--variants", default="auto,reference",
                        help="`compare`: comma-separated reference, autograd_lstm, auto, bf16, baseline; the first "
                             "over "
                        "the second")
    parser.add_argument("--baseline_repo", type=Path, default=None,
                        help="the variant `baseline`: elmo-pretrain (default settings) from this checkout")
    parser.add_argument("--config", default="small", choices=["small", "demo"],
                        help="the `small` preset, or train/demo_run.py's model")
    parser.add_argument("--data", default="ptb", choices=["ptb", "demo"],
                        help="`speed`/`compare`: train on PTB, or on the demo's generated corpus with its optimizer")
    parser.add_argument("--profile_threads", default="1,2", help="`profile`: comma-separated thread counts")
    parser.add_argument("--profile_configs", default="small,demo",
                        help="`profile`: comma-separated configs (small on PTB, demo on the demo's corpus)")
    parser.add_argument("--profile_data", default=None, choices=["ptb", "demo"],
                        help="`profile`: every config on this corpus (default: small on PTB, demo on the demo's)")
    parser.add_argument("--output_dir", default="outputs/ptb-elmo")
    parser.add_argument("extra", nargs="*", help="more elmo-pretrain arguments for `ptb` (after --)")
    args = parser.parse_args()
    if args.what == "speed":
        result = speed(args.steps or 30, args.threads, args.batch, args.softmax, preset=args.config, data=args.data)
    elif args.what == "compare":
        result = compare(args.steps or 8, args.threads, args.batch, args.softmax, args.rounds,
                         args.variants.split(","), args.config, args.baseline_repo, args.data)
    elif args.what == "profile":
        result = profile(args.steps or 10, [int(t) for t in args.profile_threads.split(",")],
                         args.profile_configs.split(","), args.batch, args.softmax, args.profile_data)
    elif args.what == "batches":
        result = batches()
    elif args.what == "optimizer":
        result = optimizer_steps(args.threads)
    else:
        result = ptb(args.steps or 2000, args.threads, args.output_dir, args.extra)
    print(json.dumps(result, indent=2))  # a benchmark's report: printed for the person running it


if __name__ == "__main__":
    main()
