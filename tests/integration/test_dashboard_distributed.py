"""The dashboard's distributed source over a real Redis and PostgreSQL.

A crawl is defined in Redis and worked directly through its store (one page done, one dead
letter of class ``HTTP 500``, one queued); its attempts and items are in PostgreSQL. The
source lists it, reads its figures, run state, filtered attempts, items and workers (pages/s
from successive heartbeats), and requeues, purges and pauses through the shared store.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import orjson
import pytest
from redis.asyncio import Redis

from crawlfleet.errors import StateError
from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report, Signal
from crawlfleet.models import CrawlRequest, Item, Lease
from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
from crawlfleet.ops.distributed import DistributedOperations
from crawlfleet.ops.protocols import ActionRefused
from crawlfleet.ops.target import cancel
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.records import Attempt, AttemptFilter, Outcome
from crawlfleet.runtime.backends import frontier_prefix
from crawlfleet.runtime.celery.crawls import delete_crawl
from crawlfleet.runtime.celery.definition import (
    ACTIVE_CRAWLS,
    DISPATCHERS,
    WORKERS,
    CrawlDefinition,
    definition_key,
)
from crawlfleet.runtime.control import control_key
from crawlfleet.settings import Settings

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

POLICY = DomainPolicy(delay_s=0.0, max_in_flight=4)


def req(path: str, domain: str) -> CrawlRequest:
    return CrawlRequest(f"http://{domain}{path}", f"{domain}{path}", domain)


def attempt(lease: Lease, outcome: Outcome, status: int, at: float, error: str | None) -> Attempt:
    r = lease.request
    return Attempt(r.url, r.fingerprint, r.domain, "w-1", outcome, status, 10, 0.1, 0, at, error)


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def define(raw: Redis, redis_url: str, dsn: str, crawl_id: str) -> list[Attempt]:
    """A crawl with a page done, a dead letter and a queued request; its attempts and items."""
    settings = Settings(crawl_id=crawl_id, delay_s=0.0, per_domain_concurrency=4)
    await raw.set(
        definition_key(crawl_id), CrawlDefinition(settings, ("http://a.test/",)).to_json()
    )
    store = await RedisQueueStore.open(redis_url, frontier_prefix(crawl_id))
    now = time.time()
    try:
        await store.add([req("/1", "a.test"), req("/2", "a.test"), req("/1", "b.test")], Budget())
        await store.start(now)
        leases = await store.claim(2, now, 60, POLICY, ["http"])
        by_url = {lease.request.url: lease for lease in leases}
        ok, bad = by_url["http://a.test/1"], by_url["http://b.test/1"]
        done = attempt(ok, Outcome.OK, 200, now, None)
        dead = attempt(bad, Outcome.DEAD, 500, now + 0.001, "HTTP 500")
        await store.complete(
            ok, Report(done, Signal.SUCCESS, "", {"items.stored.product": 1}), POLICY
        )
        await store.bury(bad, "HTTP 500", now, Report(dead), POLICY)
    finally:
        await store.close()
    migrate(dsn)
    log = await PostgresAttemptLog.open(dsn, crawl_id=crawl_id)
    await log.record([done, dead])
    await log.close()
    sink = await PostgresSink.open(dsn, crawl_id=crawl_id)
    await sink.write([Item("product", {"name": "lamp", "price": None}, key="p1")])
    await sink.close()
    return [done, dead]


async def test_the_distributed_source_reads_and_operates_a_crawl(
    raw: Redis, redis_url: str, postgres_dsn: str
) -> None:
    crawl_id = "dash-src-1"
    done, dead = await define(raw, redis_url, postgres_dsn, crawl_id)
    source = DistributedOperations(redis_url, postgres_dsn)
    await source.probe()
    try:
        assert crawl_id in await source.crawl_ids()
        reader = await source.reader(crawl_id)
        counts = await reader.counts()
        assert (counts.queued, counts.done, counts.dead) == (1, 1, 1)
        assert await source.run_state(crawl_id, counts) == "stopped"
        await raw.sadd(ACTIVE_CRAWLS, crawl_id)
        assert await source.run_state(crawl_id, counts) == "dispatcher gone"  # no beat yet
        beat = {"seen_at": time.time(), "host": "h", "pid": 1}
        await raw.hset(DISPATCHERS, crawl_id, orjson.dumps(beat))
        assert await source.run_state(crawl_id, counts) == "dispatching"
        views = {v.domain: v for v in await reader.domains(10)}
        assert views["a.test"].queued == 1
        assert views["b.test"].stats.get("outcome.dead") == 1

        everything = await source.attempts(crawl_id, AttemptFilter(), 10)
        assert [a.url for a in everything] == [dead.url, done.url]  # newest first
        only_b = await source.attempts(crawl_id, AttemptFilter(domain="b.test", status=500), 10)
        assert [a.error for a in only_b] == ["HTTP 500"]
        assert await source.attempts(crawl_id, AttemptFilter(outcome="ok", status=500), 10) == []
        assert await source.attempts("other-crawl", AttemptFilter(), 10) == []

        [items] = await source.items(crawl_id)
        assert (items.item_type, items.read) == ("product", 1)
        assert items.fill_rates() == {"name": 1.0, "price": 0.0}

        assert await source.requeue_class(crawl_id, "HTTP 500") == 1
        assert (await reader.counts()).dead == 0
        # Started over (crawl --fresh): the frontier opened before is opened again.
        await delete_crawl(raw, crawl_id)
        await define(raw, redis_url, postgres_dsn, crawl_id)
        assert (await reader.counts()).dead == 1
        assert await source.purge_class(crawl_id, "HTTP 500") == 1
        assert (await reader.counts()).dead == 0
        await source.set_paused(crawl_id, True)
        assert await raw.get(control_key(crawl_id)) == "paused"
        assert await source.run_state(crawl_id, await reader.counts()) == "paused"
        await source.set_paused(crawl_id, False)
        await cancel(Settings(redis_url=redis_url, crawl_id=crawl_id))
        with pytest.raises(ActionRefused, match="cancelled"):
            await source.set_paused(crawl_id, True)
        with pytest.raises(StateError, match="no crawl 'none'"):
            await source.reader("none")
    finally:
        await source.close()


async def test_workers_show_in_flight_and_pages_per_second_from_their_heartbeats(
    raw: Redis, redis_url: str, postgres_dsn: str
) -> None:
    now = time.time()

    async def beat(name: str, seen_at: float, pages: int | None, in_flight: int = 2) -> None:
        data = {"seen_at": seen_at, "queues": ["http"], "concurrency": 4, "crawl": "c"}
        if pages is not None:
            data |= {"pages": pages, "in_flight": in_flight}
        await raw.hset(WORKERS, name, orjson.dumps(data))

    await beat("hb-fast", now - 2.0, 100)
    await beat("hb-old", now - 3.0, None)  # a worker from before the counters
    await beat("hb-gone", now - 120.0, 50)
    source = DistributedOperations(redis_url, postgres_dsn)
    try:
        first = {w.name: w for w in await source.workers()}
        assert first["hb-fast"].pages_per_s is None  # one reading so far
        assert first["hb-fast"].in_flight == 2
        assert first["hb-fast"].live
        await beat("hb-fast", now - 1.0, 130, in_flight=3)
        rows = {w.name: w for w in await source.workers()}
        assert rows["hb-fast"].pages_per_s == pytest.approx(30.0)
        assert rows["hb-fast"].in_flight == 3
        assert (rows["hb-old"].in_flight, rows["hb-old"].pages_per_s) == (None, None)
        gone = rows["hb-gone"]
        assert (gone.live, gone.in_flight, gone.pages_per_s) == (False, None, 0.0)
        assert {b.name for b in await source.beats()} >= {"hb-fast", "hb-old", "hb-gone"}
    finally:
        await source.close()
        await raw.hdel(WORKERS, "hb-fast", "hb-old", "hb-gone")


async def test_a_database_no_worker_migrated_reads_empty_and_a_bad_url_fails_in_one_line(
    redis_url: str, postgres_dsn: str
) -> None:
    source = DistributedOperations(redis_url, postgres_dsn)
    try:
        assert await source.attempts("x", AttemptFilter(), 5) == []
        assert await source.items("x") == []
    finally:
        await source.close()
    with pytest.raises(StateError, match=r"^Redis at redis://127\.0\.0\.1:1/0: [^\n]+$"):
        await DistributedOperations("redis://127.0.0.1:1/0", postgres_dsn).probe()
    bad_dsn = postgres_dsn.rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(StateError, match=r"^PostgreSQL at [^\n]+no_such_db"):
        await DistributedOperations(redis_url, bad_dsn).probe()
