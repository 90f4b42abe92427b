"""A crawl requests a link as the page wrote it, and robots.txt judges that URL (issue #33)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from crawlfleet.api import Crawl
from crawlfleet.settings import Settings
from tests.fixtures.loopback import serve

LINK = "/list?page=2&amp;cat=a"  # as written in the HTML: /list?page=2&cat=a


def _site(robots: str, log: list[str]) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        log.append(request.raw_path)
        if request.path == "/robots.txt":
            return web.Response(text=robots)
        if request.path == "/":
            return web.Response(text=f'<a href="{LINK}">list</a>', content_type="text/html")
        return web.Response(text="<p>list</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


async def _crawl(robots: str, tmp_path: Path) -> tuple[list[str], dict[str, float]]:
    log: list[str] = []
    async with serve(_site(robots, log)) as base:
        settings = Settings(state_dir=tmp_path / "state", allow_private_addresses=True, delay_s=0)
        result = await Crawl(settings, seeds=[f"{base}/"]).run_async()
    return log, {"skipped": float(result.stats.get("outcome.skipped") or 0)}


async def test_a_link_is_requested_with_its_query_as_written(tmp_path: Path) -> None:
    log, _ = await _crawl("User-agent: *\nAllow: /\n", tmp_path)
    assert sorted(log) == ["/", "/list?page=2&cat=a", "/robots.txt"]


async def test_robots_judges_the_url_as_it_will_be_requested(tmp_path: Path) -> None:
    log, stats = await _crawl("User-agent: *\nDisallow: /list?page=\n", tmp_path)
    assert sorted(log) == ["/", "/robots.txt"]
    assert stats["skipped"] == 1
