"""A seed's userinfo is sent as Basic auth to its own origin only, and never stored."""

from __future__ import annotations

import base64

from aiohttp import web

from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from crawlfleet.urls import UrlRules, fingerprint
from tests.fixtures.loopback import serve

CANARY = "Canary-7f3e"


def _app(seen: list[str | None], expected: str, redirect_to: str = "") -> web.Application:
    async def page(request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        seen.append(header)
        if request.path == "/hop" and redirect_to:
            raise web.HTTPFound(redirect_to)
        if header != expected:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        return web.Response(text="<html>secret page</html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


def _request(url: str) -> CrawlRequest:
    target = UrlRules().target(url)
    return CrawlRequest(target.url, fingerprint(target.key), "d")


async def test_basic_auth_goes_to_the_seed_origin_and_not_past_a_redirect() -> None:
    token = "Basic " + base64.b64encode(f"user:{CANARY}".encode()).decode()
    seen_a: list[str | None] = []
    seen_b: list[str | None] = []
    options = FetchOptions(allow_private_addresses=True)
    async with (
        serve(_app(seen_b, token), "127.0.0.3") as other,
        serve(_app(seen_a, token, redirect_to=f"{other}/landed"), "127.0.0.2") as home,
    ):
        seed = home.replace("http://", f"http://user:{CANARY}@") + "/"
        fetcher = HttpFetcher(options, credentials=Credentials.from_urls([seed]))
        without = HttpFetcher(options)
        try:
            page = await fetcher.fetch(_request(seed))
            hop = await fetcher.fetch(_request(f"{home}/hop"))
            bare = await without.fetch(_request(seed))
        finally:
            await fetcher.close()
            await without.close()
    assert page.status == 200
    assert CANARY not in page.url
    assert CANARY not in page.final_url
    assert hop.status == 401
    assert hop.final_url == f"{other}/landed"
    assert seen_a == [token, token, None]
    assert seen_b == [None]
    assert bare.status == 401
