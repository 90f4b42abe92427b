"""A frontier wiped while its crawl runs is reported lost, never as a finished crawl."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from crawlfleet.errors import FrontierLost, StateError
from crawlfleet.frontier.redis import CrawlKeys, RedisQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Attempt, Outcome
from tests.fixtures.redis_server import RedisServer

pytestmark = pytest.mark.redis

NOW = 1_000_000.0
POLICY = DomainPolicy(delay_s=0.0, max_in_flight=4)
HTTP = ("http",)
PREFIX = "crawlfleet:{lost}"


def reqs(n: int) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://a.test/{i}", f"a-{i}", "a.test") for i in range(n)]


async def test_flushall_mid_crawl_is_frontier_lost_not_zero_pending(
    start_redis: Callable[..., RedisServer],
) -> None:
    server = start_redis()
    store = await RedisQueueStore.open(server.url, PREFIX, policy=POLICY)
    await store.add(reqs(5), Budget())
    (lease,) = await store.claim(1, NOW, 60, HTTP)
    client = Redis.from_url(server.url)
    await client.flushall()
    await client.aclose()

    with pytest.raises(FrontierLost, match=r"crawlfleet:\{lost\}.*is gone"):
        await store.counts()
    with pytest.raises(FrontierLost):
        await store.claim(5, NOW, 60, HTTP)
    with pytest.raises(FrontierLost):
        await store.add([CrawlRequest("http://a.test/new", "a-new", "a.test")], Budget())
    # Requests this store saw seen are answered by its prefilter, sending (writing) nothing.
    assert await store.add(reqs(1), Budget()) == 0
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "w", Outcome.OK, 200, 1, 0.1, 0, NOW)
    with pytest.raises(FrontierLost):
        await store.complete(lease, Report(attempt))
    with pytest.raises(FrontierLost):
        await store.reap(NOW + 100, 3)
    assert isinstance(FrontierLost("x"), StateError)
    await store.close()

    # Nothing was written back: a wiped crawl is not half re-created by its workers.
    client = Redis.from_url(server.url)
    assert await client.dbsize() == 0
    await client.aclose()


async def test_a_restart_without_persistence_is_frontier_lost(
    start_redis: Callable[..., RedisServer],
) -> None:
    server = start_redis(aof=False)  # no append-only file: a restart starts empty
    store = await RedisQueueStore.open(server.url, PREFIX, policy=POLICY)
    await store.add(reqs(3), Budget())
    server.restart()
    with pytest.raises(FrontierLost):
        await store.counts()
    await store.close()


async def test_another_crawl_created_under_the_prefix_is_not_taken_for_this_one(
    start_redis: Callable[..., RedisServer],
) -> None:
    server = start_redis()
    old = await RedisQueueStore.open(server.url, PREFIX, policy=POLICY)
    client = Redis.from_url(server.url)
    await client.flushall()
    new = await RedisQueueStore.open(
        server.url, PREFIX, policy=POLICY
    )  # a worker that started afresh
    assert new.epoch != old.epoch
    assert (await new.counts()).seen == 0
    with pytest.raises(FrontierLost):
        await old.counts()
    await client.aclose()
    await old.close()
    await new.close()


async def test_opening_a_crawl_whose_epoch_is_gone_is_refused(
    start_redis: Callable[..., RedisServer],
) -> None:
    server = start_redis()
    store = await RedisQueueStore.open(server.url, PREFIX, policy=POLICY)
    await store.close()
    client = Redis.from_url(server.url)
    await client.delete(CrawlKeys(PREFIX).key("epoch"))  # as an eviction would
    await client.aclose()
    with pytest.raises(FrontierLost):
        await RedisQueueStore.open(server.url, PREFIX, policy=POLICY)


async def test_a_restart_with_persistence_keeps_the_epoch(redis_server_aof: RedisServer) -> None:
    store = await RedisQueueStore.open(redis_server_aof.url, PREFIX, policy=POLICY)
    await store.add(reqs(3), Budget())
    redis_server_aof.kill()
    redis_server_aof.restart()
    assert (await store.counts()).queued == 3
    again = await RedisQueueStore.open(redis_server_aof.url, PREFIX, policy=POLICY)
    assert again.epoch == store.epoch
    await again.close()
    await store.close()
