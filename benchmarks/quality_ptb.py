"""Per minute against the standard recipe: `elmo-pretrain` and pytorch/examples' word_language_model on Penn Treebank.

The two train at the same time for the same minutes, each pinned to its own core (`taskset`) with one thread, so
that both see the same load from the other jobs of a shared machine; the load average is sampled every 30 s beside
them. Their recipe is run as it is published (its defaults: 2-layer LSTM of 200 units, SGD at lr 20 divided by 4
when the validation loss stops falling, dropout 0.2, batch 20 x 35 tokens), from a folder outside this repository,
stopped with SIGINT when the time is spent (its own handler then tests the best model it saved at an epoch's end).
Ours stops itself (`--max_train_time`) and saves a checkpoint every `--save_every` steps for the curve.

Perplexity is measured on the same tokens for both: every word of every line and one end-of-sentence token a line
(`</S>` for ours, `<eos>` for theirs), `<unk>` as in the files; the stream read in 10 contiguous columns, windows of
35 tokens, the state carried (as their `evaluate`). Our `<S>` after a `</S>` is fed but not scored. Our forward LM
only: it is the one that predicts the next word.

    python benchmarks/quality_ptb.py run --out RUNS/pair1 --wlm_dir WLM --minutes 20 -- --config_file C.json ...
    python benchmarks/quality_ptb.py evaluate --out RUNS/pair1          # writes RUNS/pair1/results.json
    python benchmarks/quality_ptb.py plot RUNS/pair1 RUNS/pair2 --output docs/quality_ptb.png
    python benchmarks/quality_ptb.py table RUNS/pair1 RUNS/pair2        # the markdown rows of results_quality.md

WLM is a folder holding pytorch/examples' `word_language_model` (main.py, data.py, model.py), e.g. from
`git clone https://github.com/pytorch/examples`; nothing of it is copied here. Options after `--` go to
`elmo-pretrain` (our recipe); `--wlm_options` to their main.py.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "ptb"
EVAL_COLUMNS, EVAL_WINDOW = 10, 35  # as word_language_model's evaluate (eval_batch_size 10, bptt 35)
KIM_2016 = {"small (19M)": 92.3, "large": 78.9}  # Kim et al. 2016, char-CNN LSTM, PTB test perplexity
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# --------------------------------------------------------------------------------------------------
# run: both recipes at once, pinned
# --------------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a running process so far (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sample_load(path: Path, stop: threading.Event, processes: dict, every: float = 30.0) -> None:
    """Every `every` seconds: the load average and the CPU seconds each recipe has had (a check that both cores
    gave the two the same share)."""
    with open(path, "a") as handle:
        while not stop.is_set():
            one, five, fifteen = open("/proc/loadavg").read().split()[:3]
            cpu = {name: cpu_seconds(process.pid) for name, process in processes.items()}
            handle.write(json.dumps({"time": time.time(), "load1": float(one), "load5": float(five),
                                     "load15": float(fifteen), "cpu_seconds": cpu}) + "\n")
            handle.flush()
            stop.wait(every)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def wlm_data_folder(out: Path, data: Path) -> Path:
    """word_language_model reads train.txt, valid.txt and test.txt of a folder: links to the PTB files."""
    folder = out / "ptb-wlm"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        link = folder / f"{split}.txt"
        if not link.exists():
            link.symlink_to(data / f"ptb.{split}.txt")
    return folder


def run(args: argparse.Namespace) -> None:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=False)
    data = Path(args.data).resolve()
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(REPO)}
    commands = {}
    processes = {}
    if args.against is not None:  # two of ours against each other: the second on the core theirs would have
        commands["ours_b"] = our_command(args, data, out / "ours_b", args.cores[0], shlex.split(args.against))
        processes["ours_b"] = subprocess.Popen(commands["ours_b"], cwd=REPO, env=env,
                                               stdout=open(out / "ours_b.log", "w"), stderr=subprocess.STDOUT)
    elif args.recipes in ("both", "theirs"):
        wlm = Path(args.wlm_dir).resolve()
        commands["theirs"] = ["taskset", "-c", str(args.cores[0]), sys.executable, "-u", str(Path(__file__).resolve()),
                              "wlm", "--wlm_dir", str(wlm), "--minutes", str(args.minutes), "--snapshot_every",
                              str(args.snapshot_every), "--snapshots", str(out / "theirs_snapshots"), "--",
                              "--data", str(wlm_data_folder(out, data)), "--save", str(out / "wlm.pt"),
                              *shlex.split(args.wlm_options)]
        processes["theirs"] = subprocess.Popen(commands["theirs"], cwd=wlm, env=env,
                                               stdout=open(out / "theirs.log", "w"), stderr=subprocess.STDOUT)
    if args.recipes in ("both", "ours"):
        commands["ours"] = our_command(args, data, out / "ours", args.cores[-1], args.ours)
        processes["ours"] = subprocess.Popen(commands["ours"], cwd=REPO, env=env,
                                             stdout=open(out / "ours.log", "w"), stderr=subprocess.STDOUT)
    (out / "run.json").write_text(json.dumps({
        "name": args.name or out.name, "labels": {"ours": args.label, "ours_b": args.label_b},
        "minutes": args.minutes, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpu": cpu_name(), "python": sys.version.split()[0], "torch": _torch_version(),
        "commands": {k: shlex.join(v) for k, v in commands.items()}, "wlm_dir": args.wlm_dir,
        }, indent=2))
    stop = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(out / "load.jsonl", stop, processes), daemon=True)
    sampler.start()
    for name, process in processes.items():
        process.wait()
        print(f"{name}: exit {process.returncode}, log {out / (name + '.log')}", file=sys.stderr)
    stop.set()
    sampler.join()


def wlm_harness(args: argparse.Namespace) -> None:
    """word_language_model's main.py run as it is, in this process, with its own command line; a timer (every
    0.5 s, in the main thread between two Python statements) starts the clock when its epoch loop begins, saves a
    snapshot of the model every --snapshot_every seconds of training, and when --minutes are spent raises
    KeyboardInterrupt: its own Ctrl-C path, which tests the best model it saved at an epoch's end. When no epoch
    has ended by then there is none, and the model reached is saved where the script loads it from."""
    import torch

    wlm = Path(args.wlm_dir).resolve()
    snapshots = Path(args.snapshots)
    snapshots.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(wlm))
    sys.argv = [str(wlm / "main.py"), *[a for a in args.main_options if a != "--"]]
    scope = {"__name__": "__main__", "__file__": str(wlm / "main.py")}
    clock = {"start": None, "next": None}
    budget = args.minutes * 60

    def snapshot(name: str) -> None:
        torch.save(scope["model"].state_dict(), snapshots / f"{name}.pt")

    def tick(signum, frame) -> None:
        now = time.perf_counter()
        if clock["start"] is None:
            if "best_val_loss" in scope:  # set on the line before the epoch loop
                clock["start"], clock["next"] = now, now + args.snapshot_every
                saved = scope["args"]
                (snapshots / "model.json").write_text(json.dumps({
                    "model": saved.model, "emsize": saved.emsize, "nhid": saved.nhid, "nlayers": saved.nlayers,
                    "dropout": saved.dropout, "tied": saved.tied,
                    "words": scope["corpus"].dictionary.idx2word}))
            return
        spent = now - clock["start"]
        if now >= clock["next"] and spent < budget:
            snapshot(f"{spent:09.1f}")
            while clock["next"] <= now:  # a tick held back by a long C call: one snapshot, not one per period missed
                clock["next"] += args.snapshot_every
        if spent >= budget:
            signal.setitimer(signal.ITIMER_REAL, 0)
            snapshot(f"{spent:09.1f}")
            if not os.path.exists(scope["args"].save):
                torch.save(scope["model"], scope["args"].save)
                print("(harness: no epoch ended in the time; the model reached is tested)", flush=True)
            raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, tick)
    signal.setitimer(signal.ITIMER_REAL, 0.5, 0.5)
    source = (wlm / "main.py").read_text()
    exec(compile(source, str(wlm / "main.py"), "exec"), scope)  # noqa: S102  (their script, unchanged)


def our_command(args: argparse.Namespace, data: Path, folder: Path, core: int, options: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), sys.executable, "-m", "elmo_hf.cli", "pretrain", "--train_file",
            str(data / "ptb.train.txt"), "--output_dir", str(folder), "--max_train_time",
            f"{round(args.minutes * 60)}s",
            "--num_train_epochs", "1000", "--save_steps", str(args.save_every), "--save_total_limit", "100000",
            "--use_cpu", "--disable_tqdm", "--report_to", "none", "--logging_steps", "100", *options]


def _torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


# --------------------------------------------------------------------------------------------------
# evaluate: our checkpoints on the same tokens as theirs; their log read
# --------------------------------------------------------------------------------------------------


def token_stream(path: Path) -> list[str]:
    """<S> w1 .. wn </S> for every non-blank line, one stream."""
    tokens: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if words:
            tokens += ["<S>", *words, "</S>"]
    return tokens


def in_columns(inputs, targets, fill):
    """The text as EVAL_COLUMNS contiguous columns, as their `batchify` lays it out: the inputs (rows of `fill` past
    the end of the last column) and their targets (-100 there, not scored), (EVAL_COLUMNS, length, ...) each."""
    import torch

    length = math.ceil(len(inputs) / EVAL_COLUMNS)
    columns = fill.expand(EVAL_COLUMNS, length, *fill.shape).clone()
    wanted = torch.full((EVAL_COLUMNS, length), -100, dtype=torch.long)
    for column in range(EVAL_COLUMNS):
        piece = slice(column * length, min((column + 1) * length, len(inputs)))
        n = piece.stop - piece.start
        columns[column, :n], wanted[column, :n] = inputs[piece], targets[piece]
    return columns, wanted


def forward_perplexity(model, tokenizer, tokens: list[str], unscored: tuple[str, ...] = ()) -> tuple[float, int]:
    """The forward LM's perplexity over every next token but `<S>` (and those `unscored` names: a word not in the
    vocabulary names every word the model reads as unknown), the stream cut into EVAL_COLUMNS contiguous columns read
    in windows of EVAL_WINDOW tokens with the LSTM state carried; (perplexity, tokens scored)."""
    import torch

    from elmo_hf.train.data import BatchEncoder

    encoder = BatchEncoder(tokenizer)
    inputs, targets = tokens[:-1], tokens[1:]
    char_rows = torch.tensor(encoder.char_ids(inputs))
    labels = torch.tensor(encoder.vocab_ids(targets))
    labels[torch.tensor([t == "<S>" for t in targets])] = -100
    if unscored:
        labels[torch.isin(labels, torch.tensor(encoder.vocab_ids(list(unscored))))] = -100
    # the last column is the shortest: its end is filled with </S> rows, read after its last scored token, unscored
    chars, wanted = in_columns(char_rows, labels, fill=torch.tensor(encoder.char_ids(["</S>"]))[0])
    length = wanted.shape[1]
    model.eval()
    state, nll, count = None, 0.0, 0
    with torch.no_grad():
        for start in range(0, length, EVAL_WINDOW):
            window = slice(start, start + EVAL_WINDOW)
            ids, forward_labels = chars[:, window].to(model.device), wanted[:, window].to(model.device)
            out = model(input_ids=ids, backward_input_ids=ids, forward_labels=forward_labels,
                        backward_labels=torch.full_like(forward_labels, -100), state=state, use_cache=True)
            state = out.state
            nll += float(out.forward_loss) * int(out.forward_tokens)
            count += int(out.forward_tokens)
    return math.exp(nll / count), count


def sentences_of(tokens: list[str]) -> list[list[str]]:
    """The words of each sentence of a token stream."""
    sentences, current = [], []
    for token in tokens:
        if token == "<S>":
            current = []
        elif token == "</S>":
            sentences.append(current)
        else:
            current.append(token)
    return sentences


def forward_perplexity_per_sentence(model, tokenizer, tokens: list[str], batch_size: int = 64) -> float:
    """The same tokens as `forward_perplexity`, each sentence read from a zero state: what is left when no earlier
    sentence can help (the difference is what the model learned to take from the sentences before)."""
    import torch

    from elmo_hf.train.data import BatchEncoder, padded_batch

    encoder = BatchEncoder(tokenizer)
    nll, count = 0.0, 0
    model.eval()
    sentences = sentences_of(tokens)
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            rows = [["<S>", *words, "</S>"] for words in sentences[start:start + batch_size]]
            out = model(**padded_batch(rows, encoder))
            nll += float(out.forward_loss) * int(out.forward_tokens)
            count += int(out.forward_tokens)
    return math.exp(nll / count)


def their_perplexity_per_sentence(model, word_ids: dict, tokens: list[str], batch_size: int = 64) -> float:
    """`their_perplexity` with each sentence read from a zero state after one `<eos>`."""
    import torch

    nll, count = 0.0, 0
    model.eval()
    sentences = sentences_of(tokens)
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            rows = [[word_ids[w] for w in ["<eos>", *words, "<eos>"]] for words in sentences[start:start + batch_size]]
            width = max(len(row) for row in rows) - 1
            inputs = torch.zeros(width, len(rows), dtype=torch.long)
            targets = torch.full((width, len(rows)), -100, dtype=torch.long)
            for i, row in enumerate(rows):
                inputs[: len(row) - 1, i] = torch.tensor(row[:-1])
                targets[: len(row) - 1, i] = torch.tensor(row[1:])
            log_probs, _ = model(inputs, model.init_hidden(len(rows)))
            target = targets.reshape(-1)
            scored = target != -100
            nll += -float(log_probs[scored].gather(1, target[scored, None]).sum())
            count += int(scored.sum())
    return math.exp(nll / count)


def our_checkpoints(folder: Path) -> list[tuple[float, int, Path]]:
    """(training seconds, step, weights file) of every checkpoint, oldest first."""
    import torch

    found = []
    for checkpoint in sorted((folder / "checkpoints").glob("step-*")):
        progress = torch.load(checkpoint / "progress_rank0.pt", weights_only=False)["progress"]
        found.append((progress["train_seconds"], progress["step"], checkpoint / "model.safetensors"))
    return found


def latest_before(times: list[float], minutes: float, slack: float = 2.0) -> int | None:
    """The index of the last of `times` (seconds, increasing) at most `minutes` in (with `slack` seconds for the
    timer's granularity), or None."""
    found = [i for i, seconds in enumerate(times) if seconds <= minutes * 60 + slack]
    return found[-1] if found else None


def evaluate_ours(folder: Path, data: Path, every: int, test_at: list[float]) -> dict:
    import torch
    from safetensors.torch import load_file

    from elmo_hf.modeling_elmo import ElmoForPreTraining
    from elmo_hf.tokenization import ElmoTokenizer

    torch.set_num_threads(1)
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    model = ElmoForPreTraining.from_pretrained(folder)
    valid, test = token_stream(data / "ptb.valid.txt"), token_stream(data / "ptb.test.txt")
    summary = json.loads((folder / "train_results.json").read_text())
    curve = []
    checkpoints = our_checkpoints(folder)
    for index, (seconds, step, weights) in enumerate(checkpoints):
        if index % every and index != len(checkpoints) - 1:
            continue
        model.load_state_dict(load_file(weights))
        perplexity, scored = forward_perplexity(model, tokenizer, valid)
        curve.append({"minutes": seconds / 60, "step": step, "valid_perplexity": perplexity})
        print(f"ours: step {step} ({seconds / 60:.1f} min): valid {perplexity:.1f}", file=sys.stderr)
    at = {}
    for minutes in test_at:  # the last checkpoint within the minutes, on both texts
        index = latest_before([seconds for seconds, _, _ in checkpoints], minutes)
        if index is None:
            continue
        seconds, step, weights = checkpoints[index]
        model.load_state_dict(load_file(weights))
        at[f"{minutes:g}"] = {"minutes": seconds / 60, "step": step,
                              "valid_perplexity": forward_perplexity(model, tokenizer, valid)[0],
                              "test_perplexity": forward_perplexity(model, tokenizer, test)[0]}
        print(f"ours at {minutes:g} min (step {step}): {at[f'{minutes:g}']}", file=sys.stderr)
    model = ElmoForPreTraining.from_pretrained(folder)  # the folder: the last step
    test_perplexity, test_tokens = forward_perplexity(model, tokenizer, test)
    test_per_sentence = forward_perplexity_per_sentence(model, tokenizer, test)
    valid_perplexity, valid_tokens = forward_perplexity(model, tokenizer, valid)
    return {"curve": curve, "test_perplexity": test_perplexity, "valid_perplexity": valid_perplexity, "at": at,
            "test_perplexity_per_sentence": test_per_sentence,
            "test_tokens": test_tokens, "valid_tokens": valid_tokens, "steps": summary["steps"],
            "train_minutes": summary["train_seconds"] / 60, "tokens_per_second": summary["tokens_per_second"],
            "parameters": sum(p.numel() for p in model.parameters())}


def their_perplexity(model, word_ids: dict, tokens: list[str]) -> tuple[float, int]:
    """Their model on the same tokens and columns as `forward_perplexity`: the stream of words with `<eos>` for
    `</S>`, one `<eos>` before the first word (what their model has read before every sentence)."""
    import torch

    stream = ["<eos>"] + [("<eos>" if t == "</S>" else t) for t in tokens if t != "<S>"]
    ids = torch.tensor([word_ids[t] for t in stream])
    inputs, targets = ids[:-1], ids[1:]
    columns, wanted = in_columns(inputs, targets, fill=torch.tensor(0))
    length = wanted.shape[1]
    model.eval()
    hidden, nll, count = model.init_hidden(EVAL_COLUMNS), 0.0, 0
    with torch.no_grad():
        for start in range(0, length, EVAL_WINDOW):
            window = slice(start, start + EVAL_WINDOW)
            log_probs, hidden = model(columns[:, window].t().contiguous(), hidden)  # (T x B, V), time first
            target = wanted[:, window].t().reshape(-1)
            scored = target != -100
            nll += -float(log_probs[scored].gather(1, target[scored, None]).sum())
            count += int(scored.sum())
    return math.exp(nll / count), count


def evaluate_theirs(snapshots: Path, wlm_dir: Path, data: Path, test_at: list[float]) -> dict:
    """Their snapshots (seconds of training in the name) on the validation text, the last also on the test text."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(wlm_dir))
    from model import RNNModel  # their model.py

    saved = json.loads((snapshots / "model.json").read_text())
    word_ids = {word: i for i, word in enumerate(saved["words"])}
    model = RNNModel(saved["model"], len(word_ids), saved["emsize"], saved["nhid"], saved["nlayers"],
                     saved["dropout"], saved["tied"])
    valid, test = token_stream(data / "ptb.valid.txt"), token_stream(data / "ptb.test.txt")
    curve = []
    files = sorted(snapshots.glob("*.pt"), key=lambda p: float(p.stem))
    for path in files:
        model.load_state_dict(torch.load(path))
        perplexity, _ = their_perplexity(model, word_ids, valid)
        curve.append({"minutes": float(path.stem) / 60, "valid_perplexity": perplexity})
        print(f"theirs: {float(path.stem) / 60:.1f} min: valid {perplexity:.1f}", file=sys.stderr)
    test_perplexity, test_tokens = their_perplexity(model, word_ids, test)
    at = {}
    for minutes in test_at:
        index = latest_before([float(path.stem) for path in files], minutes)
        if index is None:
            continue
        model.load_state_dict(torch.load(files[index]))
        at[f"{minutes:g}"] = {"minutes": float(files[index].stem) / 60,
                              "valid_perplexity": curve[index]["valid_perplexity"],
                              "test_perplexity": their_perplexity(model, word_ids, test)[0]}
        print(f"theirs at {minutes:g} min: {at[f'{minutes:g}']}", file=sys.stderr)
    model.load_state_dict(torch.load(files[-1]))
    return {"curve": curve, "last_model_test_perplexity": test_perplexity, "test_tokens": test_tokens, "at": at,
            "last_model_test_perplexity_per_sentence": their_perplexity_per_sentence(model, word_ids, test),
            "last_model_valid_perplexity": curve[-1]["valid_perplexity"]}


EPOCH_LINE = re.compile(
    r"\| end of epoch\s+(\d+) \| time:\s*([\d.]+)s \| valid loss\s*([\d.]+) \| valid ppl\s*([\d.]+)")
BATCH_LINE = re.compile(r"\| epoch\s+(\d+) \|\s*(\d+)/\s*(\d+) batches \| lr ([\d.]+) \| ms/batch\s*([\d.]+)")
TEST_LINE = re.compile(r"\| End of training \| test loss\s*([\d.]+) \| test ppl\s*([\d.]+)")


def read_theirs(log: Path, batch_tokens: int = 20 * 35) -> dict:
    """Their log: the validation perplexity at each epoch's end (training minutes so far), the test perplexity
    of the model their script tests (the best at an epoch's end), and tokens/s from ms/batch."""
    text = log.read_text()
    curve, minutes = [], 0.0  # their own validation figures, at epochs' ends
    for epoch, seconds, _, perplexity in EPOCH_LINE.findall(text):
        minutes += float(seconds) / 60
        curve.append({"minutes": minutes, "epoch": int(epoch), "valid_perplexity": float(perplexity)})
    speeds = [batch_tokens / (float(ms) / 1000) for *_, ms in BATCH_LINE.findall(text)]
    test = TEST_LINE.search(text)
    batches = BATCH_LINE.findall(text)
    return {"epoch_curve": curve, "test_perplexity": float(test.group(2)) if test else None,
            "epochs_completed": len(curve), "last_logged_batch": batches[-1][:3] if batches else None,
            "tokens_per_second": statistics.median(speeds) if speeds else None,
            "stopped_early": "Exiting from training early" in text}


def evaluate(args: argparse.Namespace) -> None:
    out = Path(args.out)
    results = {"run": json.loads((out / "run.json").read_text())}
    loads = [json.loads(line) for line in (out / "load.jsonl").read_text().splitlines()]
    results["load1"] = {"min": min(r["load1"] for r in loads), "max": max(r["load1"] for r in loads),
                        "median": statistics.median(r["load1"] for r in loads)}
    seconds = json.loads((out / "run.json").read_text())["minutes"] * 60
    within = [r for r in loads if r["time"] - loads[0]["time"] <= seconds + 30]  # the training window
    results["cpu_seconds"] = {name: max((r["cpu_seconds"].get(name) or 0) for r in within)
                              for name in within[-1]["cpu_seconds"]}
    # Each recipe's models are scored in a process of their own, one thread each, --parallel at a time.
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.parallel) as pool:
        jobs = {}
        if (out / "theirs.log").exists():
            results["theirs"] = read_theirs(out / "theirs.log")
            jobs["theirs"] = pool.submit(evaluate_theirs, out / "theirs_snapshots", Path(results["run"]["wlm_dir"]),
                                         Path(args.data), args.test_at)
        for recipe in ("ours", "ours_b"):
            if (out / recipe).is_dir():
                jobs[recipe] = pool.submit(evaluate_ours, out / recipe, Path(args.data), args.every, args.test_at)
        for recipe, job in jobs.items():
            results.setdefault(recipe, {}).update(job.result())
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in results.items() if k != "run"}, indent=2))


