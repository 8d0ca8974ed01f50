"""What the commands refuse before they import torch and transformers (seconds): a path that is not there, an
empty input, an output that cannot be written or whose name announces another format.

The command layer (`elmo_hf.cli`, each command's row) calls these checks right after parsing the options, so a mistyped
path answers in the time Python takes to start; each command's run calls the same checks again for callers in
Python. Only cheap checks belong here (a `stat`, a temporary file): reading a whole corpus (its decoding) stays in the
run, which reads it once. Standard library only, and the light `text_files`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError
from .output_paths import check_writable_file, check_writable_folder
from .text_files import resolve_files

# Input files read as a dataset (`datasets`' builder by suffix), never as raw text: their syntax would be embedded. A
# .tsv is the csv builder with tabs and no quoting, as the fine-tuning commands read it (SST-2's texts hold quotes).
DATA_FILE_BUILDERS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv",
                      ".tsv": "tsv"}
PARQUET_SUFFIXES = (".parquet", ".pq")
HDF5_SUFFIXES = (".hdf5", ".h5", ".hdf", "")  # "": an output named without a suffix is HDF5


def embed_output_format(output: Path) -> str:
    """The format OUTPUT's name announces. A name that announces another one (`out.txt`, `out.npy`) is refused: HDF5
    bytes under it would mislead whoever opens the file next."""
    suffix = output.suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in HDF5_SUFFIXES:
        return "hdf5"
    raise InputError(f"output {output}: elmo-embed writes HDF5 (.hdf5, .h5) or Parquet (.parquet), not {suffix}: "
                     "rename it, or pass --format to write that format under this name")


def is_dataset_input(source: Path, text_column: str | None) -> bool:
    """A folder, a data file (.jsonl, .csv, .parquet ...) or any file with --text_column: read with `datasets`."""
    return source.is_dir() or text_column is not None or source.suffix.lower() in DATA_FILE_BUILDERS


def check_embed_paths(args) -> None:
    """elmo-embed's paths: the output can be written as a new file, is not the input, and names a format (or
    --format does); the input exists and, read as text, is not empty. An `InputError` in one line."""
    output, source = Path(args.output), Path(args.input)
    check_writable_file(output, "output")  # an OutputPathError, an InputError
    if output.exists() and source.exists() and output.resolve() == source.resolve():
        raise InputError(f"output {output} is the input file: give another output path")  # --overwrite would lose it
    if args.format is None:
        embed_output_format(output)
    if not source.exists():
        raise InputError(f"input {source} not found")
    check_readable(source, "input")
    if not is_dataset_input(source, args.text_column) and source.stat().st_size == 0:
        raise InputError(f"input {source} is empty: nothing to embed")


def check_readable(path: Path, name: str) -> None:
    """`path` can be read by this process (an unreadable input is bad input, not a failed write)."""
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise InputError(f"{name} {path} cannot be read (permission denied)")


def check_analyze_paths(args) -> None:
    """elmo-analyze's paths: the input is a file, the output folder can be made or written. An `InputError`."""
    source = Path(args.input)
    if not source.is_file():
        raise InputError(f"input {source} not found" if not source.exists() else f"input {source} is not a file")
    check_readable(source, "input")
    check_writable_folder(Path(args.output_dir), "--output_dir")


def check_convert_paths(args) -> None:
    """elmo-convert's local input files exist (a URL is the download's to check) and its output folder can be made or
    written: refused in the converter's words, before torch and h5py are imported."""
    for option in ("options_file", "weight_file", "vocab_file"):
        value = getattr(args, option, None)
        if value and not str(value).startswith(("http://", "https://")):
            existing_file(value, option.replace("_", " "))
    check_writable_folder(Path(args.output_dir), "--output_dir")


def existing_file(path, what: str, error: type[InputError] = InputError) -> Path:
    """`path` as a Path, once it is known to be a file: a missing one and a folder are refused by name (`error`)."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{what} {path} is a folder, not a file")
    if not path.is_file():
        raise error(f"{what} {path} does not exist")
    return path


def check_model_path(args) -> None:
    """A model named by a path (`./my-model`, `../x`, `/data/elmo`, `~/elmo`: never a Hub id nor a preset) exists."""
    name = str(args.model)
    if name.startswith((".", "/", "~")) and not Path(name).expanduser().exists():
        raise InputError(f"model {name} not found: no such folder (a model is a folder with config.json, a Hub id "
                         "or a preset)")


def check_corpus_paths(train_file: list[str] | None, validation_file: list[str] | None,
                       output_dir: str | None) -> None:
    """elmo-pretrain's and elmo-demo's corpus files (globs) each match a file, and the output folder can be made or
    written (the demo's default folder is made with its parent: None skips it)."""
    resolve_files((train_file or []) + (validation_file or []))  # an InputError
    if output_dir is not None:
        check_writable_folder(Path(output_dir), "--output_dir")


def check_input_file(path: str | None, option: str) -> None:
    """A file a fine-tuning command reads (`--train_file`, ...): given or not, but not a folder nor missing."""
    if path is None:
        return
    if Path(path).is_dir():
        raise InputError(f"--{option} {path} is a folder, not a file")
    if not Path(path).is_file():
        raise InputError(f"--{option} {path}: no such file")
