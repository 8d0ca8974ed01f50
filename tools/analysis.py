"""`elmo-analyze`: how contextual is each layer of an ELMo model?

    elmo-analyze CORPUS --model MODEL --output_dir DIR [--min_count 5] [--max_occurrences 100] [--seed 0]
    python -m elmo_hf.cli analyze ...  (the same)

The measures of Ethayarajh (2019), "How Contextual are Contextualized Word Representations? Comparing the Geometry
of BERT, ELMo, and GPT-2 Embeddings" (EMNLP), computed for every layer l = 0..L of `hidden_states` (layer 0 is the
context-free character encoder, duplicated to 2P; layers 1..L the biLSTM). Only word positions count: `<S>` and
`</S>` never do. cos is cosine similarity; f_l(s, i) is the layer-l vector of the i-th word of sentence s.

* `self_similarity` (SelfSim): for a word type w with occurrences (s_1, i_1) .. (s_n, i_n),
  `SelfSim_l(w) = 1 / (n (n - 1)) * sum_{j != k} cos(f_l(s_j, i_j), f_l(s_k, i_k))`, averaged over the analysed
  word types (those with at least `--min_count` occurrences). 1 means the word's vectors do not depend on context:
  layer 0 of a character model gives every occurrence of a word the same vector, so its SelfSim is 1 exactly.
* `intra_sentence_similarity` (IntraSim): for a sentence s of n >= 2 words with mean vector
  `m_l(s) = 1/n sum_i f_l(s, i)`, `IntraSim_l(s) = 1/n sum_i cos(f_l(s, i), m_l(s))`, averaged over the sentences
  (one-word sentences are left out: their IntraSim is 1 by definition).
* `max_explainable_variance` (MEV): for a word type w, the fraction of the variance of its occurrence matrix
  M_l(w) (n rows f_l(s_j, i_j), not centred, as in the paper) explained by its first principal direction,
  `MEV_l(w) = sigma_1^2 / sum_i sigma_i^2` of the singular values of M_l(w); averaged over the analysed words.
  1 means all occurrences lie on one line (a static embedding).
* `anisotropy`: the mean cos between the vectors of `--anisotropy_pairs` pairs of word occurrences drawn uniformly
  from the whole corpus (seeded by `--seed`): the similarity two unrelated words have anyway, because the vectors
  occupy a narrow cone. `self_similarity_adjusted` and `intra_sentence_similarity_adjusted` are the measures minus
  this baseline, layer by layer, as in the paper.

Outputs in `--output_dir`: `contextuality.json` (the per-layer lists above, the settings, the counts, and per word
under `words`: `{"bank": {"count": n, "self_similarity": [per layer], "max_explainable_variance": [per layer]}}`,
`count` being the occurrences in the corpus) and `contextuality.png` (the curves per layer).

Input: a text file, one sentence per line, read as a stream (twice: once to count the words, once to embed), in
`--encoding` (utf-8; bytes that do not decode are refused in one line naming the file, the line and the byte, and
nothing is written), split into words as `elmo-embed` does: as the model's tokenizer splits raw text (its saved
`word_split`), or by `--word_split` (a registered split, `module:function`, or `whitespace` for tokenized text); blank
lines are skipped. The model: a folder, a Hub id, or a preset name (`tiny`, `small`, ...: random weights, seeded,
only useful to test the command), loaded by `elmo_hf.tools.loading.load_elmo`.

Memory stays bounded however large the corpus: at most `--max_occurrences` occurrences of each word type are kept
(a uniform sample of its occurrences, seeded, when it has more; the JSON records the cap and each word's `count`
and `used` occurrences), for at most `--max_words` word types (the most frequent ones; 0 keeps every type), plus
`2 * --anisotropy_pairs` vectors for the baseline. The bound, in bytes, is logged before the model runs.

This module is not imported by the model files (it does not travel as remote code). Exit status: 0 on success,
2 for bad arguments or inputs (a `--device` this machine does not have among them; nothing is written then), 1 when
writing fails, 130/143 when interrupted by SIGINT/SIGTERM (one line; nothing is written, unless the signal came
while the outputs were being written: they are finished first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from elmo_hf.tokenization import check_word_split, split_name, split_words

from .core.command_options import AnalyzeOptions
from .core.early_checks import check_analyze_paths
from .core.errors import InputError, writing
from .core.interrupts import Interrupted, InterruptGuard
from .core.output_folders import run_lock
from .core.text_files import DEFAULT_ENCODING, UndecodableText, iter_lines
from .embedding.embed_io import tokenizer_word_split
from .loading import ModelLoadError, checked_device, load_elmo

logger = logging.getLogger("elmo-analyze")

JSON_NAME = "contextuality.json"
PLOT_NAME = "contextuality.png"


class AnalysisError(InputError):
    """A problem with the user's arguments or inputs (exit status 2)."""