# --------------------------------------------------------------------------------------------------
# plot, table
# --------------------------------------------------------------------------------------------------


def plot(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for folder in args.runs:
        results = json.loads((Path(folder) / "results.json").read_text())
        name = results["run"]["name"]
        for recipe, style in (("theirs", "--"), ("ours", "-"), ("ours_b", "-.")):
            if recipe not in results or recipe in args.skip:
                continue
            curve = results[recipe]["curve"]
            label = f"{name}: {recipe_label(results, recipe)} (valid)"
            line, = axes.plot([p["minutes"] for p in curve], [p["valid_perplexity"] for p in curve], style,
                              marker="o" if recipe == "theirs" else None, label=label)
            test = results[recipe].get("last_model_test_perplexity") or results[recipe].get("test_perplexity")
            if test:
                axes.plot([results["run"]["minutes"]], [test], "*", color=line.get_color(), markersize=12)
    for name, value in KIM_2016.items():
        axes.axhline(value, color="grey", linewidth=0.8, linestyle=":")
        axes.text(0.99, value * 1.02, f"Kim et al. 2016 {name}, test: {value} (long-run anchor, GPU)", color="grey",
                  fontsize=8, ha="right", transform=axes.get_yaxis_transform())
    axes.set_yscale("log")
    axes.set_ylim(args.ymin, args.ymax)
    axes.set_xlabel("training minutes (one core each, the same time)")
    axes.set_ylabel("PTB perplexity (lines: valid; stars: test at the end)")
    axes.set_title("Penn Treebank, forward LM, perplexity against minutes on one CPU core")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"wrote {args.output}", file=sys.stderr)


