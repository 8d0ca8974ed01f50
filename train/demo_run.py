"""The main job, `elmo-demo`: train a small ELMo, reload it, and show what contextual vectors are for.

    elmo-demo                              # generated corpus, a few minutes on 2 CPU cores
    elmo-demo --train_file my_corpus.txt   # your own corpus (one sentence per line)
    elmo-demo --language zh                # the same on a generated Chinese corpus, per character

1. Writes a generated corpus in which "bank", "bat", "plant" and "spring" occur in two senses each
   (`train/sense_corpus.py`), unless `--train_file` is given. With `--language zh`, a Chinese corpus in which
   行, 长, 花, 打, 还, 好, 觉 and 乐 do (`train/sense_corpus_zh.py`: 银行 háng "bank" / 行走 xíng "walk", ...).
2. Pretrains a biLM on it with `elmo_hf.train.pretrain_run.train` (the same code as any pretraining run).
3. Reloads the result with `load_elmo` (the feature model, as `AutoModel` loads it), embeds held-out sentences,
   and scores how well the vectors of each ambiguous word separate its senses: leave-one-out nearest-centroid
   accuracy, for the context-free layer 0 (which gives every occurrence of a word the same vector, so it cannot
   beat chance) and for the contextual biLSTM layers.
4. Measures how contextual each layer is on held-out text (`elmo-analyze`, `tools/analysis.py`:
   self-similarity, intra-sentence similarity and maximum explainable variance per layer, Ethayarajh 2019).
5. Writes `sense_scores.json`, the plot `senses.png`, `contextuality.json` and its plot `contextuality.png`, and
   says where they are.

Ctrl-C (SIGINT) or SIGTERM ends the demo with one line saying what was kept and how to go on, exit status 130/143:
during pretraining a checkpoint of the step reached is kept (as in `elmo-pretrain`); the same command with
`--resume_from_checkpoint latest` continues from it, or, once the model is trained, only scores it again.

The model's tokenizer splits raw text with the default rule, `punctuation` (`tokenization.split_words`); the
generated corpus is already tokenized (spaces around punctuation), so both rules give it the same words. The
same rule makes every Chinese ideograph a token of its own, so the Chinese model is trained per character.

The Chinese plot names the characters with a CJK font when matplotlib has one (Noto Sans CJK, Source Han Sans,
WenQuanYi, SimHei, ...: any installed font that has the glyphs), and in pinyin with the sense otherwise
(`háng (bank)` / `xíng (walk)`), so it never shows missing-glyph boxes. Its options are `train/demo_args.py`.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import matplotlib
import torch
from matplotlib import font_manager
from matplotlib.font_manager import FontProperties
from matplotlib.ft2font import FT2Font, LoadFlags

from elmo_hf.modeling_elmo import ElmoConfig
from elmo_hf.tools.analysis import analyze_to_folder
from elmo_hf.tools.core.errors import InputError, writing
from elmo_hf.tools.core.interrupts import Interrupted, InterruptGuard
from elmo_hf.tools.core.output_folders import run_lock
from elmo_hf.tools.core.output_paths import check_writable_folder
from elmo_hf.tools.core.text_files import check_decodes, resolve_files
from elmo_hf.tools.loading import load_elmo

from . import sense_corpus, sense_corpus_zh
from .checkpoints import RESUME_OPTION, interrupted_message
from .demo_args import DemoArguments
from .pretrain_args import PretrainArguments
from .pretrain_run import train

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

logger = logging.getLogger("elmo-demo")

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


def plot(vectors: dict, scores: dict, path: Path, language: str = "en") -> None:
    """One panel per word: its contextual vectors in held-out sentences (first two principal components),
    coloured by sense. Layer 0 gives all occurrences one and the same vector, so it has nothing to plot.

    Chinese characters are drawn with a CJK font when one is installed, else named in pinyin (`_labels`)."""


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

        logger.info("drawing the Chinese labels with %s", font_file)
        return (*cjk_names, FontProperties(fname=font_file))
    logger.info("no installed font draws the Chinese characters: the plot names them in pinyin (a CJK font shows "
                "them: e.g. apt-get install fonts-noto-cjk, then remove matplotlib's font cache)")
    return ({w: sense_corpus_zh.word_label(w, cjk=False) for w in vectors},
            {(w, s): sense_corpus_zh.sense_label(w, s, cjk=False) for w in vectors for s in vectors[w]["labels"]},
            None)


# Fonts with Chinese glyphs, tried first; any other installed font that has every glyph needed also does.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC", "Noto Sans CJK JP",
             "Noto Sans CJK TC", "AR PL UMing CN", "AR PL UKai CN", "Droid Sans Fallback")


def find_font_for(text: str) -> str | None:
    """The file of an installed font (matplotlib's list) that draws every character of `text`, or None. A font that
    maps a character to an empty glyph does not draw it (WenQuanYi Micro Hei has one for the pinyin ǎ)."""
    needed = {ord(c) for c in text if not c.isspace()}
    entries = sorted(font_manager.fontManager.ttflist,
                     key=lambda f: CJK_FONTS.index(f.name) if f.name in CJK_FONTS else len(CJK_FONTS))
    for entry in entries:
        if entry.name.startswith("Last Resort"):  # matplotlib's fallback font: its "glyphs" are the missing-glyph boxes
            continue
        try:
            font = FT2Font(entry.fname)
            if needed <= font.get_charmap().keys() and all(_draws(font, code) for code in needed):
                return entry.fname
        except (OSError, RuntimeError, ValueError):  # an unreadable font file is skipped, not fatal
            continue
    return None


def _draws(font: FT2Font, code: int) -> bool:
    """Whether the font's glyph for the character `code` has an outline (an empty one draws nothing)."""
    font.load_char(code, flags=LoadFlags.NO_HINTING)
    vertices, _ = font.get_path()
    return len(vertices) > 0


CORPORA = {"en": sense_corpus, "zh": sense_corpus_zh}


def run(args: DemoArguments, guard: InterruptGuard | None = None) -> None:
    """`elmo-demo` with its options parsed: train (unless the model of these settings is there), score and plot. An
    interruption carries the line saying what was kept (`report`); a bad input found once the folder was made (a
    corpus too small for a batch) leaves no half-made folder."""
    guard = guard or InterruptGuard()
    outputs = DemoOutputs(args)
    existed = outputs.out.exists()
    try:
        with run_lock(outputs.out, "elmo-demo"):
            run_demo(args, outputs, guard)
    except Interrupted as stop:
        stop.report = outputs.interrupted_line(stop)  # pretraining's own line names its command, not the demo's
        raise
    except InputError:
        if not existed and not outputs.model_finished():
            shutil.rmtree(outputs.out, ignore_errors=True)
        raise


class DemoOutputs:
    """Where the demo writes, and what it has written whole so far: what an interrupt's line says was kept."""

    def __init__(self, args: DemoArguments):
        default = "outputs/demo" if args.language == "en" else f"outputs/demo_{args.language}"
        self.out = Path(args.output_dir or default)
        self.model_dir = self.out / "model"
        self.settings_file = self.out / "demo_settings.json"
        self.max_steps = args.max_steps
        self.settings = model_settings(args)
        self.written: list[Path] = []

    def model_finished(self) -> bool:
        """Whether the model folder holds the model of a finished pretraining (its train_results.json is written
        last, with the signals held back, so the folder is then whole)."""
        return (self.model_dir / "train_results.json").is_file()

    def saved_settings(self) -> dict | None:
        try:
            return json.loads(self.settings_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def model_trained(self) -> bool:
        """Whether the model folder holds the finished model of these settings (`model_settings`: written before
        its pretraining starts, whose train_results.json is written last)."""
        return self.model_finished() and self.saved_settings() == self.settings

    def interrupted_line(self, stop: Interrupted) -> str:
        if not self.model_trained():  # pretraining's own line: the checkpoint kept, or nothing
            return interrupted_message(stop, self.model_dir, finished=False)
        kept = "".join(f", {path}" for path in self.written)
        return (f"interrupted ({stop.name}) after pretraining: kept the model folder {self.model_dir}{kept}; run the "
                f"same command with {RESUME_OPTION} to score the model without training it again")


def _stop_if_signalled(guard: InterruptGuard) -> None:
    """A signal whose `Interrupted` some library caught and went past (a bare `except:`) is answered here, between
    two stages."""
    if guard.received:
        raise Interrupted(guard.received)


def model_settings(args: DemoArguments) -> dict:
    """The options that make the demo's model what it is: a finished model of the same ones is scored again, not
    trained again."""
    files = {name: [str(Path(f).resolve()) for f in getattr(args, name)] if getattr(args, name) else None
             for name in ("train_file", "validation_file")}
    return {"language": args.language, **files, "max_steps": args.max_steps, "seed": args.seed,
            "per_device_batch_size": args.per_device_batch_size, "unroll_steps": args.unroll_steps,
            "num_sentences": None if args.train_file else args.num_sentences}


def check_before_writing(args: DemoArguments, outputs: DemoOutputs) -> None:
    """What is refused before anything is written: files that are not there, and a finished model of other settings
    in the output folder (kept unless --overwrite_output_dir: a second `make demo` must not cost the first)."""
    for name in ("train_file", "validation_file"):
        if getattr(args, name):  # one line naming the pattern that matches nothing, a folder, a NUL or bad byte
            check_decodes(resolve_files(getattr(args, name)))
    if args.output_dir is not None:  # the default (outputs/demo) is made with its parent; a path given must exist
        check_writable_folder(outputs.out, "--output_dir")  # up to its parent: a typo makes no folders
    if outputs.model_finished() and not outputs.model_trained() and not args.overwrite_output_dir:
        saved = outputs.saved_settings() or {}
        changed = sorted(k for k in outputs.settings if saved.get(k) != outputs.settings[k])
        raise InputError(
            f"{outputs.model_dir} holds a model trained with other settings ({', '.join(changed)}): give another "
            "--output_dir, or --overwrite_output_dir true to train it anew")


def run_demo(args: DemoArguments, outputs: DemoOutputs, guard: InterruptGuard) -> None:
    """The corpus, pretraining (or, where the model of these settings is trained, none), the sense scores and
    plot, the contextuality analysis. Every file is written whole: a signal waits for the end of a write
    (`guard.deferred()`)."""
    out, model_dir = outputs.out, outputs.model_dir
    check_before_writing(args, outputs)
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
    trained = outputs.model_trained() and not args.overwrite_output_dir
    train_files, valid_files = write_corpus(args, out, guard)
    if trained:
        logger.info("the model in %s was trained with these settings (%d steps): scoring it again "
                    "(--overwrite_output_dir true trains it anew)", model_dir, args.max_steps)
    else:
        with guard.deferred(), writing(out):  # a model there is no longer finished; the settings are the next's
            (model_dir / "train_results.json").unlink(missing_ok=True)  # (written last when it is)
            outputs.settings_file.write_text(json.dumps(outputs.settings, indent=2) + "\n", encoding="utf-8")
        pretrain(args, train_files, valid_files, model_dir, guard)
    _stop_if_signalled(guard)
    scores, model, tokenizer = score_and_plot(args, outputs, guard)
    _stop_if_signalled(guard)

    analysis_file = Path(valid_files[0]) if valid_files else Path(train_files[0])
    contextuality = json.loads(analyze_to_folder(
        model, tokenizer, analysis_file, out, model_name="the demo model", split="punctuation",
        max_lines=args.analysis_lines, seed=args.seed, quiet=args.disable_tqdm,
    ).read_text())
    outputs.written += [out / "contextuality.json", out / "contextuality.png"]
    _stop_if_signalled(guard)
    report(scores, contextuality, outputs)


def write_corpus(args: DemoArguments, out: Path, guard: InterruptGuard) -> tuple[list[str], list[str] | None]:
    """The training and validation files: the user's, or a generated corpus (the same again for the same seed, so
    a resumed demo trains on what it started with)."""
    if args.train_file is not None:
        return args.train_file, args.validation_file
    corpus = out / "corpus"
    generate = CORPORA[args.language].generate_corpus
    train_text = "\n".join(generate(args.num_sentences, seed=args.seed)) + "\n"
    valid_text = "\n".join(generate(1000, seed=args.seed + 1000)) + "\n"
    with guard.deferred(), writing(corpus):
        corpus.mkdir(exist_ok=True)
        (corpus / "train.txt").write_text(train_text, encoding="utf-8")
        (corpus / "valid.txt").write_text(valid_text, encoding="utf-8")
    logger.info("generated a corpus of %d sentences in %s", args.num_sentences, corpus)
    return [str(corpus / "train.txt")], [str(corpus / "valid.txt")]


def pretrain(args: DemoArguments, train_files: list[str], valid_files: list[str] | None, model_dir: Path,
             guard: InterruptGuard) -> None:
    config_file = model_dir.parent / "demo_config.json"
    with guard.deferred(), writing(config_file):
        ElmoConfig(**DEMO_CONFIG).to_json_file(config_file)
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
        resume_from_checkpoint=args.resume_from_checkpoint,
        report_to="none",
        disable_tqdm=args.disable_tqdm,
        use_cpu=True,
    ), guard)


