"""Users' text files in the encoding they name (`--encoding`, UTF-8 by default), line by line.

Bytes that do not decode are refused with one line that names the file, the line, the byte and the option to use,
rather than replaced by U+FFFD characters that would be embedded or trained on without a word said. Commands call
`check_decodes` on every input before they write anything, so a refusal leaves nothing half-written.

Lines end at `\n`, `\r\n` or a lone `\r` (old Mac files) alike, as Python's text files read them: a file of
`\r`-ended lines is as many lines, not one. Lines are split on the bytes 0x0a and 0x0d, so only encodings in which
those are the line endings (and no other character contains them) are accepted: UTF-8, GBK/GB18030, Big5, Shift-JIS, the
ISO-8859 and Windows code pages. UTF-16 and UTF-32 are refused by `checked_encoding`, with the conversion to use.
"""

from __future__ import annotations

import codecs
import glob
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .command_options import checked_encoding  # noqa: F401  (declared there: parsing needs it before any import)
from .encoding_guess import first_non_ascii, guess_encodings, words_at
from .errors import InputError, reading

DEFAULT_ENCODING = "utf-8"
_BOM = "\ufeff"
_C1_CONTROLS = re.compile("[\x80-\x9f]")


class UndecodableText(InputError):
    """A line of a text file is not valid in the encoding it is read with; the message names the encoding the file
    reads in where one can be told, or the candidates with the words as each reads them (`guess_encodings`).
    `option`: the option that names the file's encoding (a command that reads several files may have one each).
    `suggested`: the one encoding the message names, if it names one."""

    suggested: str | None = None

    def __init__(self, path: str | Path, line_number: int, error: UnicodeDecodeError, encoding: str,
                 option: str = "--encoding", errors_option: str | None = None):
        bad = error.object[error.start: error.start + 1]
        value = f" (0x{bad[0]:02x})" if bad else ""
        hint, self.suggested = hint_and_encoding(path, bytes(error.object), encoding, option, errors_option)
        super().__init__(f"{path}: line {line_number}, byte {error.start + 1} of the line{value} is not valid "
                         f"{encoding}; {hint}")
        self.path, self.line_number, self.byte = str(path), line_number, error.start + 1


def encoding_hint(path: str | Path, bad_line: bytes, encoding: str, option: str = "--encoding",
                  errors_option: str | None = None) -> str:
    """`hint_and_encoding`'s hint."""
    return hint_and_encoding(path, bad_line, encoding, option, errors_option)[0]


def hint_and_encoding(path: str | Path, bad_line: bytes, encoding: str, option: str = "--encoding",
                      errors_option: str | None = None) -> tuple[str, str | None]:
    """What to give `option` for the file at `path`, whose line `bad_line` did not decode in `encoding`: the
    encoding it reads in, or the candidates with the words of the line as each reads them, or the usual ones. A
    UTF-8 file with a few lines in another encoding is told so (`mixed_utf8_hint`): another encoding would misread
    the rest. `errors_option`: the command's option that leaves undecodable lines out, if it has one. A file that
    starts with UTF-16's or UTF-32's byte-order mark (Notepad's "Unicode") is told so, with the conversion: the
    legacy encodings named otherwise would not decode it, and it is not read line by line. With the hint, the one
    encoding it names (None where it names several, or none)."""
    wide = wide_encoding(path)
    if wide:
        return wide_text_hint(path, wide), None
    if _utf8_encoding(encoding):
        mixed = mixed_utf8_hint(path, bad_line, option, errors_option)
        if mixed:
            return mixed, None
    readings = guess_encodings(path, bad_line, exclude=codecs.lookup(encoding).name)
    if len(readings) == 1:
        return f"the file reads as {readings[0].encoding}: {option} {readings[0].encoding}", readings[0].encoding
    if readings:
        candidates = " or as ".join(f"{r.encoding} ({r.words!r})" for r in readings)
        return (f"the file reads as {candidates}: give {option} with the one that shows the words right, "
                f"{' or '.join(f'{option} {r.encoding}' for r in readings)}"), None
    return f"give the file's encoding with {option} (gb18030 for simplified Chinese, big5 for traditional)", None


def mixed_utf8_hint(path: str | Path, bad_line: bytes, option: str, errors_option: str | None) -> str | None:
    """For a file of UTF-8 lines beyond ASCII with some lines that are not UTF-8 (one Latin-1 line pasted into a
    UTF-8 file): the lines that are not, how the first reads, and what to do; None when no line beyond ASCII is
    UTF-8 (the whole file is in another encoding: `guess_encodings` names it)."""
    good, bad = 0, []
    try:
        with open(path, "rb") as handle:
            for number, (raw, _) in enumerate(raw_lines(handle), start=1):
                if raw.isascii():
                    continue
                try:
                    raw.decode("utf-8")
                    good += 1
                except UnicodeDecodeError:
                    bad.append(number)
    except OSError:
        return None
    if not good or not bad:
        return None
    readings = guess_encodings(path, bad_line, exclude="utf-8", sample=bad_line)
    reads = f" (it reads as {readings[0].encoding}: {readings[0].words!r})" if readings else ""
    more = f" and {len(bad) - 1} more (lines {', '.join(map(str, bad[1:4]))}{', ...' if len(bad) > 4 else ''})" \
        if len(bad) > 1 else ""
    skip = f", or leave {'it' if len(bad) == 1 else 'them'} out with {errors_option} skip" if errors_option else ""
    return (f"the file is UTF-8 but for line {bad[0]}{more}{reads}: another {option} would misread its {good} UTF-8 "
            f"lines beyond ASCII; write {'that line' if len(bad) == 1 else 'those lines'} in UTF-8{skip}")


