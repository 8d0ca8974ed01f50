"""The options of the tool commands (`elmo-embed`, `elmo-analyze`, `elmo-convert`, `elmo-app`), declared once.

The console commands start in `elmo_tools.commands`, which parses the command line with these parsers before torch
and transformers are imported (seconds), so that `--help` and a mistyped option answer at once; each command's own
`main` builds the same parser from here. So this module imports only the standard library and the light
`published_models`; what an option needs at parse time is written here (`checked_encoding`, which `text_files`
re-exports).
"""

from __future__ import annotations

import argparse
import codecs
import os

from .published_models import BASE_URL_ENV, CACHE_ENV, PUBLISHED_MODELS

EMBED_FORMATS = ("hdf5", "parquet")
EMBED_DTYPES = ("float32", "bfloat16", "float16", "int8", "auto")
EMBED_BACKENDS = ("torch", "onnxruntime", "openvino", "auto")  # elmo_tools/backends.py

SPLIT_HELP = ("how lines are split into words (default: as the model's tokenizer splits raw text): a split registered "
              "in tokenization.WORD_SPLITTERS (punctuation, jieba, ...; whitespace for already tokenized text), or "
              "module:function, imported; --split is its older name")


def checked_encoding(name: str) -> str:
    """`name` as Python's codec registry spells it, if lines of that encoding can be read by splitting on newlines;
    an `argparse.ArgumentTypeError` (one line) otherwise, so argparse reports it as a usage error (exit 2)."""
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {name!r} (Python's codec names: utf-8, gb18030, "
                                         "big5, shift_jis, latin-1, cp1252, ...)") from None
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


def add_encoding_argument(parser: argparse.ArgumentParser, what: str = "the text files") -> None:
    """The `--encoding` option of every command that reads text."""
    parser.add_argument("--encoding", type=checked_encoding, default="utf-8",
                        help=f"encoding of {what} (default utf-8; e.g. gb18030, big5, shift_jis, latin-1). "
                             "Bytes that do not decode are refused, naming the file, line and byte")


