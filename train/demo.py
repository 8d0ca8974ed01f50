"""The main job: train a small ELMo, reload it, and show what contextual vectors are for.

    python -m train.demo                              # generated corpus, a few minutes on 2 CPU cores
    python -m train.demo --train_file my_corpus.txt   # your own corpus (one sentence per line)

1. Writes a generated corpus in which "bank", "bat", "plant" and "spring" occur in two senses each
   (`train/sense_corpus.py`), unless `--train_file` is given.
2. Pretrains a biLM on it with `train.pretrain` (the same code as any pretraining run).
3. Reloads the result with `AutoModel.from_pretrained`, embeds held-out sentences, and scores how well the
   vectors of each ambiguous word separate its senses: leave-one-out nearest-centroid accuracy, for the
   context-free layer 0 (which gives every occurrence of a word the same vector, so it cannot beat chance)
   and for the contextual biLSTM layers.
4. Measures how contextual each layer is on held-out text (`elmo-analyze`, `modeling_elmo/analysis.py`:
   self-similarity, intra-sentence similarity and maximum explainable variance per layer, Ethayarajh 2019).
5. Writes `sense_scores.json`, the plot `senses.png`, `contextuality.json` and its plot `contextuality.png`, and
   says where they are.

The model's tokenizer splits raw text with the default rule, `punctuation` (`tokenization.split_words`); the
generated corpus is already tokenized (spaces around punctuation), so both rules give it the same words.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer, HfArgumentParser

from modeling_elmo import ElmoConfig
from modeling_elmo.analysis import analyze_to_folder

from .pretrain import PretrainArguments, train
from .sense_corpus import generate_corpus, generate_probes

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
    output_dir: str = field(default="outputs/demo", metadata={"help": "Where the corpus, model and plot go."})
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


def plot(vectors: dict, scores: dict, path: Path) -> None:
    """One panel per word: its contextual vectors in held-out sentences (first two principal components),
    coloured by sense. Layer 0 gives all occurrences one and the same vector, so it has nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    words = list(vectors)
    fig, axes = plt.subplots(1, len(words), figsize=(4.2 * len(words), 4.4))
    for ax, word in zip(axes, words):
        data = vectors[word]
        centred = data["contextual"].double() - data["contextual"].double().mean(0)
        _, _, v = torch.linalg.svd(centred, full_matrices=False)
        points = centred @ v[:2].T
        for sense, marker in zip(sorted(set(data["labels"])), ("o", "^")):
            chosen = [i for i, s in enumerate(data["labels"]) if s == sense]
            ax.scatter(points[chosen, 0], points[chosen, 1], marker=marker, alpha=0.7, label=f"{word} ({sense})")
        result = scores["words"][word]
        distinct = len(torch.unique(data["static"], dim=0))
        ax.set_title(f"{word}: sense accuracy {result['contextual_accuracy']:.2f}\n"
                     f"layer 0: {result['layer0_accuracy']:.2f} ({distinct} distinct vector for "
                     f"{len(data['labels'])} occurrences)", fontsize=9)
        ax.legend(fontsize=7, loc="best")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("Contextual ELMo vectors of ambiguous words in held-out sentences (first two principal components)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    for noisy in ("accelerate", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    (args,) = HfArgumentParser(DemoArguments).parse_args_into_dataclasses(args=argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    train_files, valid_files = args.train_file, args.validation_file
    if train_files is None:
        corpus = out / "corpus"
        corpus.mkdir(exist_ok=True)
        (corpus / "train.txt").write_text("\n".join(generate_corpus(args.num_sentences, seed=args.seed)) + "\n")
        (corpus / "valid.txt").write_text("\n".join(generate_corpus(1000, seed=args.seed + 1000)) + "\n")
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

    model = AutoModel.from_pretrained(model_dir)  # the feature model, from the folder just written
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    scores, vectors = sense_scores(model, tokenizer, generate_probes(args.probes_per_sense, seed=args.seed + 1))
    eval_results = json.loads((model_dir / "eval_results.json").read_text()) if (model_dir / "eval_results.json").exists() else {}
    scores["validation"] = eval_results
    (out / "sense_scores.json").write_text(json.dumps(scores, indent=2))
    plot(vectors, scores, out / "senses.png")
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
