"""Which encoding the bytes of a file that does not decode most plausibly are, for the hint of the one-line refusal.

A byte sequence decodes without error in many encodings: Latin-1 text reads as cp1250 too ("crème" as "crčme"), GBK
as EUC-JP, Korean EUC-KR as GBK. A statistical detector (charset-normalizer) needs more text than a data file's
first lines to tell them apart, and guessed cp1250 for French. So each candidate's decoding is judged as a reader
would: are its letters those of one language's alphabet, its symbols where text has symbols (not inside words), its
CJK characters the common ones (the first level of GB 2312, Big5 and JIS X 0208; KS X 1001's Hangul), with some of
the language's most frequent characters among them? The best decoding is named when it is clearly best; when two
read alike (Spanish "niño" is Polish-plausible "nińo" in cp1250) both are listed with the words as each reads them,
for the user to pick.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from charset_normalizer.constant import FREQUENCIES

_SAMPLE_BYTES = 1 << 14
# The candidates, in the order that breaks ties: the Western code page first (the most common), then the CJK
# encodings under their supersets' names (gb18030 reads GBK and GB2312, cp932 Shift-JIS, cp949 EUC-KR), then the
# other single-byte pages.
CANDIDATES = ("utf-8", "cp1252", "gb18030", "cp932", "cp949", "big5", "euc_jp", "cp1250", "cp1251", "cp1253",
              "iso8859_7", "cp1254", "cp1257")  # ISO-8859-7: Greek's other page (its Ά is cp1253's ¶)
CJK_ENCODINGS = ("gb18030", "cp932", "cp949", "big5", "euc_jp")
SURE = 0.75  # the best decoding is named alone at this plausibility or more ...
MARGIN = 0.15  # ... when every other decoding is this much less plausible; those within it are listed beside it
UNLIKELY = 0.5  # a decoding below this is not offered at all
WESTERN_PRIOR = 0.05  # added to the Western code page's: of two readings almost as plausible, the more common

# The letters beyond ASCII of the languages that the candidate code pages are made for (lower case).
_ALPHABETS = tuple(set(letters) for letters in (
    "àâæçéèêëîïôœùûüÿ",  # French
    "äöüß", "áéíñóúü", "áâãàçéêíóôõú", "àèéìíîòóùú", "áéíóúëïöüè",  # German, Spanish, Portuguese, Italian, Dutch
    "æøåéó", "åäöé", "áðéíóúýþæö", "àçéèíïòóúü",  # Danish/Norwegian, Swedish/Finnish, Icelandic, Catalan
    "áčďéěíňóřšťúůýž", "áäčďéíĺľňóôŕšťúýž", "ąćęłńóśźż", "áéíóöőúüű",  # Czech, Slovak, Polish, Hungarian
    "čćđšž", "ăâîșțşţ", "çğıöşüâî", "ąčęėįšųūž", "āčēģīķļņšūž", "äöõüšž",  # Slovene/Croatian, Romanian, Turkish, Baltic
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюя", "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя",  # Russian, Ukrainian
    "абвгдђежзијклљмнњопрстћуфхцчџш", "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώϊϋΐΰς",  # Serbian, Greek
))
# Symbols beyond ASCII that ordinary text has (at a word's edge or alone); others (±, ³, ¬, ...) are what a wrong
# single-byte decoding of multi-byte text is made of.
_COMMON_SYMBOLS = set("“”‘’„«»‹›–—…•·€£¥¢°§©®™¿¡×÷½¼¾\u00a0")
# Some of each language's most frequent characters: a real text of it has them (hiragana for Japanese).
_FREQUENT = {
    "gb18030": set(FREQUENCIES["Chinese"]), "big5": set(FREQUENCIES["Chinese"]),
    "cp932": set(FREQUENCIES["Japanese"]) | {chr(c) for c in range(0x3041, 0x3097)},
    "cp949": set(FREQUENCIES["Korean"]),
}
_FREQUENT["euc_jp"] = _FREQUENT["cp932"]


@dataclass(frozen=True)
class Reading:
    """A candidate encoding, how plausible its decoding is (0 to 1), and the words of the bad line as it reads them."""

    encoding: str
    plausibility: float
    words: str


def guess_encodings(path, bad_line: bytes = b"", exclude: str | None = None,
                    sample: bytes | None = None) -> list[Reading]:
    """The plausible encodings of the file at `path` (its start, and `bad_line`, the line that did not decode), best
    first: one when it is clearly best, several when they read alike, none when none reads as text. `exclude`: the
    encoding that failed. `sample`: these bytes instead of the file's start."""
    if sample is None:
        sample = sample_of(path)
    if bad_line not in sample:  # a line beyond the sample's end
        sample += b"\n" + bad_line
    readings, seen = [], set()
    for encoding in CANDIDATES:
        if encoding == exclude:
            continue
        try:
            text = sample.decode(encoding)
        except UnicodeDecodeError:
            continue
        if text in seen or text.isascii():
            continue
        seen.add(text)
        score = 1.0 if encoding == "utf-8" else plausibility(text, encoding)  # UTF-8 by chance is very rare
        score += WESTERN_PRIOR if encoding == "cp1252" else 0.0
        readings.append((score, encoding, text))
    readings.sort(key=lambda reading: -reading[0])  # stable: ties keep the order of CANDIDATES
    if not readings or readings[0][0] < UNLIKELY:
        return []
    best = readings[0][0]
    close = [r for r in readings if r[0] >= max(UNLIKELY, best - MARGIN)][:3]
    if len(close) > 1 and not _impossible(close[0][2]):  # of pages alike, one reads a symbol no text has (¶ for Ά)
        close = [r for r in close if not _impossible(r[2])]
    if best >= SURE and len(close) == 1:
        return [Reading(close[0][1], min(best, 1.0), words_at(close[0][2], first_non_ascii(close[0][2])))]
    where = _first_difference([text for _, _, text in close])
    return [Reading(encoding, min(score, 1.0), words_at(text, where)) for score, encoding, text in close]


