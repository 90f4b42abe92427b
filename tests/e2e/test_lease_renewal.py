"""A step longer than its lease, in the distributed runtime: the lease is renewed, so the
dispatcher never reaps it and the page is fetched once.

The page links to a host whose robots.txt never answers: admission reads it (step 1 of the
data flow) for longer than the lease, inside the page's step. Before renewal the dispatcher
reaped the lease after ``lease_s``, and the page was fetched a second time. And a page whose
server takes several lease lengths to answer, among fast pages on a live worker, is fetched
once: what lets leases be seconds long (decision 0019).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from aiohttp import web

from crawlfleet.frontier.store_types import LEASE_EXPIRED
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


SLOW_S = 3 * LEASE_S + 0.5  # the slow page's answer comes after three lease lengths


def slow_site(log: list[str]) -> web.Application:
    """``/`` links to ``/slow`` (answers after ``SLOW_S``) and to 20 fast pages."""

    async def home(request: web.Request) -> web.Response:
        log.append(request.path)
        links = "".join(f'<a href="/fast/{n}">{n}</a>' for n in range(20))
        body = f'<html><title>home</title><a href="/slow">slow</a>{links}</html>'
        return web.Response(text=body, content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        log.append(request.path)
        if request.path == "/slow":
            await asyncio.sleep(SLOW_S)
        return web.Response(text="<html><title>page</title></html>", content_type="text/html")

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    app = web.Application()
    app.add_routes(
        [
            web.get("/", home),
            web.get("/robots.txt", robots),
            web.get("/slow", page),
            web.get("/fast/{n}", page),
        ]
    )
    return app


async def test_a_page_slower_than_three_leases_on_a_live_worker_is_fetched_once(
    redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    settings = {"CRAWLFLEET_LEASE_S": str(LEASE_S), "CRAWLFLEET_MAX_RETRIES": "1"}
    workers.start(redis_url, postgres_dsn, concurrency=4)
    log: list[str] = []
    async with serve(slow_site(log), PAGE_HOST) as site:
        args = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "slow", *FAST]
        dispatcher = await asyncio.create_subprocess_exec(
            CRAWLFLEET,
            "crawl",
            f"{site}/",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **settings},
        )
        output, _ = await asyncio.wait_for(dispatcher.communicate(), timeout=60)
    text = output.decode(errors="replace")

    assert log.count("/slow") == 1, (log, text)
    assert len(log) == 22, (log, text)  # home, slow and the 20 fast pages, each once
    with psycopg.connect(postgres_dsn) as db:
        errors = db.execute("SELECT error FROM attempts WHERE crawl_id = 'slow'").fetchall()
    assert (LEASE_EXPIRED,) not in errors, errors