def embed_parser() -> argparse.ArgumentParser:
    """`elmo-embed` (`elmo_tools.embed`)."""
    parser = argparse.ArgumentParser(
        prog="elmo-embed",
        description="ELMo vectors of every line of a corpus, to HDF5 (one dataset per line) or Parquet.",
        epilog="Interrupted runs continue with --resume; see `python -m pydoc elmo_tools.embed` for the layout.",
    )
    parser.add_argument("input", help="text file (one sentence per line), dataset folder, or .jsonl/.json/.csv/.parquet "
                                      "data file (read as a dataset)")
    parser.add_argument("output", help="HDF5 file to write (or .parquet)")
    parser.add_argument("--model", required=True,
                        help="model folder, Hub id, or preset name (random weights, only to test the command)")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--all", dest="mode", action="store_const", const="all", help="all layers (default)")
    modes.add_argument("--top", dest="mode", action="store_const", const="top", help="the top layer only")
    modes.add_argument("--average", dest="mode", action="store_const", const="average", help="mean of the layers")
    parser.set_defaults(mode="all")
    parser.add_argument("--format", choices=EMBED_FORMATS, default=None, help="default: from OUTPUT's suffix")
    parser.add_argument("--word_split", "--split", dest="split", default=None, metavar="SPLIT", help=SPLIT_HELP)
    parser.add_argument("--text_column", default=None, help="column of a dataset or data-file input (default 'text')")
    parser.add_argument("--dataset_split", default=None, help="split of a saved DatasetDict")
    parser.add_argument("--batch_size", type=int, default=128, help="sentences per batch (default 128)")
    parser.add_argument("--batch_tokens", type=int, default=4096,
                        help="padded tokens per batch, <S> and </S> included (default 4096)")
    parser.add_argument("--window", type=int, default=10_000,
                        help="lines sorted together by length; a window's chunk is complete when all are (default "
                             "10000)")
    parser.add_argument("--commit_seconds", type=float, default=60.0,
                        help="what is done of a window is committed this often, so that an interruption loses at "
                             "most this much work (default 60)")
    parser.add_argument("--max_tokens", type=int, default=1000,
                        help="longer lines are embedded in pieces of this many words (default 1000)")
    parser.add_argument("--max_line_chars", type=int, default=1_000_000,
                        help="longer lines of a text INPUT are truncated (default 1000000)")
    parser.add_argument("--max_lines", type=int, default=None, help="embed only the first N lines")
    add_encoding_argument(parser, "a text INPUT, .csv or .json(l)")
    parser.add_argument("--encoding_errors", choices=("strict", "replace", "skip"), default="strict",
                        help="bytes of a text INPUT that do not decode: refuse the file, naming the line (strict, "
                        "default), replace them by U+FFFD, or leave their lines out (skip)")
    parser.add_argument("--device", default=None,
                        help="cpu, cuda, cuda:1 ... (default: cuda if available; cuda:LOCAL_RANK under torchrun)")
    parser.add_argument("--dtype", choices=EMBED_DTYPES, default="float32",
                        help="compute dtype of the matrix multiplies (autocast; float16 on CUDA only; int8: the model "
                             "quantized on the CPU, as ElmoModel.quantize_int8; auto: the fastest within cosine 0.9999 "
                             "of float32 on this CPU, measured once); outputs are float32 (default float32)")
    parser.add_argument("--backend", choices=EMBED_BACKENDS, default=None,
                        help="what runs the model: torch, onnxruntime or openvino (its ONNX graph, exported once; "
                             "pip install 'elmo-hf[onnx]'), auto (the fastest, measured once on this CPU). Default: "
                             "torch, or the float32 backend an earlier auto measured faster on this CPU")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.add_argument("--token_cache_size", type=int, default=50_000,
                        help="distinct tokens whose layer-0 vectors are kept (0: off)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT (and any unfinished run)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run (with the same settings; a complete OUTPUT is left as it is)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--verbose", action="store_true", help="debugging messages too (a segmenter's own among them)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local: this process (or the processes of torchrun / accelerate launch); ray: a pool of "
                             "Ray actors, on this machine or a cluster (pip install 'elmo-hf[ray]'; docs/scaling.md)")
    parser.add_argument("--num_workers", type=int, default=1,
                        help="with --engine ray: actors, each with the model loaded once and --threads threads (1)")
    parser.add_argument("--ray_address", default=None,
                        help="with --engine ray: the cluster to join (auto, ray://host:10001 ...; default: start a "
                             "local Ray)")
    parser.add_argument("--dist_timeout", type=int, default=7200,
                        help="under torchrun / accelerate launch: seconds a process waits for the others (7200)")
    # Testing aid: SIGKILL this process while it writes the chunk after the first K (an interruption on demand).
    parser.add_argument("--debug_kill_after_chunks", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--debug_batch_delay", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser


def analyze_parser() -> argparse.ArgumentParser:
    """`elmo-analyze` (`elmo_tools.analysis`)."""
    parser = argparse.ArgumentParser(
        prog="elmo-analyze",
        description="How contextual is each layer? Self-similarity, intra-sentence similarity, maximum explainable "
        "variance and the anisotropy baseline (Ethayarajh 2019), to contextuality.json and contextuality.png.",
        epilog="Exact definitions: `python -m pydoc elmo_tools.analysis`.",
    )
    parser.add_argument("input", help="text file, one sentence per line")
    parser.add_argument("--model", required=True, help="model folder, Hub id, or preset name (random weights)")
    parser.add_argument("--output_dir", required=True, help="where contextuality.json and contextuality.png go")
    parser.add_argument("--word_split", "--split", dest="split", default=None, metavar="SPLIT",
                        help=SPLIT_HELP + " (as elmo-embed)")
    add_encoding_argument(parser, "the input")
    parser.add_argument("--min_count", type=int, default=5,
                        help="word types with fewer occurrences are not analysed (default 5)")
    parser.add_argument("--max_occurrences", type=int, default=100,
                        help="occurrences kept per word type, a uniform sample when it has more (default 100)")
    parser.add_argument("--max_words", type=int, default=1000,
                        help="analyse at most this many word types, the most frequent (default 1000; 0: all)")
    parser.add_argument("--anisotropy_pairs", type=int, default=1000,
                        help="random pairs of word occurrences for the anisotropy baseline (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the samples (and of a preset's weights)")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--max_tokens", type=int, default=500, help="longer lines are cut (default 500 words)")
    parser.add_argument("--max_lines", type=int, default=None, help="read only the first N lines")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ... (default cpu)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs in --output_dir")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--verbose", action="store_true", help="debugging messages too (a segmenter's own among them)")
    return parser