def sample_of(path) -> bytes:
    """The start of the file at `path` (`_SAMPLE_BYTES`), cut at its last whole line; b"" where it cannot be read."""
    try:
        with open(path, "rb") as handle:
            sample = handle.read(_SAMPLE_BYTES)
    except OSError:
        return b""
    if len(sample) == _SAMPLE_BYTES and b"\n" in sample:
        sample = sample[: sample.rindex(b"\n") + 1]  # no character cut in half at the end
    return sample


def plausibility(text: str, encoding: str) -> float:
    """The share of the non-ASCII characters of `text` that read as text of one language would (see the module's
    docstring), lowered for CJK text without any of its language's frequent characters."""
    wide = [c for c in text if not c.isascii()]
    if not wide:
        return 0.0
    letters = [c.lower() for c in wide if c.isalpha() and _cjk(c, encoding) is None]
    alphabet = max(_ALPHABETS, key=lambda a: sum(c in a for c in letters)) if letters else set()
    good = 0
    for word in text.split():
        latin_word = any(c.isascii() and c.isalpha() for c in word)
        for i, c in enumerate(word):
            if c.isascii():
                continue
            cjk = _cjk(c, encoding)
            if cjk is not None:
                good += cjk
            elif c.isalpha():  # a letter of the alphabet, not a Cyrillic or Greek one inside a Latin word
                good += c.lower() in alphabet and not (latin_word and not _latin(c))
            else:
                inside = 0 < i < len(word) - 1 and word[i - 1].isalpha() and word[i + 1].isalpha()
                good += c in _COMMON_SYMBOLS and not inside
    score = good / len(wide)
    if encoding in _FREQUENT:
        cjk_characters = [c for c in wide if _cjk(c, encoding) is not None]
        frequent = sum(c in _FREQUENT[encoding] for c in cjk_characters) / max(1, len(cjk_characters))
        score *= 0.6 + 0.4 * min(1.0, frequent / 0.15)
    return score


def _impossible(text: str) -> int:
    """How many characters of `text` are beyond ASCII and neither letters, CJK, nor symbols that text has."""
    return sum(not c.isascii() and not c.isalpha() and c not in _COMMON_SYMBOLS and _cjk(c, "gb18030") is None
               for c in text)


def _latin(c: str) -> bool:
    return unicodedata.name(c, "").startswith("LATIN")


def _encodes(c: str, encoding: str) -> bytes | None:
    try:
        return c.encode(encoding)
    except UnicodeEncodeError:
        return None


def _cjk(c: str, encoding: str) -> bool | None:
    """For a CJK character (ideograph, kana, Hangul, CJK punctuation): whether a text in `encoding` commonly has it;
    None for any other character."""
    o = ord(c)
    if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF:
        if encoding == "gb18030":  # GB 2312's first level: the 3,755 common hanzi
            code = _encodes(c, "gb2312")
            return code is not None and 0xB0 <= code[0] <= 0xD7
        if encoding == "big5":  # Big5's frequent characters (one outside Big5, of HKSCS or cp950, is not one)
            code = _encodes(c, "big5")
            return code is not None and 0xA4 <= code[0] <= 0xC6
        if encoding in ("cp932", "euc_jp"):  # JIS X 0208's first level
            code = _encodes(c, "cp932")
            return code is not None and 0x88 <= code[0] <= 0x98
        return False  # hanja in Korean text, or an ideograph from a single-byte page (impossible)
    if 0xAC00 <= o <= 0xD7A3:
        return encoding == "cp949" and _encodes(c, "euc_kr") is not None  # KS X 1001's 2,350 syllables
    if 0x3040 <= o <= 0x30FF:
        return encoding in ("cp932", "euc_jp")
    if 0xFF61 <= o <= 0xFF9F:
        return False  # half-width katakana: what Big5 or GBK bytes read as in Shift-JIS
    if 0x3000 <= o <= 0x303F or 0xFF01 <= o <= 0xFF5E:
        return encoding in CJK_ENCODINGS
    return None


def first_non_ascii(text: str) -> int:
    return next((i for i, c in enumerate(text) if not c.isascii()), 0)


def _first_difference(texts: list[str]) -> int:
    """The position in the first of `texts` where the readings first differ (single-byte readings align
    character for character; otherwise, their first non-ASCII character)."""
    if len({len(text) for text in texts}) == 1:
        return next((i for i, chars in enumerate(zip(*texts)) if len(set(chars)) > 1), 0)
    return first_non_ascii(texts[0])


def words_at(text: str, position: int, most: int = 24) -> str:
    """The words of `text` from the one at `position` (at most `most` characters, within its line)."""
    start = max(text.rfind(separator, 0, position) for separator in " \t\n") + 1
    end = text.find("\n", position)
    line = text[start: end if end >= 0 else len(text)].strip()
    if len(line) <= most:
        return line
    cut = line[:most]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut
