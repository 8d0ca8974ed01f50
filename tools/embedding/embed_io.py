"""Reading `elmo-embed`'s input and writing its output: text and `datasets` readers, the chunk files of each window
(HDF5 or Parquet; parts committed as the window goes), and the merge of the chunks into the final file. The layout
is described in `elmo_hf.tools.embedding.embed`.

Like `embed.py`, this module is not imported by the model files and does not travel as remote code.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from elmo_hf.tokenization import WordSplitError, check_word_split, split_name

from ..core.early_checks import DATA_FILE_BUILDERS
from ..core.errors import RunFailed, writing
from ..core.text_files import BinaryText, UndecodableText, check_decodes, raw_lines, wide_encoding
from ..loading import (
    ModelLoadError,
    weights_fingerprint,  # noqa: F401 (embed.py reads it from here)
)
from ..loading import checked_device as usable_device
from .embed_plan import EmbedError


class EmbedFailed(RunFailed):
    """The run cannot go on for a reason that is not the input's (exit status 1): what is complete stays in the work
    folder for `--resume`."""


# --------------------------------------------------------------------------------------------------
# Reading the input
# --------------------------------------------------------------------------------------------------


TRUNCATED_LINES_SAID = 3  # lines cut at --max_line_chars that are named as they are read


@dataclass
class Counts:
    """What happened to special lines, for the log and the output's metadata."""

    lines: int = 0
    tokens: int = 0
    empty: int = 0
    split: int = 0  # lines longer than --max_tokens words, embedded in pieces
    truncated: int = 0  # lines longer than --max_line_chars characters
    undecodable: int = 0  # lines that did not decode (--encoding_errors replace or skip)

    @classmethod
    def of_processes(cls, gathered: list[Counts]) -> Counts:
        """The counts of a run shared by processes: every process reads every line, so the reader's counts
        (`undecodable`, `truncated`) are those of any one; each embeds its own lines, so the others add up."""
        total = cls(undecodable=gathered[0].undecodable, truncated=gathered[0].truncated)
        for counts in gathered:
            total.lines += counts.lines
            total.tokens += counts.tokens
            total.empty += counts.empty
            total.split += counts.split
        return total


def count_lines(path: Path, encoding: str | None = None, max_lines: int | None = None) -> int:
    """Number of lines of a text file (a last line without a newline counts), in one fast pass, up to `max_lines`
    (what lies beyond is not read). With `encoding`, the same pass checks that those lines decode: `UndecodableText`
    (one line naming the file, the line, the byte and `--encoding`) for the first that does not, before anything is
    written."""
    if max_lines == 0:
        return 0
    decoder = codecs.getincrementaldecoder(encoding)() if encoding else None
    count, last, after_cr = 0, b"\n", False
    with open(path, "rb") as handle:
        while block := handle.read(1 << 24):
            if b"\r" in block or after_cr:  # \r\n and a lone \r (old Mac files) end lines as \n does
                block, after_cr = block[1:] if after_cr and block.startswith(b"\n") else block, block.endswith(b"\r")
                block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                if not block:
                    continue
            if max_lines is not None and count + block.count(b"\n") >= max_lines:
                cut = -1
                for _ in range(max_lines - count):  # the end of line `max_lines` in this block
                    cut = block.index(b"\n", cut + 1)
                block = block[: cut + 1]
            if b"\x00" in block:  # no encoding read line by line puts a NUL in text: a binary file
                line = count + block[: block.index(b"\x00")].count(b"\n") + 1
                if wide_encoding(path):  # UTF-16/32 text: named, with the conversion (BinaryText's message)
                    raise EmbedError(str(BinaryText(path, line)))
                raise EmbedError(f"{path}: line {line} holds a NUL byte: a binary file, not text (a data file is read "
                                 "as a dataset: .jsonl, .csv, .parquet, or --text_column)")
            count += block.count(b"\n")
            last = block[-1:]
            if decoder is not None:
                _decode_or_name_the_line(decoder, block, path, encoding)
            if max_lines is not None and count >= max_lines:
                break
    if decoder is not None:
        _decode_or_name_the_line(decoder, b"", path, encoding, final=True)
    return count + (last != b"\n")


def _decode_or_name_the_line(decoder, block: bytes, path: Path, encoding: str, final: bool = False) -> None:
    try:
        decoder.decode(block, final=final)  # C speed on large blocks; the text is not kept
    except UnicodeDecodeError as error:
        check_decodes(path, encoding, errors_option="--encoding_errors")  # raises UndecodableText naming the line
        # not reached for the encodings text_files accepts, which decode the same line by line as in blocks
        raise EmbedError(f"{path} is not valid {encoding} ({error.reason}); give the file's encoding with "
                         "--encoding") from error


