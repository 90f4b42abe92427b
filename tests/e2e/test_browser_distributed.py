"""A distributed crawl served by one ``--queues http`` worker and one ``--queues browser``
worker: each page is fetched by the kind its parser names, and the HTTP worker never starts
a Chromium."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.jsapp import item_name
from crawlfleet.fetchers.browser.memory import descendants_named
from tests.e2e.conftest import FAST, Workers, dispatch

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

PARSERS = """
from crawlfleet.parsing import Follow, parser


@parser(
    "127.0.0.14",
    pattern="/list/3",
    fetcher="browser",
    wait="css:#app h1",
    follow=[Follow(pattern=r"/items/5[1-9]$")],
)
def js_list(response):
    return None


@parser("127.0.0.14", pattern="/items/*", item_type="js_item", fetcher="browser", wait="css:.name")
def js_item(response):
    yield {"key": response.url.rsplit("/", 1)[1], "name": response.css_first(".name").text()}


@parser("127.0.0.15", pattern="/static/*", item_type="product")
def static_product(response):
    yield {"key": response.url.rsplit("/", 1)[1], "name": response.css_first(".name").text()}
"""
BROWSER_PAGES = {"/list/3", *(f"/items/{n}" for n in range(51, 60))}
HTTP_PAGES = {f"/static/{n}" for n in range(1, 6)}


def test_each_page_is_fetched_by_the_kind_its_parser_names(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
) -> None:
    parsers = tmp_path / "kinds_parsers.py"
    parsers.write_text(PARSERS)
    allowed = ("--parsers", str(parsers))
    http = workers.start(redis_url, postgres_dsn, extra=("--queues", "http", *allowed))
    browser = workers.start(redis_url, postgres_dsn, extra=("--queues", "browser", *allowed))
    seeds = [site.url("jsapp", "/list/3"), *(site.url("mixed", p) for p in sorted(HTTP_PAGES))]
    site.clear_log()
    result = dispatch(
        *seeds,
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "kinds",
        "--parsers",
        str(parsers),
        *FAST,
        timeout_s=180,
    )
    assert result.returncode == 0, result.stdout

    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT url, fetcher, worker, outcome FROM attempts WHERE crawl_id = 'kinds'"
        ).fetchall()
        names = dict(
            conn.execute(
                "SELECT item_key, data->>'name' FROM items WHERE crawl_id = 'kinds'"
                " AND item_type = 'js_item'"
            ).fetchall()
        )
    by_path = {"/" + url.split("/", 3)[3]: (fetcher, worker) for url, fetcher, worker, _ in rows}
    assert set(by_path) >= BROWSER_PAGES | HTTP_PAGES
    assert {outcome for *_, outcome in rows} == {"ok"}
    assert {by_path[p][0] for p in BROWSER_PAGES} == {"browser"}
    assert {by_path[p][0] for p in HTTP_PAGES} == {"http"}
    browser_workers = {by_path[p][1] for p in BROWSER_PAGES}
    http_workers = {by_path[p][1] for p in HTTP_PAGES}
    assert len(browser_workers) == len(http_workers) == 1
    assert browser_workers != http_workers
    assert names == {str(n): item_name(n) for n in range(51, 60)}

    agents = {r.path: r.user_agent for r in site.log if r.path != "/robots.txt"}
    assert all("HeadlessChrome" in agents[p] for p in BROWSER_PAGES)
    assert all("HeadlessChrome" not in agents[p] for p in HTTP_PAGES)
    assert http.process is not None
    assert browser.process is not None
    assert descendants_named(http.process.pid, "chrom") == []
    assert descendants_named(browser.process.pid, "chrom") != []