# The byte-order marks of the encodings that are not read line by line (a newline is not the byte 0x0a in them)
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
              (codecs.BOM_UTF16_BE, "utf-16"))


def wide_encoding(path: str | Path) -> str | None:
    """"utf-16" or "utf-32" for a file that starts with their byte-order mark (Windows' "Unicode" text), else None."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(4)
    except OSError:
        return None
    return next((name for bom, name in _WIDE_BOMS if start.startswith(bom)), None)


def wide_text_hint(path: str | Path, wide: str) -> str:
    """What to do with a file of `wide` ("utf-16", "utf-32") text."""
    return (f"{path} is {wide.upper()} text (it starts with its byte-order mark), which is not read line by line: "
            f"convert it to UTF-8 first, for example: iconv -f {wide} -t utf-8 {path} > {path}.utf8")


class BinaryText(UndecodableText):
    """A line holds a NUL byte, which no encoding read line by line puts in text: the file is binary."""

    def __init__(self, path: str | Path, line_number: int):
        wide = wide_encoding(path)
        message = wide_text_hint(path, wide) if wide else \
            f"{path}: line {line_number} holds a NUL byte: a binary file, not text"
        ValueError.__init__(self, message)
        self.path, self.line_number, self.byte = str(path), line_number, None


def decode_line(raw: bytes, encoding: str, path: str | Path, line_number: int, option: str = "--encoding",
                errors_option: str | None = None) -> str:
    """One line's bytes as text (its line ending removed; a byte-order mark at the start of the file too).
    `option`: the option that names the file's encoding, for the hint of `UndecodableText`."""
    if b"\x00" in raw:
        raise BinaryText(path, line_number)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        raise UndecodableText(path, line_number, error, encoding, option, errors_option) from error
    if line_number == 1 and text.startswith(_BOM):
        text = text[1:]
    return text.rstrip("\r\n")


def raw_lines(handle: BinaryIO, limit: int | None = None, block_size: int = 1 << 20) -> Iterator[tuple[bytes, bool]]:
    """(bytes, cut) of each line of the binary file `handle`, its ending removed: lines end at `\n`, `\r\n` or a lone
    `\r`, as in Python's text files. With `limit`, a line that runs on beyond a block read and `limit` bytes yields
    its first `limit` bytes with `cut` True and the rest is skipped, so memory stays bounded (a longer line read
    whole within a block comes whole, `cut` False); without, `cut` is always False."""
    rest, skipping, pieces = b"", False, []  # pieces: blocks of a line without an ending yet (joined once)
    while True:
        block = handle.read(block_size)
        if block and b"\n" not in block and b"\r" not in block and (limit is None or skipping) \
                and not rest.endswith(b"\r"):
            if not skipping:
                pieces.append(block)
            continue
        data = b"".join([rest, *pieces, block])
        pieces = []
        held = b"\r" if block and data.endswith(b"\r") else b""  # maybe the first half of \r\n: read on
        if held:
            data = data[:-1]
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        rest = lines.pop() + held  # the line not ended yet (b"" after an ending)
        for line in lines:
            if skipping:
                skipping = False
            else:
                yield line, False
        if not block:
            if rest and not skipping:
                yield rest, False
            return
        if limit is not None and len(rest) > limit and not held:
            if not skipping:
                yield rest[:limit], True
            rest, skipping = b"", True


def iter_lines(path: str | Path, encoding: str = DEFAULT_ENCODING, option: str = "--encoding") -> Iterator[str]:
    """The lines of `path` decoded with `encoding`, line endings (`\n`, `\r\n`, `\r`) removed; `UndecodableText` at
    the first bad line (its hint names `option`)."""
    with open(path, "rb") as handle:
        for number, (raw, _) in enumerate(raw_lines(handle), start=1):
            yield decode_line(raw, encoding, path, number, option)


class MisreadText(UndecodableText):
    """A file given in a legacy encoding (gbk, cp1252, ...) that is valid UTF-8 with characters beyond ASCII: UTF-8
    text, which the legacy encoding reads too, into other characters ("北京" into "鍖椾含" in gbk)."""

    def __init__(self, path: str | Path, line_number: int, line: bytes, encoding: str, option: str):
        readings = (line.decode(name) for name in ("utf-8", encoding))
        as_utf8, as_given = (words_at(text, first_non_ascii(text)) for text in readings)
        ValueError.__init__(self, f"{path} is UTF-8 text (line {line_number} reads as {as_utf8!r}), which {encoding} "
                                  f"misreads (as {as_given!r}): {option} utf-8")
        self.path, self.line_number, self.byte, self.suggested = str(path), line_number, None, "utf-8"


