"""The records of one crawl's Redis frontier: counts, statistics, attempts, known URLs and
dead letters (``keys.py``: ``counts``, ``stats``, ``dstats``, ``attempts``, ``known``,
``revisit``, ``dead``, ``errors``).

``revisit`` and ``requeue_dead`` put requests back into their lanes, each batch one script.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence

import orjson

from crawlfleet.counters import CrawlStats
from crawlfleet.errors import FrontierLost
from crawlfleet.frontier.redis.crawl import BATCH, RedisCrawl
from crawlfleet.frontier.redis.views import Arg, counters_json, crawl_stats, dumps, loads
from crawlfleet.frontier.store_types import Visit
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Attempt, DeadLetter, QueueCounts

COUNT_FIELDS = ("queued", "leased", "done", "dead", "seen")

DeadAction = Callable[[list[str]], Awaitable[int]]


class RedisRecords(RedisCrawl):
    """Counts, statistics, attempts, known URLs and dead letters of a crawl, in Redis."""

    async def counts(self) -> QueueCounts:
        with self._guard():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.get(self._keys.key("epoch"))
                pipe.hmget(self._keys.key("counts"), list(COUNT_FIELDS))
                epoch, values = await pipe.execute()
        if epoch != self._epoch or values[0] is None:
            raise FrontierLost(self._lost())
        queued, leased, done, dead, seen = (int(v) for v in values)
        return QueueCounts(queued=queued, leased=leased, done=done, dead=dead, seen=seen)

    async def start(self, now: float) -> None:
        with self._guard():
            await self._client.set(self._keys.key("started_at"), repr(float(now)), nx=True)

    async def stats(self) -> CrawlStats:
        with self._guard():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hgetall(self._keys.key("stats"))
                pipe.get(self._keys.key("started_at"))
                counters, started_at = await pipe.execute()
        return crawl_stats(counters, started_at)

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        if counters:
            await self._run("add_counters", domain, counters_json(counters))

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        if limit <= 0:
            return []
        with self._guard():
            rows = await self._client.lrange(self._keys.key("attempts"), 0, limit - 1)
        return [Attempt.from_dict(orjson.loads(row)) for row in rows]

    async def ack_attempts(self, count: int) -> None:
        if count > 0:
            with self._guard():
                await self._client.ltrim(self._keys.key("attempts"), count, -1)

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        again = dataclasses.replace(request, attempt=0, priority=visit.priority)
        known = orjson.dumps({"request": dumps(again), "visit": visit.to_dict()}).decode()
        await self._run("remember", request.fingerprint, known, repr(float(visit.next_at)))

    async def visit(self, fingerprint: str) -> Visit | None:
        with self._guard():
            raw = await self._client.hget(self._keys.key("known"), fingerprint)
        if raw is None:
            return None
        fields = orjson.loads(raw)["visit"]
        for name in ("interval_s", "next_at"):  # JSON has no infinity: null
            fields[name] = float("inf") if fields[name] is None else float(fields[name])
        fields["item_types"] = tuple(fields["item_types"])
        return Visit(**fields)

    async def revisit(self, now: float, limit: int) -> int:
        total = 0
        while total < limit:
            batch = min(BATCH, limit - total)
            moved, scanned = await self._run("revisit", repr(float(now)), batch)
            total += int(moved)
            if int(scanned) < batch:
                break
        return total

    async def next_visit_at(self) -> float | None:
        with self._guard():
            first = await self._client.zrange(self._keys.key("revisit"), 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        flat = await self._run("dead_letters", max(0, offset), limit)
        return [
            DeadLetter(
                request=loads(flat[i]),
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
                members = await self._client.zrange(self._keys.key("dead"), 0, BATCH - 1)
            page = [str(member).partition(":")[2] for member in members]
            done = await action(page) if page else 0
            total += done
            if done == 0:
                return total

    async def _requeue_batch(self, fingerprints: list[str]) -> int:
        with self._guard():
            stored = await self._client.hmget(self._keys.key("req"), fingerprints)
        args: list[Arg] = []
        for fp, raw in zip(fingerprints, stored, strict=True):
            if raw is not None:
                fresh = dataclasses.replace(loads(raw), attempt=0)
                args += [fp, fresh.domain, fresh.fetcher, fresh.priority, dumps(fresh)]
        return int(await self._run("requeue_dead", *args)) if args else 0

    async def _purge_batch(self, fingerprints: list[str]) -> int:
        return int(await self._run("purge_dead", *fingerprints))
