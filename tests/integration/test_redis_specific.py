"""What only the Redis store must do: share one Redis, survive restarts, Bloom dedup."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pytest
from redis.asyncio import Redis

import crawlfleet.frontier.redis as redis_frontier
from crawlfleet.errors import StateError
from crawlfleet.frontier.redis import BloomGeometry, CrawlKeys, RedisQueueStore
from crawlfleet.frontier.redis.bloom import SHARD_BYTES
from crawlfleet.frontier.redis.scripts import read_sources
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome
from tests.fixtures.redis_server import RedisServer, free_port

pytestmark = pytest.mark.redis

NOW = 1_000_000.0
POLITE = DomainPolicy(delay_s=0.0, max_in_flight=2)
HTTP = ("http",)


class Opener(Protocol):
    def __call__(self, url: str, prefix: str, **options: Any) -> Awaitable[RedisQueueStore]: ...


def req(n: int, domain: str = "a.test", priority: int = 0) -> CrawlRequest:
    return CrawlRequest(
        url=f"http://{domain}/{n}", fingerprint=f"{domain}-{n}", domain=domain, priority=priority
    )


def report(lease: Lease, outcome: Outcome = Outcome.OK, at: float = NOW) -> Report:
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "w", outcome, 200, 10, 0.1, r.attempt, at)
    return Report(attempt)


@pytest.fixture
async def opened() -> AsyncIterator[Opener]:
    """``await opened(url, prefix, **options)``: a store closed when the test ends (holding
    ``POLITE`` unless ``policy`` is given)."""
    stores: list[RedisQueueStore] = []

    async def open_store(url: str, prefix: str, **options: Any) -> RedisQueueStore:
        store = await RedisQueueStore.open(url, prefix, **{"policy": POLITE, **options})
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        await store.close()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def test_two_crawls_share_one_redis_without_seeing_each_other(
    opened: Opener, redis_url: str, raw: Redis
) -> None:
    one = await opened(redis_url, "share:{one}")
    two = await opened(redis_url, "share:{two}")
    batch = [req(i) for i in range(3)]
    assert await one.add(batch, Budget()) == 3
    assert await two.add(batch, Budget()) == 3
    leases = await one.claim(10, NOW, 60, HTTP)
    assert len(leases) == 2
    assert not await two.complete(leases[0], report(leases[0]))
    assert (await one.counts()).leased == 2
    assert (await two.counts()).leased == 0
    assert (await two.stats()).counters == {}
    assert len(await two.claim(10, NOW, 60, HTTP)) == 2
    keys = await raw.keys("share:*")
    assert keys
    assert all(k.startswith(("share:{one}:", "share:{two}:")) for k in keys)


async def test_scripts_are_loaded_again_after_script_flush(
    opened: Opener, redis_url: str, raw: Redis
) -> None:
    store = await opened(redis_url, "noscript")
    await store.add([req(1), req(2)], Budget())
    await raw.script_flush()
    assert len(await store.claim(5, NOW, 60, HTTP)) == 2
    assert await store.add([req(3)], Budget()) == 1


async def test_state_survives_sigkill_and_the_client_reconnects(
    opened: Opener,
    redis_server_aof: RedisServer,
) -> None:
    store = await opened(redis_server_aof.url, "aof")
    await store.add([req(i) for i in range(5)], Budget())
    first = await store.claim(2, NOW, 60, HTTP)
    assert await store.complete(first[0], report(first[0]))
    assert await store.retry(first[1], NOW + 10, "timeout", report(first[1]))
    (held,) = await store.claim(1, NOW, 60, HTTP)
    before = (await store.counts(), await store.stats(), await store.pending_attempts(10))

    redis_server_aof.kill()
    redis_server_aof.restart()

    assert (await store.counts(), await store.stats(), await store.pending_attempts(10)) == before
    assert (before[0].queued, before[0].leased, before[0].done) == (3, 1, 1)
    assert await store.complete(held, report(held))
    wide = await opened(redis_server_aof.url, "aof", policy=DomainPolicy(0.0, 10))  # a worker
    later = await wide.claim(10, NOW + 11, 60, HTTP)
    assert len(later) == 3
    (retried,) = [x for x in later if x.request.fingerprint == first[1].request.fingerprint]
    assert retried.request.attempt == 1
    assert await store.bury(retried, "gone", NOW + 12, report(retried))
    (dead,) = await store.dead_letters()
    assert dead.errors == ("timeout", "gone")


async def test_claims_from_two_connections_respect_max_in_flight(
    opened: Opener, redis_url: str
) -> None:
    workers = [await opened(redis_url, "shared") for _ in range(4)]
    await workers[0].add([req(i) for i in range(50)], Budget())
    rounds = await asyncio.gather(*(w.claim(10, NOW, 60, HTTP) for w in workers))
    assert sum(len(r) for r in rounds) == POLITE.max_in_flight
    added = await asyncio.gather(
        *(w.add([req(i) for i in range(40, 60)], Budget()) for w in workers)
    )
    assert sum(added) == 10


async def test_bloom_false_positive_rate_is_near_the_configured_rate(
    opened: Opener, redis_url: str, raw: Redis
) -> None:
    capacity, rate = 100_000, 0.01
    store = await opened(
        redis_url, "bloom", dedup="bloom", bloom_capacity=capacity, bloom_error_rate=rate
    )
    geometry = BloomGeometry.for_capacity(capacity, rate)
    seen = [CrawlRequest(f"http://s.test/{i}", f"seen-{i}", "s.test") for i in range(capacity)]
    assert await store.add(seen, Budget()) >= capacity * 0.99
    binary = Redis.from_url(redis_url)
    shards = [CrawlKeys("bloom").bloom_shard(i) for i in range(geometry.shards)]
    bitmap = bytearray(b"".join(await binary.mget(shards)))
    await binary.aclose()
    assert len(bitmap) * 8 == geometry.bits

    def looks_seen(fp: str) -> bool:
        return all(bitmap[p >> 3] & (0x80 >> (p & 7)) for p in geometry.positions(fp))

    assert all(looks_seen(f"seen-{i}") for i in range(0, capacity, 97))
    false_positives = sum(looks_seen(f"new-{i}") for i in range(capacity))
    measured = false_positives / capacity
    assert rate / 2 <= measured <= rate * 2, measured

    # The add script tests the same bits: it refuses exactly the fingerprints that look seen.
    for i in range(1000):
        fp = f"probe-{i}"
        expected = 0 if looks_seen(fp) else 1
        admitted = await store.add([CrawlRequest(f"http://b.test/{i}", fp, "b.test")], Budget())
        assert admitted == expected, fp
        for p in geometry.positions(fp):
            bitmap[p >> 3] |= 0x80 >> (p & 7)


async def test_bloom_bitmap_has_the_computed_size(
    opened: Opener, redis_url: str, raw: Redis
) -> None:
    store = await opened(redis_url, "size", dedup="bloom", bloom_capacity=200_000)
    geometry = BloomGeometry.for_capacity(200_000, 0.01)
    assert (geometry.hashes, geometry.shards) == (7, 8)
    assert geometry.bits >= 1_917_012  # -n ln(p) / ln(2)^2 for 200k at 1 %
    shards = [CrawlKeys("size").bloom_shard(i) for i in range(geometry.shards)]

    async def sizes() -> list[int]:
        return [await raw.strlen(key) for key in shards]

    assert await sizes() == [SHARD_BYTES] * 8
    assert not await raw.exists("size:bloom", CrawlKeys("size").bloom_shard(8))
    await store.add([req(i) for i in range(200)], Budget())
    assert await sizes() == [SHARD_BYTES] * 8
    # Each shard fills its jemalloc size class (32 KiB) and stays there.
    assert {await raw.memory_usage(key, samples=0) for key in shards} == {32 * 1024 + 56}


async def test_reopening_with_other_dedup_settings_is_refused(
    opened: Opener, redis_url: str
) -> None:
    await opened(redis_url, "fixed", dedup="bloom", bloom_capacity=1000)
    with pytest.raises(StateError, match="fixed"):
        await opened(redis_url, "fixed", dedup="exact")
    await opened(redis_url, "fixed", dedup="bloom", bloom_capacity=1000)


async def test_unreachable_redis_names_the_url_without_its_password() -> None:
    url = f"redis://crawler:s3cret-pw@127.0.0.1:{free_port()}/0"
    with pytest.raises(StateError) as info:
        await RedisQueueStore.open(url, "x", policy=POLITE)
    message = str(info.value)
    assert "s3cret-pw" not in message
    assert "redis://crawler:***@127.0.0.1" in message


async def test_priority_order_survives_packing_into_one_score(
    opened: Opener, redis_url: str
) -> None:
    store = await opened(redis_url, "prio", policy=DomainPolicy(0.0, 1))
    batch = [req(1, priority=-5), req(2, priority=70_000), req(3, priority=3), req(4, priority=3)]
    await store.add(batch, Budget())
    order = []
    for _ in batch:
        lease = (await store.claim(1, NOW, 60, HTTP))[0]
        order.append(lease.request.fingerprint)
        await store.complete(lease, report(lease))
    assert order == ["a.test-2", "a.test-3", "a.test-4", "a.test-1"]


def test_public_api() -> None:
    assert sorted(redis_frontier.__all__) == ["BloomGeometry", "CrawlKeys", "RedisQueueStore"]
    assert all(hasattr(redis_frontier, name) for name in redis_frontier.__all__)


async def test_every_script_compiles(raw: Redis) -> None:
    sources = read_sources()
    assert {"open", "add", "claim", "finish", "reap", "set_delay"} <= set(sources)
    for source in sources.values():
        assert source.key_names, source.name
        assert len(await raw.script_load(source.text)) == 40


async def test_reap_returns_more_leases_than_one_script_call_takes(
    opened: Opener, redis_url: str
) -> None:
    store = await opened(redis_url, "many", policy=DomainPolicy(0.0, 2500))
    await store.add([req(i) for i in range(2500)], Budget())
    leases = await store.claim(2500, NOW, 5, HTTP)
    assert len(leases) == 2500
    assert await store.reap(NOW + 6, 1) == 2500
    counts = await store.counts()
    assert (counts.queued, counts.leased) == (2500, 0)
    assert (await store.stats()).get("lease_expired") == 2500
    assert len(await store.pending_attempts(3000)) == 2500


async def test_dead_letters_of_one_time_come_in_admission_order(
    opened: Opener, redis_url: str
) -> None:
    store = await opened(redis_url, "dead-order")
    await store.add([req(2, "z.test"), req(1, "a.test")], Budget())
    for lease in await store.claim(5, NOW, 60, HTTP):
        assert await store.bury(lease, "gone", NOW, report(lease))
    letters = await store.dead_letters()
    assert [d.request.fingerprint for d in letters] == ["z.test-2", "a.test-1"]
    assert [d.request.fingerprint for d in await store.dead_letters(1, 1)] == ["a.test-1"]
    assert await store.requeue_dead(["a.test-1"]) == 1
    assert await store.purge_dead() == 1


async def test_a_lease_end_is_one_script_call_and_a_claim_batch_one(
    opened: Opener, start_redis: Callable[..., RedisServer]
) -> None:
    server = start_redis()
    store = await opened(server.url, "trips", policy=DomainPolicy(0.0, 10))
    await store.add([req(i, f"d{i % 10}.test") for i in range(101)], Budget())
    (warm,) = await store.claim(1, NOW, 60, HTTP)  # loads the scripts (NOSCRIPT once)
    await store.complete(warm, report(warm))
    client = Redis.from_url(server.url, decode_responses=True)
    await client.config_resetstat()
    leases = await store.claim(100, NOW, 60, HTTP)
    ended = [await store.complete(lease, report(lease)) for lease in leases]
    stats = await client.info("commandstats")
    await client.aclose()
    assert len(leases) == 100
    assert all(ended)
    # Commands run inside scripts count too, so only EVALSHA says what crossed the wire.
    evalsha = stats["cmdstat_evalsha"]
    assert (evalsha["calls"], evalsha["failed_calls"]) == (1 + 100, 0)
    assert not {name for name in stats if name.startswith("cmdstat_script")}
