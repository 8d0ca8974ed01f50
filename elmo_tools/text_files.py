"""Users' text files in the encoding they name (`--encoding`, UTF-8 by default), line by line.

Bytes that do not decode are refused with one line that names the file, the line, the byte and the option to use,
rather than replaced by U+FFFD characters that would be embedded or trained on without a word said. Commands call
`check_decodes` on every input before they write anything, so a refusal leaves nothing half-written.

Lines are split on the byte 0x0a, so only encodings in which a newline is that byte (and no other character contains
it) are accepted: UTF-8, GBK/GB18030, Big5, Shift-JIS, the ISO-8859 and Windows code pages. UTF-16 and UTF-32 are
refused by `checked_encoding`, with the conversion to use.
"""

from __future__ import annotations

import argparse
import codecs
import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import charset_normalizer

from .command_options import checked_encoding  # declared there: parsing needs it before any import
from .errors import InputError

DEFAULT_ENCODING = "utf-8"
_BOM = "\ufeff"
_SAMPLE_BYTES = 1 << 16  # what the encoding is guessed from


class UndecodableText(InputError):
    """A line of a text file is not valid in the encoding it is read with; the message names the encoding the file
    reads in where one can be told (`likely_encoding`)."""

    def __init__(self, path: str | Path, line_number: int, error: UnicodeDecodeError, encoding: str):
        bad = error.object[error.start: error.start + 1]
        value = f" (0x{bad[0]:02x})" if bad else ""
        likely = likely_encoding(path)
        hint = f"the file reads as {likely}: --encoding {likely}" if likely not in (None, codecs.lookup(encoding).name) \
            else "give the file's encoding with --encoding (gb18030 for simplified Chinese, big5 for traditional)"
        super().__init__(
            f"{path}: line {line_number}, byte {error.start + 1} of the line{value} is not valid {encoding}; {hint}")
        self.path, self.line_number, self.byte = str(path), line_number, error.start + 1


def likely_encoding(path: str | Path) -> str | None:
    """The encoding the start of `path` most plausibly is (charset-normalizer's guess, which tells Big5 from GB18030
    by how common the characters they decode to are), among those read line by line here; None where it cannot tell
    (no guess with any coherence: a few CJK characters among ASCII fit many encodings alike)."""
    try:
        with open(path, "rb") as handle:
            sample = handle.read(_SAMPLE_BYTES)
        guess = charset_normalizer.from_bytes(sample).best()
        return checked_encoding(guess.encoding) if guess is not None and guess.coherence > 0 else None
    except (OSError, LookupError, argparse.ArgumentTypeError):
        return None


class BinaryText(UndecodableText):
    """A line holds a NUL byte, which no encoding read line by line puts in text: the file is binary."""

    def __init__(self, path: str | Path, line_number: int):
        ValueError.__init__(self, f"{path}: line {line_number} holds a NUL byte: a binary file, not text")
        self.path, self.line_number, self.byte = str(path), line_number, None


def decode_line(raw: bytes, encoding: str, path: str | Path, line_number: int) -> str:
    """One line's bytes as text (its line ending removed; a byte-order mark at the start of the file too)."""
    if b"\x00" in raw:
        raise BinaryText(path, line_number)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        raise UndecodableText(path, line_number, error, encoding) from None
    if line_number == 1 and text.startswith(_BOM):
        text = text[1:]
    return text.rstrip("\r\n")


def iter_lines(path: str | Path, encoding: str = DEFAULT_ENCODING) -> Iterator[str]:
    """The lines of `path` decoded with `encoding`, line endings removed; `UndecodableText` at the first bad line."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            yield decode_line(raw, encoding, path, number)


def check_decodes(paths: str | Path | list, encoding: str = DEFAULT_ENCODING) -> None:
    """Raises `UndecodableText` for the first line of `paths` that does not decode: one pass, nothing kept."""
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        for _ in iter_lines(path, encoding):
            pass


def resolve_files(patterns: Iterable[str]) -> list[str]:
    """Expand globs; raise `FileNotFoundError` naming each pattern that matches nothing."""
    files: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matches:
            raise FileNotFoundError(f"no file matches {pattern!r}")
        for match in matches:
            if os.path.isdir(match):
                raise IsADirectoryError(f"{match!r} is a directory; give text files (one sentence per line)")
        files.extend(matches)
    return files
