"""Throughput of ElmoTokenizer: tokens per second encoding 10,000 sentences.

Usage:
    python -m benchmarks.bench_tokenizer                  # generated sentences (seeded, reproducible anywhere)
    python -m benchmarks.bench_tokenizer --source ptb     # first 10,000 lines of ../shared/data/ptb/ptb.train.txt

Tokens are the real (non-padding) positions of the output, `<S>` and `</S>` included; words exclude them.
"cold" uses a fresh tokenizer (empty cache), "warm" encodes the same sentences again.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import time
from pathlib import Path

import torch

from elmo_hf.tokenization import ElmoTokenizer

logger = logging.getLogger("bench_tokenizer")

PTB_TRAIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb" / "ptb.train.txt"

# A fixed list of words with punctuation, numbers, clitics and some non-ASCII, drawn with a Zipf-like weight.
WORDS = (
    "the of and to a in is that for it as was with be by on not he I this are or his from at which but have an "
    "they you were her she there one all we their has been would more if no when will up out so said can't don't "
    "it's U.S. 1,000 3.14 2009 company market government president people percent year years new first last "
    "time million billion stock shares price prices trading investors rate rates bank federal state city "
    "children school schools health flu virus swine outbreak Winfrey café naïve Zürich São résumé 東京 emoji 😀 "
    "bio-identical well-known state-of-the-art O'Neill's , . ; : ? ! ( ) \" -- ..."
).split()


def generated_sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    out = []
    for _ in range(n):
        length = rng.randint(5, 40)
        out.append(" ".join(rng.choices(WORDS, weights=weights, k=length)))
    return out


def ptb_sentences(n: int) -> list[str]:
    if not PTB_TRAIN.exists():
        raise SystemExit(f"{PTB_TRAIN} is missing; run with --source generated")
    with open(PTB_TRAIN, encoding="utf-8") as handle:
        return [line for _, line in zip(range(n), handle, strict=False)]


def run(
    tokenizer: ElmoTokenizer, sentences: list[str], batch_size: int, tensors: bool
) -> tuple[float, int, int]:
    tokens = 0
    start = time.perf_counter()
    for i in range(0, len(sentences), batch_size):
        batch = sentences[i : i + batch_size]
        if tensors:
            enc = tokenizer(batch, padding=True, return_tensors="pt")
            tokens += int(enc["attention_mask"].sum())
        else:
            enc = tokenizer(batch)
            tokens += sum(len(ids) for ids in enc["input_ids"])
    elapsed = time.perf_counter() - start
    words = tokens - 2 * len(sentences)
    return elapsed, tokens, words


def run_pad(tokenizer: ElmoTokenizer, sentences: list[str], batch_size: int) -> tuple[float, int, int]:
    """`tokenizer.pad(features, return_tensors="pt")` as a data collator calls it, on pre-encoded features."""
    encoded = tokenizer(sentences)
    features = [
        {"input_ids": ids, "attention_mask": mask} for ids, mask in zip(*encoded.values(), strict=True)
    ]
    tokens = 0
    start = time.perf_counter()
    for i in range(0, len(features), batch_size):
        batch = tokenizer.pad(features[i : i + batch_size], return_tensors="pt")
        tokens += int(batch["attention_mask"].sum())
    elapsed = time.perf_counter() - start
    return elapsed, tokens, tokens - 2 * len(sentences)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", choices=("generated", "ptb"), default="generated")
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many warm runs")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)

    sentences = (
        generated_sentences(args.sentences) if args.source == "generated" else ptb_sentences(args.sentences)
    )
    word_split = "punctuation" if args.source == "generated" else "whitespace"
    logger.info(
        "source=%s sentences=%d | python %s, torch %s, %s, %d logical CPUs",
        args.source,
        len(sentences),
        platform.python_version(),
        torch.__version__,
        platform.processor() or platform.machine(),
        os.cpu_count(),
    )
    logger.info("| output | batch size | cache | seconds | tokens | tokens/s | words/s |")
    logger.info("|---|---|---|---|---|---|---|")
    for tensors, batch_size in ((True, 32), (True, 1000), (False, 1000)):
        tokenizer = ElmoTokenizer(word_split=word_split)
        label = 'return_tensors="pt"' if tensors else "lists (datasets.map)"
        elapsed, tokens, words = run(tokenizer, sentences, batch_size, tensors)
        report(label, batch_size, "cold", elapsed, tokens, words)
        best = min(run(tokenizer, sentences, batch_size, tensors)[0] for _ in range(args.repeats))
        report(label, batch_size, "warm", best, tokens, words)
    tokenizer = ElmoTokenizer(word_split=word_split)
    best, tokens, words = min(run_pad(tokenizer, sentences, 32) for _ in range(args.repeats))
    report('pad(features, return_tensors="pt") (collator)', 32, "-", best, tokens, words)


def report(label: str, batch_size: int, cache: str, seconds: float, tokens: int, words: int) -> None:
    logger.info(
        "| %s | %d | %s | %.3f | %d | %.0f | %.0f |",
        label,
        batch_size,
        cache,
        seconds,
        tokens,
        tokens / seconds,
        words / seconds,
    )


if __name__ == "__main__":
    main()
