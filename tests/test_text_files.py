"""The shared reading of users' text files: encodings, and the one-line refusal of bytes that do not decode."""

import argparse

import pytest

from elmo_hf.tools.core.text_files import (
    UndecodableText,
    check_decodes,
    checked_encoding,
    iter_lines,
    raw_lines,
)


def test_lines_decode_in_the_named_encoding_and_lose_their_endings(tmp_path):
    path = tmp_path / "gbk.txt"
    path.write_bytes("银行 贷款\r\n河 岸\n".encode("gbk"))
    assert list(iter_lines(path, "gbk")) == ["银行 贷款", "河 岸"]
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfone\ntwo")
    assert list(iter_lines(bom)) == ["one", "two"]


def test_bytes_that_do_not_decode_are_named_by_file_line_and_byte(tmp_path):
    path = tmp_path / "gbk.txt"
    path.write_bytes(b"fine\n" + "ab 银行\n".encode("gbk"))
    with pytest.raises(UndecodableText) as caught:
        check_decodes([path])
    message = str(caught.value)
    assert (caught.value.line_number, caught.value.byte) == (2, 4)
    assert str(path) in message and "line 2, byte 4" in message and "0xd2" in message and "--encoding" in message
    assert "\n" not in message
    check_decodes(path, "gb18030")  # the right encoding reads it


@pytest.mark.parametrize("name, expected", [("UTF8", "utf-8"), ("GBK", "gbk"), ("latin-1", "iso8859-1")])
def test_encoding_names_are_normalised(name, expected):
    assert checked_encoding(name) == expected


@pytest.mark.parametrize("name, words", [("no-such-codec", "unknown encoding"), ("utf-16", "iconv -f utf-16")])
def test_unknown_or_unsplittable_encodings_are_refused_in_one_line(name, words):
    with pytest.raises(argparse.ArgumentTypeError, match=words) as caught:
        checked_encoding(name)
    assert "\n" not in str(caught.value)


def test_an_undecodable_file_names_the_encoding_it_reads_in(tmp_path):
    """Traditional Chinese in Big5 is named big5, not gb18030 (which decodes it too, into other characters); where
    the bytes fit many encodings alike, the hint names the usual two."""
    text = "我們在河邊散步，銀行的利率提高了。今天天氣很好，我們去公園散步吧。\n" * 5
    for encoding in ("big5", "gb18030"):
        path = tmp_path / f"{encoding}.txt"
        path.write_bytes(text.encode(encoding))
        with pytest.raises(UndecodableText, match=f"the file reads as {encoding}: --encoding {encoding}$"):
            check_decodes(path, "utf-8")
    few = tmp_path / "few.txt"  # a few common hanzi among English words still read as GB 2312's
    few.write_bytes("The bank, the river.\n银行 的 bank.\n".encode("gb18030"))
    with pytest.raises(UndecodableText, match="the file reads as gb18030: --encoding gb18030$"):
        check_decodes(few, "utf-8")
    junk = tmp_path / "junk.txt"  # bytes that read as no language's text
    junk.write_bytes(b"ok\n\x81\x8d\x8f\x90\x9d\x81\x8d\n")
    with pytest.raises(UndecodableText, match="gb18030 for simplified Chinese, big5 for traditional"):
        check_decodes(junk, "utf-8")


# A line of each language in its legacy encoding, and words of it that the hinted encoding must read back exactly.
LEGACY_FILES = {
    "latin-1": ("label\ttext\n1\tune crème brûlée très naïve\n0\tle café était froid à Noël\n", "latin-1",
                ["crème", "brûlée", "naïve", "Noël"]),
    "cp1252": ("label\ttext\n1\t“quoted” café – 5 €\n0\tnaïve façade\n", "cp1252", ["“quoted”", "–", "€", "façade"]),
    "cp1250": ("label\ttext\n1\tPříliš žluťoučký kůň úpěl ďábelské ódy\n0\tZażółć gęślą jaźń\n", "cp1250",
               ["Příliš", "žluťoučký", "kůň", "gęślą"]),
    "shift-jis": ("label\ttext\n1\t東京は日本の首都です。\n0\tこんにちは世界\n", "shift_jis",
                  ["東京は日本の首都です。"]),
    "euc-kr": ("label\ttext\n1\t서울은 한국의 수도입니다.\n0\t안녕하세요 세계\n", "euc-kr",
               ["서울은", "한국의", "안녕하세요"]),
    "gbk": ("label\ttext\n1\t北京是中国的首都。\n0\t鲁迅出生在绍兴。\n", "gbk",
            ["北京是中国的首都。", "鲁迅出生在绍兴。"]),
    "big5": ("label\ttext\n1\t臺北是臺灣的首都。\n0\t魯迅出生在紹興。\n", "big5",
             ["臺北是臺灣的首都。", "魯迅出生在紹興。"]),
}


