"""`elmo-embed`: ELMo vectors of a whole corpus, to HDF5 or Parquet, streamed, resumable.

    elmo-embed INPUT OUTPUT --model MODEL [--all | --top | --average] [options]
    python -m elmo_hf.cli embed ...  (the same)

This module is not imported by the model files (it does not travel as remote code), so it may use h5py, pyarrow,
datasets and tqdm.

Input
-----
* a text file, one sentence per line, split into words as the model's tokenizer splits raw text (its saved
  `word_split`: `punctuation`, `jieba`, ...), or by `--word_split`: any split registered in
  `tokenization.WORD_SPLITTERS`, an import path `module:function` (imported and registered), or `whitespace` for
  text that is already tokenized (as allennlp's `elmo` command); `tokenization.split_words`. Lines are read as bytes
  and decoded with `--encoding` (utf-8): a file with bytes that do not decode is refused before anything is written,
  in one line naming the file, the line and the byte (`--encoding_errors strict`, default), unless they are
  replaced by U+FFFD (`replace`) or their lines left out of the output (`skip`), counted and logged;
* a `datasets` dataset: a folder written by `save_to_disk` (a `DatasetDict` needs `--dataset_split`), or a
  .parquet / .jsonl / .json / .csv / .tsv file (always read as a dataset, never as raw text; a .tsv as the
  fine-tuning commands read it: tabs, no quoting), read as a stream (`--encoding` applies to all but Parquet);
  `--text_column` (default `text`) holds a string (split as a text line) or a list of strings (words, used as they
  are); any other value, or a file that does not parse or decode, is refused in one line naming the file and the
  row. The line number of a row is its index.

Output
------
HDF5 (OUTPUT ending in `.hdf5`/`.h5`/`.hdf`, or without a suffix; the layout of allennlp's former `elmo` command
and bilm-tf's `dump_bilm_embeddings`): one float32 dataset per input line, named by its 0-based line number
(`str(line_no)`), with `<S>` and `</S>` removed. A name that announces another format (`out.txt`) is refused unless
`--format` is given:

* `--all` (default): `(L + 1, n_tokens, 2P)`: layer 0 (the token embedding, duplicated), then each biLSTM layer;
* `--top`: `(n_tokens, 2P)`, the top layer; `--average`: `(n_tokens, 2P)`, the mean of the L + 1 layers.

Each dataset's attribute `tokens` holds the line's words, one per vector (`handle["3"].attrs["tokens"]`, an array
of str). An empty line gives an empty dataset (`(L + 1, 0, 2P)` or `(0, 2P)`). The file's attributes record the
model, the mode, the word split, the compute dtype, the line count (`skipped_lines` lists the lines left out by
`--encoding_errors skip`) and `settings`: the run's settings as JSON (a fingerprint of the weights among them). Written
in HDF5's format of 1.8 and later (long lines' words need it).

Parquet (OUTPUT ending in `.parquet`, or `--format parquet`): one row per line, columns `line` (int64), `tokens`
(list of str: the words, one per vector) and `embedding` (float32, nested lists of the shapes above). Rows are in no
particular order (by length within windows): use `line`. `datasets.Dataset.from_parquet(OUTPUT)` reads it. The schema's
metadata `elmo-embed` holds the attributes above, as JSON.

Speed and memory
----------------
Lines are read as a stream in windows of `--window` lines (10,000). Each window is sorted by length and cut into
batches of similar lengths (at most `--batch_size` sentences and `--batch_tokens` padded tokens), so almost no work
goes to padding and memory stays flat however large the corpus. A line with more than `--max_tokens` words is
embedded in pieces of `--max_tokens` words (each with its own `<S>`/`</S>`) whose vectors are concatenated, so it
still gets one vector per word (with a warning and a count); a line of a text file longer than `--max_line_chars`
characters is truncated (with a warning). With `--max_lines N` nothing beyond line N is read. The model runs under
`torch.inference_mode` with the fast LSTM loop and a token cache (`--token_cache_size`, 0 turns it off): results equal a
sentence-by-sentence run of the model and do not depend on the batch size (tested). `--dtype bfloat16` runs the matrix
multiplies in bfloat16 (autocast; the LSTM cell state stays float32; outputs are float32): faster on CPUs with
AVX512-BF16 or AMX and on GPUs, at a deviation measured in `benchmarks/results_embed_dtype.md`.

Interruption and `--resume`
---------------------------
The output is built in a work folder `OUTPUT.partial/`. Each window becomes one chunk file, written under a
temporary name and renamed when complete, an atomic step, and `progress.json` records the settings. While a window
is embedded, what is done of it is committed the same way as a part (`chunk-W-partK`) every `--commit_seconds`
(60), so a killed run leaves only complete chunks and parts (plus at most one temporary file, deleted on resume),
never a corrupt one, and loses at most about a minute of work whatever the window and corpus size. Ctrl-C (SIGINT)
or SIGTERM also commits what is done, then ends with one line saying what was kept, exit status 130 or 143.
`--resume` checks that the settings are the same (the model's weights too, by a fingerprint of their bytes), skips
the windows whose chunk exists, and in a window with parts
skips the batches whose lines are done (the same batches as an uninterrupted run, so the same bits). When every
window is done the chunks are merged into `OUTPUT.tmp`, which is renamed to OUTPUT, and the work folder is removed:
OUTPUT exists only when complete. `--resume` of a complete OUTPUT does nothing if it was made with the same
settings, and is refused in one line naming what differs otherwise: it never extends (a larger `--max_lines`) or
changes a complete output; `--overwrite` replaces it. A run refused for a bad row before anything was kept removes
the work folder it made.

Several processes
-----------------
Under `torchrun` or `accelerate launch` (which set `WORLD_SIZE`, `RANK` and `LOCAL_RANK`) the processes share the
windows: every process reads the whole input (cheap next to embedding it) and embeds every `world`-th window not yet
done, each into its own chunk file; process 0 prepares the work folder, and when every process has written its
chunks it merges them, once. The output is the one a single process writes (the same keys, the same vectors to
rounding). The processes exchange only these few messages, over `torch.distributed` with gloo (on GPUs too: no
tensor travels), waiting at most `--dist_timeout` seconds. Each process on a GPU node uses `cuda:LOCAL_RANK`.
`--resume` works whatever the number of processes of the interrupted run: a chunk is a window's, not a process's.

    torchrun --nproc_per_node 4 -m elmo_hf.cli embed corpus.txt out.hdf5 --model MODEL        # 4 GPUs (or CPU)
    accelerate launch --multi_gpu --num_processes 4 -m elmo_hf.cli embed corpus.txt out.hdf5 --model MODEL

(`accelerate launch --cpu --num_processes N` starts one process only: use `--multi_gpu` on CPU machines too;
docs/transformers_traps.md, "Accelerate on CPU".)

`torchrun --max_restarts N` with `--resume` is elastic: the processes started again continue the work folder (each
attempt keys its own addresses in the launcher's store).

Ray
---
`--engine ray` (the extra `elmo-hf[ray]`; `embed_ray.py`) keeps this process as the driver that reads the input and
merges, and sends the windows to `--num_workers` Ray actors (on a local Ray, or the cluster at `--ray_address`),
each with the model loaded once, running the same `WindowEmbedder` into the same chunk files; Ray restarts an
actor that dies and sends its windows again. docs/scaling.md.

Exit status: 0 on success, 130/143 when interrupted by SIGINT/SIGTERM, 2 for bad arguments or inputs (missing, empty
or unreadable model or input, an unknown or unavailable `--device`, an existing output without
`--overwrite`/`--resume`, a `--resume` with other settings), 1 when writing fails or the run cannot go on (a window
whose Ray actor died at each of its tries).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# oneDNN (and PyTorch's wrapper around it) keep every compiled matrix-multiply kernel for each new shape, 1024 of each
# by default: tens of MB that keep growing over the first windows of a corpus. 128 holds every shape of a batch.
# Set before torch creates the first kernel; the user's own settings win.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "128")
os.environ.setdefault("LRU_CACHE_CAPACITY", "128")

import torch  # noqa: E402
from tqdm.auto import tqdm
from transformers.utils import logging as hf_logging

from elmo_hf.modeling_elmo.quantization_elmo import int8_unavailable_reason, quantize_int8  # noqa: E402
from elmo_hf.tokenization import check_word_split, split_words  # noqa: E402

from ..core.backend_registry import AUTO, DEFAULT, backend_row  # noqa: E402
from ..core.early_checks import check_embed_paths, embed_output_format, is_dataset_input  # noqa: E402
from ..core.errors import RunFailed, reading, writing  # noqa: E402
from ..core.interrupts import Interrupted, InterruptGuard  # noqa: E402
from ..core.output_folders import run_lock  # noqa: E402
from ..core.text_files import UndecodableText  # noqa: E402
from ..loading import ModelLoadError, load_elmo  # noqa: E402
from .embed_io import (  # noqa: E402
    DATA_FILE_BUILDERS,
    Counts,
    EmbedError,
    EmbedFailed,
    WindowChunks,
    checked_device,
    committed_parts,
    complete_chunks,
    count_lines,
    done_windows,
    merge_chunks,
    open_dataset,
    read_text_lines,
    recorded_settings,
    tokenizer_word_split,
    weights_fingerprint,
)
from .embed_plan import EmbedOptions, EmbedPlan, check_options, resolve  # noqa: E402
from .embed_processes import Processes  # noqa: E402

logger = logging.getLogger("elmo-embed")
LONG_LINES_SAID = 3  # lines cut into pieces or truncated that are named as they are met (all are counted at the end)

MODES = ("all", "top", "average")
PROGRESS_VERSION = 2  # 2: the weights' fingerprint
__all__ = ["DATA_FILE_BUILDERS", "EmbedError", "Embedder", "run"]

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
# One window into one chunk file
# --------------------------------------------------------------------------------------------------


@dataclass
class WindowPlan:
    """One window's lines made ready: the rows already final (empty lines), the pieces to embed, the lines left
    out, the words of each line and how many pieces each line cut in pieces has."""

    ready: list[tuple[int, list[str], np.ndarray]] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    words_of: dict[int, list[str]] = field(default_factory=dict)
    pieces_of: dict[int, int] = field(default_factory=dict)


class WindowEmbedder:
    """Embeds one window of lines into its chunk file, written under a temporary name and renamed when complete
    (so that a killed process leaves no chunk that a rerun would take as done). What is done of a window is
    committed as a part every `--commit_seconds`, and on SIGINT/SIGTERM (`Interrupted`); a resumed window runs the
    same batches as an uninterrupted run (its results are the same bits) and skips those whose lines are done."""

    def __init__(self, embedder: Embedder, args, work: Path, is_dataset: bool, progress_bar, guard: InterruptGuard):
        self.embedder, self.args, self.work, self.progress_bar = embedder, args, work, progress_bar
        self.guard = guard
        self.is_dataset = is_dataset  # a dataset row of None is an empty line; a text line of None was left out
        config = embedder.model.config
        self.layers, self.width = config.num_layers + 1, config.hidden_size
        self.counts = Counts()
        self.written = 0
        self.long_lines_said = 0

    def __call__(self, window: int, items: list[tuple[int, str | list | None]]) -> None:
        plan = self.plan(items)
        args = self.args
        chunks = WindowChunks(self.work, window, args.format, args.mode, plan.skipped, args.commit_seconds,
                              self.guard.deferred)
        done = chunks.done
        self._count(plan, done)
        try:
            chunks.write(plan.ready)
            self.progress_bar.update(len(plan.ready) + len(plan.skipped) + len(done - {r[0] for r in plan.ready}))
            waiting: dict[int, list] = {}  # pieces of long lines whose other pieces are in later batches
            for batch in _batches(plan.pieces, args.batch_size, args.batch_tokens):
                if done and all(piece.line in done for piece in batch):
                    continue  # committed by an interrupted run
                rows = _whole_lines(batch, self.embedder([p.words for p in batch]), plan, waiting)
                chunks.write(rows)
                self.guard.check()  # a signal whose exception a weakref callback swallowed stops the run here
                self.progress_bar.update(sum(row[0] not in done for row in rows))
                self._debug_kill()
        except Interrupted:
            chunks.commit()  # every row written is whole: keep them
            raise
        except BaseException:
            chunks.abandon()
            raise
        chunks.finish()
        self.written += 1
        _release_free_memory()

    def plan(self, items: list[tuple[int, str | list | None]]) -> WindowPlan:
        plan, max_tokens = WindowPlan(), self.args.max_tokens
        for line_no, text in items:
            if text is None and not self.is_dataset:  # undecodable, with --encoding_errors skip
                plan.skipped.append(line_no)
                continue
            try:
                words = _words(text, self.args.word_split)
            except _NotWords as error:
                column = self.args.text_column or "text"
                raise EmbedError(f"{self.args.input}: row {line_no} of column {column!r} {error}") from error
            plan.words_of[line_no] = words
            if not words:
                plan.ready.append((line_no, words, _empty(self.args.mode, self.layers, self.width)))
                continue
            n_pieces = math.ceil(len(words) / max_tokens)
            if n_pieces > 1:
                plan.pieces_of[line_no] = n_pieces
                self._say_long_line(line_no, len(words), n_pieces)
            for k in range(n_pieces):
                plan.pieces.append(Piece(line_no, k, words[k * max_tokens : (k + 1) * max_tokens]))
        return plan

    def _say_long_line(self, line_no: int, words: int, pieces: int) -> None:
        """A line longer than the model's window (`--max_tokens` words) is said at once, with its number and how it is
        cut: it may take long, and the progress bar counts lines. The first `LONG_LINES_SAID`; the summary counts
        all."""
        self.long_lines_said += 1
        if self.long_lines_said <= LONG_LINES_SAID:
            logger.warning("line %d has %d words, more than --max_tokens %d: it is embedded in %d pieces of at most %d "
                           "words (each with its own <S> </S>), their vectors concatenated%s", line_no + 1, words,
                           self.args.max_tokens, pieces, self.args.max_tokens,
                           "; further such lines are counted at the end" if self.long_lines_said == LONG_LINES_SAID
                           else "")

    def _count(self, plan: WindowPlan, done: set[int]) -> None:
        """Count the lines this run embeds (not those an interrupted run committed)."""
        for line_no, words in plan.words_of.items():
            if line_no not in done:
                self.counts.lines += 1
                self.counts.tokens += len(words)
                self.counts.empty += not words
                self.counts.split += line_no in plan.pieces_of

    def _debug_kill(self) -> None:
        """--debug_kill_after_chunks K: SIGKILL this process while it writes its chunk after the first K.
        --debug_batch_delay S: sleep S seconds after each batch (a run slow enough to be signalled mid-window)."""
        if self.args.debug_kill_after_chunks is not None and self.written >= self.args.debug_kill_after_chunks:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.args.debug_batch_delay:
            time.sleep(self.args.debug_batch_delay)


class _NoProgress:
    """The progress bar of a Ray actor: the driver counts the windows."""

    def update(self, _n: int = 1) -> None:
        pass


def window_embedder_for_worker(plan: EmbedPlan, work: str, is_dataset: bool) -> WindowEmbedder:
    """The window embedder of one Ray actor (`embed_ray.WindowWorker`), from the driver's plan: the model loaded
    once, as `run` loads it, with no progress bar (the driver's counts) and no signal handler (Ray ends actors)."""
    hf_logging.disable_progress_bar()
    torch.set_num_threads(plan.threads or 1)
    device = checked_device(plan.device)
    model, tokenizer = load_elmo(plan.model, device=device)
    embedder = _embedder(plan, model, tokenizer, device)
    return WindowEmbedder(embedder, plan, Path(work), is_dataset, _NoProgress(), InterruptGuard())


def _whole_lines(batch: list[Piece], arrays: list[np.ndarray], plan: WindowPlan, waiting: dict) -> list:
    """The rows (line, words, vectors) that a batch completes: a line cut in pieces is complete when its last
    piece is embedded, its pieces' vectors concatenated in order."""
    rows = []
    for piece, array in zip(batch, arrays):
        n_pieces = plan.pieces_of.get(piece.line, 1)
        if n_pieces > 1:
            slots = waiting.setdefault(piece.line, [None] * n_pieces)
            slots[piece.index] = array
            if any(slot is None for slot in slots):
                continue
            array = np.concatenate(waiting.pop(piece.line), axis=-2)
        rows.append((piece.line, plan.words_of[piece.line], array))
    return rows


class _NotWords(Exception):
    """A dataset row that holds neither a string nor a list of strings (`plan` names the row)."""


def _words(text: str | list | None, rule: str) -> list[str]:
    """A line's words: a string split by `rule`, or a dataset's list of words used as it is."""
    if text is None:
        return []
    if isinstance(text, str) and "\x00" in text or isinstance(text, (list, tuple)) and any(
            isinstance(word, str) and "\x00" in word for word in text):
        raise _NotWords("holds a NUL character: binary data, not text")
    if isinstance(text, str):
        return text.split() if rule == "whitespace" else split_words(text, rule)
    if isinstance(text, (list, tuple)) and all(isinstance(word, str) for word in text):
        return list(text)
    raise _NotWords(f"holds {str(text)[:50]} ({type(text).__name__}), not a string or a list of strings")


# --------------------------------------------------------------------------------------------------
# Several processes (torchrun, accelerate launch: `embed_processes.Processes`)
# --------------------------------------------------------------------------------------------------


def _windows(lines: Iterator, size: int, max_lines: int | None) -> Iterator[tuple[int, list]]:
    """(window number, its `size` lines), in input order; the windows are numbered from 0."""
    window, items = 0, []
    for line_no, text in lines:
        if max_lines is not None and line_no >= max_lines:
            break
        items.append((line_no, text))
        if len(items) == size:
            yield window, items
            window, items = window + 1, []
    if items:
        yield window, items


def _embed_share(lines: Iterator, args, done: set[int], processes: Processes, embed_window, progress_bar):
    """Embed this process's share of the windows not done yet: the windows left are dealt out in turn, so the
    processes share them evenly however many an interrupted run finished. Returns the input's windows and lines."""
    windows = lines_read = left = 0
    for window, items in _windows(lines, args.window, args.max_lines):
        windows += 1
        lines_read += len(items)
        if window not in done:
            left += 1
            if (left - 1) % processes.world == processes.rank:
                embed_window(window, items)
                continue
        progress_bar.update(len(items))
    return windows, lines_read


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def _settings(args, input_fingerprint: str, model, weights: str) -> dict:
    """What makes a run's vectors: recorded in the work folder and in the complete output, compared by --resume."""
    config_digest = hashlib.sha256(model.config.to_json_string(use_diff=False).encode()).hexdigest()[:16]
    return {
        "version": PROGRESS_VERSION,
        "input": str(Path(args.input).resolve()),
        "input_fingerprint": input_fingerprint,
        "text_column": args.text_column,
        "dataset_split": args.dataset_split,
        "model": args.model,
        "model_config": config_digest,
        "model_weights": weights,
        "mode": args.mode,
        "format": args.format,
        "split": args.word_split,
        "window": args.window,
        "max_tokens": args.max_tokens,
        "max_line_chars": args.max_line_chars,
        "max_lines": args.max_lines,
        "encoding": args.encoding,
        "encoding_errors": args.encoding_errors,
        "dtype": args.dtype,
        **({"backend": args.backend} if args.backend not in (None, DEFAULT) else {}),
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
            _check_complete(output, args.format, settings)
            return None  # complete already, with these settings
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
            changed = _differences(recorded.get("settings"), settings)
            raise EmbedError(
                f"{work} was started with other settings ({', '.join(changed)} differ); rerun with the same "
                "arguments, or pass --overwrite to start again"
            )
        with writing(work):
            for leftover in work.glob("*.tmp*"):  # a chunk being written when the run was killed
                leftover.unlink()
        done = done_windows(work)
        parts = committed_parts(work)
        logger.info("resuming: %d window(s) of %d lines already done in %s%s", len(done), args.window, work,
                    f", and {parts} committed part(s) of windows in progress" if parts else "")
        return done
    with writing(work):
        work.mkdir(parents=True)
        _write_json(progress, {"settings": settings})
    return set()


def _differences(recorded: dict | None, settings: dict) -> list[str]:
    recorded = recorded if isinstance(recorded, dict) else {}
    return sorted(key for key in settings if recorded.get(key) != settings[key])


def _check_complete(output: Path, output_format: str, settings: dict) -> None:
    """--resume of a complete output does nothing, but only with the settings it was made with: another model,
    other weights, more lines or another mode would leave vectors that do not match the command."""
    recorded = recorded_settings(output, output_format)
    if recorded is None:
        raise EmbedError(f"output {output} is complete and records no settings to compare: --resume only continues "
                         "an interrupted run; pass --overwrite to replace it")
    if recorded != settings:
        raise EmbedError(
            f"output {output} is complete, made with other settings ({', '.join(_differences(recorded, settings))} "
            "differ): --resume does not extend or change a complete output; pass --overwrite to replace it")


@dataclass
class Input:
    """The lines to embed, as a stream of (line number, text), and what identifies the input for --resume."""

    lines: Iterator[tuple[int, str | list | None]]
    total: int | None  # lines, for the progress bar (None: a streamed data file)
    fingerprint: str
    is_dataset: bool
    counts: Counts  # the reader's counts: undecodable and truncated lines


def _open_input(args) -> Input:
    source = Path(args.input)  # there, and not an empty text file (`check_embed_paths`)
    counts = Counts()
    # A data file (.jsonl, .csv, .tsv, ...) is a dataset with its column `text` unless --text_column names another:
    # read as raw text, its syntax would be embedded as words.
    if is_dataset_input(source, args.text_column):
        rows, total, fingerprint = open_dataset(source, args.text_column or "text", args.dataset_split, args.encoding)
        lines, is_dataset = enumerate(rows), True
    else:
        strict = args.encoding if args.encoding_errors == "strict" else None  # checked in the same pass
        try:
            with reading(source, "--input"):
                stat = source.stat()
                total = count_lines(source, strict, args.max_lines)
        except UndecodableText as error:
            raise EmbedError(str(error)) from error
        fingerprint, is_dataset = f"{stat.st_size}-{stat.st_mtime_ns}", False
        lines = read_text_lines(source, args.max_line_chars, args.encoding, args.encoding_errors, counts)
    if args.max_lines is not None:  # nothing beyond is read (nor refused for a byte that does not decode)
        lines = itertools.islice(lines, args.max_lines)
        total = min(total, args.max_lines) if total is not None else args.max_lines
    return Input(lines, total, fingerprint, is_dataset, counts)


def _dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "int8":  # the model is quantized once loaded (`run`); what is not int8 computes in float32
        if device.type != "cpu":
            raise EmbedError(f"--dtype int8 runs on the CPU, not {device}: add --device cpu")
        if int8_unavailable_reason() is not None:
            raise EmbedError(f"--dtype int8: {int8_unavailable_reason()}")
        return torch.float32
    if name == "float16" and device.type != "cuda":
        raise EmbedError("--dtype float16 needs a CUDA device; use bfloat16 on the CPU")
    if name == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise EmbedError(f"--dtype bfloat16: {torch.cuda.get_device_name(device)} has no bfloat16; use float16")
    return getattr(torch, name)


def _backend_and_dtype(args, model, tokenizer, device: torch.device) -> tuple[str, str]:
    """The backend and dtype this run takes (`backend_choice.resolve`: auto measured once and remembered; the default
    float32 on the backend remembered as fastest, named in one line); `BackendError` (bad input) when it cannot run."""
    from ..export.backend_choice import resolve

    def torch_reason(name: str) -> str | None:
        try:
            _dtype(name, device)
        except EmbedError as error:
            return str(error)
        return None

    choice = resolve(args.backend, args.dtype, model, tokenizer, args.model, torch.get_num_threads(), device.type,
                     torch_reason)
    if choice.line:
        logger.info("%s", choice.line)
    return choice.backend, choice.dtype


def _embedder(args, model, tokenizer, device: torch.device):
    """The embedder of the path the run resolved, as its backend's row says: the model's ONNX graph in a runtime
    (`backends.GraphEmbedder`, exported once), or the model itself (`Embedder`: quantized for int8, autocast for
    bfloat16 and float16, with its token cache). After the settings are recorded: int8 changes the weights."""
    if backend_row(args.backend).graph:
        from ..export.backends import graph_embedder

        return graph_embedder(args.backend, args.dtype, model, tokenizer, args.mode, args.model)
    dtype = _dtype(args.dtype, device)
    if args.dtype == "int8":
        quantize_int8(model)
    if args.token_cache_size:
        model.enable_token_cache(args.token_cache_size)
    return Embedder(model, tokenizer, args.mode, device, dtype)


def run(args: EmbedOptions, guard: InterruptGuard | None = None) -> Path:
    """Embed `args.input` into `args.output` (see the module docstring); returns the output path (complete on
    process 0 when it returns; the other processes of a multi-process run return before the merge). `guard`: the
    command's interrupt guard (SIGINT/SIGTERM raise `Interrupted` after committing what is done, with the line that
    says what was kept as its `report`). Raises `EmbedError` for bad input, `EmbedFailed` when the run cannot go on."""
    output = Path(args.output)
    try:
        with run_lock(output, "elmo-embed", "output"):
            return _run(args, guard or InterruptGuard())
    except Interrupted as stop:
        stop.report = _interrupted_line(stop, output)
        raise
    except Exception as error:
        if guard is not None and guard.received:  # a Ray actor or another process was stopped by the same Ctrl-C,
            stop = Interrupted(guard.received)    # and this one failed waiting for it: the interruption is the news
            stop.report = _interrupted_line(stop, output)
            raise stop from error
        if isinstance(error, RunFailed):  # EmbedFailed, or a write into the output's work folder that failed
            raise EmbedFailed(f"{error}; what is complete is kept in {output.with_name(output.name + '.partial')}: "
                              "run the same command with --resume to continue") from error
        raise


def _run(args: EmbedOptions, guard: InterruptGuard) -> Path:
    check_options(args)  # the command layer checked them already, before importing torch
    if args.word_split is not None:
        try:  # registered (an import path is imported), and its package (jieba ...) installed
            check_word_split(args.word_split, "--word_split", allow_import=True)
        except ValueError as error:
            raise EmbedError(str(error)) from error
    output = Path(args.output)
    try:
        check_embed_paths(args)  # the console door checked them already, before importing torch
    except ValueError as error:
        raise EmbedError(str(error)) from error
    processes = Processes(args.dist_timeout)
    device = checked_device(args.device, processes.world, processes.local_rank)  # one GPU per process
    if args.dtype != AUTO and (args.backend is None or not backend_row(args.backend).graph):
        _dtype(args.dtype, device)  # torch's dtypes refused before the model loads (the runtimes': by their backend)
    source = _open_input(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model, tokenizer = load_elmo(args.model, device=device)
    except ModelLoadError as error:
        raise EmbedError(f"--model: {error}") from error
    try:
        word_split = args.word_split or tokenizer_word_split(tokenizer, args.model)
    except ValueError as error:
        raise EmbedError(str(error)) from error
    backend, dtype = _backend_and_dtype(args, model, tokenizer, device)  # auto: measured once, remembered
    plan = resolve(args, format=args.format or embed_output_format(output), word_split=word_split, backend=backend,
                   dtype=dtype)
    return _run_plan(plan, guard, source, model, tokenizer, device, processes)


def _run_plan(plan: EmbedPlan, guard: InterruptGuard, source: Input, model, tokenizer, device: torch.device,
              processes: Processes) -> Path:
    """Embed what `_run` opened and loaded, as `plan` says."""
    output = Path(plan.output)
    settings = _settings(plan, source.fingerprint, model, weights_fingerprint(model))  # before int8 changes them
    work = output.with_name(output.name + ".partial")
    start = time.perf_counter()
    processes.start()
    try:
        new_work = not work.exists()
        done = processes.from_first(lambda: _prepare_work_dir(plan, output, work, settings))
        if done is None:
            logger.info("%s is complete already: nothing to do", output)
            return output
        progress_bar = _progress_bar(source.total, plan.quiet or processes.rank != 0)
        embed_window = WindowEmbedder(_embedder(plan, model, tokenizer, device), plan, work,
                                      source.is_dataset, progress_bar, guard)
        try:
            if plan.engine == "ray":  # the same windows and chunks, embedded by Ray actors (embed_ray.py)
                from . import embed_ray  # only with Ray installed

                windows, lines_read, embed_window.counts = embed_ray.embed_windows(
                    _windows(source.lines, plan.window, plan.max_lines), plan, done, work, source.is_dataset,
                    progress_bar, window_embedder_for_worker)
            else:
                windows, lines_read = _embed_share(source.lines, plan, done, processes, embed_window, progress_bar)
        except EmbedError:  # a bad row: a work folder this run made and kept nothing in would block the next run
            if new_work and processes.world == 1 and not complete_chunks(work, plan.format):
                shutil.rmtree(work, ignore_errors=True)
            raise
        finally:
            progress_bar.close()
        own = Counts.of_processes([source.counts, embed_window.counts])  # reader's counts + what this one embedded
        counts = Counts.of_processes(processes.gather(own))  # after it, every process's chunks are complete
    finally:
        processes.stop()
    if processes.rank != 0:
        return output
    if lines_read and plan.encoding_errors == "skip" and counts.undecodable >= lines_read:
        if new_work and processes.world == 1:
            shutil.rmtree(work, ignore_errors=True)
        raise EmbedError(f"every line of {plan.input} was left out (not valid {plan.encoding}, --encoding_errors "
                         "skip): nothing to embed; give the file's encoding with --encoding")
    _log_special_lines(counts, plan)
    _merge(plan, work, output, windows, lines_read, model.config.num_layers + 1, settings)
    elapsed = time.perf_counter() - start
    logger.info(
        "wrote %s: %d lines embedded in this run (%d empty), %d tokens, %.1f s (%.1f sentences/s, %.0f tokens/s)%s",
        output, counts.lines, counts.empty, counts.tokens, elapsed, counts.lines / max(elapsed, 1e-9),
        counts.tokens / max(elapsed, 1e-9), f", {processes.world} processes" if processes.world > 1 else "",
    )
    cache = model.token_cache_info() if plan.engine == "local" else None  # off on a runtime; Ray's actors: theirs
    if cache:
        logger.info("token cache: %s", cache)
    return output


def _merge(args, work: Path, output: Path, windows: int, lines_read: int, layers: int, settings: dict) -> None:
    """Merge the chunks into `OUTPUT.tmp`, rename it to OUTPUT (complete in one step) and remove the work folder."""
    chunks = complete_chunks(work, args.format)
    if done_windows(work) != set(range(windows)):  # a bug, or the work folder was tampered with
        raise RuntimeError(f"{work} holds {len(done_windows(work))} complete chunks for {windows} windows")
    attrs = {"model": args.model, "mode": args.mode, "split": args.word_split, "dtype": args.dtype, "layers": layers,
             "lines": lines_read, "settings": json.dumps(settings)}
    tmp = output.with_name(output.name + ".tmp")
    logger.info("merging %d chunk(s) into %s", len(chunks), output)
    with writing(output):
        merge_chunks(args.format, chunks, tmp, args.mode, attrs)
        os.replace(tmp, output)
    shutil.rmtree(work, ignore_errors=True)


def _log_special_lines(counts: Counts, args) -> None:
    if counts.undecodable:
        verb = "left out" if args.encoding_errors == "skip" else "decoded with U+FFFD replacements"
        logger.warning("%d line(s) were not valid %s and were %s", counts.undecodable, args.encoding, verb)
    if counts.truncated:
        logger.warning("%d line(s) longer than %d characters were truncated", counts.truncated, args.max_line_chars)
    if counts.split:
        logger.warning(
            "%d line(s) longer than %d words were embedded in pieces of %d words (each piece with its own <S> </S>)",
            counts.split, args.max_tokens, args.max_tokens,
        )


def _release_free_memory() -> None:
    """Hand the memory freed by a window back to the system. Batches of ever different shapes leave glibc's heap
    fragmented, and its high-water mark would creep up window after window without this."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def _interrupted_line(stop: Interrupted, output: Path) -> str:
    """The one line of an interrupted run: what it kept and how to go on."""
    work = output.with_name(output.name + ".partial")
    if not work.is_dir():
        return f"interrupted ({stop.name}) before any work was kept"
    parts = committed_parts(work)
    return (f"interrupted ({stop.name}): {len(done_windows(work))} complete window(s) and {parts} committed part(s) "
            f"of windows in progress are kept in {work}; run the same command with --resume to continue")


def _progress_bar(total: int | None, quiet: bool):
    return tqdm(total=total, unit="sent", desc="elmo-embed", disable=quiet, dynamic_ncols=True, mininterval=1.0,
                smoothing=0.1)
