"""The in-memory store's entries and the records it keeps beside its queue: counts,
statistics, attempts, known URLs and revisits, dead letters.

Each request is an ``Entry`` in one ``EntryState`` (queued, leased, done, dead), counted per
state. ``MemoryRecords`` holds every structure of the store (lanes, schedule, leases,
entries, known URLs) and its one way into a lane, ``_push``, which ``revisit`` and
``requeue_dead`` use to put requests back. Attempts wait in a list for ``pending_attempts``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from itertools import islice

from crawlfleet import counters
from crawlfleet.counters import Counters, CrawlStats
from crawlfleet.frontier.domains import DomainSchedule
from crawlfleet.frontier.memory.known import KnownUrls
from crawlfleet.frontier.memory.lanes import Lanes
from crawlfleet.frontier.memory.leases import Leases
from crawlfleet.frontier.store_types import Visit
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Attempt, DeadLetter, QueueCounts


class EntryState(Enum):
    QUEUED = 0
    LEASED = 1
    DONE = 2
    DEAD = 3


@dataclass(slots=True)
class Entry:
    request: CrawlRequest
    seq: int
    state: EntryState = EntryState.QUEUED
    not_before: float = 0.0
    hand_outs: int = 0
    token: str | None = None
    errors: list[str] = field(default_factory=list)
    died_at: float = 0.0


class MemoryRecords:
    """Counts, statistics, attempts, known URLs and dead letters of a crawl, in memory."""

    def __init__(self) -> None:
        self._lanes = Lanes()
        self._schedule = DomainSchedule(self._lanes.earliest)
        self._seen: set[str] = set()
        self._entries: dict[str, Entry] = {}
        self._leases = Leases()
        self._dead: set[str] = set()
        self._counts = dict.fromkeys(EntryState, 0)
        self._admitted = 0
        self._seq = 0
        self._crawl_counters: Counters = {}
        self._started_at: float | None = None
        self._attempts: deque[Attempt] = deque()
        self._known = KnownUrls()

    def _push(self, entry: Entry, not_before: float) -> None:
        """Queue an entry (already counted nowhere) in its lane, due from ``not_before``."""
        request = entry.request
        entry.not_before = not_before
        self._lanes.push(request, entry.seq, not_before)
        entry.state = EntryState.QUEUED
        self._counts[EntryState.QUEUED] += 1
        domain = self._schedule.get(request.domain)
        self._schedule.enqueued(domain, request.fetcher, 1, not_before)

    def _count(self, domain: str, added: Mapping[str, float]) -> None:
        counters.merge(self._crawl_counters, added)
        counters.merge(self._schedule.get(domain).counters, added)

    async def counts(self) -> QueueCounts:
        c = self._counts
        return QueueCounts(
            queued=c[EntryState.QUEUED],
            leased=c[EntryState.LEASED],
            done=c[EntryState.DONE],
            dead=c[EntryState.DEAD],
            seen=len(self._seen),
        )

    async def start(self, now: float) -> None:
        if self._started_at is None:
            self._started_at = now

    async def stats(self) -> CrawlStats:
        return CrawlStats(dict(self._crawl_counters), self._started_at)

    async def add_counters(self, domain: str, counters: Mapping[str, float]) -> None:
        if counters:
            self._count(domain, counters)

    async def pending_attempts(self, limit: int) -> list[Attempt]:
        return list(islice(self._attempts, limit))

    async def ack_attempts(self, count: int) -> None:
        for _ in range(min(count, len(self._attempts))):
            self._attempts.popleft()

    async def remember(self, request: CrawlRequest, visit: Visit) -> None:
        self._known.remember(request.fingerprint, visit)

    async def visit(self, fingerprint: str) -> Visit | None:
        return self._known.get(fingerprint)

    async def revisit(self, now: float, limit: int) -> int:
        moved = 0
        while moved < limit and (due := self._known.pop_due(now)) is not None:
            fp, visit = due
            entry = self._entries.get(fp)
            if entry is None or entry.state is not EntryState.DONE:
                continue
            self._counts[EntryState.DONE] -= 1
            entry.request = replace(entry.request, attempt=0, priority=visit.priority)
            self._push(entry, 0.0)
            moved += 1
        return moved

    async def next_visit_at(self) -> float | None:
        return self._known.next_at()

    def _dead_entries(self, fingerprints: Sequence[str] | None) -> list[Entry]:
        chosen = self._dead if fingerprints is None else self._dead.intersection(fingerprints)
        return sorted((self._entries[fp] for fp in chosen), key=lambda e: (e.died_at, e.seq))

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return [
            DeadLetter(e.request, tuple(e.errors), e.died_at)
            for e in self._dead_entries(None)[offset : offset + limit]
        ]

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        entries = self._dead_entries(fingerprints)
        for entry in entries:
            self._dead.discard(entry.request.fingerprint)
            self._counts[EntryState.DEAD] -= 1
            entry.errors.clear()
            entry.request = replace(entry.request, attempt=0)
            self._push(entry, 0.0)
        return len(entries)

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        entries = self._dead_entries(fingerprints)
        for entry in entries:
            self._dead.discard(entry.request.fingerprint)
            del self._entries[entry.request.fingerprint]
        self._counts[EntryState.DEAD] -= len(entries)
        return len(entries)
