"""A refused URL is not a ban (decision 0044): a host that refuses 5 % of its URLs is crawled
at its delay; a host that starts refusing every URL still escalates.

Runs ``crawlfleet crawl`` on an embedded crawl (SQLite state) and on a distributed one (Redis,
PostgreSQL, two Celery workers), with real HTTP to the demo site's ``/refusals/`` section,
checked from the server's access log and ``crawlfleet status``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.accesslog import AccessRecord
from crawlfleet.demosite.refusals import (
    BAN_AFTER,
    REFUSALS_PAGES,
    REFUSED,
    page_path,
    refused_path,
)
from tests.e2e.conftest import Workers, attempt_workers, dispatch

runner = CliRunner(env={"COLUMNS": "300"})
DELAY_S = 0.05
FAST = ["--allow-private-addresses", "--delay", str(DELAY_S)]
RETRIES = """\
max_retries = 3
backoff_base_s = 0.25
"""
"""Three retries of a refused URL, after backoffs drawn in [0, 0.25 * 2**n] s."""
BAN = """\
max_retries = 0
ladder = ["slow", "impersonate"]
block_max_level = 2
block_cooldown_s = 0.1
"""


def budget_s(requests: int) -> float:
    """What a crawl of ``requests`` requests at ``DELAY_S`` may take (issue 33, item 6)."""
    return 1.3 * requests * DELAY_S + 5.0


def config(tmp_path: Path, run: str, rules: str) -> str:
    path = tmp_path / f"{run}.toml"
    path.write_text(f'[crawl]\nallow = ["/refusals/{run}/"]\n{rules}')
    return str(path)


def run_log(site: ThreadedDemoSite, run: str) -> list[AccessRecord]:
    return [r for r in site.log if r.role == "lab" and r.path.startswith(f"/refusals/{run}/")]


def check_refusals_only(site: ThreadedDemoSite, run: str, layout: str, ended_at: float) -> None:
    """Every page fetched once, every refused URL tried 1 + 3 times, and the crawl, from its
    first request to its end (``ended_at``, epoch s), within the budget."""
    log = run_log(site, run)
    elapsed_s = ended_at - min(r.wall_s for r in log)
    pages = Counter(r.path for r in log if r.status == 200)
    expected = {page_path(run, layout, n) for n in range(1, REFUSALS_PAGES + 1)}
    assert set(pages) == {f"/refusals/{run}/{layout}/", *expected}
    assert max(pages.values()) == 1
    refused = Counter(r.path for r in log if r.status == 403)
    assert refused == {refused_path(run, layout, n): 4 for n in REFUSED}
    requests = len(log) + 1  # and robots.txt
    print(f"{layout}: {elapsed_s:.1f} s, {requests} requests, budget {budget_s(requests):.1f} s")
    assert elapsed_s <= budget_s(requests), f"{elapsed_s:.1f} s for {requests} requests"


def domain_row(output: str) -> str:
    return next(line for line in output.splitlines() if "127.0.0.4" in line)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["scattered", "clustered"])
def test_five_percent_refused_urls_do_not_slow_an_embedded_crawl(
    site: ThreadedDemoSite, tmp_path: Path, layout: str
) -> None:
    run = f"e-{uuid.uuid4().hex[:8]}"
    state = str(tmp_path / "state")
    seed = site.url("lab", f"/refusals/{run}/{layout}/")
    args = ["crawl", seed, "--config", config(tmp_path, run, RETRIES), "--state", state, *FAST]
    crawled = runner.invoke(app, args)
    assert crawled.exit_code == 5, crawled.output  # refused URLs dead-lettered: a shortfall

    check_refusals_only(site, run, layout, time.time())
    status = runner.invoke(app, ["status", "--state", state])
    assert status.exit_code == 0, status.output
    assert "level" not in domain_row(status.output)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["scattered", "clustered"])
def test_five_percent_refused_urls_do_not_slow_two_workers(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    layout: str,
) -> None:
    run = f"d-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    seed = site.url("lab", f"/refusals/{run}/{layout}/")
    stores = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", run]
    result = dispatch(
        seed, "--config", config(tmp_path, run, RETRIES), *stores, *FAST, timeout_s=300.0
    )
    assert result.returncode == 5, result.stdout  # refused URLs dead-lettered: a shortfall

    check_refusals_only(site, run, layout, time.time())
    assert len(attempt_workers(postgres_dsn)) == 2  # both workers fetched
    status = runner.invoke(app, ["status", "--redis", redis_url, "--crawl-id", run])
    assert status.exit_code == 0, status.output
    assert "level" not in domain_row(status.output)


@pytest.mark.slow
def test_a_host_that_starts_refusing_every_url_still_escalates(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    run = f"b-{uuid.uuid4().hex[:8]}"
    state = str(tmp_path / "state")
    seed = site.url("lab", f"/refusals/{run}/ban/")
    args = ["crawl", seed, "--config", config(tmp_path, run, BAN), "--state", state, *FAST]
    crawled = runner.invoke(app, args)
    assert crawled.exit_code == 5, crawled.output  # refused URLs dead-lettered: a shortfall

    log = run_log(site, run)
    assert sum(r.status == 200 for r in log) == BAN_AFTER + 1  # the index and 100 pages
    refused = sorted(r.monotonic_s for r in log if r.status == 403)
    assert len(refused) == REFUSALS_PAGES - BAN_AFTER
    gaps = [b - a for a, b in pairwise(refused)]
    assert min(gaps[-10:]) >= 0.9 * 4 * DELAY_S  # level 2: the delay doubled twice
    status = runner.invoke(app, ["status", "--state", state])
    assert status.exit_code == 0, status.output
    row = domain_row(status.output)
    assert "level 2" in row
    assert "HTTP 403" in row
    assert "rung=impersonate" in row
