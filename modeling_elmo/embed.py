"""`elmo-embed`: ELMo vectors of a whole corpus, to HDF5 or Parquet, streamed, resumable.

    elmo-embed INPUT OUTPUT --model MODEL [--all | --top | --average] [options]
    python -m modeling_elmo.embed ...  (the same)

This module is not imported by the model files (it does not travel as remote code), so it may use h5py, pyarrow,
datasets and tqdm.

Input
-----
* a text file, one sentence per line (`--split whitespace` (default, as allennlp's `elmo` command) for text that is
  already tokenized, or `--split punctuation` for raw text: `tokenization.split_words`); lines are read as bytes and
  decoded as UTF-8: invalid bytes are replaced by U+FFFD (`--encoding_errors replace`, default) or the line is left
  out of the output (`skip`); either way they are counted and logged;
* a `datasets` dataset: a folder written by `save_to_disk` (a `DatasetDict` needs `--dataset_split`), or a
  .parquet / .jsonl / .json / .csv file read as a stream; `--text_column` (default `text`) holds a string (split
  by `--split`) or a list of words (used as they are). The line number of a row is its index.

Output
------
HDF5 (default; the layout of allennlp's former `elmo` command and bilm-tf's `dump_bilm_embeddings`): one float32
dataset per input line, named by its 0-based line number (`str(line_no)`), with `<S>` and `</S>` removed:

* `--all` (default): `(L + 1, n_tokens, 2P)`: layer 0 (the token embedding, duplicated), then each biLSTM layer;
* `--top`: `(n_tokens, 2P)`, the top layer; `--average`: `(n_tokens, 2P)`, the mean of the L + 1 layers.

An empty line gives an empty dataset (`(L + 1, 0, 2P)` or `(0, 2P)`). The file's attributes record the model, the
mode and the counts of special lines (`skipped_lines` lists the lines left out by `--encoding_errors skip`).

Parquet (OUTPUT ending in `.parquet`, or `--format parquet`): one row per line, columns `line` (int64), `tokens`
(list of str) and `embedding` (float32, nested lists of the shapes above). Rows are in no particular order (by
length within windows): use `line`. `datasets.Dataset.from_parquet(OUTPUT)` reads it.

Speed and memory
----------------
Lines are read as a stream in windows of `--window` lines (10,000). Each window is sorted by length and cut into
batches of similar lengths (at most `--batch_size` sentences and `--batch_tokens` padded tokens), so almost no work
goes to padding and memory stays flat however large the corpus. A line with more than `--max_tokens` words is
embedded in pieces of `--max_tokens` words (each with its own `<S>`/`</S>`) whose vectors are concatenated, so it
still gets one vector per word (with a warning and a count); a line longer than `--max_line_chars` characters is
truncated (with a warning). The model runs under `torch.inference_mode` with the fast LSTM loop and a token cache
(`--token_cache_size`, 0 turns it off): results equal a sentence-by-sentence run of the model and do not depend on
the batch size (tested).

Interruption and `--resume`
---------------------------
The output is built in a work folder `OUTPUT.partial/`. Each window becomes one chunk file, written under a
temporary name and renamed when complete, an atomic step, and `progress.json` records the settings. A killed run
therefore leaves only complete chunks (plus at most one temporary file, deleted on resume), never a corrupt one.
`--resume` checks that the settings are the same, skips the windows whose chunk exists and embeds the rest. When
every window is done the chunks are merged into `OUTPUT.tmp`, which is renamed to OUTPUT, and the work folder is
removed: OUTPUT exists only when complete. An interruption costs at most one window of work.

Exit status: 0 on success, 2 for bad arguments or inputs (missing model or input, an existing output without
`--overwrite`/`--resume`, a `--resume` with other settings), 1 when writing fails.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# oneDNN (and PyTorch's wrapper around it) keep every compiled matrix-multiply kernel for each new shape, 1024 of each
# by default: tens of MB that keep growing over the first windows of a corpus. 128 holds every shape of a batch.
# Set before torch creates the first kernel; the user's own settings win.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "128")
os.environ.setdefault("LRU_CACHE_CAPACITY", "128")

import torch  # noqa: E402

logger = logging.getLogger("elmo-embed")

MODES = ("all", "top", "average")
FORMATS = ("hdf5", "parquet")
PARQUET_SUFFIXES = (".parquet", ".pq")
DATA_FILE_BUILDERS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}
PROGRESS_VERSION = 1


class EmbedError(Exception):
    """A problem with the user's arguments or inputs (exit status 2)."""


