"""``QueueStore`` on Redis: one crawl's frontier shared by every worker.

Every change is one Lua script (see ``keys.py`` for the data layout and ``lua/`` for the
scripts), so it is atomic however many workers share the crawl; a lease end and everything
it records (counters, attempt row, domain policy) is one script call. ``RedisQueueStore``
runs its scripts and reads through the crawl it opened (``RedisCrawl``, ``crawl.py``: the
client, the crawl's keys and epoch, ``StateError`` and ``FrontierLost``). ``revisit`` and
``requeue_dead`` put requests back into their lanes, each batch one script.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Literal

import orjson

from crawlfleet.counters import CrawlStats
from crawlfleet.errors import FrontierLost
from crawlfleet.frontier.drift import (
    BASELINE_CAP,
    BASELINE_FLOOR,
    DRIFT_SHARE,
    DriftPage,
    DriftRule,
    DriftTest,
)
from crawlfleet.frontier.recent import SEEN_PREFILTER_CAPACITY, RecentSet
from crawlfleet.frontier.redis.bloom import SHARD_BITS, BloomGeometry
from crawlfleet.frontier.redis.crawl import BATCH, RedisCrawl
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.views import (
    Arg,
    counters_json,
    crawl_stats,
    domain_view,
    dumps,
    loads,
    policy_change,
    reap_counter_args,
    report_args,
)
from crawlfleet.frontier.store_types import (
    LEASE_EXPIRED,
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
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient, open_client

log = logging.getLogger(__name__)

PROMOTE_PER_CLAIM = 1000  # at least this many due retries move into their lanes per claim
COUNT_FIELDS = ("queued", "leased", "done", "dead", "seen")

DeadAction = Callable[[list[str]], Awaitable[int]]


class RedisQueueStore:
    """Request lanes, seen filter, leases, DLQ, domain policy and statistics, in Redis.

    Use ``open`` or ``attach``: they begin the crawl (``RedisCrawl.begin``) the store runs on.
    ``policy``: the crawl's default domain policy, sent to the scripts with each call.
    """

    def __init__(
        self,
        crawl: RedisCrawl,
        *,
        policy: DomainPolicy,
        prefilter_capacity: int = SEEN_PREFILTER_CAPACITY,
    ) -> None:
        self._crawl = crawl
        self._policy = policy
        self._client = crawl.client
        self._keys = crawl.keys
        self._bloom = crawl.bloom
        self._known = RecentSet(prefilter_capacity)
        """Fingerprints Redis answered seen (or admitted) to this store: the crawl's seen
        filter never forgets one, and a store serves one epoch of one crawl, so ``add`` need
        not send them again (~90 % of a page's links, once a crawl is under way)."""

    @classmethod
    async def open(
        cls,
        url: str,
        prefix: str,
        *,
        policy: DomainPolicy,
        dedup: Literal["exact", "bloom"] = "exact",
        bloom_capacity: int = 10_000_000,
        bloom_error_rate: float = 0.01,
    ) -> RedisQueueStore:
        """Connect, create the crawl or check its stored settings, and size the Bloom bitmap.

        ``url`` names one server or a Redis Cluster (``crawlfleet/redisdb.py``). ``prefix``
        should carry a hash tag (``crawlfleet:{<crawl_id>}``, see ``keys.py``). Raises
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
                policy=policy,
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
        policy: DomainPolicy,
        dedup: Literal["exact", "bloom"] = "exact",
        bloom_capacity: int = 10_000_000,
        bloom_error_rate: float = 0.01,
        owns_client: bool = True,
        prefilter_capacity: int = SEEN_PREFILTER_CAPACITY,
    ) -> RedisQueueStore:
        """``open`` on a client from ``open_client``; ``close`` closes it if ``owns_client``.

        ``prefilter_capacity``: how many fingerprints known to be seen ``add`` keeps in memory.
        """
        if not prefix or any(ch.isspace() for ch in prefix):
            raise ValueError(f"bad Redis key prefix {prefix!r}")
        bloom = (
            BloomGeometry.for_capacity(bloom_capacity, bloom_error_rate)
            if dedup == "bloom"
            else None
        )
        crawl = RedisCrawl(client, CrawlKeys(prefix), bloom, where, owns_client=owns_client)
        with crawl.guard():
            await crawl.begin(dedup)
        if bloom is not None:
            log.info(
                "Bloom seen filter for %r: %d bits in %d shards, %d hashes, %.1f MB in Redis",
                prefix,
                bloom.bits,
                bloom.shards,
                bloom.hashes,
                bloom.size_bytes / 1e6,
            )
        return cls(crawl, policy=policy, prefilter_capacity=prefilter_capacity)

    @property
    def default_policy(self) -> DomainPolicy:
        return self._policy

    @property
    def epoch(self) -> str:
        """The token the crawl's first open wrote; another value means another crawl."""
        return self._crawl.epoch

    @property
    def keys(self) -> CrawlKeys:
        return self._keys

    async def _run(self, name: str, *args: Arg) -> Any:
        return await self._crawl.run(name, *args)

    def _seen_args(self, fingerprint: str) -> list[int]:
        return self._bloom.positions(fingerprint) if self._bloom else []

    @property
    def _seen_head(self) -> list[Arg]:
        """The script arguments saying how to read ``_seen_args``: k, then bits per shard."""
        return [self._bloom.hashes, SHARD_BITS] if self._bloom else [0, 0]

    async def add(self, requests: Sequence[CrawlRequest], budget: Budget) -> int:
        """``add``; a request this store already saw admitted or seen is not sent at all."""
        limits = (
            -1 if budget.max_total is None else budget.max_total,
            -1 if budget.max_per_domain is None else budget.max_per_domain,
        )
        known = self._known
        offered = [req for req in requests if not known.seen(req.fingerprint)]
        admitted = 0
        for start in range(0, len(offered), BATCH):
            batch = offered[start : start + BATCH]
            args: list[Arg] = [*self._seen_head, *limits]
            for req in batch:
                kind = _kind(req.fetcher)
                args += [req.fingerprint, req.domain, kind, req.priority, dumps(req)]
                args += self._seen_args(req.fingerprint)
            got, *refused = await self._run("add", *args)
            admitted += int(got)
            # Seen now, except what the budget refused (places counted from 1): the seen
            # filter never forgets a fingerprint of this epoch, so neither may the prefilter.
            skip = {int(place) - 1 for place in refused}
            known.add(req.fingerprint for n, req in enumerate(batch) if n not in skip)
        return admitted

    async def claim(
        self,
        limit: int,
        now: float,
        lease_s: float,
        kinds: Collection[str],
    ) -> list[Lease]:
        wanted = [_kind(kind) for kind in dict.fromkeys(kinds)]
        if limit <= 0 or not wanted:
            return []
        flat = await self._run(
            "claim",
            now,
            lease_s,
            self._policy.delay_s,
            self._policy.max_in_flight,
            limit,
            max(PROMOTE_PER_CLAIM, 10 * limit),
            *wanted,
        )
        expires_at = now + lease_s
        return [
            Lease(loads(flat[i + 1]), token=flat[i], expires_at=expires_at)
            for i in range(0, len(flat), 2)
        ]

    async def complete(self, lease: Lease, report: Report) -> Ended:
        if report.visit is not None:
            await self.remember(lease.request, report.visit)
        return await self._finish(lease, report, "complete", 0.0, "", "")

    async def retry(self, lease: Lease, not_before: float, error: str, report: Report) -> Ended:
        again = dumps(dataclasses.replace(lease.request, attempt=lease.request.attempt + 1))
        return await self._finish(lease, report, "retry", not_before, error, again)

    async def bury(self, lease: Lease, error: str, now: float, report: Report) -> Ended:
        return await self._finish(lease, report, "bury", now, error, "")

    async def _finish(
        self,
        lease: Lease,
        report: Report,
        mode: str,
        when: float,
        error: str,
        stored: str,
    ) -> Ended:
        """The lease end and everything ``report`` records, in ``finish.lua`` (with the lease
        ends sent to Redis at the same time: ``scripts.GROUPED``)."""
        args = [lease.token, mode, float(when), error, stored, *report_args(report, self._policy)]
        reply = await self._run("finish", *args)
        if not int(reply[0]):
            return Ended(False)
        if len(reply) == 1:
            return Ended(True)
        return Ended(True, policy_change(lease.request.domain, reply, report, self._policy))

    async def move(self, lease: Lease, kind: str) -> bool:
        moved = dataclasses.replace(lease.request, fetcher=_kind(kind))
        return bool(int(await self._run("move", lease.token, dumps(moved))))

    async def renew(self, lease: Lease, expires_at: float) -> bool:
        return bool(int(await self._run("renew", lease.token, float(expires_at))))

    async def reap(self, now: float, max_retries: int) -> int:
        counters = reap_counter_args()
        total = 0
        while True:
            reaped = int(await self._run("reap", now, BATCH, max_retries, LEASE_EXPIRED, *counters))
            total += reaped
            if reaped < BATCH:
                return total

    async def set_delay(self, domain: str, delay_s: float, source: DelaySource) -> None:
        await self._run("set_delay", domain, float(delay_s), DelaySource(source).value)

    async def set_concurrency(self, domain: str, max_in_flight: int) -> None:
        await self._run("set_concurrency", domain, int(max_in_flight))

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        await self._run("set_strategy", domain, orjson.dumps(dict(strategy)).decode())

    async def observe_drift(
        self, domain: str, parser: str, page: DriftPage, rule: DriftRule
    ) -> DriftTest:
        filled = orjson.dumps(dict(page.filled)).decode()
        args: list[Arg] = [domain, parser, int(page.mismatched), page.items, filled]
        args += [float(rule.threshold), DRIFT_SHARE, BASELINE_FLOOR, BASELINE_CAP, rule.mark]
        raw = await self._run("drift", *args)
        return DriftTest.from_json(orjson.loads(raw), rule.threshold)

    async def domain(self, domain: str) -> DomainView:
        return (await self.views([domain]))[0]

    async def domains(self, limit: int = 100) -> list[DomainView]:
        names = [name for name, _ in await self.most_admitted(limit)]
        return await self.views(names)

    async def most_admitted(self, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` domains of ``domains``, most admitted first, with their admissions."""
        if limit <= 0:
            return []
        with self._crawl.guard():
            rows: list[Any] = await self._client.zrange(
                self._keys.key("admitted"), 0, limit - 1, withscores=True
            )
        return [(str(row[0]), -int(row[1])) for row in rows]

    async def views(self, names: list[str]) -> list[DomainView]:
        """The ``DomainView`` of each of ``names``, in order."""
        if not names:
            return []
        with self._crawl.guard():
            async with self._client.pipeline(transaction=True) as pipe:
                for name in names:
                    pipe.hgetall(self._keys.domain(name))
                    pipe.hgetall(self._keys.domain_stats(name))
                replies = await pipe.execute()
        return [
            domain_view(name, replies[2 * i], replies[2 * i + 1], self._policy)
            for i, name in enumerate(names)
        ]

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        wanted = [_kind(kind) for kind in dict.fromkeys(kinds)]
        if not wanted:
            return None
        raw = await self._run("next_ready_at", *wanted)
        return None if raw is None else max(float(raw), now)

    async def counts(self) -> QueueCounts:
        with self._crawl.guard():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.get(self._keys.key("epoch"))
                pipe.hmget(self._keys.key("counts"), list(COUNT_FIELDS))
                epoch, values = await pipe.execute()
        if epoch != self._crawl.epoch or values[0] is None:
            raise FrontierLost(self._crawl.lost())
        queued, leased, done, dead, seen = (int(v) for v in values)
        return QueueCounts(queued=queued, leased=leased, done=done, dead=dead, seen=seen)

    async def start(self, now: float) -> None:
        with self._crawl.guard():
            await self._client.set(self._keys.key("started_at"), repr(float(now)), nx=True)

    async def stats(self) -> CrawlStats:
        with self._crawl.guard():
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
        with self._crawl.guard():
            rows = await self._client.lrange(self._keys.key("attempts"), 0, limit - 1)
        return [Attempt.from_dict(orjson.loads(row)) for row in rows]

    async def ack_attempts(self, count: int) -> None:
        if count > 0:
            with self._crawl.guard():
                await self._client.ltrim(self._keys.key("attempts"), count, -1)

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        again = dataclasses.replace(request, attempt=0, priority=visit.priority)
        known = orjson.dumps({"request": dumps(again), "visit": visit.to_dict()}).decode()
        await self._run("remember", request.fingerprint, known, repr(float(visit.next_at)))

    async def visit(self, fingerprint: str) -> Visit | None:
        with self._crawl.guard():
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
        with self._crawl.guard():
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
            with self._crawl.guard():
                members = await self._client.zrange(self._keys.key("dead"), 0, BATCH - 1)
            page = [str(member).partition(":")[2] for member in members]
            done = await action(page) if page else 0
            total += done
            if done == 0:
                return total

    async def _requeue_batch(self, fingerprints: list[str]) -> int:
        with self._crawl.guard():
            stored = await self._client.hmget(self._keys.key("req"), fingerprints)
        args: list[Arg] = []
        for fp, raw in zip(fingerprints, stored, strict=True):
            if raw is not None:
                fresh = dataclasses.replace(loads(raw), attempt=0)
                args += [fp, fresh.domain, fresh.fetcher, fresh.priority, dumps(fresh)]
        return int(await self._run("requeue_dead", *args)) if args else 0

    async def _purge_batch(self, fingerprints: list[str]) -> int:
        return int(await self._run("purge_dead", *fingerprints))

    async def close(self) -> None:
        await self._crawl.close()


def _kind(kind: str) -> str:
    """A fetcher kind usable in a lane's key name; ``ValueError`` otherwise."""
    if not kind or ":" in kind or any(ch.isspace() for ch in kind):
        raise ValueError(f"bad fetcher kind {kind!r}: a non-empty name without ':' or spaces")
    return kind
