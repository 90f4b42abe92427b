"""``QueueStore`` on Redis: one crawl's frontier shared by every worker.

Every change is one Lua script (see ``keys.py`` for the data layout and ``lua/`` for the
scripts), so it is atomic however many workers share the crawl. Connection errors are retried
for about a second (a restarted Redis is reconnected to by itself); a script whose reply was
lost may therefore run twice, which at worst hands out a lease that later expires, or answers
False to a ``complete`` that took effect. Any other Redis failure raises ``StateError``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import orjson
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlfleet.errors import StateError
from crawlfleet.frontier.protocols import LEASE_EXPIRED, Budget, DomainPolicy
from crawlfleet.frontier.redis.bloom import SHARD_BITS, SHARD_BYTES, BloomGeometry
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.scripts import Scripts
from crawlfleet.models import CrawlRequest, DeadLetter, Lease, QueueCounts

log = logging.getLogger(__name__)

BATCH = 1000  # requests or fingerprints per script call, so no call blocks Redis for long
PROMOTE_PER_CLAIM = 1000  # at least this many due retries move into their queues per claim
COUNT_FIELDS = ("queued", "leased", "done", "dead", "seen")

DeadAction = Callable[[list[str]], Awaitable[int]]


def redact(url: str) -> str:
    """The URL with its password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