# --------------------------------------------------------------------------------------------------
# Reading the input
# --------------------------------------------------------------------------------------------------


@dataclass
class Counts:
    """What happened to special lines, for the log and the output's metadata."""

    lines: int = 0
    tokens: int = 0
    empty: int = 0
    split: int = 0  # lines longer than --max_tokens words, embedded in pieces
    truncated: int = 0  # lines longer than --max_line_chars characters
    invalid_utf8: int = 0


def _count_lines(path: Path) -> int:
    """Number of lines of a text file (a last line without a newline counts), in one fast pass."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 24):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _read_text_lines(path: Path, max_chars: int, errors: str, counts: Counts) -> Iterator[tuple[int, str | None]]:
    """(line number, text) of every line; text None for a line left out. Memory stays bounded by `max_chars`."""
    limit = 4 * max_chars + 4  # UTF-8 needs at most 4 bytes a character
    with open(path, "rb") as handle:
        line_no = 0
        while True:
            raw = handle.readline(limit)
            if not raw:
                return
            too_long = not raw.endswith(b"\n") and len(raw) >= limit
            if too_long:  # read the rest of the line in bounded pieces and drop it
                while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
            raw = raw.rstrip(b"\r\n")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                if too_long:  # the cut may have split a character: only an error before the cut counts
                    text = raw.decode("utf-8", "ignore") if _valid_prefix(raw) else None
                else:
                    text = None
                if text is None:
                    counts.invalid_utf8 += 1
                    if errors == "skip":
                        yield line_no, None
                        line_no += 1
                        continue
                    text = raw.decode("utf-8", "replace")
            if too_long or len(text) > max_chars:
                counts.truncated += 1
                text = text[:max_chars]
            yield line_no, text
            line_no += 1


def _valid_prefix(raw: bytes) -> bool:
    """Whether `raw` is valid UTF-8 except for an incomplete character at its very end."""
    for cut in range(4):
        try:
            raw[: len(raw) - cut].decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def _open_dataset(path: Path, text_column: str, dataset_split: str | None):
    """(an iterable of rows, the number of rows or None, a fingerprint) of a `datasets` input."""
    import datasets

    if path.is_dir():
        try:
            loaded = datasets.load_from_disk(str(path))
        except (FileNotFoundError, ValueError) as error:
            raise EmbedError(f"{path} is a folder but not a dataset saved with save_to_disk: {error}") from error
        if isinstance(loaded, datasets.DatasetDict):
            if dataset_split is None:
                raise EmbedError(f"{path} holds the splits {sorted(loaded)}: choose one with --dataset_split")
            if dataset_split not in loaded:
                raise EmbedError(f"{path} has no split {dataset_split!r}; it has {sorted(loaded)}")
            loaded = loaded[dataset_split]
        if text_column not in loaded.column_names:
            raise EmbedError(f"{path} has no column {text_column!r}; it has {loaded.column_names} (--text_column)")
        rows = (row[text_column] for row in loaded.select_columns([text_column]))
        return rows, len(loaded), loaded._fingerprint
    builder = DATA_FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise EmbedError(f"--text_column needs a dataset folder or a {sorted(DATA_FILE_BUILDERS)} file, got {path}")
    stream = iter(datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True))
    # The first row is read now, so that a wrong --text_column fails before any output is started.
    first = next(stream, None)

    def check(row: dict) -> dict:
        if text_column not in row:
            raise EmbedError(f"{path} has no column {text_column!r}; it has {sorted(row)} (--text_column)")
        return row

    if first is not None:
        check(first)

    def rows():
        if first is None:
            return
        yield first[text_column]
        for row in stream:
            yield check(row)[text_column]

    stat = path.stat()
    return rows(), None, f"{stat.st_size}-{stat.st_mtime_ns}"


# --------------------------------------------------------------------------------------------------
# Writing the output
# --------------------------------------------------------------------------------------------------


class Hdf5Chunk:
    """One window's datasets in an HDF5 file of its own."""

    suffix = ".h5"

    def __init__(self, path: Path, mode: str, skipped: list[int]):
        import h5py

        self.file = h5py.File(path, "w")
        _small_metadata_cache(self.file)
        self.file.attrs["skipped_lines"] = np.asarray(skipped, dtype=np.int64)

    def write(self, items: list[tuple[int, list[str], np.ndarray]]) -> None:
        for line_no, _, array in items:
            self.file.create_dataset(str(line_no), data=array)

    def close(self) -> None:
        self.file.close()


