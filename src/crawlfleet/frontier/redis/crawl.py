"""One crawl's frontier in Redis, opened: what ``RedisQueueStore`` runs its scripts through.

``RedisCrawl`` connects, creates the crawl or checks its stored settings (dedup, Bloom
geometry), and runs the crawl's scripts and reads. Connection errors are retried for about a
second (a restarted Redis is reconnected to by itself); a script whose reply was lost may
therefore run twice, which at worst hands out a lease that later expires, or answers False
to a ``complete`` that took effect. Every script that writes, ``claim`` and ``counts`` check
the crawl's epoch first: a frontier that vanished while the crawl was open (FLUSHALL, a
restart without persistence) raises ``FrontierLost`` instead of looking like a finished
crawl; an ``add`` of requests that the store already saw seen sends nothing (the seen
prefilter, ``RedisQueueStore.add``) and so writes nothing either: the store's next call meets
the loss. Any other Redis failure raises ``StateError``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Self

from redis.exceptions import RedisError, ResponseError

from crawlfleet.errors import FrontierLost, StateError
from crawlfleet.frontier.redis.bloom import SHARD_BYTES, BloomGeometry
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.scripts import Scripts
from crawlfleet.frontier.redis.views import Arg
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient, open_client

log = logging.getLogger(__name__)

BATCH = 1000  # requests or fingerprints per script call, so no call blocks Redis for long
LOST_MARK = "FRONTIER_LOST"  # how the scripts' error reply starts when the epoch is gone


class RedisCrawl:
    """A crawl's frontier keys on one client, under the crawl's epoch (module doc)."""

    def __init__(
        self,
        client: RedisClient,
        keys: CrawlKeys,
        bloom: BloomGeometry | None,
        where: str,
        *,
        owns_client: bool = True,
    ) -> None:
        """Use ``open`` or ``attach``; this binds an already checked client."""
        self.client = client
        self.keys = keys
        self.bloom = bloom
        self._where = where
        self._owns_client = owns_client
        self.scripts = Scripts(client, keys)
        self._epoch = uuid.uuid4().hex

    @classmethod
    async def open(
        cls,
        url: str,
        prefix: str,
        *,
        dedup: Literal["exact", "bloom"] = "exact",
        bloom_capacity: int = 10_000_000,
        bloom_error_rate: float = 0.01,
    ) -> Self:
        """Connect, create the crawl or check its stored settings, and size the Bloom bitmap.

        ``url`` names one server or a Redis Cluster (``crawlfleet/redisdb.py``). ``prefix`` should
        carry a hash tag (``crawlfleet:{<crawl_id>}``, see ``keys.py``). Raises
        ``StateError`` when Redis is unreachable (the message shows the URL without its
        password) or when ``prefix`` was created with other dedup settings, and
        ``FrontierLost`` when the crawl exists without its epoch or counts.
        """
        client = await open_client(url)
        try:
            return await cls.attach(
                client,
                prefix,
                redact(url),
                dedup=dedup,
                bloom_capacity=bloom_capacity,
                bloom_error_rate=bloom_error_rate,
            )
        except BaseException:
            await client.aclose()
            raise

    @classmethod
    async def attach(
        cls,
        client: RedisClient,
        prefix: str,
        where: str,
        *,
        dedup: Literal["exact", "bloom"] = "exact",
        bloom_capacity: int = 10_000_000,
        bloom_error_rate: float = 0.01,
        owns_client: bool = True,
    ) -> Self:
        """``open`` on a client from ``open_client``; ``close`` closes it if ``owns_client``."""
        if not prefix or any(ch.isspace() for ch in prefix):
            raise ValueError(f"bad Redis key prefix {prefix!r}")
        bloom = (
            BloomGeometry.for_capacity(bloom_capacity, bloom_error_rate)
            if dedup == "bloom"
            else None
        )
        crawl = cls(client, CrawlKeys(prefix), bloom, where, owns_client=owns_client)
        with crawl.guard():
            await crawl._open_crawl(dedup)
        if bloom is not None:
            log.info(
                "Bloom seen filter for %r: %d bits in %d shards, %d hashes, %.1f MB in Redis",
                prefix,
                bloom.bits,
                bloom.shards,
                bloom.hashes,
                bloom.size_bytes / 1e6,
            )
        return crawl

    @property
    def epoch(self) -> str:
        """The token the crawl's first open wrote; another value means another crawl."""
        return self._epoch

    async def _open_crawl(self, dedup: str) -> None:
        bloom = self.bloom
        wanted = {
            "dedup": dedup,
            "bloom_bits": str(bloom.bits if bloom else 0),
            "bloom_hashes": str(bloom.hashes if bloom else 0),
            "bloom_shard_bytes": str(SHARD_BYTES if bloom else 0),
        }
        flat = [item for pair in wanted.items() for item in pair]
        epoch, *stored_flat = await self.scripts.run("open", self._epoch, *flat)
        if not epoch:
            raise FrontierLost(self.lost())
        self._epoch = epoch
        stored = dict(zip(stored_flat[::2], stored_flat[1::2], strict=True))
        if stored != wanted:
            raise StateError(
                f"crawl {self.keys.prefix!r} in Redis at {self._where} was created with "
                f"{stored}, not {wanted}: use another prefix (crawl id) or the same settings"
            )
        if bloom is not None:
            zeros = b"\0" * SHARD_BYTES
            async with self.client.pipeline(transaction=False) as pipe:
                for index in range(bloom.shards):
                    pipe.set(self.keys.bloom_shard(index), zeros, nx=True)
                await pipe.execute()

    def lost(self) -> str:
        """Why ``FrontierLost`` is raised: the crawl's frontier is gone."""
        return (
            f"the frontier of crawl {self.keys.prefix!r} in Redis at {self._where} is gone "
            "(flushed, evicted, or Redis restarted without persistence): what was queued "
            "and done is unknown, so the crawl cannot go on or be reported complete"
        )

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Redis failures inside as ``StateError``, a lost epoch as ``FrontierLost``."""
        try:
            yield
        except ResponseError as exc:
            if str(exc).startswith(LOST_MARK):
                raise FrontierLost(self.lost()) from None
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc
        except RedisError as exc:
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc

    async def run(self, name: str, *args: Arg) -> Any:
        """Run the script ``name`` under the crawl's epoch (``guard``: its failures)."""
        with self.guard():
            return await self.scripts.run(name, self._epoch, *args)

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()
