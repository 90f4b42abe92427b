"""Sitemaps read through the frontier (decision 0052): a large sitemap index holds back no page,
``--max-pages`` bounds the crawl, SIGTERM stops it, and a rerun reads no sitemap twice."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from tests.e2e.conftest import Workers, dispatch
from tests.fixtures.loopback import serve

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
CLI = [sys.executable, "-m", "crawlfleet"]


@dataclass
class IndexSite:
    """A site whose /sitemap.xml lists ``children`` small sitemaps of ``per_child`` pages each;
    its home page links to nothing. ``log`` holds (monotonic time, path) of every request."""

    children: int
    per_child: int
    disallow: str = ""
    foreign: str = ""
    """A sitemap URL on another host the index lists too (none when empty)."""
    base: str = ""
    log: list[tuple[float, str]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", self.robots)
        app.router.add_get("/sitemap.xml", self.index)
        app.router.add_get("/s/{n}.xml", self.child)
        app.router.add_get("/{tail:.*}", self.page)
        return app

    def _seen(self, request: web.Request) -> None:
        self.log.append((time.monotonic(), request.path))

    async def robots(self, request: web.Request) -> web.Response:
        self._seen(request)
        rule = f"Disallow: {self.disallow}" if self.disallow else "Allow: /"
        return web.Response(text=f"User-agent: *\n{rule}\n")

    async def index(self, request: web.Request) -> web.Response:
        self._seen(request)
        entries = "".join(
            f"<sitemap><loc>{self.base}/s/{n}.xml</loc></sitemap>" for n in range(self.children)
        )
        if self.foreign:
            entries += f"<sitemap><loc>{self.foreign}</loc></sitemap>"
        xml = f'<?xml version="1.0"?><sitemapindex xmlns="{NS}">{entries}</sitemapindex>'
        return web.Response(text=xml, content_type="application/xml")

    async def child(self, request: web.Request) -> web.Response:
        self._seen(request)
        n = request.match_info["n"]
        entries = "".join(
            f"<url><loc>{self.base}/p/{n}-{k}</loc></url>" for k in range(self.per_child)
        )
        xml = f'<?xml version="1.0"?><urlset xmlns="{NS}">{entries}</urlset>'
        return web.Response(text=xml, content_type="application/xml")

    async def page(self, request: web.Request) -> web.Response:
        self._seen(request)
        return web.Response(text="<html><title>page</title></html>", content_type="text/html")

    def paths(self, prefix: str) -> list[str]:
        return [path for _, path in self.log if path.startswith(prefix)]

    def first_page_at(self) -> float | None:
        pages = [at for at, path in self.log if path == "/" or path.startswith("/p/")]
        return min(pages) if pages else None


@pytest.fixture
def index_site(request: pytest.FixtureRequest) -> Iterator[IndexSite]:
    site = IndexSite(*request.param)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    done = asyncio.Event()

    async def main() -> None:
        async with serve(site.app()) as base:
            site.base = base
            ready.set()
            await done.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield site
    loop.call_soon_threadsafe(done.set)
    thread.join(10)
    loop.close()


def start_crawl(site: IndexSite, state: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env["COLUMNS"] = "250"
    command = [*CLI, "crawl", f"{site.base}/", "--state", str(state), "--sitemaps"]
    command += ["--allow-private-addresses", *args]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_until(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("index_site", [(2000, 5)], indirect=True)
def test_a_large_sitemap_index_holds_back_no_page_and_max_pages_bounds_it(
    index_site: IndexSite, tmp_path: Path
) -> None:
    site = index_site
    started = time.monotonic()
    crawl = start_crawl(site, tmp_path / "state", "--delay", "0.5", "--max-pages", "8")
    try:
        assert wait_until(lambda: site.first_page_at() is not None, 10.0), (
            f"no page within 10 s; {len(site.paths('/s/'))} sitemaps read meanwhile"
        )
        _, err = crawl.communicate(timeout=60)
    finally:
        crawl.kill()
    first_page_s = (site.first_page_at() or 0.0) - started
    assert first_page_s < 5.0
    assert crawl.returncode == 0, err
    # --max-pages bounds every request of the crawl, sitemaps included (robots.txt aside)
    fetched = [path for _, path in site.log if path != "/robots.txt"]
    assert len(fetched) == 8, fetched
    assert site.paths("/sitemap.xml") == ["/sitemap.xml"]
    assert site.paths("/p/"), "no page listed by the sitemaps was fetched"
    assert "sitemaps: 4 read" in err, err
    times = [at for at, path in site.log if path != "/robots.txt"]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.45  # sitemaps paced as pages


@pytest.mark.parametrize("index_site", [(200, 1)], indirect=True)
def test_sigterm_while_reading_sitemaps_stops_and_a_rerun_reads_none_twice(
    index_site: IndexSite, tmp_path: Path
) -> None:
    site = index_site
    state = tmp_path / "state"
    crawl = start_crawl(site, state, "--delay", "0.03")
    try:
        assert wait_until(lambda: len(site.paths("/s/")) >= 10, 30.0)
        crawl.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        crawl.communicate(timeout=30)
        stop_s = time.monotonic() - stopped_at
    finally:
        crawl.kill()
    assert stop_s < 3.0
    read_before = len(site.paths("/s/"))
    assert read_before < site.children

    rerun = start_crawl(site, state, "--delay", "0.03")
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    sitemaps = Counter(site.paths("/s/")) + Counter(site.paths("/sitemap.xml"))
    assert [path for path, n in sitemaps.items() if n > 1] == []
    assert len(sitemaps) == site.children + 1
    assert len(set(site.paths("/p/"))) == site.children


@pytest.mark.parametrize(
    "index_site", [(3, 1, "/s/1.xml", "http://127.0.0.9/s.xml")], indirect=True
)
def test_a_child_sitemap_out_of_scope_or_disallowed_by_robots_is_not_fetched(
    index_site: IndexSite, tmp_path: Path
) -> None:
    site = index_site
    crawl = start_crawl(site, tmp_path / "state", "--delay", "0")
    _, err = crawl.communicate(timeout=60)
    assert crawl.returncode == 0, err
    assert sorted(site.paths("/s/")) == ["/s/0.xml", "/s/2.xml"]
    assert sorted(site.paths("/p/")) == ["/p/0-0", "/p/2-0"]
    assert "skipping sitemap http://127.0.0.9/s.xml" in err
    assert "sitemaps: 3 read" in err
    assert "1 skipped" in err


@pytest.mark.parametrize("index_site", [(2000, 5)], indirect=True)
def test_distributed_workers_read_a_large_sitemap_index_between_pages(
    index_site: IndexSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    site = index_site
    workers.start(redis_url, postgres_dsn, concurrency=2)
    started = time.monotonic()
    args = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "sitemapq"]
    args += ["--sitemaps", "--allow-private-addresses", "--delay", "0.5", "--max-pages", "8"]
    result = dispatch(f"{site.base}/", *args, timeout_s=60)
    assert result.returncode == 0, result.stdout
    first_page_s = (site.first_page_at() or float("inf")) - started
    assert first_page_s < 8.0
    fetched = [path for _, path in site.log if path != "/robots.txt"]
    assert len(fetched) == 8, fetched
    assert len(site.paths("/s/")) == 3
    assert site.paths("/p/")
    assert "sitemaps: 4 read" in result.stdout


@pytest.mark.parametrize("index_site", [(5, 2)], indirect=True)
def test_distributed_rerun_of_a_crawl_reads_no_sitemap_again(
    index_site: IndexSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    site = index_site
    workers.start(redis_url, postgres_dsn, concurrency=2)
    args = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "sitemapq-rerun"]
    args += ["--sitemaps", "--allow-private-addresses", "--delay", "0.05"]
    for _ in range(2):
        result = dispatch(f"{site.base}/", *args, timeout_s=60)
        assert result.returncode == 0, result.stdout
    sitemaps = Counter(site.paths("/s/")) + Counter(site.paths("/sitemap.xml"))
    assert sitemaps == Counter({f"/s/{n}.xml": 1 for n in range(5)} | {"/sitemap.xml": 1})
    assert len(set(site.paths("/p/"))) == 10
