"""One crawl's frontier split into P partitions, each a ``RedisQueueStore`` in its own slot.

A crawl created with ``P > 1`` partitions keeps its domains in P independent single-partition
stores with prefixes ``crawlfleet:{<crawl_id>:<p>}`` (``partition_prefix``): on a Redis
Cluster each prefix's hash tag lands in its own slot, so one crawl spreads over the nodes,
and every Lua script still touches one slot (the scripts are the single-partition store's,
unchanged). A domain, hence each of its URLs, fingerprints, leases, policy and statistics,
lives in partition ``blake2b(domain) mod P`` (``partition_of``); only the operations that
span domains fan out:

- ``claim`` visits the partitions in turn from a start that moves by one every call (and
  starts at a random one in each process), asking each for what the previous ones did not
  give: every partition gets the first pick equally often;
- ``counts``, ``stats``, ``reap``, ``next_ready_at``, ``next_visit_at``, ``domains`` and
  ``dead_letters`` read every partition and sum or merge; ``revisit`` takes the partitions
  with the earliest due URL first; ``visit``, ``requeue_dead`` and ``purge_dead`` of given
  fingerprints ask every partition (a fingerprint does not name its domain);
- ``pending_attempts`` merges the partitions' oldest attempts by time (equal times: in
  partition order) and ``ack_attempts`` trims each by what the last read took from it.

Crawl-wide state lives in the crawl's own slot ``crawlfleet:{<crawl_id>}`` (``CrawlSlot``,
``crawl_slot.py``): the crawl's epoch, and the ``budget`` that makes ``max_total`` hold across
partitions: an ``add`` reserves some admissions in it before handing a partition at most that
many requests, and gives back what the partition did not admit (seen already, or over
``max_per_domain``, which is per domain and so per partition). The price is that two
concurrent adds near the end of the budget may each be refused what the other later gives
back: a crawl never admits more than ``max_total`` and may admit a few fewer
(docs/decisions/0016).
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Collection, Mapping, Sequence

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest
from crawlfleet.frontier.redis.crawl_slot import CrawlSlot
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.routing import partition_of
from crawlfleet.frontier.redis.store import RedisQueueStore
from crawlfleet.frontier.store_types import (
    Budget,
    DelaySource,
    DomainPolicy,
    DomainView,
    Ended,
    Report,
    Visit,
)
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, DeadLetter, QueueCounts
from crawlfleet.redisdb import RedisClient


class PartitionedQueueStore:
    """``QueueStore`` over P ``RedisQueueStore`` partitions, routed by domain (module doc)."""

    def __init__(self, client: RedisClient, slot: CrawlSlot, inner: list[RedisQueueStore]) -> None:
        """Use ``crawl_store.open_crawl_store``; this binds partitions already opened on ``client``."""
        self._client = client
        self._slot = slot
        self._inner = inner
        self._turn = random.randrange(len(inner))
        self._read_from: list[int] = []  # partition of each attempt of the last read

    @classmethod
    async def attach(
        cls, client: RedisClient, base: CrawlKeys, inner: list[RedisQueueStore], where: str
    ) -> PartitionedQueueStore:
        return cls(client, await CrawlSlot.attach(client, base, where), inner)

    @property
    def default_policy(self) -> DomainPolicy:
        """Its partitions' (``open_crawl_store`` opens them all with one)."""
        return self._inner[0].default_policy

    @property
    def partitions(self) -> list[RedisQueueStore]:
        return list(self._inner)

    @property
    def epoch(self) -> str:
        return self._slot.epoch

    def _of(self, domain: str) -> RedisQueueStore:
        return self._inner[partition_of(domain, len(self._inner))]

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        groups: dict[int, list[CrawlRequest]] = {}
        for req in requests:
            groups.setdefault(partition_of(req.domain, len(self._inner)), []).append(req)
        per_partition = Budget(max_per_domain=budget.max_per_domain)
        # Past the crawl's budget a partition admits nothing; its add still counts what it
        # refuses (dropped.max_pages, the requests it has not seen).
        spent = Budget(max_total=0, max_per_domain=budget.max_per_domain)
        admitted = 0
        exhausted = False
        for index, group in groups.items():
            inner = self._inner[index]
            if budget.max_total is None:
                got = await inner.add(group, per_partition)
                await self._slot.count_admitted(got)
                admitted += got
                continue
            pending = group
            while pending:
                if exhausted:
                    await inner.add(pending, spent)
                    break
                granted = await self._slot.reserve(len(pending), budget.max_total)
                if granted == 0:
                    exhausted = True
                    continue
                chunk, pending = pending[:granted], pending[granted:]
                got = await inner.add(chunk, per_partition)
                if got < granted:
                    await self._slot.count_admitted(got - granted)
                admitted += got
        return admitted

    async def claim(
        self,
        limit: int,
        now: float,
        lease_s: float,
        kinds: Collection[str],
    ) -> list[Lease]:
        count = len(self._inner)
        start = self._turn
        self._turn = (start + 1) % count
        leases: list[Lease] = []
        for step in range(count):
            if len(leases) >= limit:
                break
            inner = self._inner[(start + step) % count]
            leases += await inner.claim(limit - len(leases), now, lease_s, kinds)
        return leases

    async def complete(self, lease: Lease, report: Report) -> Ended:
        return await self._of(lease.request.domain).complete(lease, report)

    async def retry(self, lease: Lease, not_before: float, error: str, report: Report) -> Ended:
        inner = self._of(lease.request.domain)
        return await inner.retry(lease, not_before, error, report)

    async def bury(self, lease: Lease, error: str, now: float, report: Report) -> Ended:
        return await self._of(lease.request.domain).bury(lease, error, now, report)

    async def move(self, lease: Lease, kind: str) -> bool:
        return await self._of(lease.request.domain).move(lease, kind)

    async def renew(self, lease: Lease, expires_at: float) -> bool:
        return await self._of(lease.request.domain).renew(lease, expires_at)

    async def reap(self, now: float, max_retries: int) -> int:
        reaped = await asyncio.gather(*(p.reap(now, max_retries) for p in self._inner))
        return sum(reaped)

    async def set_delay(self, domain: str, delay_s: float, source: DelaySource) -> None:
        await self._of(domain).set_delay(domain, delay_s, source)

    async def set_concurrency(self, domain: str, max_in_flight: int) -> None:
        await self._of(domain).set_concurrency(domain, max_in_flight)

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        await self._of(domain).set_strategy(domain, strategy)

    async def observe_drift(
        self, domain: str, parser: str, page: DriftPage, rule: DriftRule
    ) -> DriftTest:
        return await self._of(domain).observe_drift(domain, parser, page, rule)

    async def domain(self, domain: str) -> DomainView:
        return await self._of(domain).domain(domain)

    async def domains(self, limit: int = 100) -> list[DomainView]:
        if limit <= 0:
            return []
        tops = await asyncio.gather(*(p.most_admitted(limit) for p in self._inner))
        ranked = sorted(
            ((-admitted, name) for top in tops for name, admitted in top),
        )[:limit]
        names = [name for _, name in ranked]
        views = {view.domain: view for view in await self._views(names)}
        return [views[name] for name in names]

    async def _views(self, names: list[str]) -> list[DomainView]:
        by_partition: dict[int, list[str]] = {}
        for name in names:
            by_partition.setdefault(partition_of(name, len(self._inner)), []).append(name)
        found = await asyncio.gather(
            *(self._inner[p].views(group) for p, group in by_partition.items())
        )
        return [view for views in found for view in views]

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        times = await asyncio.gather(*(p.next_ready_at(now, kinds) for p in self._inner))
        known = [t for t in times if t is not None]
        return min(known) if known else None

    async def counts(self) -> QueueCounts:
        await self._slot.check_epoch()
        parts = await asyncio.gather(*(p.counts() for p in self._inner))
        return QueueCounts(
            queued=sum(c.queued for c in parts),
            leased=sum(c.leased for c in parts),
            done=sum(c.done for c in parts),
            dead=sum(c.dead for c in parts),
            seen=sum(c.seen for c in parts),
        )

    async def start(self, now: float) -> None:
        await asyncio.gather(*(p.start(now) for p in self._inner))

    async def stats(self) -> CrawlStats:
        parts = await asyncio.gather(*(p.stats() for p in self._inner))
        counters: dict[str, float] = {}
        for part in parts:
            for name, value in part.counters.items():
                counters[name] = counters.get(name, 0.0) + value
        starts = [part.started_at for part in parts if part.started_at is not None]
        return CrawlStats(counters=counters, started_at=min(starts) if starts else None)

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        await self._of(domain).add_counters(domain, counters)

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        if limit <= 0:
            return []
        pages = await asyncio.gather(*(p.pending_attempts(limit) for p in self._inner))
        tagged = [[(index, row) for row in page] for index, page in enumerate(pages)]
        merged = list(heapq.merge(*tagged, key=lambda pair: pair[1].at))[:limit]
        self._read_from = [index for index, _ in merged]
        return [row for _, row in merged]

    async def ack_attempts(self, count: int) -> None:
        """Trim each partition by its share of the first ``count`` attempts the last
        ``pending_attempts`` returned (the copier acks what it read, oldest first)."""
        if count <= 0:
            return
        taken = [0] * len(self._inner)
        for index in self._read_from[:count]:
            taken[index] += 1
        self._read_from = []
        await asyncio.gather(
            *(self._inner[i].ack_attempts(n) for i, n in enumerate(taken) if n > 0)
        )

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        await self._of(request.domain).remember(request, visit)

    async def visit(self, fingerprint: str) -> Visit | None:
        found = await asyncio.gather(*(p.visit(fingerprint) for p in self._inner))
        return next((one for one in found if one is not None), None)

    async def revisit(self, now: float, limit: int) -> int:
        """The partitions whose earliest due URL is earliest go first, each up to what the
        previous ones left of ``limit``."""
        due = await asyncio.gather(*(p.next_visit_at() for p in self._inner))
        order = sorted((at, index) for index, at in enumerate(due) if at is not None and at <= now)
        moved = 0
        for _, index in order:
            if moved >= limit:
                break
            moved += await self._inner[index].revisit(now, limit - moved)
        return moved

    async def next_visit_at(self) -> float | None:
        due = await asyncio.gather(*(p.next_visit_at() for p in self._inner))
        known = [at for at in due if at is not None]
        return min(known) if known else None

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        if limit <= 0:
            return []
        wanted = max(0, offset) + limit
        pages = await asyncio.gather(*(p.dead_letters(wanted, 0) for p in self._inner))
        merged = heapq.merge(*pages, key=lambda letter: letter.died_at)
        return list(merged)[max(0, offset) : max(0, offset) + limit]

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        moved = await asyncio.gather(*(p.requeue_dead(fingerprints) for p in self._inner))
        return sum(moved)

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        purged = await asyncio.gather(*(p.purge_dead(fingerprints) for p in self._inner))
        return sum(purged)

    async def close(self) -> None:
        await self._client.aclose()