@pytest.mark.parametrize("name", LEGACY_FILES)
def test_the_hinted_encoding_reads_the_words_of_a_legacy_file_back(tmp_path, name):
    """Following the hint reads every word as it was written: Western European text is cp1252's (which reads Latin-1
    text too; cp1250 would read "crème" as "crčme"), Central European cp1250's, Japanese, Korean, simplified and
    traditional Chinese their encodings' (under the names of their supersets: cp932, cp949, gb18030)."""
    text, encoding, words = LEGACY_FILES[name]
    path = tmp_path / f"{name}.tsv"
    path.write_bytes(text.encode(encoding))
    with pytest.raises(UndecodableText, match=r"the file reads as (\S+): --encoding \1$") as caught:
        check_decodes(path, "utf-8")
    hinted = str(caught.value).rsplit(" ", 1)[-1]
    check_decodes(path, hinted)
    read = "\n".join(iter_lines(path, hinted))
    assert all(word in read for word in words) and read == text.rstrip("\n"), (hinted, read)


def test_readings_alike_are_listed_with_the_words_as_each_reads_them(tmp_path):
    """Spanish in Latin-1 reads as Polish-looking words in cp1250 ("nińo"): both are offered, the words shown."""
    path = tmp_path / "es.tsv"
    path.write_bytes("label\ttext\n1\tEl niño comió piñata\n".encode("latin-1"))
    with pytest.raises(UndecodableText) as caught:
        check_decodes(path, "utf-8", option="--validation_encoding")
    message = str(caught.value)
    assert ("the file reads as cp1252 ('niño comió piñata') or as cp1250 ('nińo comió pińata'): give "
            "--validation_encoding with the one that shows the words right, --validation_encoding cp1252 or "
            "--validation_encoding cp1250") in message, message


def test_utf8_text_named_as_a_legacy_encoding_is_refused_not_misread(tmp_path):
    """gbk and cp1252 decode UTF-8 bytes too, into other characters ("café" as "caf茅"): a file that is valid UTF-8
    beyond ASCII is UTF-8, and is refused in the encoding named, with the words as each reads them."""
    from elmo_hf.tools.core.text_files import MisreadText

    path = tmp_path / "utf8.tsv"
    path.write_text("label\ttext\n1\tcafé au lait\n", encoding="utf-8")
    for encoding, misread in (("gbk", "caf茅 au lait"), ("cp1252", "cafÃ© au lait")):
        with pytest.raises(MisreadText) as caught:
            check_decodes(path, encoding, option="--test_encoding")
        assert str(caught.value) == (
            f"{path} is UTF-8 text (line 2 reads as 'café au lait'), which {encoding} misreads "
            f"(as {misread!r}): --test_encoding utf-8")
    check_decodes(path, "utf-8")
    legacy = tmp_path / "gbk.txt"
    legacy.write_bytes("银行 贷款\ncafé\n".encode("gbk"))  # real GBK text is not valid UTF-8: read as named
    check_decodes(legacy, "gbk")


def test_windows_quotes_read_as_latin_1_control_characters_are_refused(tmp_path):
    """Latin-1 decodes every byte: cp1252's curly quotes, dashes and euro sign become C1 control characters."""
    path = tmp_path / "quotes.tsv"
    path.write_bytes("label\ttext\n1\t“quoted” café – 5 €\n".encode("cp1252"))
    with pytest.raises(UndecodableText) as caught:
        check_decodes(path, "latin-1")
    assert str(caught.value) == (f"{path}: line 2, character 3 is the control character U+0093 in latin-1, which text "
                                 "does not hold; the file reads as cp1252: --encoding cp1252")
    check_decodes(path, "cp1252")


@pytest.mark.parametrize("block_size", [1, 2, 3, 1 << 20])
def test_lines_end_at_lf_crlf_and_a_lone_cr_across_block_boundaries(block_size):
    import io
    import re

    for data in (b"a\rb\rc", b"a\r\nb\nc\n", b"x\r\r\ny\r", b"\r\n\r\n", b"one\r\ntwo\rthree\nfour"):
        expected = re.split(rb"\r\n|\r|\n", data)
        expected = expected[:-1] if expected[-1] == b"" else expected
        assert [line for line, _ in raw_lines(io.BytesIO(data), block_size=block_size)] == expected
    # a line that runs on beyond the limit is cut, the next one read whole
    lines = list(raw_lines(io.BytesIO(b"abcdefgh\rxy\r\nz"), limit=3, block_size=min(block_size, 2)))
    assert lines == [(b"abc", True), (b"xy", False), (b"z", False)]
