"""Operating a distributed crawl from the CLI: pause and resume, cancel, add seeds, and dead
letters by error class, with real workers, Redis, PostgreSQL and the demo site."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import redis
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.runtime.celery.definition import DISPATCHERS
from tests.e2e.conftest import (
    FAST,
    ItemKeys,
    Workers,
    crawl_done,
    dispatch,
    postgres_items,
    start_dispatch,
)
from tests.e2e.test_operations_embedded import DEAD_FAST, dead_seeds

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
runner = CliRunner(env={"COLUMNS": "300"})
CRAWL_TIMEOUT_S = 90.0
POLL_S = 0.05


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def wait_for(condition: Callable[[], bool], timeout_s: float = CRAWL_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(POLL_S)


def pages(site: ThreadedDemoSite) -> list[str]:
    return [f"{r.role}{r.path}" for r in site.log if r.path != "/robots.txt"]


def wait_quiet(site: ThreadedDemoSite, quiet_s: float, timeout_s: float = 15.0) -> int:
    """Until the server has seen no new request for ``quiet_s``; how many it saw."""
    deadline = time.monotonic() + timeout_s
    seen, since = len(site.log), time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            raise AssertionError(f"still fetching after {timeout_s} s")
        time.sleep(POLL_S)
        if len(site.log) != seen:
            seen, since = len(site.log), time.monotonic()
    return seen


def finish(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = CRAWL_TIMEOUT_S) -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(log.read_text(errors="replace")[-3000:]) from None


def test_a_paused_crawl_fetches_nothing_and_completes_after_resume(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)
    target = ["--redis", redis_url, "--crawl-id", "paused"]
    log = tmp_path / "dispatch.log"
    seeds = [site.url("shop"), site.url("quotes")]
    proc = start_dispatch(*seeds, *target, "--postgres", postgres_dsn, *FAST, log_path=log)
    try:
        wait_for(lambda: crawl_done(redis_url, "paused") >= 10)
        code, output = cli("pause", *target)
        assert code == 0, output
        quiet_at = wait_quiet(site, quiet_s=0.6)  # the pages in flight finish
        for _ in range(30):  # 1.5 s more: nothing is fetched, the dispatcher waits
            time.sleep(POLL_S)
            assert len(site.log) == quiet_at
        assert proc.poll() is None
        assert crawl_done(redis_url, "paused") < len(shop_quotes_items)
        code, output = cli("status", *target)
        assert "paused" in output, output

        code, output = cli("resume", *target)
        assert code == 0, output
        assert finish(proc, log) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert postgres_items(postgres_dsn) == shop_quotes_items
    assert [page for page, n in Counter(pages(site)).items() if n > 1] == []


def test_add_puts_seeds_into_a_running_crawl_through_its_scope(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)
    target = ["--redis", redis_url, "--crawl-id", "added"]
    keep_alive = site.url("lab", "/slow?delay_ms=3000")
    log = tmp_path / "dispatch.log"
    proc = start_dispatch(
        keep_alive, site.url("shop"), *target, "--postgres", postgres_dsn, *FAST,
        "--max-depth", "0", log_path=log,
    )  # fmt: skip
    try:
        wait_for(lambda: "shop/" in pages(site))
        code, output = cli(
            "add", site.url("shop", "/catalogue/page-2.html"), site.url("shop"),
            site.url("quotes", "/page/2/"), *target,
        )  # fmt: skip
        assert code == 0, output
        assert "added 1 URLs" in output
        assert "1 seen before" in output
        assert f"not added: {site.url('quotes', '/page/2/')}: off-site" in output
        assert finish(proc, log) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert pages(site).count("shop/catalogue/page-2.html") == 1
    assert not any(page.startswith("quotes") for page in pages(site))

    code, output = cli("add", site.url("shop"), "--redis", redis_url, "--crawl-id", "nope")
    assert code == 2
    assert output.startswith("error: no crawl 'nope'")


def test_dead_letters_by_class_requeued_and_purged(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)
    target = ["--redis", redis_url, "--crawl-id", "dlq"]
    args = [*dead_seeds(site), *target, "--postgres", postgres_dsn, *FAST, "--ignore-robots"]
    first = dispatch(*args, env=DEAD_FAST)
    assert first.returncode == 5, first.stdout  # dead letters left: a shortfall
    assert "5 dead-lettered" in first.stdout

    code, output = cli("dlq", "classes", *target)
    assert code == 0, output
    cells = [line.split("│")[1:3] for line in output.splitlines() if line.count("│") >= 3]
    rows = [(name.strip(), count.strip()) for name, count in cells if count.strip()]
    assert rows == [
        ("HTTP 500", "2"), ("HTTP 502", "1"), ("connection refused", "1"), ("timeout", "1"),
    ]  # fmt: skip

    code, output = cli("dlq", "requeue", "--class", "HTTP 500", *target)
    assert code == 0, output
    assert "requeued 2" in output
    site.clear_log()
    again = dispatch(*args, env=DEAD_FAST)
    assert again.returncode == 5, again.stdout  # the requeued ones died again
    assert Counter(pages(site)) == {"lab/status/500?n=1": 1, "lab/status/500?n=2": 1}

    code, output = cli("dlq", "purge", "--class", "timeout", *target)
    assert code == 0, output
    assert "purged 1" in output
    code, output = cli("dlq", "list", *target)
    assert "/slow" not in output
    assert "HTTP 502" in output


def test_a_cancelled_crawl_stops_for_good_and_keeps_its_state(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)
    target = ["--redis", redis_url, "--crawl-id", "cancelled"]
    args = [site.url("shop"), site.url("quotes"), *target, "--postgres", postgres_dsn, *FAST]
    log = tmp_path / "dispatch.log"
    proc = start_dispatch(*args, log_path=log)
    try:
        wait_for(lambda: crawl_done(redis_url, "cancelled") >= 10)
        code, output = cli("cancel", *target)
        assert code == 0, output
        assert finish(proc, log, timeout_s=10) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_quiet(site, quiet_s=0.6)
    done = crawl_done(redis_url, "cancelled")
    code, output = cli("status", *target)
    assert "cancelled" in output, output
    assert cli("dlq", "list", *target)[0] == 0

    code, output = cli("resume", *target)
    assert code == 2
    assert "cancelled" in output
    refused = dispatch(*args)
    assert refused.returncode == 2, refused.stdout
    assert "was cancelled; start it over with --fresh" in refused.stdout
    assert crawl_done(redis_url, "cancelled") == done

    fresh = dispatch(*args, "--fresh", "--max-pages", "3")
    assert fresh.returncode == 0, fresh.stdout
    assert crawl_done(redis_url, "cancelled") == 3


def test_status_marks_a_crawl_whose_dispatcher_is_gone(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, tmp_path: Path
) -> None:
    target = ["--redis", redis_url, "--crawl-id", "orphan"]
    log = tmp_path / "dispatch.log"
    # No worker: the crawl stays dispatched, and its dispatcher beats until it is killed.
    proc = start_dispatch(site.url("quotes"), *target, "--postgres", postgres_dsn, log_path=log)
    try:
        wait_for(lambda: "dispatching" in cli("status", *target)[1], timeout_s=30)
    finally:
        proc.kill()  # SIGKILL: the crawl stays marked as dispatched
        proc.wait()
    with redis.Redis.from_url(redis_url) as client:
        beat = orjson.loads(client.hget(DISPATCHERS, "orphan") or b"{}")
        stale = {**beat, "seen_at": time.time() - 100}  # as if 100 s had passed
        client.hset(DISPATCHERS, "orphan", orjson.dumps(stale))
    code, output = cli("status", *target)
    assert code == 0, output
    assert "dispatcher gone" in output  # was "dispatching" for good
    assert "dispatching" not in output