def score_and_plot(args: DemoArguments, outputs: DemoOutputs, guard: InterruptGuard) -> tuple:
    """Reload the model as `AutoModel` does, score the senses of the ambiguous words, write the scores and plot;
    returns (scores, model, tokenizer)."""
    out, model_dir = outputs.out, outputs.model_dir
    model, tokenizer = load_elmo(model_dir)  # the feature model, from the folder just written
    probes = CORPORA[args.language].generate_probes(args.probes_per_sense, seed=args.seed + 1)
    scores, vectors = sense_scores(model, tokenizer, probes)
    results_file = model_dir / "eval_results.json"
    scores["validation"] = json.loads(results_file.read_text()) if results_file.exists() else {}
    with guard.deferred(), writing(out):
        (out / "sense_scores.json").write_text(json.dumps(scores, indent=2, ensure_ascii=False), encoding="utf-8")
        plot(vectors, scores, out / "senses.png", language=args.language)
    outputs.written += [out / "sense_scores.json", out / "senses.png"]
    return scores, model, tokenizer


def report(scores: dict, contextuality: dict, outputs: DemoOutputs) -> None:
    out, model_dir = outputs.out, outputs.model_dir
    summary, eval_results = scores["summary"], scores["validation"]
    logger.info("sense accuracy of ambiguous words: contextual layers %.2f, context-free layer 0 %.2f (chance 0.50)",
                summary["contextual_accuracy"], summary["layer0_accuracy"])
    for word, result in scores["words"].items():
        logger.info("  %-7s contextual %.2f   layer 0 %.2f", word, result["contextual_accuracy"],
                    result["layer0_accuracy"])
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


def _rounded(values: list) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"