def read_text_lines(path: Path, max_chars: int, encoding: str, errors: str,
                    counts: Counts) -> Iterator[tuple[int, str | None]]:
    """(line number, text) of every line, decoded with `encoding`; text None for a line left out (`errors` "skip";
    "replace" puts U+FFFD for the bytes; "strict" raises `UndecodableText`, which `count_lines` raised before
    already). A byte-order mark starting the file is dropped. Memory stays bounded by `max_chars`."""
    limit = 4 * max_chars + 4  # UTF-8 and GB18030 need at most 4 bytes a character, the other encodings fewer
    with open(path, "rb") as handle:
        line_no = 0
        for raw, too_long in raw_lines(handle, limit):  # lines end at \n, \r\n or \r; a longer one is cut at limit
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as error:
                # the cut may have split a character: only an error before the cut counts
                text = raw.decode(encoding, "ignore") if too_long and _valid_prefix(raw, encoding) else None
                if text is None:
                    if errors == "strict":
                        raise UndecodableText(path, line_no + 1, error, encoding,
                                              errors_option="--encoding_errors") from error
                    counts.undecodable += 1
                    if errors == "skip":
                        yield line_no, None
                        line_no += 1
                        continue
                    text = raw.decode(encoding, "replace")
            if line_no == 0 and text.startswith("\ufeff"):
                text = text[1:]
            if too_long or len(text) > max_chars:
                counts.truncated += 1
                text = text[:max_chars]
                if counts.truncated <= TRUNCATED_LINES_SAID:  # named as met; the summary counts them all
                    logging.getLogger("elmo-embed").warning(
                        "line %d is longer than --max_line_chars %d characters: only its first %d are read%s",
                        line_no + 1, max_chars, max_chars,
                        "; further such lines are counted at the end" if counts.truncated == TRUNCATED_LINES_SAID
                        else "")
            yield line_no, text
            line_no += 1


def _valid_prefix(raw: bytes, encoding: str) -> bool:
    """Whether `raw` decodes except for an incomplete character at its very end."""
    for cut in range(4):
        try:
            raw[: len(raw) - cut].decode(encoding)
            return True
        except UnicodeDecodeError:
            continue
    return False


def tokenizer_word_split(tokenizer, model: str) -> str:
    """The name of the split the model's tokenizer saved, checked here: `WordSplitError` (one line, suggesting
    `--word_split`) for a split whose package is missing, or a function it names by import path (a name read from a
    model's files is never imported). elmo-analyze uses it too."""
    split = split_name(tokenizer.word_split)
    try:
        check_word_split(split)
    except ValueError as error:
        raise WordSplitError(f"the tokenizer of {model}: {error}; or give another split with --word_split") from error
    return split


def checked_device(name: str | None, world: int = 1, local_rank: int = 0):
    """The `--device` to run on (default: CUDA if there is one), checked by `loading.checked_device`: `EmbedError`
    (one line) for a name torch does not know (`gpu`) or a device this machine or this torch build does not have.
    Several processes on GPUs take one each (`cuda:LOCAL_RANK`)."""
    name = name or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = usable_device(name, "--device")
        if device.type == "cuda" and device.index is None and world > 1:
            device = usable_device(torch.device("cuda", local_rank), "--device")
    except ModelLoadError as error:
        raise EmbedError(str(error)) from error
    return device


def recorded_settings(output: Path, output_format: str) -> dict | None:
    """The settings a complete output was made with (the attribute / metadata `settings`), None if it records none;
    `EmbedError` if it is not an output of this format."""
    try:
        if output_format == "parquet":
            import pyarrow.parquet as pq

            metadata = pq.read_schema(output).metadata or {}
            recorded = json.loads(metadata.get(b"elmo-embed", b"{}")).get("settings")
        else:
            import h5py

            with h5py.File(output, "r") as handle:
                recorded = handle.attrs.get("settings")
        return None if recorded is None else json.loads(recorded)
    except (OSError, ValueError, AttributeError) as error:
        raise EmbedError(f"output {output} is not a readable {output_format} file ({type(error).__name__}): pass "
                         "--overwrite to replace it") from error


