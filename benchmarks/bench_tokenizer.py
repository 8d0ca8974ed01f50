"""Throughput of ElmoTokenizer: tokens per second encoding 10,000 sentences.

Usage:
    python -m benchmarks.bench_tokenizer                  # generated sentences (seeded, reproducible anywhere)
    python -m benchmarks.bench_tokenizer --source ptb     # first 10,000 lines of ../shared/data/ptb/ptb.train.txt
    python -m benchmarks.bench_tokenizer --compare_fast   # ElmoTokenizerFast against ElmoTokenizer on a large file

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

from elmo_hf.tokenization import ElmoTokenizer, ElmoTokenizerFast

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
    parser.add_argument("--compare_fast", action="store_true",
                        help="time ElmoTokenizerFast against ElmoTokenizer on a generated file of --sentences lines")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.compare_fast:
        compare_fast(args.sentences)
        return

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


# ----- ElmoTokenizerFast against ElmoTokenizer ------------------------------------------------------------------------
def compare_fast(lines: int) -> None:
    """Both tokenizers, each fresh (empty cache), on the same calls over a generated file of `lines` lines: raw text
    split by "punctuation" (a Python pre-tokenizer in the fast one) and by "whitespace" (a `tokenizers` one), as
    tensors in batches of 32 and as lists in batches of 1000 (what `datasets.map` stores), and run_qa.py's call on
    question/passage pairs (windows with stride and offsets). Both must give the same number of tokens."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.txt"
        path.write_text("\n".join(generated_sentences(lines)) + "\n", encoding="utf-8")
        with open(path, encoding="utf-8") as handle:
            text = [line.rstrip("\n") for line in handle]
        logger.info("file: %d lines, %.1f MB | python %s, torch %s, %s, %d logical CPUs, load average %s", len(text),
                    path.stat().st_size / 1e6, platform.python_version(), torch.__version__,
                    platform.processor() or platform.machine(), os.cpu_count(),
                    " ".join(f"{x:.1f}" for x in os.getloadavg()))
    questions = [" ".join(line.split()[:6]) + " ?" for line in text]
    qa = {"truncation": "only_second", "max_length": 32, "stride": 8, "return_overflowing_tokens": True,
          "return_offsets_mapping": True, "padding": "max_length"}
    cases = [  # (input, split, call, batch size, keyword arguments)
        ("text", "punctuation", 'return_tensors="pt"', 32, {"padding": True, "return_tensors": "pt"}),
        ("text", "punctuation", "lists (datasets.map)", 1000, {}),
        ("text", "whitespace", 'return_tensors="pt"', 32, {"padding": True, "return_tensors": "pt"}),
        ("question + passage", "punctuation", "run_qa.py windows", 1000, qa),
    ]
    logger.info("| input | word_split | call | batch size | tokens | ElmoTokenizer s | ElmoTokenizerFast s | "
                "fast / slow | ElmoTokenizer tokens/s | ElmoTokenizerFast tokens/s |")
    logger.info("|---|---|---|---|---|---|---|---|---|---|")
    for kind, split, label, batch_size, kwargs in cases:
        pairs = kind != "text"
        seconds, tokens = {}, {}
        for cls in (ElmoTokenizer, ElmoTokenizerFast):
            tokenizer = cls(word_split=split)
            start, count = time.perf_counter(), 0
            for i in range(0, len(text), batch_size):
                args = (questions[i : i + batch_size],
                        text[i : i + batch_size]) if pairs else (text[i : i + batch_size],)
                enc = tokenizer(*args, **kwargs)
                mask = enc["attention_mask"]
                count += int(mask.sum()) if isinstance(mask, torch.Tensor) else sum(map(sum, mask))
            seconds[cls], tokens[cls] = time.perf_counter() - start, count
        if tokens[ElmoTokenizer] != tokens[ElmoTokenizerFast]:
            raise SystemExit(f"{label}: the tokenizers gave {tokens[ElmoTokenizer]} and {tokens[ElmoTokenizerFast]} "
                             "tokens")
        slow, fast = seconds[ElmoTokenizer], seconds[ElmoTokenizerFast]
        n = tokens[ElmoTokenizer]
        logger.info("| %s | %s | %s | %d | %d | %.2f | %.2f | %.1fx | %.0f | %.0f |", kind, split, label, batch_size, n,
                    slow, fast, fast / slow, n / slow, n / fast)


if __name__ == "__main__":
    main()
