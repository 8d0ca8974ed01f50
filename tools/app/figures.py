"""The app's pictures, returned as PIL images. The similarity view's figure, drawn for every request, is drawn with
PIL itself (about 10 ms, where matplotlib took a second on a loaded 2-core machine: the figure was most of a
request's time, and the page answers visitors' requests in batches); the contextuality view's is `elmo-analyze`'s own
(matplotlib). Labels are ASCII (S1, S2 ...), so that no CJK font is needed: the words themselves are shown in the page's
text."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from ..analysis import plot
from .similarity import SimilarityResult, layer_name

_PYPLOT_LOCK = threading.Lock()  # analysis.plot draws through pyplot, whose state is global

# The similarity figure's layout, in pixels of the image returned (it is drawn at SCALE times the size and reduced:
# smooth edges and text).
SCALE = 2
PANEL = 360  # the width of one layer's column
MARGIN = 20  # left of the first column
COLOURBAR = 80  # right of the last column
HEIGHT = 720
HEAT = (70, 290)  # the top and bottom of the heat maps
SCATTER = (360, 690)  # the top and bottom of the projections' frames


@functools.lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size * SCALE)  # Pillow's own font (FreeType): the same on every machine


@functools.lru_cache(maxsize=1)
def _palettes() -> tuple[list, list]:
    """matplotlib's RdBu_r (256 steps, for cosines -1 to 1) and tab10 (the sentences' colours), as RGB triples."""
    from matplotlib import colormaps

    def rgb(colour) -> tuple[int, int, int]:
        return tuple(round(255 * c) for c in colour[:3])

    return ([rgb(colormaps["RdBu_r"](i / 255)) for i in range(256)], [rgb(colormaps["tab10"](i)) for i in range(10)])


def _cosine_colour(value: float) -> tuple[int, int, int]:
    return _palettes()[0][min(255, max(0, round((value + 1) / 2 * 255)))]


@functools.lru_cache(maxsize=4096)
def _text_mask(text: str, size: int, anchor: str, angle: int) -> tuple[Image.Image, tuple[int, int]]:
    """`text` rendered once as a mask (its ink white on black) and the offset of the mask's corner from the anchor
    point. Cached: a figure draws about a hundred labels and numbers, mostly the same from one request to the next
    (S1, 0.97, the layer names), and FreeType's rendering was half of a figure's time."""
    font = _font(size)
    if not angle:
        left, top, right, bottom = font.getbbox(text, anchor=anchor)
        mask = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
        ImageDraw.Draw(mask).text((-left, -top), text, font=font, anchor=anchor, fill=255)
        return mask, (left, top)
    left, top, right, bottom = font.getbbox(text)
    mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
    ImageDraw.Draw(mask).text((-left + 1, -top + 1), text, font=font, fill=255)
    mask = mask.rotate(angle, expand=True)
    w, h = mask.size
    return mask, (-{"l": 0, "m": w // 2, "r": w}[anchor[0]], -{"a": 0, "t": 0, "m": h // 2, "b": h, "d": h}[anchor[1]])


class _Canvas:
    """A PIL drawing in the figure's coordinates (pixels of the returned image), drawn at SCALE times the size."""

    def __init__(self, width: int, height: int):
        self.image = Image.new("RGB", (width * SCALE, height * SCALE), "white")
        self.draw = ImageDraw.Draw(self.image)

    def text(self, xy, text: str, size: int = 11, anchor: str = "la", fill="black", angle: int = 0) -> None:
        mask, (dx, dy) = _text_mask(text, size, anchor, angle)
        x, y = xy
        self.image.paste(fill, (round(x * SCALE) + dx, round(y * SCALE) + dy), mask)

    def rectangle(self, box, fill=None, outline=None, width: float = 1) -> None:
        self.draw.rectangle([round(v * SCALE) for v in box], fill=fill, outline=outline,
                            width=max(1, round(width * SCALE)))

    def circle(self, xy, radius: float, fill, outline="black") -> None:
        x, y = xy
        self.draw.ellipse([(x - radius) * SCALE, (y - radius) * SCALE, (x + radius) * SCALE, (y + radius) * SCALE],
                          fill=fill, outline=outline, width=SCALE)

    def result(self) -> Image.Image:
        return self.image.reduce(SCALE)


def similarity_figure(result: SimilarityResult) -> Image.Image:
    """Top row: per layer, the heat map of the cosines of the word's occurrences (the numbers in the cells up to 8
    occurrences). Bottom row: per layer, the occurrences on their first two principal components, coloured by
    sentence. A colour bar for the cosines on the right."""
    layers = result.cosine.shape[0]
    labels = [o.label for o in result.occurrences]
    canvas = _Canvas(MARGIN + PANEL * layers + COLOURBAR, HEIGHT)
    word = f"'{result.word}'" if result.word.isascii() else "the word"  # Pillow's font has no CJK glyphs
    canvas.text(((MARGIN + PANEL * layers) / 2, 14), f"{word} in {len({o.sentence for o in result.occurrences})} "
                "sentences: top, the cosine of its occurrences; bottom, its occurrences on their first two principal "
                "components", size=12, anchor="ma")
    _, tab10 = _palettes()
    colours = [tab10[o.sentence % 10] for o in result.occurrences]
    for layer in range(layers):
        left = MARGIN + PANEL * layer
        _heat_map(canvas, result.cosine[layer].tolist(), labels, layer)
        _projection(canvas, result, layer, labels, colours, left)
    _colour_bar(canvas, MARGIN + PANEL * layers + 10)
    return canvas.result()