def open_dataset(path: Path, text_column: str, dataset_split: str | None, encoding: str = "utf-8"):
    """(an iterable of rows, the number of rows or None, a fingerprint) of a `datasets` input; `encoding` is that of
    a .csv or .json(l) file (a saved dataset and Parquet hold Unicode strings already)."""
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
        if len(loaded) == 0:
            raise EmbedError(f"input {path} is empty (no rows): nothing to embed")
        rows = (row[text_column] for row in loaded.select_columns([text_column]))
        return rows, len(loaded), loaded._fingerprint
    builder = DATA_FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise EmbedError(f"--text_column needs a dataset folder or a {sorted(DATA_FILE_BUILDERS)} file, got {path}")
    if path.stat().st_size == 0:
        raise EmbedError(f"input {path} is empty: nothing to embed")
    options = {"encoding": encoding} if builder in ("json", "csv", "tsv") else {}
    if builder == "tsv":  # tab-separated, a quote character is text (csv.QUOTE_NONE)
        builder, options = "csv", {**options, "delimiter": "\t", "quoting": 3}
    stream = _readable(iter(datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True,
                                                  **options)), path, encoding)
    # The first row is read now, so that a wrong --text_column fails before any output is started.
    first = next(stream, None)

    def check(row: dict) -> dict:
        if text_column not in row:
            raise EmbedError(f"{path} has no column {text_column!r}; it has {sorted(row)} (--text_column)")
        return row

    if first is None:
        raise EmbedError(f"input {path} is empty (no rows): nothing to embed")
    check(first)

    def rows():
        yield first[text_column]
        for row in stream:
            yield check(row)[text_column]

    stat = path.stat()
    return rows(), None, f"{stat.st_size}-{stat.st_mtime_ns}"


def _readable(stream: Iterator[dict], path: Path, encoding: str) -> Iterator[dict]:
    """The rows of a streamed data file; a file that does not parse or decode (pandas, pyarrow and the codecs raise
    ValueErrors) is one EmbedError naming the file and the rows read before. The builders' own error line is held
    back while reading, as this one says the same."""
    import pyarrow

    builders_log = logging.getLogger("datasets.packaged_modules")
    level = builders_log.level
    builders_log.setLevel(logging.CRITICAL)
    read = 0
    try:
        while True:
            try:
                row = next(stream)
            except StopIteration:
                return
            except (ValueError, pyarrow.ArrowException) as error:
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                hint = f" (not valid {encoding}: give the file's encoding with --encoding)" \
                    if isinstance(error, UnicodeDecodeError) else ""
                where = f"after row {read - 1}" if read else "from its first row"
                raise EmbedError(f"{path} could not be read {where}: {reason}{hint}") from error
            read += 1
            yield row
    finally:
        builders_log.setLevel(level)


# --------------------------------------------------------------------------------------------------
# Writing the output
# --------------------------------------------------------------------------------------------------


# HDF5's file format of 1.8 (2008) and later: the words of a long line make an attribute larger than the 64 KB
# that the oldest format's object headers hold.
HDF5_LIBVER = ("v108", "latest")


class Hdf5Chunk:
    """One window's datasets in an HDF5 file of its own; each dataset's attribute `tokens` holds the line's words
    (one per vector)."""

    suffix = ".h5"

    def __init__(self, path: Path, mode: str, skipped: list[int]):
        import h5py

        self.file = h5py.File(path, "w", libver=HDF5_LIBVER)
        self.strings = h5py.string_dtype()
        _small_metadata_cache(self.file)
        self.file.attrs["skipped_lines"] = np.asarray(skipped, dtype=np.int64)

    def write(self, items: list[tuple[int, list[str], np.ndarray]]) -> None:
        for line_no, words, array in items:
            dataset = self.file.create_dataset(str(line_no), data=array)
            dataset.attrs["tokens"] = np.asarray(words, dtype=self.strings)

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


# A window's complete chunk is chunk-WWWWWWWW.SUFFIX; while it is embedded, what is done is committed every
# --commit_seconds as chunk-WWWWWWWW-partKKKK.SUFFIX, so that an interruption loses little of a large window.
_CHUNK_NAME = re.compile(r"chunk-(\d{8})(-part\d{4})?\.(h5|parquet)")


def chunk_path(work: Path, window: int, output_format: str, part: int | None = None) -> Path:
    """The complete chunk file of window number `window` (it is written under a temporary name first), or its
    committed part number `part`."""
    suffix = ParquetChunk.suffix if output_format == "parquet" else Hdf5Chunk.suffix
    return work / (f"chunk-{window:08d}{suffix}" if part is None else f"chunk-{window:08d}-part{part:04d}{suffix}")


def open_chunk(output_format: str, path: Path, mode: str, skipped: list[int]) -> Hdf5Chunk | ParquetChunk:
    chunk_class = ParquetChunk if output_format == "parquet" else Hdf5Chunk
    return chunk_class(path, mode, skipped)


