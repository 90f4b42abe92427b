"""The distributed runtime under faults: killed workers, a crashed Redis, a restarted
PostgreSQL, RabbitMQ as the broker, junk in the task queue, unreachable servers at start."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import redis
from celery import Celery
from kombu.connection import Connection
from kombu.messaging import Producer

from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.conftest import (
    FAST,
    ItemKeys,
    KillAt,
    Workers,
    crawl_done,
    dispatch,
    postgres_items,
    start_dispatch,
)
from tests.fixtures.postgres_server import PostgresServer
from tests.fixtures.redis_server import RedisServer

SHORT_LEASE = {"CRAWLFLEET_LEASE_S": "3"}
CRAWL_TIMEOUT_S = 90.0


def page_counts(site: ThreadedDemoSite) -> Counter[str]:
    return Counter(
        f"{r.role}{r.path}"
        for r in site.log
        if r.role in ("shop", "quotes") and r.path != "/robots.txt"
    )


def crawl_with(
    site: ThreadedDemoSite,
    redis_url: str,
    dsn: str,
    crawl_id: str,
    tmp_path: Path,
    fault: Callable[[int], bool],
    *,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run a dispatcher over shop+quotes; ``fault(done)`` is polled until it returns True."""
    seeds = [site.url("shop"), site.url("quotes")]
    log_path = tmp_path / f"dispatch-{crawl_id}.log"
    proc = start_dispatch(
        *seeds,
        "--redis",
        redis_url,
        "--postgres",
        dsn,
        "--crawl-id",
        crawl_id,
        *FAST,
        log_path=log_path,
        env={**SHORT_LEASE, **(env or {})},
    )
    deadline = time.monotonic() + CRAWL_TIMEOUT_S
    faults_done = False
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if not faults_done:
                try:
                    done = crawl_done(redis_url, crawl_id)
                except Exception:  # Redis may be down while a fault plays
                    done = 0
                faults_done = fault(done)
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
    assert faults_done, "the crawl ended before every fault was played"
    return code, log_path.read_text(errors="replace")