class ParquetChunk:
    """One window's rows in a Parquet file of its own (a row group per batch)."""

    suffix = ".parquet"

    def __init__(self, path: Path, mode: str, skipped: list[int]):
        import pyarrow.parquet as pq

        self.schema = parquet_schema(mode).with_metadata({"skipped_lines": json.dumps(skipped)})
        self.writer = pq.ParquetWriter(path, self.schema)

    def write(self, items: list[tuple[int, list[str], np.ndarray]]) -> None:
        if items:
            self.writer.write_table(_parquet_table(items, self.schema))

    def close(self) -> None:
        self.writer.close()


def parquet_schema(mode: str):
    import pyarrow as pa

    vector = pa.list_(pa.float32())
    embedding = pa.list_(pa.list_(vector)) if mode == "all" else pa.list_(vector)
    return pa.schema([("line", pa.int64()), ("tokens", pa.list_(pa.string())), ("embedding", embedding)])


def _parquet_table(items: list[tuple[int, list[str], np.ndarray]], schema):
    """Rows -> an Arrow table, building the nested lists from offsets (no Python loop over the numbers)."""
    import pyarrow as pa

    width = items[0][2].shape[-1]
    values = pa.array(np.concatenate([a.reshape(-1) for _, _, a in items]), type=pa.float32())
    vectors = pa.ListArray.from_arrays(pa.array(np.arange(0, len(values) + 1, width, dtype=np.int32)), values)
    per_row = [a.shape[-2] for _, _, a in items]  # tokens of each row
    if items[0][2].ndim == 3:  # (L + 1, n, 2P): a list of layers of lists of tokens
        layers = items[0][2].shape[0]
        token_lists = np.repeat(per_row, layers)
        offsets = np.concatenate([[0], np.cumsum(token_lists)]).astype(np.int32)
        tokens_level = pa.ListArray.from_arrays(pa.array(offsets), vectors)
        layer_offsets = np.arange(0, len(items) * layers + 1, layers, dtype=np.int32)
        embedding = pa.ListArray.from_arrays(pa.array(layer_offsets), tokens_level)
    else:
        offsets = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)
        embedding = pa.ListArray.from_arrays(pa.array(offsets), vectors)
    columns = [
        pa.array([line for line, _, _ in items], type=pa.int64()),
        pa.array([tokens for _, tokens, _ in items], type=pa.list_(pa.string())),
        embedding.cast(schema.field("embedding").type),
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _small_metadata_cache(file) -> None:
    """Cap HDF5's metadata cache of a file being written (32 MB by default, grown as datasets are added)."""
    config = file.id.get_mdc_config()
    config.set_initial_size = True
    config.initial_size = 1 << 20
    config.min_size = 1 << 20
    config.max_size = 4 << 20
    file.id.set_mdc_config(config)


def _merge_hdf5(chunks: list[Path], target: Path, attrs: dict) -> None:
    """Copy every chunk's datasets into one file (HDF5's own object copy, in line order within a chunk)."""
    import h5py

    skipped = []
    with h5py.File(target, "w") as out:
        _small_metadata_cache(out)
        for chunk in chunks:
            with h5py.File(chunk, "r") as source:
                skipped.extend(int(v) for v in source.attrs["skipped_lines"])
                for name in sorted(source, key=int):
                    source.copy(source[name], out, name=name)
        for key, value in attrs.items():
            out.attrs[key] = value
        out.attrs["skipped_lines"] = np.asarray(skipped, dtype=np.int64)


def _merge_parquet(chunks: list[Path], target: Path, mode: str, attrs: dict) -> None:
    """Concatenate the chunks' row groups into one file (one row group in memory at a time)."""
    import pyarrow.parquet as pq

    skipped = []
    for chunk in chunks:
        skipped.extend(json.loads(pq.read_schema(chunk).metadata[b"skipped_lines"]))
    schema = parquet_schema(mode).with_metadata({"elmo-embed": json.dumps({**attrs, "skipped_lines": skipped})})
    with pq.ParquetWriter(target, schema) as writer:
        for chunk in chunks:
            source = pq.ParquetFile(chunk)
            for group in range(source.num_row_groups):
                writer.write_table(source.read_row_group(group).replace_schema_metadata(schema.metadata))


# --------------------------------------------------------------------------------------------------
# Embedding
# --------------------------------------------------------------------------------------------------


@dataclass
class Piece:
    line: int
    index: int  # which piece of its line
    words: list[str]


def _batches(pieces: list[Piece], batch_size: int, batch_tokens: int) -> Iterator[list[Piece]]:
    """Pieces sorted by length, cut into batches of at most `batch_size` rows and `batch_tokens` padded tokens."""
    pieces = sorted(pieces, key=lambda p: len(p.words))
    batch: list[Piece] = []
    for piece in pieces:
        width = len(piece.words) + 2  # with <S> and </S>; the longest so far, as they are sorted
        if batch and (len(batch) >= batch_size or (len(batch) + 1) * width > batch_tokens):
            yield batch
            batch = []
        batch.append(piece)
    if batch:
        yield batch


class Embedder:
    """Runs the model on batches of word lists and returns each row's vectors without `<S>`/`</S>`."""

    def __init__(self, model, tokenizer, mode: str, device: torch.device, dtype: torch.dtype):
        self.model, self.tokenizer, self.mode = model, tokenizer, mode
        self.device, self.dtype = device, dtype

    def __call__(self, sentences: list[list[str]]) -> list[np.ndarray]:
        encoded = self.tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        input_ids = encoded["input_ids"].to(self.device)
        attention_mask = encoded["attention_mask"].to(self.device)
        autocast = (
            torch.autocast(self.device.type, dtype=self.dtype)
            if self.dtype != torch.float32
            else contextlib.nullcontext()
        )
        with torch.inference_mode(), autocast:
            out = self.model(input_ids, attention_mask=attention_mask, output_hidden_states=self.mode != "top")
            if self.mode == "top":
                layers = out.last_hidden_state.unsqueeze(0)  # (1, B, T, 2P)
            else:
                layers = torch.stack(out.hidden_states)  # (L + 1, B, T, 2P)
            layers = layers.float()
            if self.mode == "average":
                layers = layers.mean(0, keepdim=True)
            layers = layers.cpu().numpy()
        results = []
        for row, words in enumerate(sentences):
            array = layers[:, row, 1 : len(words) + 1]  # boundaries removed
            results.append(np.ascontiguousarray(array if self.mode == "all" else array[0]))
        return results


def _empty(mode: str, layers: int, width: int) -> np.ndarray:
    return np.zeros((layers, 0, width) if mode == "all" else (0, width), dtype=np.float32)


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-embed",
        description="ELMo vectors of every line of a corpus, to HDF5 (one dataset per line) or Parquet.",
        epilog="Interrupted runs continue with --resume; see `python -m pydoc modeling_elmo.embed` for the layout.",
    )
    parser.add_argument("input", help="text file (one sentence per line), dataset folder, or data file with --text_column")
    parser.add_argument("output", help="HDF5 file to write (or .parquet)")
    parser.add_argument("--model", required=True, help="model folder (or Hub id) with an ELMo model")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--all", dest="mode", action="store_const", const="all", help="all layers (default)")
    modes.add_argument("--top", dest="mode", action="store_const", const="top", help="the top layer only")
    modes.add_argument("--average", dest="mode", action="store_const", const="average", help="mean of the layers")
    parser.set_defaults(mode="all")
    parser.add_argument("--format", choices=FORMATS, default=None, help="default: from OUTPUT's suffix")
    parser.add_argument("--split", choices=("whitespace", "punctuation"), default="whitespace",
                        help="how lines are split into words (default whitespace: already tokenized text)")
    parser.add_argument("--text_column", default=None, help="column of a dataset input (default 'text')")
    parser.add_argument("--dataset_split", default=None, help="split of a saved DatasetDict")
    parser.add_argument("--batch_size", type=int, default=128, help="sentences per batch (default 128)")
    parser.add_argument("--batch_tokens", type=int, default=4096,
                        help="padded tokens per batch, <S> and </S> included (default 4096)")
    parser.add_argument("--window", type=int, default=10_000,
                        help="lines sorted together by length; also the unit of resumption (default 10000)")
    parser.add_argument("--max_tokens", type=int, default=1000,
                        help="longer lines are embedded in pieces of this many words (default 1000)")
    parser.add_argument("--max_line_chars", type=int, default=1_000_000,
                        help="longer lines are truncated (default 1000000)")
    parser.add_argument("--max_lines", type=int, default=None, help="embed only the first N lines")
    parser.add_argument("--encoding_errors", choices=("replace", "skip"), default="replace",
                        help="invalid UTF-8: replace the bytes by U+FFFD (default) or leave the line out")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                        help="compute dtype (autocast); outputs are float32")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.add_argument("--token_cache_size", type=int, default=50_000,
                        help="distinct tokens whose layer-0 vectors are kept (0: off)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT (and any unfinished run)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    # Testing aid: SIGKILL this process while it writes the chunk after the first K (an interruption on demand).
    parser.add_argument("--debug_kill_after_chunks", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def _check_args(args) -> None:
    for name in ("batch_size", "batch_tokens", "window", "max_tokens", "max_line_chars"):
        if getattr(args, name) < 1:
            raise EmbedError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if args.max_lines is not None and args.max_lines < 0:
        raise EmbedError(f"--max_lines must be >= 0, got {args.max_lines}")
    if args.token_cache_size < 0:
        raise EmbedError(f"--token_cache_size must be >= 0, got {args.token_cache_size}")
    if args.batch_tokens < args.max_tokens + 2:
        raise EmbedError(
            f"--batch_tokens ({args.batch_tokens}) must hold one piece of --max_tokens ({args.max_tokens}) words "
            "plus <S> and </S>"
        )
    if args.overwrite and args.resume:
        raise EmbedError("--overwrite and --resume contradict each other: choose one")


def _load_model(name: str, device: torch.device):
    from transformers import AutoConfig

    from modeling_elmo import ElmoModel
    from tokenization import ElmoTokenizer

    path = Path(name)
    if not path.exists() and (name.startswith((".", "/")) or name.count("/") != 1):
        raise EmbedError(f"model {name} not found (a folder with config.json, or a Hub id)")
    try:
        config = AutoConfig.from_pretrained(name)
        model = ElmoModel.from_pretrained(name)
    except (OSError, ValueError) as error:
        raise EmbedError(f"cannot load an ELMo model from {name}: {error}") from error
    try:
        tokenizer = ElmoTokenizer.from_pretrained(name)
    except (OSError, ValueError):
        logger.info("no tokenizer files in %s: using the default ElmoTokenizer", name)
        tokenizer = ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)
    return model.to(device).eval(), tokenizer


def _settings(args, input_fingerprint: str, model) -> dict:
    config_digest = hashlib.sha256(model.config.to_json_string(use_diff=False).encode()).hexdigest()[:16]
    return {
        "version": PROGRESS_VERSION,
        "input": str(Path(args.input).resolve()),
        "input_fingerprint": input_fingerprint,
        "text_column": args.text_column,
        "dataset_split": args.dataset_split,
        "model": args.model,
        "model_config": config_digest,
        "mode": args.mode,
        "format": args.format,
        "split": args.split,
        "window": args.window,
        "max_tokens": args.max_tokens,
        "max_line_chars": args.max_line_chars,
        "max_lines": args.max_lines,
        "encoding_errors": args.encoding_errors,
        "dtype": args.dtype,
    }


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _prepare_work_dir(args, output: Path, work: Path, settings: dict) -> set[int]:
    """Create or check the work folder; return the windows already done."""
    if output.exists() and not output.is_file():
        raise EmbedError(f"output {output} exists and is not a file")
    if args.overwrite:
        shutil.rmtree(work, ignore_errors=True)
    elif output.exists() and not work.exists():
        if args.resume:
            return None  # complete already
        raise EmbedError(f"output {output} exists: pass --overwrite to replace it (or --resume to continue a run)")
    elif work.exists() and not args.resume:
        raise EmbedError(
            f"an unfinished run left {work}: pass --resume to continue it, or --overwrite to start again"
        )
    progress = work / "progress.json"
    if work.exists():
        try:
            recorded = json.loads(progress.read_text())
        except (OSError, ValueError) as error:
            raise EmbedError(f"{progress} is unreadable ({error}); pass --overwrite to start again") from error
        if recorded.get("settings") != settings:
            changed = sorted(k for k in settings if recorded.get("settings", {}).get(k) != settings[k])
            raise EmbedError(
                f"{work} was started with other settings ({', '.join(changed)} differ); rerun with the same "
                "arguments, or pass --overwrite to start again"
            )
        for leftover in work.glob("*.tmp*"):  # a chunk being written when the run was killed
            leftover.unlink()
        done = {int(p.name.split("-")[1].split(".")[0]) for p in work.glob("chunk-*") if p.is_file()}
        logger.info("resuming: %d window(s) of %d lines already done in %s", len(done), args.window, work)
        return done
    work.mkdir(parents=True)
    _write_json(progress, {"settings": settings})
    return set()


def _chunk_path(work: Path, window: int, suffix: str) -> Path:
    return work / f"chunk-{window:08d}{suffix}"


def run(args) -> Path:
    """Embed `args.input` into `args.output` (see the module docstring); returns the output path."""
    _check_args(args)
    output = Path(args.output)
    args.format = args.format or ("parquet" if output.suffix.lower() in PARQUET_SUFFIXES else "hdf5")
    source = Path(args.input)
    if not source.exists():
        raise EmbedError(f"input {source} not found")
    use_dataset = source.is_dir() or args.text_column is not None
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = getattr(torch, args.dtype)
    if dtype == torch.float16 and device.type != "cuda":
        raise EmbedError("--dtype float16 needs a CUDA device; use bfloat16 on the CPU")

    counts = Counts()
    text_column = args.text_column or "text"
    if use_dataset:
        rows, total, fingerprint = _open_dataset(source, text_column, args.dataset_split)
        lines = enumerate(rows)
    else:
        total = _count_lines(source)
        stat = source.stat()
        fingerprint = f"{stat.st_size}-{stat.st_mtime_ns}"
        lines = _read_text_lines(source, args.max_line_chars, args.encoding_errors, counts)
    if args.max_lines is not None:
        total = min(total, args.max_lines) if total is not None else args.max_lines

    model, tokenizer = _load_model(args.model, device)
    config = model.config
    if args.token_cache_size:
        model.enable_token_cache(args.token_cache_size)
    work = output.with_name(output.name + ".partial")
    settings = _settings(args, fingerprint, model)
    done = _prepare_work_dir(args, output, work, settings)
    if done is None:
        logger.info("%s is complete already: nothing to do", output)
        return output
    embedder = Embedder(model, tokenizer, args.mode, device, dtype)
    layers, width = config.num_layers + 1, config.hidden_size
    chunk_suffix = ".parquet" if args.format == "parquet" else ".h5"

    def split(text) -> list[str]:
        if text is None:
            return []
        if isinstance(text, str):
            return text.split() if args.split == "whitespace" else _split_words(text, args.split)
        return [str(word) for word in text]  # a dataset column of word lists

    progress_bar = _progress_bar(total, args.quiet)
    start, written_chunks, lines_read = time.perf_counter(), 0, 0

    def embed_window(window: int, items: list[tuple[int, str | None]]) -> None:
        """Embed one window of lines into its chunk file, written under a temporary name, then renamed."""
        nonlocal written_chunks
        if window in done:
            progress_bar.update(len(items))
            return
        skipped = [line_no for line_no, text in items if text is None and not use_dataset]
        pieces, ready, parts, words_of = [], [], {}, {}
        for line_no, text in items:
            if text is None and not use_dataset:  # invalid UTF-8 with --encoding_errors skip
                continue
            words = split(text)
            words_of[line_no] = words
            counts.lines += 1
            counts.tokens += len(words)
            if not words:
                counts.empty += 1
                ready.append((line_no, words, _empty(args.mode, layers, width)))
                continue
            n_pieces = math.ceil(len(words) / args.max_tokens)
            if n_pieces > 1:
                counts.split += 1
                parts[line_no] = [None] * n_pieces
            for k in range(n_pieces):
                pieces.append(Piece(line_no, k, words[k * args.max_tokens : (k + 1) * args.max_tokens]))
        final = _chunk_path(work, window, chunk_suffix)
        tmp = final.with_name(final.name + ".tmp")
        chunk_class = ParquetChunk if args.format == "parquet" else Hdf5Chunk
        writer = chunk_class(tmp, args.mode, skipped)
        try:
            writer.write(ready)
            progress_bar.update(len(ready) + len(skipped))
            for batch in _batches(pieces, args.batch_size, args.batch_tokens):
                finished = []
                for piece, array in zip(batch, embedder([p.words for p in batch])):
                    if piece.line in parts:  # a long line: wait for all its pieces
                        slots = parts[piece.line]
                        slots[piece.index] = array
                        if any(slot is None for slot in slots):
                            continue
                        array = np.concatenate(slots, axis=-2)
                        del parts[piece.line]
                    finished.append((piece.line, words_of[piece.line], array))
                writer.write(finished)
                progress_bar.update(len(finished))
                if args.debug_kill_after_chunks is not None and written_chunks >= args.debug_kill_after_chunks:
                    os.kill(os.getpid(), signal.SIGKILL)  # mid-chunk, as an interruption would
        finally:
            writer.close()
        os.replace(tmp, final)  # the chunk is complete: one atomic step
        written_chunks += 1
        _release_free_memory()

    window, window_lines = 0, []
    for line_no, text in lines:
        if args.max_lines is not None and line_no >= args.max_lines:
            break
        lines_read += 1
        window_lines.append((line_no, text))
        if len(window_lines) == args.window:
            embed_window(window, window_lines)
            window, window_lines = window + 1, []
    if window_lines:
        embed_window(window, window_lines)
        window += 1
    progress_bar.close()
    if counts.invalid_utf8:
        verb = "left out" if args.encoding_errors == "skip" else "decoded with U+FFFD replacements"
        logger.warning("%d line(s) had invalid UTF-8 and were %s", counts.invalid_utf8, verb)
    if counts.truncated:
        logger.warning("%d line(s) longer than %d characters were truncated", counts.truncated, args.max_line_chars)
    if counts.split:
        logger.warning(
            "%d line(s) longer than %d words were embedded in pieces of %d words (each piece with its own <S> </S>)",
            counts.split, args.max_tokens, args.max_tokens,
        )

    chunks = sorted(work.glob(f"chunk-*{chunk_suffix}"))
    if len(chunks) != window:  # a bug, or the work folder was tampered with
        raise RuntimeError(f"{work} holds {len(chunks)} chunks for {window} windows")
    attrs = {"model": args.model, "mode": args.mode, "split": args.split, "layers": layers, "lines": lines_read}
    tmp = output.with_name(output.name + ".tmp")
    logger.info("merging %d chunk(s) into %s", len(chunks), output)
    if args.format == "parquet":
        _merge_parquet(chunks, tmp, args.mode, attrs)
    else:
        _merge_hdf5(chunks, tmp, attrs)
    os.replace(tmp, output)
    shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - start
    logger.info(
        "wrote %s: %d lines embedded in this run (%d empty), %d tokens, %.1f s (%.1f sentences/s, %.0f tokens/s)",
        output, counts.lines, counts.empty, counts.tokens, elapsed, counts.lines / max(elapsed, 1e-9),
        counts.tokens / max(elapsed, 1e-9),
    )
    cache = model.token_cache_info()
    if cache:
        logger.info("token cache: %s", cache)
    return output


def _release_free_memory() -> None:
    """Hand the memory freed by a window back to the system. Batches of ever different shapes leave glibc's heap
    fragmented, and its high-water mark would creep up window after window without this."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def _split_words(text: str, rule: str) -> list[str]:
    from tokenization import split_words

    return split_words(text, rule)


def _progress_bar(total: int | None, quiet: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="sent", desc="elmo-embed", disable=quiet, dynamic_ncols=True, mininterval=1.0,
                smoothing=0.1)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        run(args)
    except EmbedError as error:
        logger.error("%s", error)
        return 2
    except OSError as error:
        logger.error("could not write %s: %s", args.output, error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
