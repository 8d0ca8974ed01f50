"""The main job: train a small ELMo, reload it, and show what contextual vectors are for.

    python -m train.demo                              # generated corpus, a few minutes on 2 CPU cores
    python -m train.demo --train_file my_corpus.txt   # your own corpus (one sentence per line)
    python -m train.demo --language zh                # the same on a generated Chinese corpus, per character

1. Writes a generated corpus in which "bank", "bat", "plant" and "spring" occur in two senses each
   (`train/sense_corpus.py`), unless `--train_file` is given. With `--language zh`, a Chinese corpus in which
   行, 长, 花, 打, 还, 好, 觉 and 乐 do (`train/sense_corpus_zh.py`: 银行 háng "bank" / 行走 xíng "walk", ...).
2. Pretrains a biLM on it with `train.pretrain` (the same code as any pretraining run).
3. Reloads the result with `load_elmo` (the feature model, as `AutoModel` loads it), embeds held-out sentences,
   and scores how well the vectors of each ambiguous word separate its senses: leave-one-out nearest-centroid
   accuracy, for the context-free layer 0 (which gives every occurrence of a word the same vector, so it cannot
   beat chance) and for the contextual biLSTM layers.
4. Measures how contextual each layer is on held-out text (`elmo-analyze`, `modeling_elmo/tools/analysis.py`:
   self-similarity, intra-sentence similarity and maximum explainable variance per layer, Ethayarajh 2019).
5. Writes `sense_scores.json`, the plot `senses.png`, `contextuality.json` and its plot `contextuality.png`, and
   says where they are.

The model's tokenizer splits raw text with the default rule, `punctuation` (`tokenization.split_words`); the
generated corpus is already tokenized (spaces around punctuation), so both rules give it the same words. The
same rule makes every Chinese ideograph a token of its own, so the Chinese model is trained per character.

The Chinese plot names the characters with a CJK font when matplotlib has one (Noto Sans CJK, Source Han Sans,
WenQuanYi, SimHei, ...: any installed font that has the glyphs), and in pinyin with the sense otherwise
(`háng (bank)` / `xíng (walk)`), so it never shows missing-glyph boxes.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import sense_corpus, sense_corpus_zh
from .arguments import parse_dataclass
from .pretrain import PretrainArguments, train

# torch, transformers and the model are imported where they are used, so that `--help` answers without them.
if TYPE_CHECKING:
    import torch

logger = logging.getLogger("train.demo")

# Small enough to train in a few minutes on 2 CPU cores, large enough to learn the senses.
DEMO_CONFIG = dict(
    cell_size=256,
    projection_dim=64,
    num_layers=2,
    num_highway_layers=1,
    char_embedding_dim=16,
    char_cnn_filters=[[1, 32], [2, 32], [3, 64], [4, 64], [5, 64]],
    dropout=0.1,
)


@dataclass
class DemoArguments:
    output_dir: str | None = field(default=None, metadata={
        "help": "Where the corpus, model and plot go (default outputs/demo, outputs/demo_zh for --language zh)."})
    language: str = field(default="en", metadata={
        "help": "Language of the generated corpus: en (bank, bat, plant, spring) or zh (行, 长, 花, 打, 还, 好, 觉, 乐).",
        "choices": ["en", "zh"]})
    train_file: list[str] | None = field(default=None, metadata={"help": "Your corpus instead of the generated one."})
    validation_file: list[str] | None = field(default=None)
    max_steps: int = field(default=500)
    per_device_batch_size: int = field(default=32)
    unroll_steps: int = field(default=20)
    num_sentences: int = field(default=20000, metadata={"help": "Size of the generated corpus."})
    probes_per_sense: int = field(default=40)
    analysis_lines: int = field(default=2000, metadata={"help": "Held-out lines for the contextuality analysis."})
    seed: int = field(default=0)
    disable_tqdm: bool = field(default=False)


def sense_scores(model, tokenizer, probes) -> dict:
    """Per word: leave-one-out nearest-centroid sense accuracy of layer 0 and of the contextual layers."""
    import torch

    model.eval()
    results: dict[str, dict] = {}
    vectors: dict[str, dict] = {}
    for word in dict.fromkeys(w for w, _, _ in probes):
        rows = [(sense, sentence) for w, sense, sentence in probes if w == word]
        batch = tokenizer([s for _, s in rows], padding=True, return_tensors="pt")  # raw text, the tokenizer's rule
        with torch.no_grad():
            layers = model(**batch, output_hidden_states=True).hidden_states
        static, contextual = [], []
        for i, (_, sentence) in enumerate(rows):
            position = tokenizer.tokenize(sentence).index(word) + 1  # +1 for <S>
            static.append(layers[0][i, position])
            contextual.append(torch.stack([layer[i, position] for layer in layers[1:]]).mean(0))
        labels = [sense for sense, _ in rows]
        results[word] = {
            "layer0_accuracy": _loo_centroid_accuracy(torch.stack(static), labels),
            "contextual_accuracy": _loo_centroid_accuracy(torch.stack(contextual), labels),
            "occurrences": len(rows),
        }
        vectors[word] = {"static": torch.stack(static), "contextual": torch.stack(contextual), "labels": labels}
    summary = {
        "layer0_accuracy": sum(r["layer0_accuracy"] for r in results.values()) / len(results),
        "contextual_accuracy": sum(r["contextual_accuracy"] for r in results.values()) / len(results),
    }
    return {"summary": summary, "words": results}, vectors


def _loo_centroid_accuracy(x: torch.Tensor, labels: list[str]) -> float:
    """Each vector is assigned the sense whose centroid (without itself) is nearest by cosine; ties score 1/2."""
    import torch

    x = torch.nn.functional.normalize(x.double(), dim=-1)
    senses = sorted(set(labels))
    index = torch.tensor([senses.index(s) for s in labels])
    sums = torch.stack([x[index == k].sum(0) for k in range(len(senses))])
    counts = torch.bincount(index, minlength=len(senses)).double()
    score = 0.0
    for i in range(len(labels)):
        own = index[i]
        centroids = sums.clone()
        centroids[own] -= x[i]
        n = counts.clone()
        n[own] -= 1
        sims = torch.nn.functional.cosine_similarity(x[i].unsqueeze(0), centroids / n.unsqueeze(1), dim=-1)
        best = sims.max()
        winners = (sims >= best - 1e-9).nonzero().flatten().tolist()
        score += (1.0 / len(winners)) if int(own) in winners else 0.0
    return score / len(labels)


def plot(vectors: dict, scores: dict, path: Path, language: str = "en") -> None:
    """One panel per word: its contextual vectors in held-out sentences (first two principal components),
    coloured by sense. Layer 0 gives all occurrences one and the same vector, so it has nothing to plot.

    Chinese characters are drawn with a CJK font when one is installed, else named in pinyin (`_labels`)."""
    import matplotlib
    import torch

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    words = list(vectors)
    word_names, sense_names, font = _labels(vectors, language)
    title_font = {} if font is None else {"fontproperties": font}
    legend_font = {"fontsize": 7} if font is None else {"prop": font.copy()}
    if font is not None:
        legend_font["prop"].set_size(7)
    columns = min(4, len(words))
    rows = math.ceil(len(words) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 4.4 * rows), squeeze=False)
    for ax in axes.flat[len(words):]:
        ax.set_visible(False)
    for ax, word in zip(axes.flat, words):
        data = vectors[word]
        centred = data["contextual"].double() - data["contextual"].double().mean(0)
        _, _, v = torch.linalg.svd(centred, full_matrices=False)
        points = centred @ v[:2].T
        for sense, marker in zip(sorted(set(data["labels"])), ("o", "^")):
            chosen = [i for i, s in enumerate(data["labels"]) if s == sense]
            ax.scatter(points[chosen, 0], points[chosen, 1], marker=marker, alpha=0.7,
                       label=sense_names[word, sense])
        result = scores["words"][word]
        distinct = len(torch.unique(data["static"], dim=0))
        ax.set_title(f"{word_names[word]}: sense accuracy {result['contextual_accuracy']:.2f}\n"
                     f"layer 0: {result['layer0_accuracy']:.2f} ({distinct} distinct vector for "
                     f"{len(data['labels'])} occurrences)", fontsize=9, **title_font)
        ax.legend(loc="best", **legend_font)
        ax.set_xticks([])
        ax.set_yticks([])
    kind = "characters" if language == "zh" else "words"
    fig.suptitle(f"Contextual ELMo vectors of ambiguous {kind} in held-out sentences (first two principal components)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _labels(vectors: dict, language: str):
    """Panel and legend names per word and per (word, sense), and the font to draw them with (None: default)."""
    if language != "zh":
        return ({w: w for w in vectors}, {(w, s): f"{w} ({s})" for w in vectors for s in vectors[w]["labels"]}, None)
    cjk_names = ({w: sense_corpus_zh.word_label(w, cjk=True) for w in vectors},
                 {(w, s): sense_corpus_zh.sense_label(w, s, cjk=True) for w in vectors for s in vectors[w]["labels"]})
    text = "".join(cjk_names[0].values()) + "".join(cjk_names[1].values()) + "0123456789.:()"
    font_file = find_font_for(text)
    if font_file is not None:
        from matplotlib.font_manager import FontProperties

        logger.info("drawing the Chinese labels with %s", font_file)
        return (*cjk_names, FontProperties(fname=font_file))
    logger.info("no installed font has the Chinese characters: the plot names them in pinyin")
    return ({w: sense_corpus_zh.word_label(w, cjk=False) for w in vectors},
            {(w, s): sense_corpus_zh.sense_label(w, s, cjk=False) for w in vectors for s in vectors[w]["labels"]},
            None)


# Fonts with Chinese glyphs, tried first; any other installed font that has every glyph needed also does.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC", "Noto Sans CJK JP",
             "Noto Sans CJK TC", "AR PL UMing CN", "AR PL UKai CN", "Droid Sans Fallback")


def find_font_for(text: str) -> str | None:
    """The file of an installed font (matplotlib's list) that has a glyph for every character of `text`, or None."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    needed = {ord(c) for c in text if not c.isspace()}
    entries = sorted(font_manager.fontManager.ttflist,
                     key=lambda f: CJK_FONTS.index(f.name) if f.name in CJK_FONTS else len(CJK_FONTS))
    for entry in entries:
        if entry.name.startswith("Last Resort"):  # matplotlib's fallback font: its "glyphs" are the missing-glyph boxes
            continue
        try:
            charmap = FT2Font(entry.fname).get_charmap()
        except (OSError, RuntimeError, ValueError):  # an unreadable font file is skipped, not fatal
            continue
        if needed <= charmap.keys():
            return entry.fname
    return None


CORPORA = {"en": sense_corpus, "zh": sense_corpus_zh}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    for noisy in ("accelerate", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = parse_dataclass(DemoArguments, sys.argv[1:] if argv is None else argv, prog="elmo-demo",
                           description="Train a small ELMo and show what contextual vectors are for.")
    from modeling_elmo import ElmoConfig
    from modeling_elmo.tools.analysis import analyze_to_folder
    from modeling_elmo.tools.loading import load_elmo

    corpus_module = CORPORA[args.language]
    out = Path(args.output_dir or ("outputs/demo" if args.language == "en" else f"outputs/demo_{args.language}"))
    out.mkdir(parents=True, exist_ok=True)

    train_files, valid_files = args.train_file, args.validation_file
    if train_files is None:
        corpus = out / "corpus"
        corpus.mkdir(exist_ok=True)
        generate = corpus_module.generate_corpus
        (corpus / "train.txt").write_text("\n".join(generate(args.num_sentences, seed=args.seed)) + "\n",
                                          encoding="utf-8")
        (corpus / "valid.txt").write_text("\n".join(generate(1000, seed=args.seed + 1000)) + "\n", encoding="utf-8")
        train_files, valid_files = [str(corpus / "train.txt")], [str(corpus / "valid.txt")]
        logger.info("generated a corpus of %d sentences in %s", args.num_sentences, corpus)

    config_file = out / "demo_config.json"
    ElmoConfig(**DEMO_CONFIG).to_json_file(config_file)
    model_dir = out / "model"
    train(PretrainArguments(
        train_file=train_files,
        validation_file=valid_files,
        output_dir=str(model_dir),
        config_file=str(config_file),
        max_steps=args.max_steps,
        per_device_batch_size=args.per_device_batch_size,
        unroll_steps=args.unroll_steps,
        optimizer="adamw",
        learning_rate=3e-3,
        lr_scheduler_type="linear",
        warmup_steps=20,
        seed=args.seed,
        word_split="punctuation",  # the tokenizer's default rule, saved with the model
        logging_steps=25,
        overwrite_output_dir=True,
        report_to="none",
        disable_tqdm=args.disable_tqdm,
        use_cpu=True,
    ))

    model, tokenizer = load_elmo(model_dir)  # the feature model, from the folder just written
    probes = corpus_module.generate_probes(args.probes_per_sense, seed=args.seed + 1)
    scores, vectors = sense_scores(model, tokenizer, probes)
    eval_results = json.loads((model_dir / "eval_results.json").read_text()) if (model_dir / "eval_results.json").exists() else {}
    scores["validation"] = eval_results
    (out / "sense_scores.json").write_text(json.dumps(scores, indent=2, ensure_ascii=False), encoding="utf-8")
    plot(vectors, scores, out / "senses.png", language=args.language)
    analysis_file = Path(valid_files[0]) if valid_files else Path(train_files[0])
    contextuality = json.loads(analyze_to_folder(
        model, tokenizer, analysis_file, out, model_name="the demo model", split="punctuation",
        max_lines=args.analysis_lines, seed=args.seed, quiet=args.disable_tqdm,
    ).read_text())

    summary = scores["summary"]
    logger.info("sense accuracy of ambiguous words: contextual layers %.2f, context-free layer 0 %.2f (chance 0.50)",
                summary["contextual_accuracy"], summary["layer0_accuracy"])
    for word, result in scores["words"].items():
        logger.info("  %-7s contextual %.2f   layer 0 %.2f", word, result["contextual_accuracy"], result["layer0_accuracy"])
    if eval_results:
        logger.info("validation perplexity: forward %.1f, backward %.1f", eval_results["forward_perplexity"],
                    eval_results["backward_perplexity"])
    logger.info("how contextual is each layer (0 = characters): self-similarity %s, minus the anisotropy baseline "
                "%s, variance explained by a static vector %s", _rounded(contextuality["self_similarity"]),
                _rounded(contextuality["self_similarity_adjusted"]),
                _rounded(contextuality["max_explainable_variance"]))
    logger.info("outputs: model %s | scores %s | plots %s, %s | contextuality %s", model_dir.resolve(),
                (out / "sense_scores.json").resolve(), (out / "senses.png").resolve(),
                (out / "contextuality.png").resolve(), (out / "contextuality.json").resolve())
    return 0


def _rounded(values: list) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


if __name__ == "__main__":
    sys.exit(main())
