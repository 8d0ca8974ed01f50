"""The options of the tool commands (`elmo-analyze`, `elmo-convert`, `elmo-app`; `elmo-embed`'s are its own module's,
`elmo_hf.tools.embedding.embed_plan`), one dataclass each, and the options every command shares (`--encoding`, the word
split). The tools' run functions take these (`elmo_hf.tools.analysis.run(AnalyzeOptions(...))`); the command layer
(`elmo_hf.cli`) builds their parsers (`elmo_hf.tools.core.arguments`) before torch and transformers are imported
(seconds), so that `--help` and a mistyped option answer at once. Standard library only, with the light
`published_models`; what an option needs at parse time is written here (`checked_encoding`, which `text_files`
re-exports).
"""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import os
from dataclasses import dataclass, field

from .arguments import flag, positional
from .backend_registry import APP_BACKENDS
from .published_models import BASE_URL_ENV, CACHE_ENV, PUBLISHED_MODELS

ENCODING_HELP = ("encoding of {what} (default utf-8; e.g. gb18030, big5, shift_jis, latin-1). Bytes that do not "
                 "decode are refused, naming the file, line and byte")
WORD_SPLIT_HELP = ("how lines are split into words (default: as the model's tokenizer splits raw text): a split "
                   "registered in tokenization.WORD_SPLITTERS (punctuation, jieba, ...; whitespace for already "
                   "tokenized text), or module:function, imported; --split is its older name")
MODEL_HELP = "model folder, Hub id, or preset name (random weights, only to test the command)"


def checked_encoding(name: str) -> str:
    """`name` as Python's codec registry spells it, if lines of that encoding can be read by splitting on newlines;
    an `argparse.ArgumentTypeError` (one line) otherwise, so argparse reports it as a usage error (exit 2)."""
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {name!r} (Python's codec names: utf-8, gb18030, "
                                         "big5, shift_jis, latin-1, cp1252, ...)") from None
    if info.name == "utf-8-sig":  # UTF-8 with a byte-order mark at the start, which reading removes
        return info.name
    if not _splits_on_newline_byte(info.name):
        raise argparse.ArgumentTypeError(
            f"encoding {name!r} is not read line by line (a newline is not the byte 0x0a in it); convert the file "
            f"first, for example: iconv -f {name} -t utf-8 FILE > FILE.utf8")
    return info.name


def _splits_on_newline_byte(encoding: str) -> bool:
    try:
        return "\n".encode(encoding) == b"\n" and "a\nb".encode(encoding).count(b"\n") == 1
    except (UnicodeError, LookupError):
        return False


def encoding_option(what: str = "the text files", default: str | None = "utf-8",
                    help: str | None = None) -> dataclasses.Field:
    """The `--encoding` option of every command that reads text (and a fine-tuning command's `--train_encoding`
    ...: `help` of their own, no default), checked as the command line is parsed (`checked_encoding`)."""
    return field(default=default, metadata={"help": help or ENCODING_HELP.format(what=what),
                                            "type": checked_encoding})


def word_split_option(help: str = WORD_SPLIT_HELP) -> dataclasses.Field:
    return field(default=None, metadata={"help": help, "aliases": ["--split"], "metavar": "SPLIT"})