# --------------------------------------------------------------------------------------------------
# Reading the corpus
# --------------------------------------------------------------------------------------------------


def read_sentences(path: Path, split, max_tokens: int, max_lines: int | None = None,
                   encoding: str = DEFAULT_ENCODING, cut: list | None = None) -> Iterator[list[str]]:
    """The words of every non-blank line of `path` (of its first `max_lines` lines), in order; a line is cut after
    `max_tokens` words (`cut`, a list: each such line's number and words are appended to it). `split`: a word
    split's name or a function; `UndecodableText` at a line that does not decode."""
    if split == "whitespace":
        splitter = str.split
    else:

        def splitter(text: str) -> list[str]:
            return split_words(text, split)

    for number, line in enumerate(itertools.islice(iter_lines(path, encoding), max_lines), start=1):
        words = splitter(line)
        if cut is not None and len(words) > max_tokens:
            cut.append((number, len(words)))
        if words:
            yield words[:max_tokens]


def count_words(path: Path, split, max_tokens: int, max_lines: int | None = None,
                encoding: str = DEFAULT_ENCODING) -> tuple[Counter, int]:
    """(occurrences of each word type, number of sentences): the first pass over the corpus, which also finds a line
    that does not decode before anything is written."""
    counts: Counter = Counter()
    sentences, cut = 0, []
    for words in read_sentences(path, split, max_tokens, max_lines, encoding, cut):
        counts.update(words)
        sentences += 1
    if cut:
        number, length = max(cut, key=lambda item: item[1])
        logger.warning("%d line(s) have more than --max_tokens %d words: each is cut to its first %d (the longest, "
                       "line %d, has %d words; the first is line %d)", len(cut), max_tokens, max_tokens, number, length,
                       cut[0][0])
    return counts, sentences


# --------------------------------------------------------------------------------------------------
# Collecting the vectors
# --------------------------------------------------------------------------------------------------


@dataclass
class Collector:
    """What the second pass keeps: a bounded sample of each analysed word's vectors, the anisotropy sample, and
    running sums for the intra-sentence similarity. Vectors are kept in float64, as (n, L + 1, D) per word."""

    keep: dict[str, dict[int, int]]  # word -> {occurrence index -> row of its store}
    baseline_keep: dict[int, int]  # corpus-wide occurrence index -> row of the baseline store
    layers: int
    width: int
    stores: dict[str, torch.Tensor] = field(default_factory=dict)
    baseline: torch.Tensor | None = None
    seen: Counter = field(default_factory=Counter)
    occurrences: int = 0
    intra_sum: torch.Tensor | None = None
    intra_sentences: int = 0

    def __post_init__(self):
        for word, rows in self.keep.items():
            self.stores[word] = torch.zeros(len(rows), self.layers, self.width, dtype=torch.float64)
        self.baseline = torch.zeros(len(self.baseline_keep), self.layers, self.width, dtype=torch.float64)
        self.intra_sum = torch.zeros(self.layers, dtype=torch.float64)

    def add_batch(self, sentences: list[list[str]], hidden: torch.Tensor) -> None:
        """`hidden`: (L + 1, B, T, D) with `<S>` at position 0 of every row and the words at 1..n."""
        hidden = hidden.double()
        for row, words in enumerate(sentences):
            vectors = hidden[:, row, 1 : len(words) + 1].transpose(0, 1)  # (n, L + 1, D), boundaries left out
            self._add_intra_sentence(vectors)
            for position, word in enumerate(words):
                rows = self.keep.get(word)
                if rows is not None:
                    slot = rows.get(self.seen[word])
                    if slot is not None:
                        self.stores[word][slot] = vectors[position]
                    self.seen[word] += 1
                slot = self.baseline_keep.get(self.occurrences)
                if slot is not None:
                    self.baseline[slot] = vectors[position]
                self.occurrences += 1

    def _add_intra_sentence(self, vectors: torch.Tensor) -> None:
        if len(vectors) < 2:  # a one-word sentence is trivially similar to its own mean
            return
        mean = vectors.mean(0, keepdim=True)  # (1, L + 1, D)
        self.intra_sum += torch.nn.functional.cosine_similarity(vectors, mean, dim=-1, eps=1e-30).mean(0)
        self.intra_sentences += 1


