"""What the app's views share: the loaded model (`AppSession`), the limits and checks of what a page may send, and
embedding sentences into per-layer vectors.

Every problem with a request is an `AppInputError` whose message is shown in the page as it is; the limits cap
long input (with a note saying what was used) so that no request can hold the model for long.
"""

from __future__ import annotations

import argparse
import html
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from elmo_hf.modeling_elmo.configuration_elmo import PRESETS
from elmo_hf.tokenization import WORD_SPLITTERS, check_word_split, split_words

from ..core.backend_registry import DEFAULT
from ..core.errors import InputError
from ..core.text_files import UndecodableText, check_decodes, checked_encoding
from ..export.backends import BackendError
from ..export.runtime_model import on_backend
from ..loading import ModelLoadError, load_elmo
from .examples import training_line

logger = logging.getLogger(__name__)

# The demo's model (`elmo-demo`, `make demo`), the default where it exists; else this preset, with random weights.
DEMO_MODEL = "outputs/demo/model"
FALLBACK_PRESET = "small"


class AppInputError(InputError):
    """A request the app cannot answer: one line for the page (empty text, a word not found, a binary file ...)."""


@dataclass(frozen=True)
class Limits:
    """How much one request may ask for. Longer input is cut to these (with a note), never refused for length."""

    max_chars: int = 2_000  # the sentences of the similarity view
    max_sentences: int = 20
    max_words: int = 60  # per sentence; longer sentences are cut
    max_occurrences: int = 20  # of the chosen word, in the similarity view
    max_corpus_chars: int = 50_000  # a corpus (neighbours, contextuality), pasted or uploaded
    max_corpus_sentences: int = 500
    max_upload_bytes: int = 1_000_000


@dataclass
class AppSession:
    """The model the page shows, with what the views need beside it. `lock`: one forward pass at a time (the token
    cache is not thread-safe, and the page serves several visitors)."""

    model: torch.nn.Module
    tokenizer: object
    name: str
    random_weights: bool = False
    limits: Limits = field(default_factory=Limits)
    lock: threading.Lock = field(default_factory=threading.Lock)
    corpus_cache: dict = field(default_factory=dict)  # the neighbours view's embedded corpora, newest last
    corpus_lock: threading.Lock = field(default_factory=threading.Lock)  # guards corpus_cache (views run side by side)

    @property
    def num_layers(self) -> int:
        """Layers shown: 0 (the character encoder) to L (the top biLSTM layer)."""
        return self.model.config.num_layers + 1

    @property
    def default_split(self) -> str:
        """The tokenizer's own word split when it is a registered name (a Chinese model trained on jieba words
        gets jieba), else `punctuation`."""
        split = getattr(self.tokenizer, "word_split", "punctuation")
        return split if isinstance(split, str) and split in WORD_SPLITTERS else "punctuation"


def default_model() -> str:
    """The demo's model where `make demo` wrote it, else the preset (random weights)."""
    return DEMO_MODEL if (Path(DEMO_MODEL) / "config.json").is_file() else FALLBACK_PRESET


def load_session(name: str, *, device: str | None = None, trust_remote_code: bool = False,
                 token_cache_size: int = 50_000, limits: Limits | None = None, backend: str = DEFAULT) -> AppSession:
    """Load `name` (a folder, a Hub id or a preset: `load_elmo`'s rules) for the app, with the token cache on, so
    that each distinct word runs through the character CNN once; on a `backend` that runs the ONNX graph
    ("onnxruntime", "openvino": `runtime_model.on_backend`), the graph computes the vectors instead. Raises
    `ModelLoadError` (one line)."""
    model, tokenizer = load_elmo(name, device=device, trust_remote_code=trust_remote_code)
    random_weights = name in PRESETS and not Path(name).exists()  # load_elmo's rule for a preset
    try:
        model = on_backend(model, backend, folder=name)  # the model itself on torch
    except BackendError as error:
        raise ModelLoadError(str(error)) from error
    if hasattr(model, "enable_token_cache"):  # a Hub model's own code may predate the cache
        model.enable_token_cache(token_cache_size)
    return AppSession(model, tokenizer, name, random_weights=random_weights, limits=limits or Limits())


def model_summary(session: AppSession) -> str:
    """The lines at the top of the page (HTML): which model and its size; a red warning for random weights."""
    config = session.model.config
    parameters = getattr(session.model, "parameter_count", 0) or sum(p.numel() for p in session.model.parameters())
    count = f"{parameters / 1e6:.1f} M" if parameters >= 1e6 else f"{parameters:,}"
    size = (f"{config.num_layers} biLSTM layers (+ layer 0, the character encoder), "
            f"{2 * config.projection_dim}-dimensional vectors, {count} parameters")
    name = html.escape(session.name)
    if session.random_weights:
        return ("<div class='elmo-random' style='border: 2px solid #b00020; background: #fdecee; color: #7a0016; "
                "padding: 8px 12px; border-radius: 6px'>⚠️ <b>RANDOM WEIGHTS</b>: <code>" + name + "</code> is a "
                "preset, not a trained model: the numbers below show how the page works, not what ELMo learns. "
                "Train one with <code>make demo</code>, or pass <code>--model FOLDER_OR_HUB_ID</code>. "
                f"{size}.</div>")
    trained = training_line(session.name, session.tokenizer)
    trained = f"<br>{html.escape(trained[0].upper() + trained[1:])}." if trained else ""
    return f"<div class='elmo-model'>Model: <code>{name}</code>, {size}.{trained}</div>"