class ControlCharacters(UndecodableText):
    """A line that decodes into C1 control characters (U+0080 to U+009F), which text does not hold: Latin-1 decodes
    every byte, and reads Windows' curly quotes, dashes and euro sign (cp1252's 0x80 to 0x9f) so."""

    def __init__(self, path: str | Path, line_number: int, raw: bytes, encoding: str, option: str):
        text = raw.decode(encoding)
        first = _C1_CONTROLS.search(text).start()
        hint = encoding_hint(path, raw.rstrip(b"\r\n"), encoding, option)
        ValueError.__init__(self, f"{path}: line {line_number}, character {first + 1} is the control character "
                                  f"U+{ord(text[first]):04X} in {encoding}, which text does not hold; {hint}")
        self.path, self.line_number, self.byte = str(path), line_number, None


# A legacy CJK encoding's family, as the encoding guesser names it: a file given in one that reads as text of another
# (Big5 given as gb18030 decodes without an error, into characters no text has) is refused (`MisreadCJK`).
_CJK_FAMILIES = {"gb18030": "gb18030", "gbk": "gb18030", "gb2312": "gb18030", "big5": "big5", "big5hkscs": "big5",
                 "cp950": "big5", "cp932": "cp932", "shift_jis": "cp932", "euc_jp": "euc_jp", "cp949": "cp949",
                 "euc_kr": "cp949"}


class MisreadCJK(UndecodableText):
    """A file given in one legacy CJK encoding that reads as text only in another: Big5 decodes as gb18030 without an
    error, into rare characters (a tenth of them common ones, where a real text has nearly all), and trained."""

    def __init__(self, path: str | Path, encoding: str, option: str, sample: str, reading):
        given = words_at(sample, first_non_ascii(sample))
        ValueError.__init__(self, f"{path} reads as {reading.encoding} text ({reading.words!r}), which {encoding} "
                                  f"misreads (as {given!r}): {option} {reading.encoding}")
        self.path, self.line_number, self.byte, self.suggested = str(path), None, None, reading.encoding


def check_cjk_reading(path: str | Path, encoding: str, option: str) -> None:
    """`MisreadCJK` where `encoding` is a legacy CJK one, the start of the file (which decodes in it) reads as
    implausible text in it, and as plausible text in exactly one other encoding (`encoding_guess`)."""
    from .encoding_guess import SURE, UNLIKELY, plausibility, sample_of

    family = _CJK_FAMILIES.get(codecs.lookup(encoding).name.replace("-", "_"))
    if family is None:
        return
    sample = sample_of(path)
    if sample.isascii():
        return
    text = sample.decode(encoding, errors="replace")
    if plausibility(text, family) >= UNLIKELY:
        return
    readings = guess_encodings(path, exclude=family, sample=sample)
    if len(readings) == 1 and readings[0].plausibility >= SURE:
        raise MisreadCJK(path, encoding, option, text, readings[0])


def _utf8_encoding(encoding: str) -> bool:
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig", "ascii")


def check_decodes(paths: str | Path | list, encoding: str = DEFAULT_ENCODING, option: str = "--encoding",
                  errors_option: str | None = None) -> None:
    """Raises `UndecodableText` for the first line of `paths` that does not decode: one pass, nothing kept. `option`:
    the option that names their encoding. In a legacy `encoding`, a file that is valid UTF-8 beyond ASCII (which
    legacy text practically never is: `MisreadText`) or that decodes into C1 control characters (Windows' quotes read
    as Latin-1: `ControlCharacters`) is refused too: it decodes, but into other characters."""
    legacy = not _utf8_encoding(encoding)
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        maybe_utf8, first = legacy, None  # whether the file is still valid UTF-8; its first line beyond ASCII
        with reading(path), open(path, "rb") as handle:  # a file this process may not read: one line naming it
            for number, (raw, _) in enumerate(raw_lines(handle), start=1):
                text = decode_line(raw, encoding, path, number, option, errors_option)
                if not legacy or raw.isascii():
                    continue
                if _C1_CONTROLS.search(text):
                    raise ControlCharacters(path, number, raw, encoding, option)
                if maybe_utf8:
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError:
                        maybe_utf8 = False
                    else:
                        first = first or (number, raw)
        if maybe_utf8 and first is not None:
            raise MisreadText(path, first[0], first[1].rstrip(b"\r\n"), encoding, option)
        if legacy:
            check_cjk_reading(path, encoding, option)


def resolve_files(patterns: Iterable[str]) -> list[str]:
    """Expand globs; an `InputError` naming the first pattern that matches nothing, or a folder it matches."""
    files: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matches:
            raise InputError(f"no file matches {pattern!r}")
        for match in matches:
            if os.path.isdir(match):
                raise InputError(f"{match!r} is a directory; give text files (one sentence per line)")
        files.extend(matches)
    return files
