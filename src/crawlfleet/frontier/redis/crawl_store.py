"""Open a crawl's Redis frontier: one store, or P partitions, with the count fixed at creation."""

from __future__ import annotations

from typing import Literal

from redis.exceptions import RedisError

from crawlfleet.errors import StateError
from crawlfleet.frontier.recent import SEEN_PREFILTER_CAPACITY
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.partitioned import PartitionedQueueStore
from crawlfleet.frontier.redis.routing import crawl_prefix, partition_prefix
from crawlfleet.frontier.redis.store import RedisQueueStore
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient, open_client


async def open_crawl_store(
    url: str,
    crawl_id: str,
    *,
    partitions: int | None = None,
    dedup: Literal["exact", "bloom"] = "exact",
    bloom_capacity: int = 10_000_000,
    bloom_error_rate: float = 0.01,
) -> RedisQueueStore | PartitionedQueueStore:
    """The frontier of crawl ``crawl_id`` at ``url`` (one server or a cluster).

    ``partitions`` is used when the crawl is new (None: 1) and must match the stored count
    otherwise (None: whatever it is); a mismatch is a ``StateError``. One partition is a
    plain ``RedisQueueStore`` under ``crawl_prefix``. The Bloom capacity is split evenly over
    the partitions (a crawl whose domains are very uneven needs a larger capacity), and so is
    the capacity of the seen prefilter ``add`` keeps in memory.
    """
    where = redact(url)
    client = await open_client(url)
    try:
        base = CrawlKeys(crawl_prefix(crawl_id))
        count = await _fix_partitions(client, base, crawl_id, partitions, where)
        capacity = -(-bloom_capacity // count)
        if count == 1:
            return await RedisQueueStore.attach(
                client,
                base.prefix,
                where,
                dedup=dedup,
                bloom_capacity=capacity,
                bloom_error_rate=bloom_error_rate,
            )
        inner = [
            await RedisQueueStore.attach(
                client,
                partition_prefix(crawl_id, p),
                where,
                dedup=dedup,
                bloom_capacity=capacity,
                bloom_error_rate=bloom_error_rate,
                owns_client=False,
                prefilter_capacity=SEEN_PREFILTER_CAPACITY
                // count,  # the crawl's, split like Bloom's
            )
            for p in range(count)
        ]
        return await PartitionedQueueStore.attach(client, base, inner, where)
    except BaseException:
        await client.aclose()
        raise


async def _fix_partitions(
    client: RedisClient, base: CrawlKeys, crawl_id: str, wanted: int | None, where: str
) -> int:
    """The crawl's partition count: stored at its first open, checked at every other."""
    key = base.key("partitions")
    try:
        if wanted is None:
            stored = await client.get(key)
            if stored is not None:
                return int(stored)
        await client.set(key, str(wanted or 1), nx=True)
        stored = await client.get(key)
    except RedisError as exc:
        raise StateError(f"Redis at {where} failed: {exc}") from exc
    count = int(stored) if stored is not None else 0
    if wanted is not None and count != wanted:
        raise StateError(
            f"crawl {crawl_id!r} in Redis at {where} has {count} frontier partitions, not "
            f"{wanted}: the count is fixed when a crawl is created (start it over with --fresh)"
        )
    return count