# --------------------------------------------------------------------------------------------------
# Checking what a request sends
# --------------------------------------------------------------------------------------------------


def check_split(split: str) -> str:
    """`split` if it is a registered word split whose package is installed, else an `AppInputError`."""
    try:
        check_word_split(split, "the word split")
    except ValueError as error:  # WordSplitDependencyError is one too
        raise AppInputError(str(error)) from error
    return split


@dataclass
class Sentences:
    """Text cut into sentences (one per non-blank line) of words, with notes on what the limits left out."""

    words: list[list[str]]
    lines: list[str]
    notes: list[str] = field(default_factory=list)


def split_sentences(text: str | None, split: str, *, max_chars: int, max_sentences: int, max_words: int,
                    what: str = "the text") -> Sentences:
    """One sentence per non-blank line, split into words by `split`, within the limits (with a note for each cut).
    Empty text, or text with no word, is an `AppInputError`."""
    check_split(split)
    text = (text or "").replace("\x00", "")
    if not text.strip():
        raise AppInputError(f"{what} is empty: type or paste one sentence per line")
    notes = []
    if len(text) > max_chars:
        notes.append(f"{what} has {len(text):,} characters: only the first {max_chars:,} were used")
        text = text[:max_chars]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > max_sentences:
        notes.append(f"{what} has {len(lines):,} sentences: only the first {max_sentences:,} were used")
        lines = lines[:max_sentences]
    words, kept = [], []
    for line in lines:
        line_words = split_words(line, split)
        if len(line_words) > max_words:
            notes.append(f"a sentence of {len(line_words)} words was cut to its first {max_words}")
            line_words = line_words[:max_words]
        if line_words:
            words.append(line_words)
            kept.append(line)
    if not words:
        raise AppInputError(f"{what} has no word (split {split!r})")
    return Sentences(words, kept, notes)


def read_upload(path: str | os.PathLike, encoding: str, max_bytes: int) -> str:
    """The text of an uploaded file, or an `AppInputError` naming the file: too large, binary (NUL bytes), or not
    in `encoding` (the line and byte, from `text_files.check_decodes`)."""
    name = Path(path).name
    try:
        encoding = checked_encoding(encoding or "utf-8")
    except argparse.ArgumentTypeError as error:  # an unknown encoding, or one not read line by line
        raise AppInputError(str(error)) from error
    size = os.path.getsize(path)
    if size > max_bytes:
        raise AppInputError(f"{name} has {size:,} bytes: upload at most {max_bytes:,} (a sample of the corpus)")
    with open(path, "rb") as handle:
        raw = handle.read()
    if b"\x00" in raw:
        raise AppInputError(f"{name} is a binary file (it holds NUL bytes), not text: upload a text file, one "
                            "sentence per line")
    try:
        check_decodes(path, encoding)
    except UndecodableText as error:
        if error.byte is None:  # the file is text of another encoding, told as a whole: the line says which
            raise AppInputError(str(error).replace(str(path), name)) from error
        raise AppInputError(f"{name}: line {error.line_number}, byte {error.byte} of the line is not valid "
                            f"{encoding}: choose the file's encoding in the page, or upload UTF-8 text") from error
    return raw.decode(encoding).removeprefix("\ufeff")


def corpus_text(text: str | None, upload: str | None, encoding: str, limits: Limits) -> str:
    """The corpus a view reads: the uploaded file when there is one, else the pasted text."""
    if upload:
        return read_upload(upload, encoding, limits.max_upload_bytes)
    return text or ""


# --------------------------------------------------------------------------------------------------
# Vectors
# --------------------------------------------------------------------------------------------------


def embed_sentences(session: AppSession, sentences: list[list[str]], batch_size: int = 32) -> list[torch.Tensor]:
    """The vectors of every word of every sentence: one float32 tensor (L + 1, n, 2P) per sentence, layer 0 the
    character encoder, `<S>` and `</S>` left out. Exactly `ElmoModel`'s `hidden_states` at the word positions."""
    model, tokenizer = session.model, session.tokenizer
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        with session.lock, torch.inference_mode():
            hidden = model(encoded["input_ids"].to(device), attention_mask=encoded["attention_mask"].to(device),
                           output_hidden_states=True).hidden_states
        stacked = torch.stack(hidden).float().cpu()  # (L + 1, B, T, 2P)
        for row, words in enumerate(batch):
            out.append(stacked[:, row, 1 : len(words) + 1].clone())  # (L + 1, n, 2P): position 0 is <S>
    return out