@dataclass
class AnalyzeOptions:
    """`elmo-analyze`: how contextual is each layer? Self-similarity, intra-sentence similarity, maximum explainable
    variance and the anisotropy baseline (Ethayarajh 2019), to contextuality.json and contextuality.png."""

    input: str = positional("text file, one sentence per line")
    model: str = field(metadata={"help": MODEL_HELP})
    output_dir: str = field(metadata={"help": "where contextuality.json and contextuality.png go"})
    word_split: str | None = word_split_option(WORD_SPLIT_HELP + " (as elmo-embed)")
    encoding: str = encoding_option("the input")
    min_count: int = field(default=5, metadata={"help": "word types with fewer occurrences are not analysed"})
    max_occurrences: int = field(default=100, metadata={
        "help": "occurrences kept per word type, a uniform sample when it has more"})
    max_words: int = field(default=1000, metadata={
        "help": "analyse at most this many word types, the most frequent (0: all)"})
    anisotropy_pairs: int = field(default=1000, metadata={
        "help": "random pairs of word occurrences for the anisotropy baseline"})
    seed: int = field(default=0, metadata={"help": "seed of the samples (and of a preset's weights)"})
    batch_size: int = field(default=64, metadata={"help": "sentences per batch"})
    max_tokens: int = field(default=500, metadata={"help": "longer lines are cut (in words)"})
    max_lines: int | None = field(default=None, metadata={"help": "read only the first N lines"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda, cuda:1 ..."})
    overwrite: bool = flag("replace existing outputs in --output_dir")
    quiet: bool = flag("no progress bar")
    verbose: bool = flag("debugging messages too (a segmenter's own among them)")


@dataclass
class ConvertOptions:
    """`elmo-convert`: original ELMo weights (bilm-tf / AllenNLP options.json + hdf5) to a Hugging Face folder: a
    published model by name (--model, downloaded and cached), your own files or URLs, or an ELMoForManyLangs folder
    (--manylangs_dir)."""

    output_dir: str = field(metadata={"help": "folder to write (must not exist or be empty)"})
    model: str | None = field(default=None, metadata={
        "help": f"a published AllenNLP model to download and convert: {', '.join(PUBLISHED_MODELS)}"})
    options_file: str | None = field(default=None, metadata={"help": "bilm-tf options JSON (a path or an http(s) URL)"})
    weight_file: str | None = field(default=None,
                                    metadata={"help": "bilm-tf / allennlp hdf5 weights (a path or a URL)"})
    vocab_file: str | None = field(default=None, metadata={
        "help": "optional vocabulary, one token per line (path or URL)"})
    with_vocab: bool = flag("with --model: also download the 1B Word Benchmark vocabulary (793,471 words) for the "
                            "tokenizer")
    cache_dir: str | None = field(default=None, metadata={
        "help": f"where downloads are kept and reused (default ${CACHE_ENV} or ~/.cache/elmo-hf)"})
    base_url: str | None = field(default=None, metadata={
        "help": f"with --model: a mirror of AllenNLP's published files (default ${BASE_URL_ENV})"})
    overwrite: bool = flag("replace a non-empty output_dir")
    push_to_hub: str | None = field(default=None, metadata={
        "help": "also upload the folder to the Hub", "metavar": "REPO_ID"})
    hub_private_repo: bool = flag("create the Hub repository as private")
    word_split: str | None = field(default=None, metadata={
        "help": "how the saved tokenizer splits raw text into words: a name registered in tokenization.WORD_SPLITTERS "
                "(punctuation, whitespace, jieba, ...). Default: punctuation, the rule closest to the English models' "
                "training data; pass jieba for raw Chinese text with a word-level ELMoForManyLangs model "
                "(docs/converting.md)"})
    manylangs_dir: str | None = field(default=None, metadata={
        "help": "an ELMoForManyLangs model folder (HIT-SCIR) instead of the options above: see "
                "elmo_hf.tools.conversion.convert_elmoformanylangs"})
    verbose: bool = flag("log what is read and converted (by default: only where the model was written, and problems)")


@dataclass
class AppOptions:
    """`elmo-app`: an interactive page that shows what an ELMo model's vectors do: one word in several sentences, its
    nearest neighbours in a corpus, and how contextual each layer is."""

    model: str | None = field(default_factory=lambda: os.environ.get("ELMO_APP_MODEL"), metadata={
        "help": "model folder, Hub id or preset name (random weights); default: $ELMO_APP_MODEL, else the demo's "
                "model (outputs/demo/model, from make demo) where it exists, else the small preset"})
    # Spaces set GRADIO_SERVER_NAME and GRADIO_SERVER_PORT: app.py then serves where the Space expects it.
    host: str = field(default_factory=lambda: os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), metadata={
        "help": "address to serve on (default 127.0.0.1, this machine only; 0.0.0.0 for a network)"})
    port: int = field(default_factory=lambda: int(os.environ.get("GRADIO_SERVER_PORT", 7860)), metadata={
        "help": "port (default 7860)"})
    device: str | None = field(default=None, metadata={"help": "cpu, cuda, cuda:1 ... (default: the CPU)"})
    backend: str = field(default_factory=lambda: os.environ.get("ELMO_APP_BACKEND", "torch"), metadata={
        "help": "what computes the vectors: torch (default; $ELMO_APP_BACKEND), or the model's ONNX graph in "
                "onnxruntime or openvino, float32 (pip install 'elmo-hf[onnx]')", "choices": APP_BACKENDS})
    trust_remote_code: bool = flag("let a Hub model run its own code")
    verbose: bool = flag("debug logging, and Gradio's own messages")

    def __post_init__(self):
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be between 1 and 65535, got {self.port}")
