"""The third view: how contextual is each layer, on a text the visitor pastes or uploads. The measures and the
figure are `elmo-analyze`'s own (`elmo_hf.tools.analysis`: self-similarity, intra-sentence similarity,
maximum explainable variance, the anisotropy baseline), on the text cut to the corpus limits."""

from __future__ import annotations

import html
import tempfile
from pathlib import Path

from PIL import Image

from ..analysis import AnalysisError, analyze
from .figures import analysis_figure
from .session import AppInputError, AppSession, split_sentences

# The rows of the page's table: the per-layer lists of `analyze`'s results, with their names in the page.
MEASURES = {
    "self_similarity": "self-similarity (same word, other contexts)",
    "self_similarity_adjusted": "self-similarity minus anisotropy",
    "intra_sentence_similarity": "intra-sentence similarity",
    "max_explainable_variance": "variance explained by a static vector (MEV)",
    "anisotropy": "anisotropy (random pairs of words)",
}


def contextuality(session: AppSession, text: str, split: str, min_count: int = 2, max_words: int = 200,
                  ) -> tuple[dict, Image.Image, list[str]]:
    """`analysis.analyze` on `text` (one sentence per line, within the corpus limits): its results, its figure and
    the notes on what the limits left out. `AnalysisError`s (no word occurs `min_count` times ...) become
    `AppInputError`s."""
    limits = session.limits
    if int(min_count) < 2:
        raise AppInputError(f"the minimum count must be at least 2 (self-similarity needs two occurrences), "
                            f"got {min_count}")
    sentences = split_sentences(text, split, max_chars=limits.max_corpus_chars,
                                max_sentences=limits.max_corpus_sentences, max_words=limits.max_words,
                                what="the text")
    with tempfile.TemporaryDirectory(prefix="elmo-app-") as folder:
        corpus = Path(folder) / "text.txt"
        corpus.write_text("\n".join(sentences.lines) + "\n", encoding="utf-8")
        try:
            with session.lock:
                results = analyze(session.model, session.tokenizer, corpus, split=split, min_count=int(min_count),
                                  max_words=int(max_words), max_tokens=limits.max_words, quiet=True)
        except AnalysisError as error:
            raise AppInputError(str(error).replace(str(corpus), "the text")) from error
        title = (f"How contextual is each layer? {session.name}, {results['sentences']} sentences, "
                 f"{results['words_analysed']} words analysed")
        image = analysis_figure(results, title, Path(folder))
    return results, image, sentences.notes


def contextuality_html(results: dict) -> str:
    """The per-layer numbers of the figure, one row per measure."""
    layers = results["layers"]
    head = "".join(f"<th>layer {k}</th>" for k in layers)
    rows = []
    for key, name in MEASURES.items():
        cells = "".join("<td>n/a</td>" if v is None else f"<td data-measure='{key}' data-layer='{k}'>{v:.4f}</td>"
                        for k, v in zip(layers, results[key]))
        rows.append(f"<tr><th>{html.escape(name)}</th>{cells}</tr>")
    words = ", ".join(html.escape(w) for w in list(results["words"])[:20])
    return (f"<table class='elmo-contextuality'><thead><tr><th>measure</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"
            f"<p>{results['sentences']} sentences, {results['tokens']} words, {results['word_types']} word types; "
            f"self-similarity and MEV over the {results['words_analysed']} words that occur often enough: {words}"
            f"{' ...' if results['words_analysed'] > 20 else ''}</p>")
