"""What a ``/metrics`` scrape renders for one crawl: a snapshot read from the crawl's store.

``CrawlWatch.refresh`` reads the store through the ``Frontier`` facade (``stats``,
``counts``, ``domains``, ``domain``) at the runtime's periodic tick and keeps the result as
a ``CrawlSnapshot``; a scrape only renders the last snapshot, so it never waits on the store.

Domain labels are bounded by ``DomainLabels``: at most ``limit`` domains get a label of their
own, the busiest by admissions when the label is given, and keep it for the life of the
watch; every other domain is summed into ``other`` (present once the labels are all given).
A Prometheus counter must never go down, and ``other`` would go down whenever a domain left it
for a label of its own: as long as labels are free every domain has one (``other`` is empty),
and once they are all given the set never changes again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from crawlfleet.counters import CrawlStats
from crawlfleet.errors import StateError
from crawlfleet.frontier.drift_marks import drifts
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.proxies.protocols import ProxyState
from crawlfleet.records import QueueCounts

DEFAULT_BIND = "127.0.0.1"
"""Where ``/metrics`` listens unless told otherwise: this machine only."""
DEFAULT_TOP_DOMAINS = 50
"""Domains with a label of their own; the rest are summed as ``other``."""

log = logging.getLogger(__name__)

OTHER_DOMAINS = "other"
"""The domain label of every domain without a label of its own."""


class CrawlSource(Protocol):
    """Where a crawl's statistics are read (``Frontier``)."""

    async def stats(self) -> CrawlStats: ...

    async def counts(self) -> QueueCounts: ...

    async def domains(self, limit: int = 100) -> list[DomainView]: ...

    async def domain(self, domain: str) -> DomainView: ...


class Beat(Protocol):
    """A worker's last heartbeat (``runtime.celery.crawls.WorkerBeat``)."""

    @property
    def name(self) -> str: ...

    @property
    def seen_at(self) -> float: ...


BeatsFn = Callable[[], Awaitable[Sequence[Beat]]]
ProxiesFn = Callable[[], Awaitable[Sequence[ProxyState]]]
"""Every proxy record of a crawl (``ProxyStateStore.all``)."""
PROXY_STATES = ("ok", "quarantined")


@dataclass(frozen=True, slots=True)
class DomainRow:
    """One domain label's figures; ``level`` and ``delay_s`` are None for ``other``.

    ``drifts``: parser -> its drift mark on the domain (``frontier/drift_marks.py``).
    """

    domain: str
    counters: Mapping[str, float]
    queued: int
    leased: int
    level: int | None = None
    delay_s: float | None = None
    drifts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CrawlSnapshot:
    """One read of a crawl's store; ``beats`` are (worker, epoch seconds) pairs."""

    crawl: str
    runtime: str
    started_at: float | None
    counts: QueueCounts
    totals: Mapping[str, float]
    rows: tuple[DomainRow, ...]
    beats: tuple[tuple[str, float], ...] = ()
    proxies: tuple[tuple[str, int], ...] = ()
    """Proxies by state (``PROXY_STATES``), for a crawl with a proxy pool."""


class DomainLabels:
    """Which domains get a label of their own: at most ``limit``, kept once given."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"top domains must be >= 0, not {limit}")
        self.limit = limit
        self._given: dict[str, None] = {}

    def choose(self, busiest: Sequence[str]) -> list[str]:
        """The labelled domains, after giving free labels to ``busiest`` (most first)."""
        for name in busiest:
            if len(self._given) >= self.limit:
                break
            self._given.setdefault(name, None)
        return list(self._given)

    @property
    def full(self) -> bool:
        return len(self._given) >= self.limit


class CrawlWatch:
    """Reads one crawl's statistics into ``snapshot`` on every ``refresh``.

    ``beats`` (the dispatcher, the dashboard) adds the workers' heartbeats, at most
    ``max_workers`` of the most recent; ``proxies`` the crawl's proxies by state.
    """

    def __init__(
        self,
        crawl_id: str,
        source: CrawlSource,
        *,
        runtime: str,
        top_domains: int,
        beats: BeatsFn | None = None,
        max_workers: int = 100,
        proxies: ProxiesFn | None = None,
    ) -> None:
        self.crawl_id = crawl_id
        self._source = source
        self._runtime = runtime
        self._labels = DomainLabels(top_domains)
        self._beats = beats
        self._max_workers = max_workers
        self._proxies = proxies
        self._other_floor: dict[str, float] = {}
        self.snapshot: CrawlSnapshot | None = None

    async def refresh(self) -> None:
        """Read the store; on a ``StateError`` keep the last snapshot and log it."""
        source = self._source
        try:
            counts = await source.counts()
            stats = await source.stats()
            busiest = await source.domains(self._labels.limit)
            chosen = self._labels.choose([view.domain for view in busiest])
            views = {view.domain: view for view in busiest}
            for name in chosen:
                if name not in views:
                    views[name] = await source.domain(name)
            beats = await self._beats() if self._beats is not None else ()
            proxies = await self._proxies() if self._proxies is not None else None
        except StateError as exc:
            log.warning("metrics of crawl %s not refreshed: %s", self.crawl_id, exc)
            return
        rows = [_row(views[name]) for name in chosen]
        if self._labels.full:
            rows.append(self._other(stats.counters, counts, rows))
        recent = sorted(beats, key=lambda beat: -beat.seen_at)[: self._max_workers]
        self.snapshot = CrawlSnapshot(
            crawl=self.crawl_id,
            runtime=self._runtime,
            started_at=stats.started_at,
            counts=counts,
            totals=dict(stats.counters),
            rows=tuple(rows),
            beats=tuple((beat.name, beat.seen_at) for beat in recent),
            proxies=() if proxies is None else proxy_counts(proxies, time.time()),
        )

    def _other(
        self, totals: Mapping[str, float], counts: QueueCounts, rows: Sequence[DomainRow]
    ) -> DomainRow:
        """The crawl minus its labelled domains; counters never below an earlier read.

        Reads of the crawl and of its domains are not one atomic step on Redis: a domain
        read after it moved on would make ``other`` dip for one refresh.
        """
        floor = self._other_floor
        for name, total in totals.items():
            rest = total - sum(row.counters.get(name, 0.0) for row in rows)
            floor[name] = max(floor.get(name, 0.0), rest)
        queued = counts.queued - sum(row.queued for row in rows)
        leased = counts.leased - sum(row.leased for row in rows)
        return DomainRow(OTHER_DOMAINS, dict(floor), max(queued, 0), max(leased, 0))


def _row(view: DomainView) -> DomainRow:
    return DomainRow(
        view.domain,
        dict(view.stats.counters),
        view.queued,
        view.in_flight,
        view.level,
        view.effective_delay_s,
        drifts(view.strategy),
    )


def proxy_counts(states: Sequence[ProxyState], now: float) -> tuple[tuple[str, int], ...]:
    """How many proxies are in each of ``PROXY_STATES`` at ``now``."""
    quarantined = sum(1 for state in states if state.quarantined(now))
    return (("ok", len(states) - quarantined), ("quarantined", quarantined))
