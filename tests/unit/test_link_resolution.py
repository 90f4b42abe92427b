"""Links resolved as a browser resolves them: the page's encoding, its white space rules."""

from __future__ import annotations

from crawlfleet.models import FetchResult
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.links import extract_links
from crawlfleet.parsing.response import Response
from crawlfleet.urls import UrlRules

PAGE = "http://shop.test/list/page.html"


def _page(body: bytes, content_type: str) -> FetchResult:
    headers = {"content-type": content_type}
    return FetchResult(
        url=PAGE, final_url=PAGE, status=200, headers=headers, body=body, elapsed_s=0
    )


def test_a_windows_1252_pages_link_query_is_sent_in_windows_1252() -> None:
    body = '<a href="/s?q=caf\u00e9">x</a><a href="/caf\u00e9">y</a>'.encode("cp1252")
    result = _page(body, "text/html; charset=windows-1252")
    links = [link.url for link in default_parser(result).links]
    assert links == ["http://shop.test/s?q=caf%E9", "http://shop.test/caf%C3%A9"]
    assert [link.url for link in Response(result).links()] == links
    assert UrlRules().target(links[0]).url == "http://shop.test/s?q=caf%E9"


def test_a_meta_declared_encoding_counts_too() -> None:
    body = '<meta charset="iso-8859-1"><a href="?q=\u00e9t\u00e9">x</a>'.encode("cp1252")
    links = default_parser(_page(body, "text/html")).links
    assert [link.url for link in links] == ["http://shop.test/list/page.html?q=%E9t%E9"]


def test_a_utf8_pages_link_query_is_sent_in_utf8() -> None:
    body = '<a href="/s?q=caf\u00e9">x</a>'.encode()
    links = default_parser(_page(body, "text/html; charset=utf-8")).links
    assert [link.url for link in links] == ["http://shop.test/s?q=caf%C3%A9"]


def test_only_ascii_white_space_is_stripped_from_an_href() -> None:
    html = (
        '<a href=" \t/a\n ">a</a>'
        '<a href="/b\u00a0">b</a>'  # NO-BREAK SPACE: part of the URL
        '<a href="\u2003/c">c</a>'  # EM SPACE: part of the URL, a relative path
        '<a href="/d\te">d</a>'  # a tab inside: removed
    )
    assert [link.url for link in extract_links(html, PAGE)] == [
        "http://shop.test/a",
        "http://shop.test/b%C2%A0",
        "http://shop.test/list/%E2%80%83/c",
        "http://shop.test/de",
    ]


def test_a_base_href_with_backslashes_is_read_as_slashes() -> None:
    html = '<base href="\\\\cdn.test\\docs\\"><a href="x.html">x</a>'
    assert [link.url for link in extract_links(html, PAGE)] == ["http://cdn.test/docs/x.html"]
