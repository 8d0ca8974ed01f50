"""int8 inference (`quantize_int8`, `elmo-embed --dtype int8`) against float32 at the original size, in one run:
tokens/s and how far the int8 vectors are from float32's on real text.

Usage:
    python benchmarks/bench_int8.py                        # 64 PTB test sentences in batches of 32, 3 rounds
    python benchmarks/bench_int8.py --sentences 128 --rounds 5 --threads 2 --model FOLDER

Two models from the same folder: float32 (the default path, oneDNN) and int8
(`ElmoModel.from_pretrained(folder, lstm_implementation="int8")`), each with its packed weights built before timing,
no token cache (every round does the whole work). Rounds alternate (float32, int8, float32, ...), so that load on a
shared machine hits both alike; tokens/s are medians over the rounds (`<S>`/`</S>` count as tokens), with the
min-max range, and the load average (`os.getloadavg`) is recorded before the first and after the last round: on a
loaded machine the figures are not a measure of the kernels, re-run on a quiet one.

Deviation: every real token's vector of every layer (layer 0, each biLSTM layer) of int8 against float32: max and
mean absolute difference, cosine per vector (mean and min), per layer and over all.

The model is the original size with random weights in the published layout (`tests/original_layout.py`, converted
once into `--work_dir` by `bench_speed.py`'s `original_model_dir`), or `--model FOLDER`. The text: Penn Treebank
test sentences (../shared/data/ptb/ptb.test.txt) in file order; without it, generated words, said in the output
(they do not tell how far real sentences move).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PTB_TEST = REPO.parent / "shared" / "data" / "ptb" / "ptb.test.txt"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def text(count: int) -> tuple[list[list[str]], str]:
    """`count` sentences, and where they come from."""
    if PTB_TEST.exists():
        lines = [line.split() for line in PTB_TEST.read_text().splitlines()]
        return [words for words in lines if words][:count], f"PTB test, first {count} sentences"
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)] + ["the", ",", ".", "of"]
    return ([[rng.choice(words) for _ in range(rng.randint(5, 40))] for _ in range(count)],
            "GENERATED words (PTB test absent): speed only, the deviation does not stand for real text")


def encode(tokenizer, sentences: list[list[str]], batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    batches = []
    for start in range(0, len(sentences), batch_size):
        encoded = tokenizer(sentences[start : start + batch_size], is_split_into_words=True, padding=True,
                            return_tensors="pt")
        batches.append((encoded["input_ids"], encoded["attention_mask"]))
    return batches


def run(model, batches) -> list[torch.Tensor]:
    """Every layer's vectors at the real positions of each batch: (L + 1, tokens, 2P) per batch."""
    outputs = []
    with torch.inference_mode():
        for ids, mask in batches:
            out = model(ids, attention_mask=mask, output_hidden_states=True)
            outputs.append(torch.stack(out.hidden_states)[:, mask.bool()])
    return outputs


def deviation(exact: torch.Tensor, int8: torch.Tensor) -> dict:
    a, b = exact.double(), int8.double()
    cosine = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    return {"max_abs": (a - b).abs().max().item(), "mean_abs": (a - b).abs().mean().item(),
            "cosine_mean": cosine.mean().item(), "cosine_min": cosine.min().item()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="an original-size folder (default: built once)")
    parser.add_argument("--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-bench")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from bench_speed import original_model_dir

    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.modeling_elmo.quantization_elmo import int8_unavailable_reason
    from elmo_hf.tokenization import ElmoTokenizer

    if int8_unavailable_reason() is not None:
        raise SystemExit(int8_unavailable_reason())
    folder = args.model or original_model_dir(args.work_dir)
    models = {
        "float32": ElmoModel.from_pretrained(folder).eval(),
        "int8": ElmoModel.from_pretrained(folder, lstm_implementation="int8").eval(),
    }
    sentences, source = text(args.sentences)
    batches = encode(ElmoTokenizer(), sentences, args.batch_size)
    tokens = sum(int(mask.sum()) for _, mask in batches)
    outputs = {name: run(model, batches[:1]) for name, model in models.items()}  # warm-up: packs the weights
    load_before = os.getloadavg()
    seconds = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            start = time.perf_counter()
            outputs[name] = run(model, batches)
            seconds[name].append(time.perf_counter() - start)
            print(f"{name}: {tokens / seconds[name][-1]:.0f} tokens/s, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    load_after = os.getloadavg()

    speed = {name: {"tokens_per_s": tokens / statistics.median(s), "range": [tokens / max(s), tokens / min(s)]}
             for name, s in seconds.items()}
    exact, int8 = (torch.cat(outputs[name], dim=1) for name in ("float32", "int8"))  # (L + 1, all tokens, 2P)
    result = {
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
                   f"{torch.backends.cpu.get_cpu_capability()}, {args.threads} threads",
        "text": source, "tokens": tokens, "batch_size": args.batch_size, "rounds": args.rounds,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "speed": speed, "int8_over_float32": speed["int8"]["tokens_per_s"] / speed["float32"]["tokens_per_s"],
        "deviation_all_layers": deviation(exact, int8),
        "deviation_per_layer": [deviation(exact[i], int8[i]) for i in range(exact.shape[0])],
    }
    print(f"{result['machine']}; {source}: {tokens} tokens in batches of {args.batch_size}, {args.rounds} rounds")
    print(f"load average {result['load_average_before']} before, {result['load_average_after']} after")
    for name, s in speed.items():
        print(f"{name:8s} {s['tokens_per_s']:8.0f} tokens/s (range {s['range'][0]:.0f}-{s['range'][1]:.0f})")
    print(f"int8 / float32: {result['int8_over_float32']:.2f}x")
    for label, d in [("all layers", result["deviation_all_layers"]),
                     *((f"layer {i}", d) for i, d in enumerate(result["deviation_per_layer"]))]:
        print(f"{label:10s} max abs {d['max_abs']:.4f}  mean abs {d['mean_abs']:.5f}  "
              f"cosine mean {d['cosine_mean']:.5f}  min {d['cosine_min']:.4f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