def choose_occurrences(total: int, cap: int, rng: random.Random) -> dict[int, int]:
    """Which of `total` occurrences to keep (all, or a uniform sample of `cap`), as {occurrence index: row}."""
    chosen = range(total) if total <= cap else sorted(rng.sample(range(total), cap))
    return {index: row for row, index in enumerate(chosen)}


# --------------------------------------------------------------------------------------------------
# The measures
# --------------------------------------------------------------------------------------------------


def self_similarity(vectors: torch.Tensor) -> torch.Tensor:
    """(n, L + 1, D) occurrences of one word -> (L + 1,) mean cosine over all pairs j != k."""
    n = len(vectors)
    unit = torch.nn.functional.normalize(vectors.double(), dim=-1, eps=1e-30).transpose(0, 1)  # (L + 1, n, D)
    gram = unit @ unit.transpose(1, 2)  # (L + 1, n, n)
    off_diagonal = gram.sum((1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(-1)
    return off_diagonal / (n * (n - 1))


def max_explainable_variance(vectors: torch.Tensor) -> torch.Tensor:
    """(n, L + 1, D) occurrences of one word -> (L + 1,) sigma_1^2 / sum sigma_i^2 of the uncentred matrix."""
    singular = torch.linalg.svdvals(vectors.double().transpose(0, 1))  # (L + 1, min(n, D))
    squares = singular**2
    return squares[:, 0] / squares.sum(-1).clamp(min=1e-300)


def anisotropy(sample: torch.Tensor) -> torch.Tensor:
    """(2K, L + 1, D) occurrences in random order -> (L + 1,) mean cosine of the pairs (k, K + k)."""
    half = len(sample) // 2
    return torch.nn.functional.cosine_similarity(sample[:half], sample[half : 2 * half], dim=-1, eps=1e-30).mean(0)


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def _check_args(args) -> None:
    if args.word_split is not None:
        try:  # registered (an import path is imported), and its package (jieba ...) installed
            check_word_split(args.word_split, "--word_split", allow_import=True)
        except ValueError as error:
            raise AnalysisError(str(error)) from error
    if args.min_count < 2:
        raise AnalysisError(
            f"--min_count must be at least 2 (self-similarity needs two occurrences), got {args.min_count}")
    if args.max_occurrences < 2:
        raise AnalysisError(f"--max_occurrences must be at least 2, got {args.max_occurrences}")
    for name in ("batch_size", "max_tokens", "anisotropy_pairs"):
        if getattr(args, name) < 1:
            raise AnalysisError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if args.max_lines is not None and args.max_lines < 1:
        raise AnalysisError(f"--max_lines must be a positive integer, got {args.max_lines}")
    if args.max_words < 0:
        raise AnalysisError(f"--max_words must be >= 0, got {args.max_words}")


def analyze(model, tokenizer, path: Path, *, split=None, min_count: int = 5, max_occurrences: int = 100,
            max_words: int = 1000, anisotropy_pairs: int = 1000, seed: int = 0, batch_size: int = 64,
            max_tokens: int = 500, max_lines: int | None = None, encoding: str = DEFAULT_ENCODING,
            quiet: bool = False) -> dict:
    """The contextuality measures of `model` on the corpus at `path` (see the module docstring), as a dict. `split`:
    a word split (default: the tokenizer's `word_split`); a line that does not decode in `encoding` raises
    `UndecodableText` before the model runs."""
    split = tokenizer.word_split if split is None else split
    counts, num_sentences = count_words(path, split, max_tokens, max_lines, encoding)
    total = sum(counts.values())
    if total == 0:
        raise AnalysisError(f"{path} has no words (it is empty or blank)")
    eligible = [(word, n) for word, n in counts.most_common() if n >= min_count]
    if not eligible:
        raise AnalysisError(
            f"no word occurs {min_count} times in {path} ({total} words, {len(counts)} types): "
            "lower --min_count or use a larger corpus"
        )
    analysed = eligible[:max_words] if max_words else eligible
    if len(analysed) < len(eligible):
        logger.info("analysing the %d most frequent of the %d word types with >= %d occurrences",
                    len(analysed), len(eligible), min_count)
    rng = random.Random(seed)
    keep = {word: choose_occurrences(n, max_occurrences, rng) for word, n in analysed}
    pairs = min(anisotropy_pairs, total // 2)
    if pairs < 1:
        raise AnalysisError(f"{path} has a single word: the anisotropy baseline needs two")
    drawn = rng.sample(range(total), 2 * pairs)  # random order: pairs are (k, pairs + k)
    baseline_keep = {index: row for row, index in enumerate(drawn)}

    config = model.config
    layers, width = config.num_layers + 1, 2 * config.projection_dim
    kept = sum(len(rows) for rows in keep.values()) + 2 * pairs
    logger.info("%d sentences, %d words, %d types; %d types analysed (>= %d occurrences, <= %d kept each); "
                "vectors kept: %d x %d layers x %d (%.1f MB)", num_sentences, total, len(counts), len(analysed),
                min_count, max_occurrences, kept, layers, width, kept * layers * width * 8 / 1e6)
    collector = Collector(keep, baseline_keep, layers, width)
    device = next(model.parameters()).device

    progress = tqdm(total=num_sentences, unit="sent", desc="elmo-analyze", disable=quiet, dynamic_ncols=True,
                    mininterval=1.0)
    for batch in _batched(read_sentences(path, split, max_tokens, max_lines, encoding), batch_size):
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        with torch.inference_mode():
            out = model(encoded["input_ids"].to(device), attention_mask=encoded["attention_mask"].to(device),
                        output_hidden_states=True)
            hidden = torch.stack(out.hidden_states).cpu()
        collector.add_batch(batch, hidden)
        progress.update(len(batch))
    progress.close()
    return _results(collector, counts, analysed, num_sentences, total, layers)


def _batched(sentences: Iterator[list[str]], size: int) -> Iterator[list[list[str]]]:
    batch = []
    for words in sentences:
        batch.append(words)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _results(collector: Collector, counts: Counter, analysed: list, num_sentences: int, total: int,
             layers: int) -> dict:
    words = {}
    self_sims, mevs = [], []
    for word, n in analysed:
        vectors = collector.stores[word]
        sim, mev = self_similarity(vectors), max_explainable_variance(vectors)
        self_sims.append(sim)
        mevs.append(mev)
        words[word] = {"count": n, "used": len(vectors), "self_similarity": _floats(sim),
                       "max_explainable_variance": _floats(mev)}
    self_sim = torch.stack(self_sims).mean(0)
    mev = torch.stack(mevs).mean(0)
    if collector.intra_sentences:
        intra = collector.intra_sum / collector.intra_sentences
    else:
        intra = torch.full((layers,), float("nan"), dtype=torch.float64)
    baseline = anisotropy(collector.baseline)
    return {
        "self_similarity": _floats(self_sim),
        "intra_sentence_similarity": _floats(intra),
        "max_explainable_variance": _floats(mev),
        "anisotropy": _floats(baseline),
        "self_similarity_adjusted": _floats(self_sim - baseline),
        "intra_sentence_similarity_adjusted": _floats(intra - baseline),
        "layers": list(range(layers)),
        "sentences": num_sentences,
        "sentences_for_intra_similarity": collector.intra_sentences,
        "tokens": total,
        "word_types": len(counts),
        "words_analysed": len(analysed),
        "anisotropy_pairs": len(collector.baseline) // 2,
        "words": words,
    }


def _floats(values: torch.Tensor) -> list[float]:
    return [None if v != v else round(float(v), 8) for v in values.tolist()]  # NaN -> null (valid JSON)


def plot(results: dict, path: Path, title: str) -> None:
    """The per-layer curves: self-similarity, intra-sentence similarity (raw and anisotropy-adjusted, with the
    baseline) and the maximum explainable variance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = results["layers"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels = [
        ("self-similarity of a word's occurrences", "self_similarity", "self_similarity_adjusted"),
        ("intra-sentence similarity", "intra_sentence_similarity", "intra_sentence_similarity_adjusted"),
    ]
    for ax, (name, raw, adjusted) in zip(axes, panels):
        ax.plot(layers, results[raw], "o-", label="raw")
        ax.plot(layers, results[adjusted], "s--", label="minus the anisotropy baseline")
        ax.plot(layers, results["anisotropy"], ":", color="grey", label="anisotropy (random pairs)")
        ax.set_title(name, fontsize=10)
    axes[2].plot(layers, results["max_explainable_variance"], "o-", color="tab:green")
    axes[2].set_title("variance explained by a static vector (MEV)", fontsize=10)
    for ax in axes:
        ax.set_xticks(layers, [f"{k}" + (" (chars)" if k == 0 else "") for k in layers])
        ax.set_xlabel("layer")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args: AnalyzeOptions, guard: InterruptGuard | None = None) -> Path:
    """Analyse `args.input` with `args.model` and write the outputs; returns the JSON's path. `guard`: the command's
    interrupt guard (the outputs are written whole, a signal meanwhile waits for the end; an interruption carries the
    line saying what was kept as its `report`)."""
    try:
        with run_lock(Path(args.output_dir), "elmo-analyze"):
            return _run(args, guard or InterruptGuard())
    except Interrupted as stop:
        kept = "the outputs were written first" if getattr(stop, "after_writing", False) else "nothing was written"
        stop.report = f"interrupted by {stop.name}: {kept}"
        raise


def _run(args: AnalyzeOptions, guard: InterruptGuard) -> Path:
    _check_args(args)
    source, out = Path(args.input), Path(args.output_dir)
    try:
        check_analyze_paths(args)  # the console door checked them already, before importing torch
    except ValueError as error:
        raise AnalysisError(str(error)) from error
    existing = [name for name in (JSON_NAME, PLOT_NAME) if (out / name).exists()]
    if existing and not args.overwrite:
        raise AnalysisError(f"{out} already holds {', '.join(existing)}: pass --overwrite to replace")
    try:
        device = checked_device(args.device, "--device")  # `gpu`, or CUDA without a GPU: one line, as elmo-embed says
    except ModelLoadError as error:
        raise AnalysisError(str(error)) from error
    try:
        model, tokenizer = load_elmo(args.model, device=device, seed=args.seed)
    except ModelLoadError as error:
        raise AnalysisError(f"--model: {error}") from error
    if args.word_split is None:  # the tokenizer's own split, never imported from its saved file
        try:
            tokenizer_word_split(tokenizer, args.model)
        except ValueError as error:
            raise AnalysisError(str(error)) from error
    options = {name: getattr(args, name) for name in ANALYZE_OPTIONS}
    options["split"] = args.word_split
    try:
        return analyze_to_folder(model, tokenizer, source, out, model_name=args.model, quiet=args.quiet,
                                 protect=lambda: _written_whole(guard), **options)
    except UndecodableText as error:  # found by the first pass, before anything is written
        raise AnalysisError(str(error)) from error


# The options of `analyze` that the command exposes, recorded in the JSON.
ANALYZE_OPTIONS = ("min_count", "max_occurrences", "max_words", "anisotropy_pairs", "seed", "batch_size",
                   "max_tokens", "max_lines", "encoding")


def analyze_to_folder(model, tokenizer, source: Path, out: Path, model_name: str, quiet: bool = False,
                      protect=contextlib.nullcontext, **options) -> Path:
    """`analyze` then `write_outputs` (inside `protect()`), with the settings recorded in the JSON; returns the
    JSON's path."""
    if options.get("split") is None:
        options["split"] = tokenizer.word_split
    results = analyze(model, tokenizer, Path(source), quiet=quiet, **options)
    defaults = {item.name: item.default for item in dataclasses.fields(AnalyzeOptions)}
    settings = {"split": split_name(options["split"]),
                **{name: options.get(name, defaults[name]) for name in ANALYZE_OPTIONS}}
    settings = {"model": model_name, "input": str(source), **settings,
                "reference": "Ethayarajh (2019), How Contextual are Contextualized Word Representations?, EMNLP"}
    title = f"How contextual is each layer? {model_name} on {Path(source).name}"
    with protect():
        return write_outputs({**settings, **results}, Path(out), title=title)


@contextlib.contextmanager
def _written_whole(guard: InterruptGuard):
    """The outputs are written whole: a signal meanwhile is raised once they are, marked so that `main` says so."""
    try:
        with guard.deferred():
            yield
    except Interrupted as stop:
        stop.after_writing = True
        raise


def write_outputs(results: dict, out: Path, title: str) -> Path:
    """contextuality.json and contextuality.png in `out`, each written under a temporary name and renamed. A failed
    write (a full disk) is a `RunFailed` naming the folder."""
    json_path, plot_path = out / JSON_NAME, out / PLOT_NAME
    tmp_plot = out / (PLOT_NAME + ".tmp.png")
    tmp_json = out / (JSON_NAME + ".tmp")
    try:
        with writing(out, "--output_dir"):
            out.mkdir(parents=True, exist_ok=True)
            plot(results, tmp_plot, title)
            tmp_json.write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
            os.replace(tmp_plot, plot_path)
            os.replace(tmp_json, json_path)
    finally:
        for leftover in (tmp_plot, tmp_json):
            leftover.unlink(missing_ok=True)
    logger.info("self-similarity per layer %s, anisotropy %s, intra-sentence %s, MEV %s",
                _short(results["self_similarity"]), _short(results["anisotropy"]),
                _short(results["intra_sentence_similarity"]), _short(results["max_explainable_variance"]))
    logger.info("wrote %s and %s", json_path, plot_path)
    return json_path


def _short(values: list) -> str:
    return "[" + ", ".join("nan" if v is None else f"{v:.3f}" for v in values) + "]"
