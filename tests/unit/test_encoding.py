"""Encoding sniffing as a browser does it: BOM, then header, then meta prescan, then detector."""

from __future__ import annotations

import codecs

import pytest
from selectolax.lexbor import LexborHTMLParser

from crawlfleet.models import FetchResult
from crawlfleet.parsing.encoding import (
    Encoding,
    codec_for,
    decode,
    html_input,
    prescan,
    sniff,
    text_of,
)

JA = "東京の天気は晴れです。価格は千円から。"


@pytest.mark.parametrize(
    ("head", "codec"),
    [
        (b'<meta charset="shift_jis">', "cp932"),
        (b"<META CHARSET=windows-1252>", "cp1252"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=EUC-JP">', "euc_jp"),
        (b"<meta content='text/html;charset=koi8-r' http-equiv=content-type>", "koi8-r"),
        (b'<meta charset="iso-8859-1">', "cp1252"),
        (b'<meta charset="utf-16">', "utf-8"),
        (b'<!-- <meta charset="koi8-r"> --><meta charset="gbk">', "gb18030"),
        (b'<meta charset="no-such-encoding"><meta charset="latin1">', "cp1252"),
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
    assert sniff(meta, "text/html") == Encoding("cp932", "meta")
    assert sniff(meta, "text/html; charset=bogus") == Encoding("cp932", "meta")
    assert sniff(meta, "text/plain", html=False) == Encoding("utf-8", "default")


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


def test_whatwg_labels() -> None:
    assert codec_for("ISO-8859-1") == "cp1252"
    assert codec_for("Shift_JIS") == "cp932"
    assert codec_for("utf8") == "utf-8"
    assert codec_for("bogus") is None


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
