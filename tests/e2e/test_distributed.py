"""The distributed runtime end to end: real Celery workers, Redis, PostgreSQL, the demo site."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import psycopg
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite, gaps_s
from tests.e2e.conftest import Workers, dispatch

DELAY_S = 0.05
FAST = ["--allow-private-addresses", "--delay", str(DELAY_S)]
ItemKeys = set[tuple[str, str]]


def embedded_items(tmp_path: Path, seeds: list[str], *args: str) -> ItemKeys:
    """(item_type, item_key) of an embedded crawl of the same seeds."""
    state = tmp_path / "embedded"
    result = CliRunner().invoke(app, ["crawl", *seeds, "--state", str(state), *FAST, *args])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(state / "items.sqlite") as db:
        return {(t, k) for t, k in db.execute("SELECT item_type, item_key FROM items")}


def postgres_items(dsn: str) -> ItemKeys:
    with psycopg.connect(dsn) as conn:
        return {(t, k) for t, k in conn.execute("SELECT item_type, item_key FROM items")}


def attempt_workers(dsn: str) -> Counter[str]:
    with psycopg.connect(dsn) as conn:
        return Counter(w for (w,) in conn.execute("SELECT worker FROM attempts"))


def page_paths(site: ThreadedDemoSite, role: str) -> list[str]:
    return [r.path for r in site.log if r.role == role and r.path != "/robots.txt"]


def test_two_workers_crawl_like_the_embedded_runtime(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    seeds = [site.url("shop"), site.url("quotes")]
    expected = embedded_items(tmp_path, seeds)
    site.clear_log()
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    result = dispatch(
        *seeds, "--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "two", *FAST
    )
    assert result.returncode == 0, result.stdout
    assert postgres_items(postgres_dsn) == expected
    for role in ("shop", "quotes"):
        paths = page_paths(site, role)
        assert [p for p, n in Counter(paths).items() if n > 1] == []
        pages = [r for r in site.log if r.role == role and r.path != "/robots.txt"]
        assert min(gaps_s(pages, role)) >= DELAY_S
    assert len(attempt_workers(postgres_dsn)) == 2
    assert "crawl summary" in result.stdout
