"""HttpFetcher sends a request's method, body and headers, redirect by redirect."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import orjson
import pytest
from aiohttp import web

from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest, Link


async def echo(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "method": request.method,
            "path": request.path_qs,
            "body": (await request.read()).decode(),
            "content_type": request.headers.get("Content-Type"),
            "token": request.headers.get("X-Token"),
        }
    )


async def redirect(request: web.Request) -> web.Response:
    await request.read()
    code = int(request.match_info["code"])
    return web.Response(status=code, headers={"Location": request.query.get("to", "/echo")})


@pytest.fixture
async def servers() -> AsyncIterator[tuple[str, str]]:
    runners = []
    bases = []
    for host in ("127.0.0.1", "127.0.0.2"):
        app = web.Application()
        app.router.add_route("*", "/echo", echo)
        app.router.add_route("*", "/redirect/{code}", redirect)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port = runner.addresses[0][1]
        runners.append(runner)
        bases.append(f"http://{host}:{port}")
    yield bases[0], bases[1]
    for runner in runners:
        await runner.cleanup()


def request_of(link: Link) -> CrawlRequest:
    return CrawlRequest(
        link.url,
        "fp",
        "d",
        data=dict(link.data),
        method=link.method,
        body=link.body,
        headers=dict(link.headers),
    )


async def fetch(link: Link, *, follow: bool = True) -> dict[str, object]:
    options = FetchOptions(allow_private_addresses=True)
    fetcher = HttpFetcher(options, follow_redirects=follow)
    try:
        result = await fetcher.fetch(request_of(link))
    finally:
        await fetcher.close()
    assert result.request == request_of(link)
    echoed: dict[str, object] = orjson.loads(result.body)
    return echoed


async def test_a_form_post_is_sent_with_its_body_and_headers(servers: tuple[str, str]) -> None:
    base, _ = servers
    link = Link.post(f"{base}/echo", form={"q": "grün", "page": 2}, headers={"X-Token": "t1"})
    assert await fetch(link) == {
        "method": "POST",
        "path": "/echo",
        "body": "q=gr%C3%BCn&page=2",
        "content_type": "application/x-www-form-urlencoded",
        "token": "t1",
    }


async def test_a_json_post_and_other_methods(servers: tuple[str, str]) -> None:
    base, _ = servers
    posted = await fetch(Link.post(f"{base}/echo", json={"cursor": None, "q": "x"}))
    assert (posted["body"], posted["content_type"]) == (
        '{"cursor":null,"q":"x"}',
        "application/json",
    )
    put = await fetch(Link(f"{base}/echo", method="PUT", body="raw", headers={"X-Token": "p"}))
    assert (put["method"], put["body"], put["token"]) == ("PUT", "raw", "p")


@pytest.mark.parametrize(
    ("code", "method", "body"),
    [
        (301, "GET", ""),
        (302, "GET", ""),
        (303, "GET", ""),
        (307, "POST", "a=1"),
        (308, "POST", "a=1"),
    ],
)
async def test_a_post_redirected_is_followed_as_browsers_do(
    servers: tuple[str, str], code: int, method: str, body: str
) -> None:
    base, _ = servers
    echoed = await fetch(Link.post(f"{base}/redirect/{code}", form={"a": "1"}))
    assert (echoed["method"], echoed["body"]) == (method, body)
    assert echoed["content_type"] == ("application/x-www-form-urlencoded" if body else None)


async def test_request_headers_stay_with_their_origin(servers: tuple[str, str]) -> None:
    base, other = servers
    link = Link(f"{base}/redirect/307?to={other}/echo", headers={"X-Token": "secret"})
    assert (await fetch(link))["token"] is None
    same = replace(link, url=f"{base}/redirect/307?to=/echo")
    assert (await fetch(same))["token"] == "secret"


async def test_without_following_a_post_gets_its_redirect(servers: tuple[str, str]) -> None:
    base, _ = servers
    options = FetchOptions(allow_private_addresses=True)
    fetcher = HttpFetcher(options, follow_redirects=False)
    try:
        link = Link.post(f"{base}/redirect/303", form={"a": "1"})
        result = await fetcher.fetch(request_of(link))
    finally:
        await fetcher.close()
    assert (result.status, result.headers["location"]) == (303, "/echo")