class RedisQueueStore:
    """Request queue, seen filter, leases, retries and DLQ of one crawl, in Redis."""

    def __init__(
        self, client: Redis, keys: CrawlKeys, bloom: BloomGeometry | None, where: str
    ) -> None:
        """Use ``open``; this binds an already checked client."""
        self._client = client
        self._keys = keys
        self._bloom = bloom
        self._where = where
        self._scripts = Scripts(client, keys)

    @classmethod
    async def open(
        cls,
        url: str,
        prefix: str,
        *,
        dedup: Literal["exact", "bloom"] = "exact",
        bloom_capacity: int = 10_000_000,
        bloom_error_rate: float = 0.01,
    ) -> RedisQueueStore:
        """Connect, check the crawl's stored dedup settings, and size the Bloom bitmap.

        Raises ``StateError`` when Redis is unreachable (the message shows the URL without its
        password) or when ``prefix`` was created with other dedup settings.
        """
        if not prefix or any(ch.isspace() for ch in prefix):
            raise ValueError(f"bad Redis key prefix {prefix!r}")
        bloom = (
            BloomGeometry.for_capacity(bloom_capacity, bloom_error_rate)
            if dedup == "bloom"
            else None
        )
        where = redact(url)
        retry = Retry(ExponentialBackoff(cap=0.25, base=0.01), retries=8)
        try:
            client = Redis.from_url(
                url,
                decode_responses=True,
                retry=retry,
                retry_on_error=[RedisConnectionError, RedisTimeoutError],
                socket_connect_timeout=5,
            )
        except ValueError as exc:
            raise StateError(f"bad Redis URL {where}: {exc}") from None
        store = cls(client, CrawlKeys(prefix), bloom, where)
        try:
            with store._guard():
                await _ping_once(url)
                await store._check_config(dedup)
        except StateError:
            await client.aclose()
            raise
        if bloom is not None:
            log.info(
                "Bloom seen filter for %r: %d bits in %d shards, %d hashes, %.1f MB in Redis",
                prefix,
                bloom.bits,
                bloom.shards,
                bloom.hashes,
                bloom.size_bytes / 1e6,
            )
        return store

    async def _check_config(self, dedup: str) -> None:
        bloom = self._bloom
        wanted = {
            "dedup": dedup,
            "bloom_bits": str(bloom.bits if bloom else 0),
            "bloom_hashes": str(bloom.hashes if bloom else 0),
            "bloom_shard_bytes": str(SHARD_BYTES if bloom else 0),
        }
        key = self._keys.key("config")
        async with self._client.pipeline(transaction=True) as pipe:
            for field, value in wanted.items():
                pipe.hsetnx(key, field, value)
            pipe.hgetall(key)
            *_, stored = await pipe.execute()
        if stored != wanted:
            raise StateError(
                f"crawl {self._keys.prefix!r} in Redis at {self._where} was created with "
                f"{stored}, not {wanted}: use another prefix (crawl id) or the same settings"
            )
        if bloom is not None:
            zeros = b"\0" * SHARD_BYTES
            async with self._client.pipeline(transaction=False) as pipe:
                for index in range(bloom.shards):
                    pipe.set(self._keys.bloom_shard(index), zeros, nx=True)
                await pipe.execute()

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except RedisError as exc:
            raise StateError(f"Redis at {self._where} failed: {exc}") from exc

    async def _run(self, name: str, *args: str | int | float) -> Any:
        with self._guard():
            return await self._scripts.run(name, *args)

    def _seen_args(self, fingerprint: str) -> list[int]:
        return self._bloom.positions(fingerprint) if self._bloom else []

    @property
    def _seen_head(self) -> list[str | int]:
        """The script arguments saying how to read ``_seen_args``: k, then bits per shard."""
        return [self._bloom.hashes, SHARD_BITS] if self._bloom else [0, 0]

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        limits = (
            -1 if budget.max_total is None else budget.max_total,
            -1 if budget.max_per_domain is None else budget.max_per_domain,
        )
        admitted = 0
        for start in range(0, len(requests), BATCH):
            args: list[str | int] = [*self._seen_head, *limits]
            for req in requests[start : start + BATCH]:
                args += [req.fingerprint, req.domain, req.priority, _dumps(req)]
                args += self._seen_args(req.fingerprint)
            admitted += int(await self._run("add", *args))
        return admitted

    async def mark_seen(self, fingerprints: Sequence[str]) -> None:
        for start in range(0, len(fingerprints), BATCH):
            args: list[str | int] = [*self._seen_head]
            for fp in fingerprints[start : start + BATCH]:
                args += [fp, *self._seen_args(fp)]
            await self._run("mark_seen", *args)

    async def claim(
        self, limit: int, now: float, lease_s: float, default: DomainPolicy
    ) -> list[Lease]:
        if limit <= 0:
            return []
        flat = await self._run(
            "claim",
            now,
            lease_s,
            default.delay_s,
            default.max_in_flight,
            limit,
            max(PROMOTE_PER_CLAIM, 10 * limit),
        )
        expires_at = now + lease_s
        return [
            Lease(_loads(flat[i + 1]), token=flat[i], expires_at=expires_at)
            for i in range(0, len(flat), 2)
        ]

    async def complete(self, lease: Lease) -> bool:
        return bool(await self._run("complete", lease.token))

    async def retry(self, lease: Lease, not_before: float, error: str) -> bool:
        again = dataclasses.replace(lease.request, attempt=lease.request.attempt + 1)
        return bool(await self._run("retry", lease.token, not_before, error, _dumps(again)))

    async def bury(self, lease: Lease, error: str, now: float) -> bool:
        return bool(await self._run("bury", lease.token, error, now))

    async def reap(self, now: float, max_retries: int) -> int:
        total = 0
        while True:
            reaped = int(await self._run("reap", now, BATCH, max_retries, LEASE_EXPIRED))
            total += reaped
            if reaped < BATCH:
                return total

    async def set_policy(self, domain: str, policy: DomainPolicy) -> None:
        await self._run("set_policy", domain, repr(float(policy.delay_s)), policy.max_in_flight)

    async def block(self, domain: str, until: float) -> None:
        await self._run("block", domain, until)

    async def next_ready_at(self, now: float) -> float | None:
        raw = await self._run("next_ready_at")
        return None if raw is None else max(float(raw), now)

    async def counts(self) -> QueueCounts:
        with self._guard():
            values = await self._client.hmget(self._keys.key("counts"), list(COUNT_FIELDS))
        queued, leased, done, dead, seen = (int(v or 0) for v in values)
        return QueueCounts(queued=queued, leased=leased, done=done, dead=dead, seen=seen)

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        flat = await self._run("dead_letters", max(0, offset), limit)
        return [
            DeadLetter(
                request=_loads(flat[i]),
                errors=tuple(orjson.loads(flat[i + 1])),
                died_at=float(flat[i + 2]),
            )
            for i in range(0, len(flat), 3)
        ]

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        return await self._on_dead(fingerprints, self._requeue_batch)

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        return await self._on_dead(fingerprints, self._purge_batch)

    async def _on_dead(self, fingerprints: Sequence[str] | None, action: DeadAction) -> int:
        """Apply ``action`` to the given dead letters in batches, or to all of them."""
        total = 0
        if fingerprints is not None:
            for start in range(0, len(fingerprints), BATCH):
                total += await action(list(fingerprints[start : start + BATCH]))
            return total
        while True:
            with self._guard():
                page = [
                    str(fp)
                    for fp in await self._client.zrange(self._keys.key("dead"), 0, BATCH - 1)
                ]
            done = await action(page) if page else 0
            total += done
            if done == 0:
                return total

    async def _requeue_batch(self, fingerprints: list[str]) -> int:
        with self._guard():
            stored = await self._client.hmget(self._keys.key("req"), fingerprints)
        args: list[str | int] = []
        for fp, raw in zip(fingerprints, stored, strict=True):
            if raw is not None:
                fresh = dataclasses.replace(_loads(raw), attempt=0)
                args += [fp, fresh.domain, fresh.priority, _dumps(fresh)]
        return int(await self._run("requeue_dead", *args)) if args else 0

    async def _purge_batch(self, fingerprints: list[str]) -> int:
        return int(await self._run("purge_dead", *fingerprints))

    async def close(self) -> None:
        await self._client.aclose()


async def _ping_once(url: str) -> None:
    """PING without retries, so an unreachable Redis fails ``open`` at once."""
    probe = Redis.from_url(url, retry=Retry(NoBackoff(), retries=0), socket_connect_timeout=5)
    try:
        await probe.ping()
    finally:
        await probe.aclose()


def _dumps(request: CrawlRequest) -> str:
    return orjson.dumps(request.to_dict()).decode()


def _loads(raw: str | bytes) -> CrawlRequest:
    return CrawlRequest.from_dict(orjson.loads(raw))