def heat_map_cell(layer: int, n: int, i: int, j: int) -> tuple[float, float, float, float]:
    """The box (left, top, right, bottom, in pixels of the figure) of the cosine of occurrences i and j of `n` in
    the heat map of `layer`."""
    top, bottom = HEAT
    side = bottom - top
    x0 = MARGIN + PANEL * layer + (PANEL - side) / 2 + 10
    cell = side / n
    return x0 + j * cell, top + i * cell, x0 + (j + 1) * cell, top + (i + 1) * cell


def _heat_map(canvas: _Canvas, cosine: list[list[float]], labels: list[str], layer: int) -> None:
    n = len(labels)
    (x0, top, _, _), (_, _, right, bottom) = heat_map_cell(layer, n, 0, 0), heat_map_cell(layer, n, n - 1, n - 1)
    canvas.text(((x0 + right) / 2, top - 6), layer_name(layer), size=12, anchor="md")
    small = 8 if n > 8 else 10
    for i in range(n):
        for j in range(n):
            value = cosine[i][j]
            box = heat_map_cell(layer, n, i, j)
            canvas.rectangle(box, fill=_cosine_colour(value))
            if n <= 8:
                canvas.text(((box[0] + box[2]) / 2, (box[1] + box[3]) / 2), f"{value:.2f}", size=10, anchor="mm",
                            fill="white" if abs(value) > 0.6 else "black")
        left, top_i, right_i, bottom_i = heat_map_cell(layer, n, i, i)
        centre_x, centre_y = (left + right_i) / 2, (top_i + bottom_i) / 2
        canvas.text((x0 - 4, centre_y), labels[i], size=small, anchor="rm")
        canvas.text((centre_x, bottom + 4), labels[i], size=small, anchor="ma", angle=90 if n > 6 else 0)
    canvas.rectangle((x0, top, right, bottom), outline="black", width=0.5)


def _projection(canvas: _Canvas, result: SimilarityResult, layer: int, labels: list[str], colours: list,
                left: float) -> None:
    top, bottom = SCATTER
    frame = (left + 30, top, left + PANEL - 30, bottom)
    canvas.rectangle(frame, outline="black", width=0.5)
    explained = result.explained[layer].tolist()
    if sum(explained) == 0:
        title = "one point: every occurrence has the same vector"
    else:
        title = f"PC1 {explained[0]:.0%}, PC2 {explained[1]:.0%} of the variance"
    canvas.text(((frame[0] + frame[2]) / 2, top - 5), title, size=10, anchor="md")
    points = result.projection[layer].tolist()
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    scale = max(max(map(abs, xs + ys)), 1e-12)

    def spread(values: list[float], low: float, high: float, flip: bool) -> list[float]:
        lo, hi = min(values), max(values)
        span = (hi - lo) or scale  # one position (layer 0; or PC2 of two points): the middle
        pad = 0.25 * span  # matplotlib's margins(0.25)
        lo, hi = lo - pad, hi + pad
        out = [low + (v - lo) / (hi - lo) * (high - low) for v in values]
        return [low + high - v for v in out] if flip else out

    px = spread(xs, frame[0], frame[2], flip=False)
    py = spread(ys, frame[1], frame[3], flip=True)  # the image's y grows downwards
    places: dict[tuple, list[int]] = {}  # points that coincide (layer 0) get one label naming them all
    for k, (x, y) in enumerate(zip(xs, ys)):
        places.setdefault((round(x / scale, 3), round(y / scale, 3)), []).append(k)
    for members in places.values():
        for k in members:
            canvas.circle((px[k], py[k]), 5, fill=colours[k])
        names = [labels[k] for k in members]
        text = ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:6])} ..."
        canvas.text((px[members[0]] + 6, py[members[0]] - 6), text, size=9, anchor="ld")


def _colour_bar(canvas: _Canvas, left: float) -> None:
    top, bottom = HEAT
    steps = 64
    for k in range(steps):
        value = 1 - 2 * (k + 0.5) / steps
        y = top + (bottom - top) * k / steps
        canvas.rectangle((left, y, left + 14, y + (bottom - top) / steps + 0.5), fill=_cosine_colour(value))
    canvas.rectangle((left, top, left + 14, bottom), outline="black", width=0.5)
    for value in (1, 0.5, 0, -0.5, -1):
        y = top + (1 - value) / 2 * (bottom - top)
        canvas.rectangle((left + 14, y, left + 17, y), outline="black", width=0.5)
        canvas.text((left + 20, y), f"{value:g}", size=9, anchor="lm")
    canvas.text((left + 48, (top + bottom) / 2), "cosine", size=10, anchor="mm", angle=90)


def analysis_figure(results: dict, title: str, folder: Path) -> Image.Image:
    """`elmo-analyze`'s own figure (`analysis.plot`), drawn into `folder` and read back."""
    path = Path(folder) / "contextuality.png"
    with _PYPLOT_LOCK:
        plot(results, path, title)
    image = Image.open(path)
    image.load()
    return image