def add_conversion_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both converters take besides their inputs: the word split and --verbose."""
    parser.add_argument(
        "--word_split", default=None,
        help="how the saved tokenizer splits raw text into words: a name registered in tokenization.WORD_SPLITTERS "
        "(punctuation, whitespace, jieba, ...). Default: punctuation, the rule closest to the English models' "
        "training data; pass jieba for raw Chinese text with a word-level ELMoForManyLangs model (docs/converting.md)")
    parser.add_argument("--verbose", action="store_true",
                        help="log what is read and converted (by default: only where the model was written, and "
                        "problems)")


def convert_parser(prog: str = "elmo-convert", with_manylangs_dir: bool = True) -> argparse.ArgumentParser:
    """`elmo-convert` (`elmo_tools.convert`); without `--manylangs_dir`, the AllenNLP converter's own."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Convert original ELMo weights (bilm-tf / AllenNLP options.json + hdf5) to a Hugging Face "
        "folder: a published model by name (--model, downloaded and cached), or your own files or URLs.",
    )
    parser.add_argument("--model", default=None,
                        help=f"a published AllenNLP model to download and convert: {', '.join(PUBLISHED_MODELS)}")
    parser.add_argument("--options_file", default=None, help="bilm-tf options JSON (a path or an http(s) URL)")
    parser.add_argument("--weight_file", default=None, help="bilm-tf / allennlp hdf5 weights (a path or a URL)")
    parser.add_argument("--output_dir", required=True, help="folder to write (must not exist or be empty)")
    parser.add_argument("--vocab_file", default=None, help="optional vocabulary, one token per line (path or URL)")
    parser.add_argument("--with_vocab", action="store_true",
                        help="with --model: also download the 1B Word Benchmark vocabulary (793,471 words) for the "
                        "tokenizer")
    parser.add_argument("--cache_dir", default=None,
                        help=f"where downloads are kept and reused (default ${CACHE_ENV} or ~/.cache/elmo-hf)")
    parser.add_argument("--base_url", default=None,
                        help=f"with --model: a mirror of AllenNLP's published files (default ${BASE_URL_ENV})")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty output_dir")
    parser.add_argument("--push_to_hub", metavar="REPO_ID", default=None, help="also upload the folder to the Hub")
    parser.add_argument("--hub_private_repo", action="store_true", help="create the Hub repository as private")
    add_conversion_arguments(parser)
    if with_manylangs_dir:
        parser.add_argument("--manylangs_dir", default=None,
                            help="an ELMoForManyLangs model folder (HIT-SCIR) instead: see "
                            "elmo_tools.convert_elmoformanylangs")
    return parser


def app_parser() -> argparse.ArgumentParser:
    """`elmo-app` (`elmo_tools.app.server`)."""
    parser = argparse.ArgumentParser(
        prog="elmo-app", description="An interactive page that shows what an ELMo model's vectors do: one word "
        "in several sentences, its nearest neighbours in a corpus, and how contextual each layer is.")
    parser.add_argument("--model", default=os.environ.get("ELMO_APP_MODEL"),
                        help="model folder, Hub id or preset name (random weights); default: $ELMO_APP_MODEL, else "
                        "the demo's model (outputs/demo/model, from make demo) where it exists, else the small preset")
    # Spaces set GRADIO_SERVER_NAME and GRADIO_SERVER_PORT: app.py then serves where the Space expects it.
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to serve on (default 127.0.0.1, this machine only; 0.0.0.0 for a network)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)),
                        help="port (default 7860)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: the CPU)")
    parser.add_argument("--backend", choices=EMBED_BACKENDS[:3], default=os.environ.get("ELMO_APP_BACKEND", "torch"),
                        help="what computes the vectors: torch (default; $ELMO_APP_BACKEND), or the model's ONNX graph "
                             "in onnxruntime or openvino, float32 (pip install 'elmo-hf[onnx]')")
    parser.add_argument("--trust_remote_code", action="store_true", help="let a Hub model run its own code")
    parser.add_argument("--verbose", action="store_true", help="debug logging, and Gradio's own messages")
    return parser