def recipe_label(results: dict, recipe: str) -> str:
    if recipe == "theirs":
        return "word_language_model"
    return (results["run"].get("labels") or {}).get(recipe) or "elmo-pretrain"


def table(args: argparse.Namespace) -> None:
    print("| run | recipe | minutes | CPU seconds in them | steps / epochs | tokens/s | valid ppl at the end | "
          "test ppl at the end | its script's test ppl | load (1-min avg) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for folder in args.runs:
        results = json.loads((Path(folder) / "results.json").read_text())
        load = results["load1"]
        load_text = f"{load['min']:.1f} - {load['max']:.1f} (median {load['median']:.1f})"
        name, minutes = results["run"]["name"], results["run"]["minutes"]
        cpu = {k: f"{v:.0f}" if v else "?" for k, v in results.get("cpu_seconds", {}).items()}
        if "theirs" in results:
            r = results["theirs"]
            script = f"{r['test_perplexity']:.1f}" if r["test_perplexity"] else "-"
            print(f"| {name} | word_language_model | {minutes:g} | {cpu.get('theirs', '?')} | "
                  f"{r['epochs_completed']} epochs | {r['tokens_per_second'] or float('nan'):.0f} | "
                  f"{r['last_model_valid_perplexity']:.1f} | {r['last_model_test_perplexity']:.1f} | {script} | "
                  f"{load_text} |")
        for recipe in ("ours", "ours_b"):
            if recipe not in results:
                continue
            r = results[recipe]
            print(f"| {name} | {recipe_label(results, recipe)} | {r['train_minutes']:.1f} | {cpu.get(recipe, '?')} | "
                  f"{r['steps']} steps | {r['tokens_per_second']:.0f} | {r['valid_perplexity']:.1f} | "
                  f"{r['test_perplexity']:.1f} | - | {load_text} |")


def perplexity(args: argparse.Namespace) -> None:
    """The forward LM's perplexity of model folders on text files (one sentence a line), scored as above."""
    import torch

    from elmo_hf.modeling_elmo import ElmoForPreTraining
    from elmo_hf.tokenization import ElmoTokenizer

    torch.set_num_threads(1)
    results = {}
    for folder in args.models:
        model = ElmoForPreTraining.from_pretrained(folder).to(args.device)
        tokenizer = ElmoTokenizer.from_pretrained(folder)
        for text in args.texts:
            value, tokens = forward_perplexity(model, tokenizer, token_stream(Path(text)), tuple(args.unscored))
            results[f"{folder} on {text}"] = {"forward_perplexity": value, "tokens": tokens, "unscored": args.unscored}
            print(f"{folder} on {text}: {value:.1f} ({tokens} tokens)", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2))


