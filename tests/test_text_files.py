"""The shared reading of users' text files: encodings, and the one-line refusal of bytes that do not decode."""

import argparse

import pytest

from elmo_tools.text_files import UndecodableText, check_decodes, checked_encoding, iter_lines


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
    few = tmp_path / "few.txt"
    few.write_bytes("The bank, the river.\n银行 的 bank.\n".encode("gb18030"))
    with pytest.raises(UndecodableText, match="gb18030 for simplified Chinese, big5 for traditional"):
        check_decodes(few, "utf-8")
