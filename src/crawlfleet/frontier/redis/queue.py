"""``QueueStore`` on Redis: one crawl's frontier shared by every worker.

Every change is one Lua script (see ``keys.py`` for the data layout and ``lua/`` for the
scripts), so it is atomic however many workers share the crawl; a lease end and everything
it records (counters, attempt row, domain policy) is one script call. Here: the lanes, the
leases and the domain policy. ``RedisQueueStore`` inherits how a crawl is opened, its
scripts run and its failures read (``crawl.py``: ``open``, ``attach``, epoch, ``StateError``
and ``FrontierLost``) and its records (``records.py``: counts, statistics, attempts, known
URLs, dead letters).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import orjson

from crawlfleet.frontier.drift import (
    BASELINE_CAP,
    BASELINE_FLOOR,
    DRIFT_SHARE,
    DriftPage,
    DriftRule,
    DriftTest,
)
from crawlfleet.frontier.redis.bloom import SHARD_BITS
from crawlfleet.frontier.redis.crawl import BATCH
from crawlfleet.frontier.redis.records import RedisRecords
from crawlfleet.frontier.redis.views import (
    Arg,
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
)
from crawlfleet.models import CrawlRequest, Lease

PROMOTE_PER_CLAIM = 1000  # at least this many due retries move into their lanes per claim


class RedisQueueStore(RedisRecords):
    """Request lanes, seen filter, leases, DLQ, domain policy and statistics, in Redis."""

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
        default: DomainPolicy,
        kinds: Collection[str],
    ) -> list[Lease]:
        wanted = [_kind(kind) for kind in dict.fromkeys(kinds)]
        if limit <= 0 or not wanted:
            return []
        flat = await self._run(
            "claim",
            now,
            lease_s,
            default.delay_s,
            default.max_in_flight,
            limit,
            max(PROMOTE_PER_CLAIM, 10 * limit),
            *wanted,
        )
        expires_at = now + lease_s
        return [
            Lease(loads(flat[i + 1]), token=flat[i], expires_at=expires_at)
            for i in range(0, len(flat), 2)
        ]

    async def complete(self, lease: Lease, report: Report, default: DomainPolicy) -> Ended:
        if report.visit is not None:
            await self.remember(lease.request, report.visit)
        return await self._finish(lease, report, default, "complete", 0.0, "", "")

    async def retry(
        self, lease: Lease, not_before: float, error: str, report: Report, default: DomainPolicy
    ) -> Ended:
        again = dumps(dataclasses.replace(lease.request, attempt=lease.request.attempt + 1))
        return await self._finish(lease, report, default, "retry", not_before, error, again)

    async def bury(
        self, lease: Lease, error: str, now: float, report: Report, default: DomainPolicy
    ) -> Ended:
        return await self._finish(lease, report, default, "bury", now, error, "")

    async def _finish(
        self,
        lease: Lease,
        report: Report,
        default: DomainPolicy,
        mode: str,
        when: float,
        error: str,
        stored: str,
    ) -> Ended:
        """The lease end and everything ``report`` records, in ``finish.lua`` (with the lease
        ends sent to Redis at the same time: ``scripts.GROUPED``)."""
        args = [lease.token, mode, float(when), error, stored, *report_args(report, default)]
        reply = await self._run("finish", *args)
        if not int(reply[0]):
            return Ended(False)
        if len(reply) == 1:
            return Ended(True)
        return Ended(True, policy_change(lease.request.domain, reply, report, default))

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
        args += [float(rule.threshold)]
        args += [DRIFT_SHARE, BASELINE_FLOOR, BASELINE_CAP, rule.mark]
        raw = await self._run("drift", *args)
        return DriftTest.from_json(orjson.loads(raw), rule.threshold)

    async def domain(self, domain: str, default: DomainPolicy) -> DomainView:
        return (await self.views([domain], default))[0]

    async def domains(self, default: DomainPolicy, limit: int = 100) -> list[DomainView]:
        names = [name for name, _ in await self.most_admitted(limit)]
        return await self.views(names, default)

    async def most_admitted(self, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` domains of ``domains``, most admitted first, with their admissions."""
        if limit <= 0:
            return []
        with self._guard():
            rows: list[Any] = await self._client.zrange(
                self._keys.key("admitted"), 0, limit - 1, withscores=True
            )
        return [(str(row[0]), -int(row[1])) for row in rows]

    async def views(self, names: list[str], default: DomainPolicy) -> list[DomainView]:
        """The ``DomainView`` of each of ``names``, in order."""
        if not names:
            return []
        with self._guard():
            async with self._client.pipeline(transaction=True) as pipe:
                for name in names:
                    pipe.hgetall(self._keys.domain(name))
                    pipe.hgetall(self._keys.domain_stats(name))
                replies = await pipe.execute()
        return [
            domain_view(name, replies[2 * i], replies[2 * i + 1], default)
            for i, name in enumerate(names)
        ]

    async def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        wanted = [_kind(kind) for kind in dict.fromkeys(kinds)]
        if not wanted:
            return None
        raw = await self._run("next_ready_at", *wanted)
        return None if raw is None else max(float(raw), now)


def _kind(kind: str) -> str:
    """A fetcher kind usable in a lane's key name; ``ValueError`` otherwise."""
    if not kind or ":" in kind or any(ch.isspace() for ch in kind):
        raise ValueError(f"bad fetcher kind {kind!r}: a non-empty name without ':' or spaces")
    return kind
