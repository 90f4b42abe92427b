"""A distributed crawl tells the same truth (issue #37.1 and #37.3): the outcome judge's
lines and exit 5, and ``-o`` exported from PostgreSQL at the end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson

from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.conftest import FAST, Workers, dispatch, postgres_items
from tests.e2e.test_outcomes import STRICT_PARSER
from tests.fixtures.cli import assert_one_line_error, run_cli
from tests.fixtures.redis_server import RedisServer


def test_a_refused_seed_says_why_and_how_to_retry_with_the_crawl_s_options(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    workers.start(redis_url, postgres_dsn, concurrency=2)
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "refused"]
    result = dispatch(site.url("shop"), *target, "--delay", "0")
    assert result.returncode == 5, result.stdout
    lines = result.stdout.splitlines()
    assert (
        "seed domain 127.0.0.2: 0 pages ok: 1 dead-lettered (forbidden address: a loopback or "
        "private address, refused unless --allow-private-addresses)"
    ) in lines
    assert (
        "1 URLs dead-lettered (forbidden address 1); retry them: crawlfleet dlq requeue --class "
        f"'forbidden address' --redis {redis_url} --crawl-id refused, then run the same crawl "
        "command again with --allow-private-addresses"
    ) in lines


def test_output_of_a_distributed_crawl_is_exported_from_postgres(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    workers.start(redis_url, postgres_dsn, concurrency=2)
    out = tmp_path / "items.jsonl"
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "exported"]
    result = dispatch(site.url("quotes"), *target, *FAST, "-o", str(out))
    assert result.returncode == 0, result.stdout
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert {(r["type"], r["key"]) for r in records} == postgres_items(postgres_dsn)
    assert f"wrote {len(records)} items to {out}" in result.stdout


def test_an_sqlite_output_of_a_distributed_crawl_is_refused_at_start(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, tmp_path: Path
) -> None:
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "sq"]
    out = str(tmp_path / "items.sqlite")
    result = run_cli("crawl", site.url("quotes"), *target, *FAST, "-o", out, cwd=tmp_path)
    assert assert_one_line_error(result).startswith(
        "error: -o of a distributed crawl is exported from PostgreSQL"
    )


QUOTES_PARSERS = str(Path(__file__).resolve().parents[2] / "examples" / "quotes" / "parsers.py")


def test_a_crawl_no_worker_will_serve_stops_with_the_reason_and_status_shows_it(
    site: ThreadedDemoSite,
    start_redis: Callable[..., RedisServer],
    postgres_dsn: str,
    workers: Workers,
) -> None:
    redis_url = start_redis().url  # its own: no heartbeat of another test's workers
    workers.start(redis_url, postgres_dsn, concurrency=2)  # no --parsers: refuses the crawl
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "orphan"]
    result = dispatch(
        site.url("quotes"), *target, *FAST, "--parsers", QUOTES_PARSERS,
        env={"CRAWLFLEET_WORKER_WAIT_S": "3"},
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    error = result.stdout.splitlines()[-1]
    assert error.startswith("error: no live worker has served crawl 'orphan' for 3 s ("), error
    assert "refuses it: crawl 'orphan' names parser" in error
    assert "(crawlfleet worker --parsers ...)" in error
    status = run_cli("status", "--redis", redis_url, cwd=Path.cwd())
    assert status.returncode == 0, status.stderr
    assert "dispatching, no worker" in status.stdout
    assert "crawl orphan: no live worker serves it (" in status.stdout


def test_a_crawl_without_any_worker_says_so(
    site: ThreadedDemoSite, start_redis: Callable[..., RedisServer], postgres_dsn: str
) -> None:
    redis_url = start_redis().url
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "alone"]
    result = dispatch(site.url("quotes"), *target, *FAST, env={"CRAWLFLEET_WORKER_WAIT_S": "1"})
    assert result.returncode == 2, result.stdout
    assert "(no worker sent a heartbeat in the last 30 s)" in result.stdout.splitlines()[-1]


def test_reject_reasons_of_a_distributed_crawl(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    parsers = tmp_path / "strict.py"
    parsers.write_text(STRICT_PARSER)
    workers.start(redis_url, postgres_dsn, concurrency=2, extra=("--parsers", str(parsers)))
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "strict"]
    result = dispatch(
        site.url("quotes"), *target, *FAST, "--parsers", str(parsers), "--max-pages", "1"
    )
    assert result.returncode == 5, result.stdout
    lines = result.stdout.splitlines()
    assert "1 items invalid (kept as rejects; crawlfleet rejects lists them):" in lines
    assert any(line.startswith("  1x page: ") and "title" in line for line in lines), lines
    listed = run_cli("rejects", "--postgres", postgres_dsn, "--crawl-id", "strict", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "rejected items by reason (1)" in listed.stdout
