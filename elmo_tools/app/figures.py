"""The app's pictures, drawn with matplotlib's object API (no pyplot state, so page requests may draw at the same
time) and returned as PIL images. Labels are ASCII (S1, S2 ...), so that no CJK font is needed: the words
themselves are shown in the page's text."""

from __future__ import annotations

import io
import threading
from pathlib import Path

from matplotlib.figure import Figure
from PIL import Image

from ..analysis import plot
from .similarity import SimilarityResult, layer_name

_PYPLOT_LOCK = threading.Lock()  # analysis.plot draws through pyplot, whose state is global


def to_image(fig: Figure) -> Image.Image:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    buffer.seek(0)
    image = Image.open(buffer)
    image.load()
    return image


def _colours(result: SimilarityResult) -> list:
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return [palette(o.sentence % 10) for o in result.occurrences]


def similarity_figure(result: SimilarityResult) -> Image.Image:
    """Top row: per layer, the heat map of the cosines of the word's occurrences. Bottom row: per layer, the
    occurrences on their first two principal components, coloured by sentence."""
    layers, n = result.cosine.shape[0], len(result.occurrences)
    labels = [o.label for o in result.occurrences]
    fig = Figure(figsize=(3.6 * layers + 0.8, 7.2))
    axes = fig.subplots(2, layers, squeeze=False)
    colours = _colours(result)
    image = None
    for layer in range(layers):
        ax = axes[0, layer]
        image = ax.imshow(result.cosine[layer].numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(n), labels, rotation=90 if n > 6 else 0, fontsize=8)
        ax.set_yticks(range(n), labels, fontsize=8)
        ax.set_title(layer_name(layer), fontsize=10)
        if n <= 8:
            for i in range(n):
                for j in range(n):
                    value = float(result.cosine[layer, i, j])
                    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                            color="white" if abs(value) > 0.6 else "black")
        _projection(axes[1, layer], result, layer, labels, colours)
    fig.colorbar(image, ax=axes[0, :].tolist(), shrink=0.8, label="cosine")
    word = f"'{result.word}'" if result.word.isascii() else "the word"  # the default font has no CJK glyphs
    fig.suptitle(f"{word} in {len({o.sentence for o in result.occurrences})} sentences: top, the cosine of its "
                 "occurrences; bottom, its occurrences on their first two principal components", fontsize=10)
    return to_image(fig)


def _projection(ax, result: SimilarityResult, layer: int, labels: list[str], colours: list) -> None:
    points = result.projection[layer].numpy()
    explained = result.explained[layer].tolist()
    ax.scatter(points[:, 0], points[:, 1], c=colours, s=60, edgecolors="black", linewidths=0.5)
    places: dict[tuple, list[str]] = {}  # points that coincide (layer 0) get one label naming them all
    scale = max(float(abs(points).max()), 1e-12)
    for (x, y), label in zip(points, labels):
        places.setdefault((round(x / scale, 3), round(y / scale, 3)), []).append(label)
    for (x, y), names in places.items():
        text = ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:6])} ..."
        ax.annotate(text, (x * scale, y * scale), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if sum(explained) == 0:
        ax.set_title("one point: every occurrence has the same vector", fontsize=8)
    else:
        ax.set_title(f"PC1 {explained[0]:.0%}, PC2 {explained[1]:.0%} of the variance", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.margins(0.25)


def analysis_figure(results: dict, title: str, folder: Path) -> Image.Image:
    """`elmo-analyze`'s own figure (`analysis.plot`), drawn into `folder` and read back."""
    path = Path(folder) / "contextuality.png"
    with _PYPLOT_LOCK:
        plot(results, path, title)
    image = Image.open(path)
    image.load()
    return image