def at_least_one(text: str) -> int:
    """argparse's type for a count of processes: an integer of 1 or more (argparse says so in one line)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    runner = commands.add_parser("run", help="train both recipes at once, pinned, for --minutes")
    runner.add_argument("--out", required=True, help="a new folder (outside the repository) for logs and models")
    runner.add_argument("--wlm_dir", help="pytorch/examples' word_language_model folder (for theirs)")
    runner.add_argument("--minutes", type=float, default=20)
    runner.add_argument("--recipes", choices=("both", "ours", "theirs"), default="both")
    runner.add_argument("--cores", type=int, nargs=2, default=[0, 1], help="theirs, ours")
    runner.add_argument("--save_every", type=int, default=500, help="our checkpoints (the curve's points)")
    runner.add_argument("--snapshot_every", type=float, default=120, help="seconds between snapshots of theirs")
    runner.add_argument("--wlm_options", default="", help="options for their main.py (default: its defaults)")
    runner.add_argument("--name", help="the run's name in tables and plots (default: the folder's)")
    runner.add_argument("--against", help="options of a second elmo-pretrain run on the first core instead of theirs "
                                          "(two of our recipes compared under the same load)")
    runner.add_argument("--label", help="our recipe's name in tables and plots")
    runner.add_argument("--label_b", help="the --against recipe's name")
    runner.add_argument("--data", default=str(DATA))
    runner.add_argument("ours", nargs=argparse.REMAINDER, help="after --: options of elmo-pretrain")
    harness = commands.add_parser("wlm", help="(used by run) their main.py with a clock, snapshots and a stop")
    harness.add_argument("--wlm_dir", required=True)
    harness.add_argument("--minutes", type=float, required=True)
    harness.add_argument("--snapshot_every", type=float, default=120)
    harness.add_argument("--snapshots", required=True)
    harness.add_argument("main_options", nargs=argparse.REMAINDER, help="after --: their main.py's options")
    evaluator = commands.add_parser("evaluate", help="perplexities of a finished run -> OUT/results.json")
    evaluator.add_argument("--out", required=True)
    evaluator.add_argument("--data", default=str(DATA))
    evaluator.add_argument("--every", type=int, default=1, help="evaluate every N-th of our checkpoints")
    evaluator.add_argument("--parallel", type=at_least_one, default=min(2, os.cpu_count() or 1),
                           help="recipes scored at once, a process and a thread each (default: 2)")
    evaluator.add_argument("--test_at", type=float, nargs="*", default=[],
                           help="minutes at which both are also tested (the last checkpoint or snapshot within them)")
    scorer = commands.add_parser("perplexity", help="forward perplexity of model folders on text files")
    scorer.add_argument("--models", nargs="+", required=True)
    scorer.add_argument("--device", default="cpu", help="where the models run (cuda on a GPU)")
    scorer.add_argument("--texts", nargs="+", required=True)
    scorer.add_argument("--output", help="a JSON file for the figures")
    scorer.add_argument("--unscored", nargs="*", default=[],
                        help="target words not scored (<UNK>: every word the model reads as unknown)")
    plotter = commands.add_parser("plot", help="perplexity against minutes of runs")
    plotter.add_argument("runs", nargs="+")
    plotter.add_argument("--output", default=str(REPO / "docs" / "quality_ptb.png"))
    plotter.add_argument("--ymin", type=float, default=70)
    plotter.add_argument("--ymax", type=float, default=1500)
    plotter.add_argument("--skip", nargs="*", default=[], help="recipes left out: theirs, ours, ours_b")
    tabler = commands.add_parser("table", help="markdown rows of runs")
    tabler.add_argument("runs", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "run":
        args.ours = [a for a in args.ours if a != "--"] if args.ours else []
        if args.recipes != "ours" and not args.wlm_dir and args.against is None:
            parser.error("--wlm_dir is needed to run theirs")
    sys.path.insert(0, str(REPO))
    {"run": run, "wlm": wlm_harness, "evaluate": evaluate, "perplexity": perplexity, "plot": plot,
     "table": table}[args.command](args)


if __name__ == "__main__":
    main()
