"""A/B speed of ElmoModel between two checkouts of this repository, on the same saved model, in one process each.

Run it alternately for the two checkouts (e.g. the old commit in a `git worktree` and the current tree), so that
both see the same machine load, then compare medians:

    git worktree add /tmp/elmo_before <old-commit>
    for round in 1 2; do for repo in /tmp/elmo_before "$PWD"; do
        python benchmarks/bench_ab.py --repo "$repo" --model /tmp/elmo-bench/original --sentences 8 --repeats 5 \
            --threads 1 >> /tmp/ab.jsonl
    done; done

`--model` is a saved original-size model (see benchmarks/results_speed.md for how the random one is made).
Each run prints one JSON line: tokens/s (wall-clock median and best) and tokens per CPU-second for the fast path,
the fast path with the token cache, and the reference implementation. On a loaded machine compare the
CPU-second figures: wall-clock ones swing with the other jobs.
"""

import argparse
import json
import os
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="the checkout whose code is measured")
    parser.add_argument("--model", required=True, help="a saved model folder")
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sys.path[:0] = [args.repo, os.path.join(args.repo, "benchmarks")]
    import torch

    torch.set_num_threads(args.threads)
    import bench_speed

    from elmo_hf import modeling_elmo
    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    assert modeling_elmo.__file__.startswith(os.path.abspath(args.repo)), modeling_elmo.__file__
    model = ElmoModel.from_pretrained(args.model).eval()
    tokenizer = ElmoTokenizer.from_pretrained(args.model)
    words = bench_speed.sentences(16, 24, args.sentences)
    batch = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    tokens = int(batch["attention_mask"].sum())
    out = {"repo": args.repo, "tokens": tokens, "threads": args.threads}
    for name, implementation, cache in (("fast", "auto", False), ("fast+cache", "auto", True),
                                        ("reference", "reference", False)):
        model.config.lstm_implementation = implementation
        model.disable_token_cache()
        if cache:
            model.enable_token_cache(50_000)
        wall, cpu = [], []
        for repeat in range(args.repeats + 1):  # the first call warms up (packing, cache) and is not counted
            start, start_cpu = time.perf_counter(), time.process_time()
            with torch.inference_mode():
                model(**batch)
            if repeat:
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
        out[name] = tokens / statistics.median(wall)
        out[name + " best"] = tokens / min(wall)
        out[name + " cpu"] = tokens / statistics.median(cpu)  # tokens per CPU-second, all threads together
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
