"""The distributed runtime's shared state seen from outside: a robots Crawl-delay held across
workers, per-domain overrides, progress read from the store, ``status`` per domain, parse
errors in the exit code."""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg
import pytest
import redis
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite, gaps_s
from tests.e2e.conftest import FAST, KillAt, Workers, dispatch, start_dispatch
from tests.e2e.test_distributed_faults import crawl_with

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
CRAWL_TIMEOUT_S = 90.0
FAILING_PARSER = """
from crawlfleet import parser


@parser("127.0.0.3", pattern="/page/*")
def broken(response):
    raise ValueError("no quotes here")
"""


def pages(site: ThreadedDemoSite, role: str) -> list[float]:
    return [r.monotonic_s for r in site.log if r.role == role and r.path != "/robots.txt"]


def role_gaps(site: ThreadedDemoSite, role: str) -> list[float]:
    return gaps_s([r for r in site.log if r.role == role and r.path != "/robots.txt"], role)


@pytest.mark.slow
def test_a_crawl_delay_holds_across_workers_even_one_that_came_later(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    first = workers.start(redis_url, postgres_dsn, concurrency=4)
    proc = start_dispatch(
        site.url("slow-robots"),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "delay",
        "--allow-private-addresses",
        "--delay",
        "0",
        log_path=tmp_path / "dispatch.log",
    )
    deadline = time.monotonic() + CRAWL_TIMEOUT_S
    while len(pages(site, "slow-robots")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    # The first worker read robots.txt and fetched two pages; the second never saw them.
    first.kill()
    second = workers.start(redis_url, postgres_dsn, concurrency=4)
    assert proc.wait(timeout=CRAWL_TIMEOUT_S) == 0, (tmp_path / "dispatch.log").read_text()
    assert len(pages(site, "slow-robots")) >= 4
    assert min(role_gaps(site, "slow-robots")) >= 2.0
    assert "joined crawl delay" in second.log()


def test_config_domain_overrides_space_one_host_only(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(
        '[crawl]\nper_domain_concurrency = 4\n[crawl.domains."127.0.0.3"]\ndelay_s = 0.3\n'
        "concurrency = 1\n"
    )
    workers.start(redis_url, postgres_dsn, concurrency=4)
    result = dispatch(
        site.url("quotes"),
        site.url("shop"),
        "--config",
        str(config),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "overrides",
        "--max-pages",
        "16",
        "--allow-private-addresses",
        "--delay",
        "0",
    )
    assert result.returncode == 0, result.stdout
    assert min(role_gaps(site, "quotes")) >= 0.3
    assert min(role_gaps(site, "shop")) < 0.3  # the default: no delay, four in flight


def test_progress_status_and_summary_come_from_the_store(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    workers.start(redis_url, postgres_dsn, concurrency=4)
    result = dispatch(
        site.url("quotes"),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "views",
        "--progress-every",
        "0.5",
        *FAST,
    )
    assert result.returncode == 0, result.stdout
    rates = [float(r) for r in re.findall(r"([\d.]+) pages/s", result.stdout)]
    assert max(rates) > 0, result.stdout
    fetched = int(re.findall(r"fetched (\d+) responses", result.stdout)[-1])
    assert fetched == len(pages(site, "quotes"))

    status = CliRunner().invoke(
        app, ["status", "--redis", redis_url, "--crawl-id", "views"], env={"COLUMNS": "200"}
    )
    assert status.exit_code == 0, status.output
    assert "domains of views" in status.output
    (row,) = [line for line in status.output.splitlines() if "127.0.0.3" in line]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[1:4] == ["0", "0", str(fetched)]  # queued, in flight, done
    assert cells[-3:] == ["0.05 s (cli)", "ok", "default"]  # delay (--delay), block, strategy


def test_parse_errors_fail_the_distributed_crawl_unless_allowed(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    module = tmp_path / "broken_parsers.py"
    module.write_text(FAILING_PARSER)
    workers.start(redis_url, postgres_dsn, concurrency=4, extra=("--parsers", str(module)))
    args = [
        site.url("quotes"),
        "--parsers",
        str(module),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--max-pages",
        "4",
        *FAST,
    ]
    failed = dispatch(*args, "--crawl-id", "broken")
    assert failed.returncode == 3, failed.stdout
    (count,) = re.findall(r"(\d+) pages failed to parse;", failed.stdout)
    assert int(count) >= 1
    assert f"{count}x parser 'broken': ValueError: no quotes here" in failed.stdout
    allowed = dispatch(*args, "--crawl-id", "broken-ok", "--max-parse-errors", count)
    assert allowed.returncode == 0, allowed.stdout


@pytest.mark.slow
def test_the_summary_counts_every_fetch_of_sigkilled_workers(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    kills_at = [10, 30, 50]
    fault = KillAt(workers, redis_url, postgres_dsn, kills_at)
    workers.start(redis_url, postgres_dsn, concurrency=4)

    code, output = crawl_with(site, redis_url, postgres_dsn, "summary", tmp_path, fault)
    assert code == 0, output
    served = len(pages(site, "shop")) + len(pages(site, "quotes"))
    fetched = int(re.findall(r"fetched (\d+) responses", output)[-1])
    with redis.Redis.from_url(redis_url) as client:
        lost = int(float(client.hget("crawlfleet:{summary}:stats", "lease_expired") or 0))
    # Every response a worker got is counted, killed or not; a request the server saw
    # from a worker killed before it recorded the response is an expired lease.
    assert fetched <= served <= fetched + lost, (served, fetched, lost)
    assert lost <= 4 * len(kills_at)
    with psycopg.connect(postgres_dsn) as conn:
        (rows,) = conn.execute(
            "SELECT count(*) FROM attempts WHERE crawl_id = 'summary' AND status IS NOT NULL"
        ).fetchone() or (0,)
    assert rows == fetched  # the attempt log lost no row either