def complete_chunks(work: Path, output_format: str) -> list[Path]:
    """Every chunk file and committed part of a work folder, in window order."""
    suffix = ParquetChunk.suffix if output_format == "parquet" else Hdf5Chunk.suffix
    return sorted(work.glob(f"chunk-*{suffix}"))


def done_windows(work: Path) -> set[int]:
    """The windows whose chunk is complete."""
    found = (_CHUNK_NAME.fullmatch(p.name) for p in work.glob("chunk-*"))
    return {int(m.group(1)) for m in found if m and not m.group(2)}


def committed_parts(work: Path) -> int:
    """How many parts of windows in progress are committed (a part being written has a temporary name)."""
    found = (_CHUNK_NAME.fullmatch(p.name) for p in work.glob("chunk-*-part*"))
    return sum(1 for m in found if m)


def window_parts(work: Path, window: int, output_format: str) -> list[Path]:
    """The parts committed so far of a window not complete."""
    suffix = ParquetChunk.suffix if output_format == "parquet" else Hdf5Chunk.suffix
    return sorted(work.glob(f"chunk-{window:08d}-part*{suffix}"))


def chunk_lines(path: Path, output_format: str) -> set[int]:
    """The line numbers a chunk file holds."""
    if output_format == "parquet":
        import pyarrow.parquet as pq

        return set(pq.read_table(path, columns=["line"]).column("line").to_pylist())
    import h5py

    with h5py.File(path, "r") as handle:
        return {int(name) for name in handle}


class WindowChunks:
    """The files of one window: rows go to a part that is committed (renamed from its temporary name) once it is
    `commit_seconds` old, and the last part becomes the window's complete chunk. Parts an interrupted run committed
    are kept: `done` holds their lines, which are not written again. Each write and rename runs inside `protect()`
    (the interrupt guard's `deferred`), so a signal never leaves half a row or half a rename."""

    def __init__(self, work: Path, window: int, output_format: str, mode: str, skipped: list[int],
                 commit_seconds: float, protect: Callable[[], contextlib.AbstractContextManager]):
        self.work, self.window, self.format, self.mode = work, window, output_format, mode
        self.commit_seconds, self.protect = commit_seconds, protect
        existing = window_parts(work, window, output_format)
        self.done: set[int] = set().union(*(chunk_lines(path, output_format) for path in existing))
        self.part = len(existing)
        self._open([] if existing else skipped)  # the skipped lines are recorded by the window's first part

    def _open(self, skipped: list[int]) -> None:
        self.path = chunk_path(self.work, self.window, self.format, self.part)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        with writing(self.tmp):
            self.writer = open_chunk(self.format, self.tmp, self.mode, skipped)
        self.opened = time.monotonic()

    def write(self, rows: list[tuple[int, list[str], np.ndarray]]) -> None:
        with self.protect(), writing(self.tmp):
            self.writer.write([row for row in rows if row[0] not in self.done])
        if time.monotonic() - self.opened >= self.commit_seconds:
            self.commit()
            self.part += 1
            self._open([])

    def commit(self) -> None:
        """Keep the rows written so far as a part of the window (nothing to do when the part is closed already)."""
        self._close_as(self.path)

    def finish(self) -> None:
        """The window is done: its last part becomes its complete chunk, in one atomic step."""
        self._close_as(chunk_path(self.work, self.window, self.format))

    def abandon(self) -> None:
        """A failed write: the temporary file is not kept as done (a resumed run deletes it)."""
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
            self.writer = None

    def _close_as(self, path: Path) -> None:
        if self.writer is None:
            return
        with self.protect(), writing(path):
            self.writer.close()
            os.replace(self.tmp, path)
            self.writer = None


def merge_chunks(output_format: str, chunks: list[Path], target: Path, mode: str, attrs: dict) -> None:
    if output_format == "parquet":
        merge_parquet(chunks, target, mode, attrs)
    else:
        merge_hdf5(chunks, target, attrs)


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


def merge_hdf5(chunks: list[Path], target: Path, attrs: dict) -> None:
    """Copy every chunk's datasets into one file (HDF5's own object copy, attributes included, in line order within
    a chunk)."""
    import h5py

    skipped = []
    with h5py.File(target, "w", libver=HDF5_LIBVER) as out:
        _small_metadata_cache(out)
        for chunk in chunks:
            with h5py.File(chunk, "r") as source:
                skipped.extend(int(v) for v in source.attrs["skipped_lines"])
                for name in sorted(source, key=int):
                    source.copy(source[name], out, name=name)
        for key, value in attrs.items():
            out.attrs[key] = value
        out.attrs["skipped_lines"] = np.asarray(skipped, dtype=np.int64)


def merge_parquet(chunks: list[Path], target: Path, mode: str, attrs: dict) -> None:
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
