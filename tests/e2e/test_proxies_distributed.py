"""Distributed: the proxy pool's state lives in Redis, so a proxy banned through one worker is
avoided by the other (real tinyproxy processes, two Celery workers, the guarded demo host)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import GUARDED, GuardRules, ThreadedDemoSite
from crawlfleet.proxies.endpoints import build_tiers
from crawlfleet.proxies.pool import REFRESH_S
from tests.e2e.conftest import Workers, dispatch
from tests.e2e.test_proxies import PASSWORD, pages_ok
from tests.fixtures.tinyproxy import ProxyFarm

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
PAGES = 60
BANNED = "127.0.1.10"


@pytest.fixture
def site() -> Iterator[ThreadedDemoSite]:
    rules = GuardRules(burst=1000, window_s=60, ban_s=60, page_count=PAGES, bursts={BANNED: 8})
    with ThreadedDemoSite(addresses={GUARDED: "127.0.0.20"}, guard=rules) as demo:
        yield demo


@pytest.mark.slow
def test_a_proxy_banned_through_one_worker_is_avoided_by_the_other(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    proxies: ProxyFarm,
    tmp_path: Path,
) -> None:
    banned = proxies.start(BANNED)
    others = [proxies.start("127.0.1.11", auth=("crawler", PASSWORD)), proxies.start("127.0.1.12")]
    urls = [banned.url, *(p.url for p in others)]
    config = tmp_path / "crawl.toml"
    config.write_text(
        "[crawl]\nper_domain_concurrency = 2\n[crawl.proxies]\n"
        f"tiers = [{json.dumps(urls)}]\ncooldown_s = 30\nsessions_per_domain = 3\n"
    )
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=2)
    result = dispatch(
        site.url(GUARDED, "/"), "--config", str(config), "--redis", redis_url,
        "--postgres", postgres_dsn, "--crawl-id", "proxied", "--allow-private-addresses",
        "--delay", "0.05",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    assert pages_ok(site.log, PAGES) == set()
    robots_clients = {r.client for r in site.log if r.path == "/robots.txt"}
    assert robots_clients
    assert robots_clients <= {BANNED, "127.0.1.11", "127.0.1.12"}  # the dispatcher's too

    banned_id = build_tiers([[banned.url]])[0][0].id
    with psycopg.connect(postgres_dsn) as conn:
        routed = conn.execute(
            "SELECT DISTINCT worker FROM attempts WHERE proxy_id IS NOT NULL"
        ).fetchall()
    assert len(routed) == 2  # both workers fetched through the pool
    logs = [worker.log() for worker in workers.started]
    quarantined_by = [n for n, log in enumerate(logs) if f"proxy {banned_id} quarantined" in log]
    assert len(quarantined_by) == 1, logs  # one worker saw the ban...
    ban_at = min(r.wall_s for r in site.log if r.client == BANNED and r.status in (403, 429))
    # ...and the other read the quarantine from Redis within REFRESH_S (plus the requests it
    # had in flight): no request goes through that proxy afterwards, from either worker.
    late = [r for r in site.log if r.client == BANNED and r.wall_s > ban_at + REFRESH_S + 1.0]
    assert late == []
    assert site.log[-1].wall_s > ban_at + REFRESH_S + 1.0  # the crawl went on after it
    with redis.Redis.from_url(redis_url) as client:
        record = json.loads(client.hget("crawlfleet:{proxied}:proxies", banned_id) or "{}")
    assert record["strikes"] >= 1
    assert record["label"] == f"127.0.0.1:{banned.port}"
    listing = CliRunner().invoke(
        app, ["proxies", "--redis", redis_url, "--crawl-id", "proxied"], env={"COLUMNS": "200"}
    )
    assert listing.exit_code == 0, listing.output
    (banned_line,) = [line for line in listing.output.splitlines() if banned_id in line]
    assert "quarantined until" in banned_line
    assert all(PASSWORD not in text for text in [result.stdout, listing.output, *logs])
