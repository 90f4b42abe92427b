"""The default parser: page and resource items, meta robots, robustness, speed."""

from __future__ import annotations

import time

import pytest

from crawlfleet.models import FetchResult, Link
from crawlfleet.parsing.default import default_parser, iso_utc

URL = "https://shop.example/list/"
FETCHED_AT = 1_700_000_000.25


def fetched(
    body: bytes | str,
    content_type: str = "text/html; charset=utf-8",
    *,
    url: str = URL,
    final_url: str | None = None,
    status: int = 200,
) -> FetchResult:
    raw = body.encode() if isinstance(body, str) else body
    headers = {"content-type": content_type} if content_type else {}
    return FetchResult(
        url=url,
        final_url=final_url or url,
        status=status,
        headers=headers,
        body=raw,
        elapsed_s=0.01,
        fetched_at=FETCHED_AT,
    )


def test_html_page_gives_one_page_item_and_its_links() -> None:
    html = """<html><head><title>  The
      Shop </title><link rel="canonical" href="/list/?page=1"></head>
      <body><a href="a.html">a</a><a href="/b">b</a></body></html>"""
    result = default_parser(fetched(html, final_url="https://shop.example/list/index.html"))
    assert [item.to_dict() for item in result.items] == [
        {
            "type": "page",
            "key": URL,
            "url": URL,
            "final_url": "https://shop.example/list/index.html",
            "status": 200,
            "title": "The Shop",
            "canonical": "https://shop.example/list/?page=1",
            "fetched_at": "2023-11-14T22:13:20.250+00:00",
        }
    ]
    assert result.items[0].url == URL
    assert result.links == [
        Link("https://shop.example/list/a.html"),
        Link("https://shop.example/b"),
    ]


def test_links_resolve_against_the_final_url_after_a_redirect() -> None:
    result = default_parser(fetched('<a href="x">x</a>', final_url="https://shop.example/moved/"))
    assert result.links == [Link("https://shop.example/moved/x")]


def test_page_without_title_or_canonical() -> None:
    data = default_parser(fetched("<p>hi</p>")).items[0].data
    assert data["title"] is None
    assert data["canonical"] is None


def test_noindex_gives_links_but_no_item() -> None:
    html = '<meta name="robots" content="noindex"><a href="/next">n</a>'
    result = default_parser(fetched(html))
    assert result.items == []
    assert result.links == [Link("https://shop.example/next")]


def test_noindex_nofollow_gives_nothing() -> None:
    html = '<meta name="robots" content="noindex,nofollow"><a href="/next">n</a>'
    result = default_parser(fetched(html))
    assert (result.items, result.links) == ([], [])


def test_non_html_gives_a_resource_item_without_links() -> None:
    result = default_parser(
        fetched(b"%PDF-1.7 <a href='/x'>", "application/pdf", url="https://shop.example/c.pdf")
    )
    assert result.links == []
    assert [item.to_dict() for item in result.items] == [
        {
            "type": "resource",
            "key": "https://shop.example/c.pdf",
            "url": "https://shop.example/c.pdf",
            "final_url": "https://shop.example/c.pdf",
            "status": 200,
            "content_type": "application/pdf",
            "bytes": 22,
            "fetched_at": "2023-11-14T22:13:20.250+00:00",
        }
    ]


def test_html_sniffed_without_content_type() -> None:
    result = default_parser(fetched("<!DOCTYPE html><title>t</title>", ""))
    assert result.items[0].type == "page"


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe\xfa<title>caf\xe9 \xc3\xa9</title><a href='/ok'>\x80</a>",
        b"<html><head><title>unclosed<body><div><a href=/x>x<table><tr><td></html></p>",
        b"",
        b"\x00\x00\x00<<<<",
    ],
)
def test_broken_html_and_bad_utf8_do_not_raise(body: bytes) -> None:
    result = default_parser(fetched(body))
    assert len(result.items) == 1


def test_unknown_charset_falls_back_to_utf8() -> None:
    result = default_parser(fetched("<title>ok</title>", "text/html; charset=x-nonsense"))
    assert result.items[0].data["title"] == "ok"


def test_declared_charset_is_used() -> None:
    body = "<title>Grüße</title>".encode("iso-8859-1")
    result = default_parser(fetched(body, "text/html; charset=iso-8859-1"))
    assert result.items[0].data["title"] == "Grüße"


def test_fetched_at_zero_is_unknown() -> None:
    assert iso_utc(0.0) is None


def typical_page(n: int) -> str:
    links = "".join(f'<li><a href="/p/{n}-{i}?ref=list">Product {i}</a></li>' for i in range(30))
    filler = "<p>" + "Some words about the products on this page. " * 12 + "</p>"
    return (
        f"<!doctype html><html><head><title>Page {n}</title>"
        f'<link rel="canonical" href="/list/{n}"></head><body><ul>{links}</ul>'
        f"{filler * 30}</body></html>"
    )


def test_cpu_cost_of_a_typical_page_stays_under_a_millisecond() -> None:
    pages = [fetched(typical_page(n)) for n in range(50)]
    assert 15_000 < len(pages[0].body) < 30_000
    best_s = float("inf")
    for _ in range(3):
        started = time.process_time()
        for page in pages:
            default_parser(page)
        best_s = min(best_s, (time.process_time() - started) / len(pages))
    assert best_s < 0.001


def test_default_parser_keeps_every_link_of_a_6000_link_page() -> None:
    html = "<body>" + "".join(f'<a href="/p/{i}">{i}</a>' for i in range(6000))
    assert len(default_parser(fetched(html)).links) == 6000


def test_a_meta_charset_decides_the_title_when_the_header_names_none() -> None:
    body = '<meta charset="windows-1252"><title>Crème brûlée, €5</title>'.encode("cp1252")
    (item,) = default_parser(fetched(body, "text/html")).items
    assert item.data["title"] == "Crème brûlée, €5"
