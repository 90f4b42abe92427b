"""Pages without a charset in Content-Type, fetched over loopback, decoded as a browser would."""

from __future__ import annotations

import codecs

import pytest
from aiohttp import web

from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from crawlfleet.parsing.response import Response
from crawlfleet.urls import fingerprint
from tests.fixtures.loopback import serve

JA = "東京の天気は晴れです"
FR = "Noël à l\u2019été: déjà vu — 5 €"
RU = "Погода в Москве хорошая, температура двадцать градусов"


def _page(title: str, head: str = "") -> str:
    return f"<html><head>{head}<title>{title}</title></head><body><h1>{title}</h1></body></html>"


PAGES: dict[str, tuple[bytes, str]] = {
    "/sjis": (_page(JA, '<meta charset="Shift_JIS">').encode("shift_jis"), "text/html"),
    "/cp1252": (
        _page(FR, '<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">')
        .encode("cp1252"),
        "text/html",
    ),
    "/latin1-label": (_page(FR, '<meta charset="iso-8859-1">').encode("cp1252"), "text/html"),
    "/utf16": (codecs.BOM_UTF16_LE + _page(JA).encode("utf-16-le"), "text/html"),
    "/header-wins": (_page(RU, '<meta charset="utf-8">').encode("koi8-r"), "text/html; charset=KOI8-R"),
    "/undeclared": (_page(RU * 3).encode("cp1251"), "text/html"),
}  # fmt: skip
EXPECTED = {
    "/sjis": JA,
    "/cp1252": FR,
    "/latin1-label": FR,
    "/utf16": JA,
    "/header-wins": RU,
    "/undeclared": RU * 3,
}


def _app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        body, content_type = PAGES[request.path]
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/{name}", page)
    return app


@pytest.mark.parametrize("path", sorted(PAGES))
async def test_page_decoded_in_its_declared_encoding(path: str) -> None:
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True))
    try:
        async with serve(_app()) as base:
            url = base + path
            result = await fetcher.fetch(CrawlRequest(url, fingerprint(url), "d"))
    finally:
        await fetcher.close()
    response = Response(result)
    title = response.css_first("title")
    assert title is not None
    assert title.text() == EXPECTED[path]
