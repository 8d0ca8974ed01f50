"""`elmo-embed`'s options, what they refuse on their own, and the plan a run follows. Standard library and the runtime
core only: the command layer parses and checks the options here before torch is imported.

`EmbedOptions` are what the caller gave, frozen: a run never changes them. `check_options` refuses what the options say
on their own (a count below its least value is refused as they are parsed, by its field's converter). Once the model
is loaded, `resolve` settles what the options left to the run (the format from OUTPUT's suffix, the tokenizer's word
split, the backend and dtype the automatic choice measured) into an `EmbedPlan`: the same fields, every one settled,
frozen too. Every later step reads the plan, and Ray's actors receive it as it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
from dataclasses import dataclass, field

from ..core.arguments import at_least, check_fields, flag, positional
from ..core.backend_registry import AUTO, EMBED_BACKENDS
from ..core.command_options import MODEL_HELP, encoding_option, word_split_option
from ..core.errors import InputError

EMBED_FORMATS = ("hdf5", "parquet")
EMBED_DTYPES = ("float32", "bfloat16", "float16", "int8", "auto")


class EmbedError(InputError):
    """A problem with the user's arguments or inputs (exit status 2)."""


def positive_seconds(value) -> float:
    """A field's converter: a number of seconds above 0, from a word or a number."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {value!r}") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {value}")
    return seconds


positive_seconds.checks_values = True  # numbers of an options file and of Python callers too (`at_least`'s way)


@dataclass(frozen=True)
class EmbedOptions:
    """`elmo-embed`: ELMo vectors of every line of a corpus, to HDF5 (one dataset per line) or Parquet."""

    input: str = positional("text file (one sentence per line), dataset folder, or .jsonl/.json/.csv/.parquet data "
                            "file (read as a dataset)")
    output: str = positional("HDF5 file to write (or .parquet)")
    model: str = field(metadata={"help": MODEL_HELP})
    mode: str = field(default="all", metadata={
        "help": "all layers (all, the default), the top layer only (top), or their mean (average)",
        "choices": ("all", "top", "average"), "values": {"--all": "all", "--top": "top", "--average": "average"}})
    format: str | None = field(default=None,
                               metadata={"help": "default: from OUTPUT's suffix", "choices": EMBED_FORMATS})
    word_split: str | None = word_split_option()
    text_column: str | None = field(default=None, metadata={
        "help": "column of a dataset or data-file input (default 'text')"})
    dataset_split: str | None = field(default=None, metadata={"help": "split of a saved DatasetDict"})
    batch_size: int = field(default=128, metadata={"help": "sentences per batch", "type": at_least(1)})
    batch_tokens: int = field(default=4096, metadata={"help": "padded tokens per batch, <S> and </S> included",
                                                      "type": at_least(1)})
    window: int = field(default=10_000, metadata={
        "help": "lines sorted together by length; a window's chunk is complete when all are", "type": at_least(1)})
    commit_seconds: float = field(default=60.0, metadata={
        "help": "what is done of a window is committed this often, so that an interruption loses at most this much "
                "work", "type": positive_seconds})
    max_tokens: int = field(default=1000, metadata={
        "help": "longer lines are embedded in pieces of this many words", "type": at_least(1)})
    max_line_chars: int = field(default=1_000_000, metadata={
        "help": "longer lines of a text INPUT are truncated", "type": at_least(1)})
    max_lines: int | None = field(default=None, metadata={"help": "embed only the first N lines",
                                                          "type": at_least(0)})
    encoding: str = encoding_option("a text INPUT, .csv or .json(l)")
    encoding_errors: str = field(default="strict", metadata={
        "help": "bytes of a text INPUT that do not decode: refuse the file, naming the line (strict), replace them "
                "by U+FFFD, or leave their lines out (skip)", "choices": ("strict", "replace", "skip")})
    device: str | None = field(default=None, metadata={
        "help": "cpu, cuda, cuda:1 ... (default: cuda if available; cuda:LOCAL_RANK under torchrun)"})
    dtype: str = field(default="float32", metadata={
        "help": "compute dtype of the matrix multiplies (autocast; float16 on CUDA only; int8: the model quantized on "
                "the CPU, as ElmoModel.quantize_int8; auto: the fastest within cosine 0.9999 of float32 on this CPU "
                "whose vectors do not depend on the batch, measured once); outputs are float32",
        "choices": EMBED_DTYPES})
    backend: str | None = field(default=None, metadata={
        "help": "what runs the model: torch, onnxruntime or openvino (its ONNX graph, exported once; pip install "
                "'elmo-hf[onnx]'), auto (the fastest, measured once on this CPU). Default: torch, or the float32 "
                "backend an earlier auto measured faster on this CPU", "choices": EMBED_BACKENDS})
    threads: int | None = field(default=None, metadata={"help": "CPU threads for torch", "type": at_least(1)})
    token_cache_size: int = field(default=50_000, metadata={
        "help": "distinct tokens whose layer-0 vectors are kept (0: off)", "type": at_least(0)})
    overwrite: bool = flag("replace OUTPUT (and any unfinished run)")
    resume: bool = flag("continue an interrupted run (with the same settings; a complete OUTPUT is left as it is)")
    quiet: bool = flag("no progress bar")
    verbose: bool = flag("debugging messages too (a segmenter's own among them)")
    engine: str = field(default="local", metadata={
        "help": "local: this process (or the processes of torchrun / accelerate launch); ray: a pool of Ray actors, "
                "on this machine or a cluster (pip install 'elmo-hf[ray]'; docs/scaling.md)",
        "choices": ("local", "ray")})
    num_workers: int = field(default=1, metadata={
        "help": "with --engine ray: actors, each with the model loaded once and --threads threads",
        "type": at_least(1)})
    ray_address: str | None = field(default=None, metadata={
        "help": "with --engine ray: the cluster to join (auto, ray://host:10001 ...; default: start a local Ray)"})
    dist_timeout: int = field(default=7200, metadata={
        "help": "under torchrun / accelerate launch: seconds a process waits for the others", "type": at_least(1)})
    # Testing aids: SIGKILL this process while it writes the chunk after the first K (an interruption on demand), and
    # a pause after every batch (a run slow enough to interrupt).
    debug_kill_after_chunks: int | None = field(default=None, metadata={"hidden": True})
    debug_batch_delay: float = field(default=0.0, metadata={"hidden": True})

    def __post_init__(self):
        check_fields(self)  # the converters and choices, for options made in Python as for the command line's


@dataclass(frozen=True)
class EmbedPlan(EmbedOptions):
    """The options with what they left to the run settled (`resolve`): the format, the word split, the backend and
    the dtype are never None or auto here. Frozen: a step that needs another value makes another plan."""

    def __post_init__(self):
        super().__post_init__()
        unsettled = [name for name in ("format", "word_split", "backend", "dtype")
                     if getattr(self, name) in (None, AUTO)]
        if unsettled:
            raise ValueError(f"an EmbedPlan settles every option the run chooses; unsettled: {', '.join(unsettled)}")


def resolve(options: EmbedOptions, **settled) -> EmbedPlan:
    """The plan of a run of `options`, with the values the run settled (`format=`, `word_split=`, `backend=`,
    `dtype=`)."""
    given = {item.name: getattr(options, item.name) for item in dataclasses.fields(options)}
    return EmbedPlan(**{**given, **settled})


def check_options(args: EmbedOptions) -> None:
    """What `elmo-embed` refuses in its options taken together (`EmbedError`, one line), before anything is opened or
    loaded (the command layer calls it before torch is imported)."""
    if args.batch_tokens < args.max_tokens + 2:
        raise EmbedError(
            f"--batch_tokens ({args.batch_tokens}) must hold one piece of --max_tokens ({args.max_tokens}) words "
            "plus <S> and </S>"
        )
    if args.overwrite and args.resume:
        raise EmbedError("--overwrite and --resume contradict each other: choose one")
    if args.engine == "ray":
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise EmbedError("--engine ray runs from one process: start it without torchrun / accelerate launch")
        if importlib.util.find_spec("ray") is None:
            raise EmbedError("--engine ray needs Ray: pip install 'elmo-hf[ray]'")
    elif args.ray_address is not None or args.num_workers != 1:
        option = "--ray_address" if args.ray_address is not None else "--num_workers"
        raise EmbedError(f"{option} is an option of --engine ray: add --engine ray (or leave {option} out)")
