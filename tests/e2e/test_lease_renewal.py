"""A step longer than its lease, in the distributed runtime: the lease is renewed, so the
dispatcher never reaps it and the page is fetched once.

The page links to a host whose robots.txt never answers: admission reads it (step 1 of the
data flow) for longer than the lease, inside the page's step. Before renewal the dispatcher
reaped the lease after ``lease_s``, and the page was fetched a second time.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from aiohttp import web

from crawlfleet.frontier.protocols import LEASE_EXPIRED
from tests.e2e.conftest import CRAWLFLEET, FAST, Workers
from tests.fixtures.loopback import serve

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

PAGE_HOST = "127.0.0.30"
HANGING_HOST = "127.0.0.31"
LEASE_S = 2.0
ROBOTS_TIMEOUT_S = 5.0  # how long the hanging robots.txt holds the page's step


@asynccontextmanager
async def hanging_host() -> AsyncIterator[str]:
    """A host that accepts connections, reads, and never answers; yields its base URL."""

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(4096):
                pass
        finally:
            writer.close()

    server = await asyncio.start_server(hang, HANGING_HOST, 0)
    try:
        yield f"http://{HANGING_HOST}:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


def linking_site(target: str, log: list[str]) -> web.Application:
    """``/`` links to ``target``; robots.txt allows all; every request's path is logged."""

    async def home(request: web.Request) -> web.Response:
        log.append(request.path)
        body = f'<html><title>home</title><a href="{target}/far">far</a></html>'
        return web.Response(text=body, content_type="text/html")

    async def robots(request: web.Request) -> web.Response:
        log.append(request.path)
        return web.Response(text="User-agent: *\nAllow: /\n")

    app = web.Application()
    app.add_routes([web.get("/", home), web.get("/robots.txt", robots)])
    return app


async def test_a_page_whose_step_outlasts_its_lease_is_fetched_once(
    redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    settings = {
        "CRAWLFLEET_LEASE_S": str(LEASE_S),
        "CRAWLFLEET_CONNECT_TIMEOUT_S": str(ROBOTS_TIMEOUT_S),
        "CRAWLFLEET_READ_TIMEOUT_S": str(ROBOTS_TIMEOUT_S),
        "CRAWLFLEET_TOTAL_TIMEOUT_S": str(ROBOTS_TIMEOUT_S),
        "CRAWLFLEET_MAX_RETRIES": "1",
        "CRAWLFLEET_BACKOFF_BASE_S": "0",
        "CRAWLFLEET_ALLOWED_DOMAINS": f'["{PAGE_HOST}", "{HANGING_HOST}"]',
    }
    workers.start(redis_url, postgres_dsn, concurrency=2)
    log: list[str] = []
    async with hanging_host() as far, serve(linking_site(far, log), PAGE_HOST) as page:
        args = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "renew", *FAST]
        dispatcher = await asyncio.create_subprocess_exec(
            CRAWLFLEET,
            "crawl",
            f"{page}/",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **settings},
        )
        output, _ = await asyncio.wait_for(dispatcher.communicate(), timeout=60)
    text = output.decode(errors="replace")

    assert log.count("/") == 1, (log, text)
    with psycopg.connect(postgres_dsn) as db:
        attempts = db.execute("SELECT url, outcome, error FROM attempts ORDER BY id").fetchall()
    assert (f"{page}/", "ok", None) in attempts, attempts
    assert all(error != LEASE_EXPIRED for _url, _outcome, error in attempts), attempts
