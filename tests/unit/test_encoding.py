"""Encoding sniffing as a browser does it: BOM, header, meta prescan, a later meta, detector.

Ported tables: every label of the WHATWG Encoding Standard (whatwg_encoding_labels.txt), its
single-byte indexes (whatwg_single_byte_indexes.txt), the labels web-platform-tests says no
browser supports (wpt_unsupported_encoding_labels.txt) and html5lib-tests' encoding cases
(html5lib_encoding_cases.jsonl).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
from selectolax.lexbor import LexborHTMLParser

from crawlfleet.models import FetchResult
from crawlfleet.parsing.encoding import (
    Encoding,
    decode,
    decode_as,
    encoding_for,
    html_input,
    prescan,
    sniff,
    text_of,
)

JA = "東京の天気は晴れです。価格は千円から。"


@pytest.mark.parametrize(
    ("head", "codec"),
    [
        (b'<meta charset="shift_jis">', "shift_jis"),
        (b"<META CHARSET=windows-1252>", "windows-1252"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=EUC-JP">', "euc-jp"),
        (b"<meta content='text/html;charset=koi8-r' http-equiv=content-type>", "koi8-r"),
        (b'<meta charset="iso-8859-1">', "windows-1252"),
        (b'<meta charset="utf-16">', "utf-8"),
        (b'<meta charset="utf-16be">', "utf-8"),
        (b'<meta charset="x-user-defined">', "windows-1252"),
        (b'<meta charset="iso-2022-kr">', "replacement"),
        (b'<!-- <meta charset="koi8-r"> --><meta charset="gbk">', "gbk"),
        (b'<meta charset="no-such-encoding"><meta charset="latin1">', "windows-1252"),
        (b'<div title="<meta charset=koi8-r>"><meta charset=euc-kr>', "euc-kr"),
        (b"<meta name=viewport content=width>", None),
        (b" " * 1024 + b'<meta charset="shift_jis">', None),
    ],
)
def test_meta_prescan(head: bytes, codec: str | None) -> None:
    assert prescan(b"<html><head>" + head) == codec


def test_order_bom_then_header_then_meta() -> None:
    meta = b'<meta charset="shift_jis">'
    assert sniff(codecs.BOM_UTF8 + meta, "text/html; charset=koi8-r") == Encoding("utf-8", "bom")
    assert sniff(meta, "text/html; charset=koi8-r") == Encoding("koi8-r", "header")
    assert sniff(meta, "text/html") == Encoding("shift_jis", "meta")
    assert sniff(meta, "text/html; charset=bogus") == Encoding("shift_jis", "meta")
    assert sniff(meta, "text/plain", html=False) == Encoding("utf-8", "default")


def test_a_meta_after_the_first_1024_bytes_decides_before_the_detector() -> None:
    text = "<html><head><title>t</title>" + "<!-- padding -->" * 80
    text += '<meta charset="windows-1251"></head><body><p>Погода в Москве хорошая</p></body>'
    body = text.encode("cp1251")
    assert sniff(body, "text/html") == Encoding("windows-1251", "late-meta")
    assert decode(body, "text/html") == text
    # Past the prescan, a <meta> in a script's text is not a <meta>.
    hidden = b"<html>" + b" " * 1100 + b"<script>var s = '<meta charset=koi8-r>';</script>"
    assert sniff(hidden + "<p>é</p>".encode(), "text/html").source == "default"


@pytest.mark.parametrize(
    ("label", "declared"),
    [
        ("ansi_x3.4-1968", "<p>caf\xe9 \x80</p>"),  # Python: ASCII, é and € lost
        ("csisolatin1", "<p>caf\xe9 \x80</p>"),  # Python: ISO-8859-1, € lost
        ("iso-8859-8-i", "<p>\xf9\xec\xe5\xed</p>"),  # Python: unknown, detector guessed
        ("ksc5601", "<p>\xc7\xd1\x8c\x63</p>"),  # Python: EUC-KR without UHC
    ],
)
def test_labels_python_misreads_decode_as_the_standard_says(label: str, declared: str) -> None:
    body = declared.encode("latin-1")
    expected = {
        "ansi_x3.4-1968": "<p>café €</p>",
        "csisolatin1": "<p>café €</p>",
        "iso-8859-8-i": "<p>שלום</p>",
        "ksc5601": "<p>한똠</p>",
    }[label]
    assert decode(body, f"text/html; charset={label}") == expected


@pytest.mark.parametrize("label", ["utf-7", "utf-32", "cp037", "utf-16-le", "x-mac-japanese"])
def test_labels_browsers_refuse_are_ignored(label: str) -> None:
    body = "<p>déjà</p>".encode()
    assert encoding_for(label) is None
    assert sniff(body, f"text/html; charset={label}") == Encoding("utf-8", "default")
    assert sniff(b'<meta charset="' + label.encode() + b'">' + body, None).source == "default"


def test_decoders_the_standard_defines_apart_from_python() -> None:
    assert (
        decode_as(b"<p>\x81\x8d\x8f\x90\x9d</p>", "windows-1252") == "<p>\x81\x8d\x8f\x90\x9d</p>"
    )
    assert decode_as(b"\xca", "windows-1255") == "\u05ba"
    assert decode_as(b"\xae\xbe", "koi8-u") == "\u045e\u040e"  # KOI8-RU
    assert decode_as(b"a\x80\xff", "x-user-defined") == "a\uf780\uf7ff"
    assert decode_as(b"\x1b$)C\x0e!!", "replacement") == "\ufffd"
    assert decode_as(b"", "replacement") == ""
    assert decode(b"a\x00b\x00", "text/html; charset=utf-16") == "ab"
    assert decode(b"\x00a\x00b", "text/html; charset=utf-16be") == "ab"


_HERE = Path(__file__).parent


def _labels() -> list[tuple[str, str]]:
    lines = (_HERE / "whatwg_encoding_labels.txt").read_text().splitlines()
    return [(line.split()[0], line.split()[1]) for line in lines if line and line[0] != "#"]


def test_every_whatwg_label_names_its_encoding() -> None:
    table = _labels()
    assert len(table) == 228
    assert {label: encoding_for(label) for label, _ in table} == dict(table)
    # Labels are matched without ASCII whitespace around them and without ASCII case.
    assert encoding_for(" \tLATIN1\n") == "windows-1252"
    assert encoding_for("\u212aoi8-r") is None  # KELVIN SIGN does not lower-case to k here


def test_labels_no_browser_supports_are_ignored() -> None:
    lines = (_HERE / "wpt_unsupported_encoding_labels.txt").read_text().splitlines()
    labels = [line for line in lines if line and line[0] != "#"]
    assert len(labels) == 155  # 39 of them Python's codecs know (utf-7, cp437, ibm037, ...)
    assert [label for label in labels if encoding_for(label) is not None] == []
    body = "<p>déjà</p>".encode("cp1252")
    for label in labels:
        assert sniff(body, f"text/html; charset={label}").source == "detected", label


def test_a_label_with_other_than_ascii_whitespace_around_it_is_no_label() -> None:
    # web-platform-tests, encoding/api-invalid-label.any.js: NUL, VT, NBSP, U+2028, U+2029.
    for label, _ in _labels():
        for space in ("\u0000", "\u000b", "\u00a0", "\u2028", "\u2029"):
            for padded in (space + label, label + space, space + label + space):
                assert encoding_for(padded) is None, repr(padded)


@pytest.mark.parametrize("name", sorted({name for _, name in _labels()}))
def test_every_whatwg_encoding_decodes(name: str) -> None:
    text = {"replacement": "\ufffd", "utf-16be": "\u3c70\u613e", "utf-16le": "\u703c\u3e61"}
    assert decode_as(b"<pa>", name) == text.get(name, "<pa>")
    decode_as(bytes(range(256)), name)  # any byte: a character or U+FFFD, never an error


def _single_byte_indexes() -> list[tuple[str, list[str | None]]]:
    lines = (_HERE / "whatwg_single_byte_indexes.txt").read_text().splitlines()
    rows = [line.split() for line in lines if line and line[0] != "#"]
    return [(row[0], [None if c == "-" else chr(int(c, 16)) for c in row[1:]]) for row in rows]


@pytest.mark.parametrize(("name", "index"), _single_byte_indexes(), ids=lambda v: str(v)[:14])
def test_single_byte_decoders_match_the_standards_index(name: str, index: list[str | None]) -> None:
    assert len(index) == 128
    assert decode_as(bytes(range(128)), name) == "".join(map(chr, range(128)))
    decoded = [decode_as(bytes([0x80 + offset]), name) for offset in range(128)]
    assert decoded == [char or "\ufffd" for char in index]


def test_multi_byte_decoders_where_python_differs_from_the_standard() -> None:
    # EUC-JP: NEC row 13, U+FF5E (Microsoft's table), JIS X 0212, half-width katakana.
    assert decode_as(b"\xad\xa1\xa1\xc1\x8f\xa2\xb7\x8e\xb1", "euc-jp") == "①\uff5e\uff5eｱ"
    assert decode_as(b"\xa1b\xff", "euc-jp") == "\ufffdb\ufffd"
    # gb18030 / gbk: two-byte codes GB18030-2022 moved out of the Private Use Area.
    assert decode_as(b"\xa3\xa0\xa6\xd9", "gbk") == "\u3000\ufe10"
    # euc-kr is UHC (windows-949), shift_jis is Microsoft's.
    assert decode_as(b"\x8c\x63", "euc-kr") == "똠"
    assert decode_as(b"\x87\x40", "shift_jis") == "①"


def _html5lib_cases() -> list[tuple[str, bytes, str]]:
    lines = (_HERE / "html5lib_encoding_cases.jsonl").read_text().splitlines()[1:]
    cases = [json.loads(line) for line in lines]
    return [(c["case"], c["bytes_latin1"].encode("latin-1"), c["encoding"]) for c in cases]


@pytest.mark.parametrize(("case", "body", "expected"), _html5lib_cases(), ids=lambda v: str(v))
def test_html5lib_encoding_cases(case: str, body: bytes, expected: str) -> None:
    found = sniff(body, None)
    if found.source == "default" and body.isascii() and expected == "windows-1252":
        # By design: an undeclared ASCII page is read as UTF-8; both give the same text.
        assert decode(body, None) == body.decode("cp1252")
        return
    assert found.name == encoding_for(expected), case


def test_detector_only_for_bytes_that_are_not_utf8() -> None:
    body = f"<html><body><p>{JA * 4}</p></body></html>".encode("shift_jis")
    assert sniff(body, "text/html").source == "detected"
    assert decode(body, "text/html").count(JA) == 4
    assert sniff("<p>déjà</p>".encode(), None) == Encoding("utf-8", "default")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-8"])
def test_a_bom_is_dropped(codec: str) -> None:
    text = f"<html><title>{JA}</title></html>"
    body = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}.get(
        codec, codecs.BOM_UTF8
    ) + text.encode(codec)
    assert decode(body, "text/html") == text


def test_the_python_codec_of_an_encoding_encodes_text_for_it() -> None:
    assert Encoding("shift_jis", "meta").codec == "cp932"
    assert "é".encode(Encoding("windows-1252", "detected").codec) == b"\xe9"
    assert Encoding("replacement", "header").codec == "utf-8"  # the URL standard's rule


def test_whatwg_labels() -> None:
    assert encoding_for("ISO-8859-1") == "windows-1252"
    assert encoding_for("Shift_JIS") == "shift_jis"
    assert encoding_for("utf8") == "utf-8"
    assert encoding_for("bogus") is None


def _page(body: bytes, content_type: str) -> FetchResult:
    return FetchResult(
        url="http://a.test/",
        final_url="http://a.test/",
        status=200,
        headers={"content-type": content_type},
        body=body,
        elapsed_s=0.01,
        fetched_at=0.0,
    )


@pytest.mark.parametrize(
    "body",
    [
        b'<meta charset="utf-8"><a href="/x\xff\xfey" title="\xed\xa0\x80">a\xe9b \xc3\xa9</a>',
        "<a href='/é' title='ok'>東京 déjà</a>".encode(),
    ],
)
def test_a_utf8_body_is_parsed_as_its_decoded_text_would_be(body: bytes) -> None:
    page = _page(body, "text/html")
    assert html_input(page) is body  # no decode
    from_bytes, from_text = LexborHTMLParser(body), LexborHTMLParser(text_of(page))
    assert from_bytes.html == from_text.html
    a, b = from_bytes.css_first("a"), from_text.css_first("a")
    assert (a.attributes, a.text()) == (b.attributes, b.text())


def test_other_encodings_and_a_bom_are_parsed_from_the_decoded_text() -> None:
    latin = _page("<p>déjà</p>".encode("cp1252"), "text/html; charset=windows-1252")
    with_bom = _page(codecs.BOM_UTF8 + b"<p>x</p>", "text/html")
    assert html_input(latin) == "<p>déjà</p>"
    assert html_input(with_bom) == "<p>x</p>"
