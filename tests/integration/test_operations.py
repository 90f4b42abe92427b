"""The ``Operations`` port, one suite over both implementations (``crawlfleet.ops``).

Each runtime gets the same crawl: a page done, a dead letter (``HTTP 500``) and a request
queued, written through its own store; then the operator's reads and actions must agree.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report, Signal
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.ops.protocols import ActionRefused, Operations
from crawlfleet.ops.target import operations
from crawlfleet.records import Attempt, Outcome
from crawlfleet.runtime.backends import frontier_prefix
from crawlfleet.runtime.celery.definition import CrawlDefinition, definition_key
from crawlfleet.runtime.control import RunState
from crawlfleet.settings import Settings

POLICY = DomainPolicy(delay_s=0.0, max_in_flight=4)


def req(path: str, domain: str) -> CrawlRequest:
    return CrawlRequest(f"http://{domain}{path}", f"{domain}{path}", domain)


def attempt(lease: Lease, outcome: Outcome, status: int, at: float, error: str | None) -> Attempt:
    r = lease.request
    return Attempt(r.url, r.fingerprint, r.domain, "w-1", outcome, status, 10, 0.1, 0, at, error)


async def fill(store: QueueStore) -> None:
    """A page of a.test done, b.test's page dead-lettered, a.test/2 queued."""
    now = time.time()
    await store.add([req("/1", "a.test"), req("/2", "a.test"), req("/1", "b.test")], Budget())
    await store.start(now)
    leases = await store.claim(2, now, 60, POLICY, ["http"])
    by_url = {lease.request.url: lease for lease in leases}
    ok, bad = by_url["http://a.test/1"], by_url["http://b.test/1"]
    done = attempt(ok, Outcome.OK, 200, now, None)
    dead = attempt(bad, Outcome.DEAD, 500, now + 0.001, "HTTP 500")
    await store.complete(ok, Report(done, Signal.SUCCESS, "", {}), POLICY)
    await store.bury(bad, "HTTP 500", now, Report(dead), POLICY)


@pytest.fixture(params=["embedded", pytest.param("distributed", marks=pytest.mark.redis)])
async def crawl(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Operations, str]]:
    if request.param == "embedded":
        store: QueueStore = await SqliteQueueStore.open(tmp_path / "state.sqlite")
        settings = Settings(state_dir=tmp_path, redis_url=None)
    else:
        redis_url: str = request.getfixturevalue("redis_url")
        crawl_id = f"ops-{uuid.uuid4().hex[:8]}"
        client = Redis.from_url(redis_url, decode_responses=True)
        definition = CrawlDefinition(Settings(crawl_id=crawl_id), ("http://a.test/",))
        await client.set(definition_key(crawl_id), definition.to_json())
        await client.aclose()
        store = await RedisQueueStore.open(redis_url, frontier_prefix(crawl_id))
        settings = Settings(redis_url=redis_url, crawl_id=crawl_id)
    try:
        await fill(store)
    finally:
        await store.close()
    ops, crawl_id = operations(settings)
    try:
        yield ops, crawl_id
    finally:
        await ops.close()


async def test_reads_the_crawl(crawl: tuple[Operations, str], tmp_path: Path) -> None:
    ops, crawl_id = crawl
    named = f"crawl in {tmp_path}" if ops.mode == "embedded" else f"crawl {crawl_id}"
    assert ops.describe(crawl_id) == named
    assert crawl_id in await ops.crawl_ids()
    reader = await ops.reader(crawl_id)
    counts = await reader.counts()
    assert (counts.queued, counts.done, counts.dead) == (1, 1, 1)
    assert await ops.run_state(crawl_id, counts) == "stopped"
    assert await ops.asked(crawl_id) is RunState.RUNNING
    assert await ops.proxies(crawl_id) == []


async def test_requeues_and_purges_dead_letters_by_fingerprint_prefix(
    crawl: tuple[Operations, str],
) -> None:
    ops, crawl_id = crawl
    reader = await ops.reader(crawl_id)
    [letter] = await reader.dead_letters()
    with pytest.raises(ConfigError, match="no dead letter with fingerprint 'zz'"):
        await ops.requeue_dead(crawl_id, ["zz"])
    assert await ops.requeue_dead(crawl_id, [letter.request.fingerprint[:12]]) == 1
    counts = await reader.counts()
    assert (counts.queued, counts.dead) == (2, 0)
    assert await ops.purge_dead(crawl_id, None) == 0


async def test_purges_a_class(crawl: tuple[Operations, str]) -> None:
    ops, crawl_id = crawl
    assert await ops.purge_class(crawl_id, "HTTP 500") == 1
    assert (await (await ops.reader(crawl_id)).counts()).dead == 0


async def test_pauses_resumes_and_cancels(crawl: tuple[Operations, str]) -> None:
    ops, crawl_id = crawl
    await ops.set_paused(crawl_id, True)
    assert await ops.asked(crawl_id) is RunState.PAUSED
    await ops.set_paused(crawl_id, False)
    assert await ops.asked(crawl_id) is RunState.RUNNING
    if ops.mode == "embedded":
        with pytest.raises(ConfigError, match="distributed"):
            await ops.cancel(crawl_id)
        with pytest.raises(ConfigError, match="distributed"):
            await ops.add_urls(crawl_id, ["http://a.test/3"])
        assert await ops.no_worker(crawl_id) is None
        return
    assert await ops.no_worker(crawl_id) == "no worker sent a heartbeat in the last 30 s"
    await ops.cancel(crawl_id)
    assert await ops.asked(crawl_id) is RunState.CANCELLED
    with pytest.raises(ActionRefused, match="cancelled"):
        await ops.set_paused(crawl_id, True)
