"""A host that refuses the plain HTTP fetcher's requests: the domain climbs the strategy ladder
to ``impersonate`` and the crawl completes with every page fetched.

Runs ``crawlfleet crawl`` and ``crawlfleet status`` on an embedded crawl (SQLite state) and on a
distributed one (Redis, a Celery worker of the ``http`` queue), with real HTTP to the demo
site's ``/picky/`` section, checked from the server's access log.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.picky import PICKY_PAGES
from tests.e2e.conftest import FAST as DISTRIBUTED_FAST
from tests.e2e.conftest import PICKY_LADDER, Workers, dispatch

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "4", "--ignore-robots"]


def test_a_host_refusing_plain_http_is_crawled_through_the_impersonate_rung(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(PICKY_LADDER)
    state = str(tmp_path / "state")
    seed = site.url("lab", "/picky/")
    crawled = runner.invoke(app, ["crawl", seed, "--config", str(config), "--state", state, *FAST])
    assert crawled.exit_code == 0, crawled.output

    served = Counter(r.path for r in site.log if r.role == "lab" and r.status == 200)
    pages = {"/picky/", *(f"/picky/page/{n}" for n in range(1, PICKY_PAGES + 1))}
    assert set(served) == pages  # 0 missing
    refused = [r for r in site.log if r.role == "lab" and r.status == 403]
    assert 4 <= len(refused) <= 8  # two blocks per rung (slow, then impersonate), in flight
    assert all("Chrome/" in r.user_agent for r in site.log if r.status == 200)

    status = runner.invoke(app, ["status", "--state", state])
    assert status.exit_code == 0, status.output
    row = next(line for line in status.output.splitlines() if "127.0.0.4" in line)
    assert "level 2" in row
    assert "HTTP 403" in row
    assert "fetcher=impersonate, rung=impersonate" in row


@pytest.mark.slow
def test_the_fleet_climbs_the_ladder_in_redis_and_an_http_worker_impersonates(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(PICKY_LADDER)
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)  # --queues http: both kinds
    seed = site.url("lab", "/picky/")
    args = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "picky"]
    result = dispatch(seed, "--config", str(config), *args, *DISTRIBUTED_FAST)
    assert result.returncode == 0, result.stdout

    served = {r.path for r in site.log if r.role == "lab" and r.status == 200}
    assert served - {"/robots.txt"} == {
        "/picky/",
        *(f"/picky/page/{n}" for n in range(1, PICKY_PAGES + 1)),
    }
    status = runner.invoke(app, ["status", "--redis", redis_url, "--crawl-id", "picky"])
    assert status.exit_code == 0, status.output
    row = next(line for line in status.output.splitlines() if "127.0.0.4" in line)
    assert "fetcher=impersonate, rung=impersonate" in row
    with psycopg.connect(postgres_dsn) as db:
        used = dict(
            db.execute(
                "SELECT fetcher, count(*) FROM attempts WHERE crawl_id = 'picky' GROUP BY fetcher"
            ).fetchall()
        )
    assert used["impersonate"] == PICKY_PAGES + 1
