"""The distributed runtime end to end: real Celery workers, Redis, PostgreSQL, the demo site."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite, gaps_s
from crawlfleet.errors import ConfigError
from crawlfleet.runtime.celery.app import TaskLimits, make_app
from tests.e2e.conftest import (
    DELAY_S,
    FAST,
    ItemKeys,
    Workers,
    attempt_workers,
    crawl_done,
    dispatch,
    postgres_items,
    start_dispatch,
)


def page_paths(site: ThreadedDemoSite, role: str) -> list[str]:
    return [r.path for r in site.log if r.role == role and r.path != "/robots.txt"]


def test_two_workers_crawl_like_the_embedded_runtime(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    shop_quotes_items: ItemKeys,
) -> None:
    seeds = [site.url("shop"), site.url("quotes")]
    site.clear_log()
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    result = dispatch(
        *seeds, "--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "two", *FAST
    )
    assert result.returncode == 0, result.stdout
    assert postgres_items(postgres_dsn) == shop_quotes_items
    for role in ("shop", "quotes"):
        paths = page_paths(site, role)
        assert [p for p, n in Counter(paths).items() if n > 1] == []
        pages = [r for r in site.log if r.role == role and r.path != "/robots.txt"]
        assert min(gaps_s(pages, role)) >= DELAY_S
    assert len(attempt_workers(postgres_dsn)) == 2
    assert "crawl summary" in result.stdout

    status = CliRunner().invoke(app, ["status", "--redis", redis_url, "--crawl-id", "two"])
    assert status.exit_code == 0, status.output
    assert "finished" in status.output
    assert f" {crawl_done(redis_url, 'two')} " in status.output
    migrate = CliRunner().invoke(app, ["db", "migrate", "--postgres", postgres_dsn])
    assert migrate.exit_code == 0, migrate.output
    assert "up to date" in migrate.output


def test_time_limits_must_fit_under_the_visibility_timeout() -> None:
    make_app("redis://127.0.0.1:1/0", TaskLimits())
    with pytest.raises(ConfigError, match="visibility timeout"):
        make_app("redis://127.0.0.1:1/0", TaskLimits(hard_s=4000.0, soft_s=100.0))
    with pytest.raises(ConfigError, match="soft time limit"):
        make_app("redis://127.0.0.1:1/0", TaskLimits(batch_s=200.0))


def test_one_worker_pool_serves_two_crawls_at_once(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    common = ["--redis", redis_url, "--postgres", postgres_dsn, *FAST]
    shop = start_dispatch(
        site.url("shop"), "--crawl-id", "shop", *common, log_path=tmp_path / "shop.log"
    )
    quotes = start_dispatch(
        site.url("quotes"), "--crawl-id", "quotes", *common, log_path=tmp_path / "quotes.log"
    )
    assert shop.wait(timeout=90) == 0, (tmp_path / "shop.log").read_text()
    assert quotes.wait(timeout=90) == 0, (tmp_path / "quotes.log").read_text()
    assert postgres_items(postgres_dsn) == shop_quotes_items
    with psycopg.connect(postgres_dsn) as conn:
        per_crawl = dict(conn.execute("SELECT crawl_id, count(*) FROM attempts GROUP BY 1"))
    assert set(per_crawl) == {"shop", "quotes"}