def test_sigkilled_workers_lose_nothing(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    site.clear_log()
    kills_at = [10, 30, 50]
    fault = KillAt(workers, redis_url, postgres_dsn, kills_at)
    workers.start(redis_url, postgres_dsn, concurrency=4)

    code, output = crawl_with(site, redis_url, postgres_dsn, "killed", tmp_path, fault)
    assert code == 0, output
    assert postgres_items(postgres_dsn) == shop_quotes_items
    with psycopg.connect(postgres_dsn) as conn:
        rows, keys = conn.execute(
            "SELECT count(*), count(DISTINCT (item_type, item_key)) FROM items"
        ).fetchone() or (0, 0)
    assert rows == keys
    counts = page_counts(site)
    refetches = sum(counts.values()) - len(counts)
    assert refetches <= 4 * len(kills_at)  # at most the killed worker's pages in flight


@pytest.mark.parametrize(
    "outage_s",
    [
        1.0,
        3.0,  # a worker whose ack fell in the outage never took another task (kombu's QoS)
        pytest.param(10.0, marks=pytest.mark.slow),
        pytest.param(30.0, marks=pytest.mark.slow),
    ],
)
def test_redis_crash_and_restart_midcrawl(
    outage_s: float,
    site: ThreadedDemoSite,
    redis_server_aof: RedisServer,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    site.clear_log()
    url = redis_server_aof.url
    workers.start(url, postgres_dsn, concurrency=4)
    workers.start(url, postgres_dsn, concurrency=4)
    crashed = False

    def fault(done: int) -> bool:
        nonlocal crashed
        if not crashed and done >= 20:
            redis_server_aof.kill()
            time.sleep(outage_s)
            redis_server_aof.start()
            crashed = True
        return crashed

    code, output = crawl_with(site, url, postgres_dsn, "redis-crash", tmp_path, fault)
    assert code == 0, output
    assert postgres_items(postgres_dsn) == shop_quotes_items
    assert all(w.process is not None and w.process.poll() is None for w in workers.started)


def test_postgres_restart_midcrawl(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_server: PostgresServer,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)
    workers.start(redis_url, postgres_dsn, concurrency=4)
    restarted = False

    def fault(done: int) -> bool:
        nonlocal restarted
        if not restarted and done >= 20:
            postgres_server.restart()
            restarted = True
        return restarted

    code, output = crawl_with(site, redis_url, postgres_dsn, "pg-restart", tmp_path, fault)
    assert code == 0, output
    assert postgres_items(postgres_dsn) == shop_quotes_items


def test_rabbitmq_broker(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    rabbitmq_vhost: str,
) -> None:
    workers.start(redis_url, postgres_dsn, extra=("--broker", rabbitmq_vhost))
    result = dispatch(
        site.url("quotes"),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "rabbit",
        "--max-pages",
        "10",
        "--allow-private-addresses",
        "--delay",
        "0",
        "--per-domain-concurrency",
        "4",  # several pages of one host in flight: concurrent item writes in one worker
        env={"CRAWLFLEET_BROKER_URL": rabbitmq_vhost},
    )
    assert result.returncode == 0, result.stdout
    assert len(postgres_items(postgres_dsn)) == 10


def test_junk_messages_are_rejected_and_logged(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    worker = workers.start(redis_url, postgres_dsn)
    sender = Celery("junk", broker=redis_url, set_as_current=False)
    sender.send_task("crawlfleet.crawl_batch", args=["../etc", "many"], queue="http")
    sender.send_task("os.system", args=["touch /tmp/crawlfleet-pwned"], queue="http")
    with Connection(redis_url) as conn:
        producer = Producer(conn.default_channel, routing_key="http")
        producer.publish(
            b"\x80\x04\x95junk",
            content_type="application/x-python-serialize",
            content_encoding="binary",
            headers={"task": "crawlfleet.crawl_batch", "id": "pickle-1"},
            routing_key="http",
        )
        producer.publish({"hello": "world"}, serializer="json", routing_key="http")
    expected = (
        "rejected malformed task",
        "unregistered task",
        "untrusted content",
        "unknown message",
    )
    deadline = time.monotonic() + 20
    while not all(text in worker.log() for text in expected) and time.monotonic() < deadline:
        time.sleep(0.05)
    log = worker.log()
    assert [text for text in expected if text not in log] == [], log[-4000:]
    assert worker.process is not None
    assert worker.process.poll() is None
    assert not Path("/tmp/crawlfleet-pwned").exists()
    result = dispatch(
        site.url("quotes"),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "after-junk",
        "--max-pages",
        "3",
        *FAST,
    )
    assert result.returncode == 0, result.stdout


def test_unreachable_servers_give_one_line_errors(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    bad_redis = "redis://:hunter2@127.0.0.1:1/0"
    bad_pg = "postgresql://crawler:hunter2@127.0.0.1:1/items"
    seed = site.url("quotes")
    for redis_arg, pg_arg, named in (
        (bad_redis, postgres_dsn, "redis://:***@127.0.0.1:1/0"),
        (redis_url, bad_pg, "postgresql://crawler:***@127.0.0.1:1/items"),
    ):
        # rich wraps at the terminal width; a wide one shows the message is one line
        wide = {"COLUMNS": "500"}
        result = dispatch(seed, "--redis", redis_arg, "--postgres", pg_arg, *FAST, env=wide)
        assert result.returncode == 2, result.stdout
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, result.stdout
        assert named in lines[0]
        assert "hunter2" not in result.stdout
        worker = workers.start(redis_arg, pg_arg, ready=False)
        assert worker.process is not None
        assert worker.process.wait(timeout=30) == 2
        assert named in worker.log()
        assert "hunter2" not in worker.log()


def test_a_page_that_keeps_killing_its_worker_ends_in_the_dlq(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    poison = "/slow?delay_ms=20000"
    env = {**SHORT_LEASE, "CRAWLFLEET_MAX_RETRIES": "1"}
    worker = workers.start(redis_url, postgres_dsn, concurrency=1)
    proc = start_dispatch(
        site.url("lab", poison),
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "poison",
        *FAST,
        log_path=tmp_path / "dispatch.log",
        env=env,
    )
    deadline = time.monotonic() + CRAWL_TIMEOUT_S
    killed = 0
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            fetched = sum(1 for r in site.log if r.path == poison)
            if fetched > killed:  # the worker is in the middle of the page: it "crashes"
                worker.kill()
                killed += 1
                worker = workers.start(redis_url, postgres_dsn, concurrency=1, ready=False)
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = (tmp_path / "dispatch.log").read_text()
    assert proc.wait() == 5, output  # the poison page is a dead letter: a shortfall (0050)
    assert killed == 2  # max_retries=1: two attempts, both lost with their worker
    assert "1 dead-lettered" in output
    with redis.Redis.from_url(redis_url) as client:
        (dead,) = client.zrange("crawlfleet:{poison}:dead", 0, -1)
        fingerprint = dead.split(b":", 1)[1]  # members are "<seq>:<fingerprint>"
        errors = client.hget("crawlfleet:{poison}:errors", fingerprint)
    assert (errors or b"").count(b"lease expired") == 2


def test_sigterm_lets_a_worker_finish_its_task_and_exit_0(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    site.clear_log()
    leaving = workers.start(redis_url, postgres_dsn, concurrency=4)
    workers.start(redis_url, postgres_dsn, concurrency=4)
    exit_code: int | None = None

    def fault(done: int) -> bool:
        nonlocal exit_code
        if done >= 20:
            exit_code = leaving.terminate()
        return exit_code is not None

    code, output = crawl_with(site, redis_url, postgres_dsn, "sigterm", tmp_path, fault)
    assert exit_code == 0, leaving.log()[-3000:]
    assert code == 0, output
    assert postgres_items(postgres_dsn) == shop_quotes_items
    twice = [path for path, n in page_counts(site).items() if n > 1]
    assert twice == [], leaving.log()[-3000:]  # no lease abandoned


def test_ctrl_c_stops_the_dispatcher_and_the_crawl_resumes(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
    shop_quotes_items: ItemKeys,
) -> None:
    site.clear_log()
    workers.start(redis_url, postgres_dsn, concurrency=4)
    seeds = [site.url("shop"), site.url("quotes")]
    args = [*seeds, "--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "resume"]
    proc = start_dispatch(*args, *FAST, log_path=tmp_path / "first.log")
    deadline = time.monotonic() + CRAWL_TIMEOUT_S
    while crawl_done(redis_url, "resume") < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130, (tmp_path / "first.log").read_text()
    assert "run the same command" in (tmp_path / "first.log").read_text()
    assert postgres_items(postgres_dsn) < shop_quotes_items

    resumed = dispatch(*args, *FAST)
    assert resumed.returncode == 0, resumed.stdout
    assert postgres_items(postgres_dsn) == shop_quotes_items
    counts = page_counts(site)
    assert sum(counts.values()) - len(counts) <= 4  # only pages in flight at Ctrl-C again

    fresh = dispatch(*args, *FAST, "--fresh", "--max-pages", "3")
    assert fresh.returncode == 0, fresh.stdout
    assert crawl_done(redis_url, "resume") == 3
