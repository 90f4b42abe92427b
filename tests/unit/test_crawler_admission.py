"""Admission: robots.txt of a page's new domains is read concurrently, and bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from crawlfleet.clock import SystemClock
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import FetchResult, Link, ParseResult
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.fetcher_wiring import robots_fetch
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed

TIMEOUT_S = 0.4
HOSTS = 10
NO_RULES = Canned(body=b"User-agent: *\nAllow: /\n", headers={"content-type": "text/plain"})


class HangingHosts:
    """Servers on 127.0.0.20.. that accept connections, read, and never answer.

    ``open_now`` counts connections the client has not closed yet.
    """

    def __init__(self) -> None:
        self.servers: list[asyncio.Server] = []
        self.open_now = 0
        self.most_open = 0
        self.connections = 0

    async def start(self, count: int) -> None:
        for n in range(count):
            server = await asyncio.start_server(self._hang, f"127.0.0.{20 + n}", 0)
            self.servers.append(server)

    @property
    def origins(self) -> list[str]:
        return [
            f"http://{host}:{port}"
            for host, port, *_ in (s.sockets[0].getsockname() for s in self.servers)
        ]

    async def _hang(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while await reader.read(4096):
                pass  # never answer; the client gives up and closes
        finally:
            self.open_now -= 1
            writer.close()

    async def close(self) -> None:
        for server in self.servers:
            server.close()
            await server.wait_closed()


@pytest.fixture
async def hanging() -> AsyncIterator[HangingHosts]:
    hosts = HangingHosts()
    await hosts.start(HOSTS)
    yield hosts
    await hosts.close()


def http_fetcher() -> HttpFetcher:
    options = FetchOptions(
        allow_private_addresses=True,
        connect_timeout_s=TIMEOUT_S,
        read_timeout_s=TIMEOUT_S,
        total_timeout_s=TIMEOUT_S,
    )
    return HttpFetcher(options, clock=SystemClock())


async def test_a_page_linking_hanging_hosts_holds_its_step_for_one_robots_timeout(
    hanging: HangingHosts,
) -> None:
    origins = hanging.origins
    page = "http://a.test/links"

    def all_hosts(response: FetchResult) -> ParseResult:
        return ParseResult(links=[Link(f"{origin}/") for origin in origins])

    side = http_fetcher()
    canned = CannedFetcher(FakeClock(T0), {page: html(), "http://a.test/robots.txt": NO_RULES})
    over_http = robots_fetch(side)

    async def fetch_robots(url: str) -> FetchResult:
        return await (canned.fetch_url(url) if "a.test" in url else over_http(url))

    crawl = make_crawl(
        canned,
        seeds=[page, *origins],
        parsers=ParserRegistry(default=all_hosts),
        robots_fetch=fetch_robots,
    )
    await seed(crawl, page)
    (lease,) = await crawl.frontier.claim(1, T0, {"http"})
    try:
        started = time.monotonic()
        await crawl.crawler.process(lease)
        elapsed_s = time.monotonic() - started
    finally:
        await side.close()

    assert hanging.connections == HOSTS
    assert elapsed_s < 2 * TIMEOUT_S  # one timeout for all; one after another took 10
    assert (await crawl.frontier.counts()).queued == HOSTS


async def test_the_robots_prefetch_is_bounded(hanging: HangingHosts) -> None:
    side = http_fetcher()
    canned = CannedFetcher(FakeClock(T0), {})
    crawl = make_crawl(canned, seeds=hanging.origins, robots_fetch=robots_fetch(side))
    admitter = Admitter(
        crawl.frontier,
        robots=crawl.crawler.parts.robots,
        events=crawl.events,
        fetch_url=robots_fetch(side),
        clock=crawl.clock,
        prefetch_concurrency=4,
    )
    try:
        started = time.monotonic()
        await admitter.seed(hanging.origins)
        elapsed_s = time.monotonic() - started
    finally:
        await side.close()

    assert hanging.connections == HOSTS
    assert hanging.most_open == 4
    assert 3 * TIMEOUT_S <= elapsed_s < 4 * TIMEOUT_S  # 10 hosts, 4 at a time: 3 rounds
