"""Per-domain scheduling shared by the embedded queue stores, with one lane per fetcher kind.

A ``DomainSchedule`` keeps, for each domain, its ready time, in-flight count, admission count,
policy record (``frontier.policy``) and statistics counters, shared by its lanes, and per lane (fetcher kind) its
queued count. Each kind has its own heap of domains keyed by the earliest time the domain's
lane of that kind may have claimable work, so a claim for ``http`` never scans a domain that
only has ``browser`` work. Heap entries are lazy: one counts only while it matches its lane's
``heap_key``, and a key earlier than the domain's ``ready_at`` (the domain rested after it was
pushed) is moved to ``ready_at`` when it reaches the top. ``delayed`` counts queued requests
that carry a not-before time (retries): only when every queued request of a lane is delayed
does the schedule ask the store for the earliest one (``earliest``). A domain a claim finds or
leaves at its in-flight limit is **parked**: out of every heap, even when requests join its
queues, until one of its leases ends or its policy changes, so ``next_ready_at`` does not
report a domain that cannot be served; freed, each lane is due at the later of the domain's
``ready_at`` and its earliest not-before time, as when it was filled.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TypeVar

from crawlfleet.counters import Counters, CrawlStats
from crawlfleet.frontier import policy
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.store_types import DomainPolicy, DomainView

T = TypeVar("T")

# Rebuild a heap when stale entries outnumber live domains by this factor.
COMPACT_FACTOR = 4


@dataclass(slots=True)
class Lane:
    """A domain's queue of one fetcher kind, as the schedule counts it."""

    queued: int = 0
    delayed: int = 0
    heap_key: float | None = None


@dataclass(slots=True)
class DomainState:
    """What the schedule knows about one domain."""

    name: str
    ready_at: float = 0.0
    in_flight: int = 0
    admitted: int = 0
    record: PolicyRecord = field(default_factory=PolicyRecord)
    counters: Counters = field(default_factory=dict)
    lanes: dict[str, Lane] = field(default_factory=dict)
    parked: bool = False

    @property
    def queued(self) -> int:
        return sum(lane.queued for lane in self.lanes.values())


class DomainSchedule:
    """Domains by the time each of their lanes may next be served.

    ``earliest(domain, kind)`` is the store's earliest not-before time among the lane's
    queued requests (0 for a request without one; None when the lane is empty).
    """

    def __init__(self, earliest: Callable[[str, str], float | None]) -> None:
        self._earliest = earliest
        self.domains: dict[str, DomainState] = {}
        self._heaps: dict[str, list[tuple[float, str]]] = {}

    def get(self, domain: str) -> DomainState:
        state = self.domains.get(domain)
        if state is None:
            state = self.domains[domain] = DomainState(domain)
        return state

    def wake(self, state: DomainState, kind: str, at: float) -> None:
        """Put the domain's ``kind`` lane in its heap at ``at`` (replacing any other entry)."""
        state.lanes[kind].heap_key = at
        heap = self._heaps.setdefault(kind, [])
        heapq.heappush(heap, (at, state.name))
        if len(heap) > COMPACT_FACTOR * len(self.domains) + 64:
            heap[:] = [
                (lane.heap_key, d.name)
                for d in self.domains.values()
                if (lane := d.lanes.get(kind)) is not None and lane.heap_key is not None
            ]
            heapq.heapify(heap)

    def enqueued(self, state: DomainState, kind: str, count: int, not_before: float = 0.0) -> None:
        """Record ``count`` requests joining the domain's ``kind`` lane, due from ``not_before``."""
        lane = state.lanes.get(kind)
        if lane is None:
            lane = state.lanes[kind] = Lane()
        lane.queued += count
        if not_before > 0:
            lane.delayed += count
        eligible = max(state.ready_at, not_before)
        if not state.parked and (lane.heap_key is None or lane.heap_key > eligible):
            self.wake(state, kind, eligible)

    def lease_ended(self, state: DomainState, count: int = 1) -> None:
        """``count`` of the domain's leases completed, failed or expired."""
        state.in_flight -= count
        self.unpark(state)

    def unpark(self, state: DomainState) -> None:
        """Put the domain's lanes with queued work back in their heaps (its slots may be free)."""
        state.parked = False
        for kind, lane in state.lanes.items():
            if lane.queued > 0 and lane.heap_key is None:
                self.wake(state, kind, self._eligible(state, kind, lane))

    def _park(self, state: DomainState) -> None:
        state.parked = True
        for lane in state.lanes.values():
            lane.heap_key = None

    @staticmethod
    def rest(state: DomainState, until: float) -> None:
        """Keep the domain quiet until ``until`` (never shortens; heaps catch up lazily)."""
        if until > state.ready_at:
            state.ready_at = until

    def _peek(self, kind: str) -> tuple[float, DomainState] | None:
        heap = self._heaps.get(kind)
        while heap:
            key, name = heap[0]
            state = self.domains[name]
            lane = state.lanes[kind]
            if lane.heap_key != key:
                heapq.heappop(heap)
            elif key < state.ready_at:
                lane.heap_key = state.ready_at
                heapq.heapreplace(heap, (state.ready_at, name))
            else:
                return key, state
        return None

    def _first(self, kinds: Collection[str]) -> tuple[float, str, DomainState] | None:
        """The lane (of ``kinds``) with the earliest key: key, kind, domain."""
        best: tuple[float, str, DomainState] | None = None
        for kind in kinds:
            top = self._peek(kind)
            if top is not None and (best is None or top[0] < best[0]):
                best = (top[0], kind, top[1])
        return best

    def has_due(self, now: float, kinds: Collection[str]) -> bool:
        first = self._first(kinds)
        return first is not None and first[0] <= now

    def next_ready_at(self, now: float, kinds: Collection[str]) -> float | None:
        """Earliest wake time of a lane of ``kinds`` with queued work (at least ``now``)."""
        first = self._first(kinds)
        return None if first is None else max(now, first[0])

    def claim(
        self,
        limit: int,
        now: float,
        default: DomainPolicy,
        kinds: Collection[str],
        take: Callable[[str, str, float], tuple[T, float] | None],
    ) -> list[tuple[DomainState, T]]:
        """Pick up to ``limit`` requests of ``kinds`` from due domains, one per lane visit.

        ``take(domain, kind, now)`` removes the lane's best request due at ``now`` and returns
        it with its not-before time (None if nothing is due). Each claim moves the domain's
        ready time to ``now + effective delay`` and counts a lease.
        """
        taken: list[tuple[DomainState, T]] = []
        while len(taken) < limit:
            first = self._first(kinds)
            if first is None or first[0] > now:
                break
            _key, kind, state = first
            lane = state.lanes[kind]
            heapq.heappop(self._heaps[kind])
            lane.heap_key = None
            cap = policy.max_in_flight(state.record, default)
            if state.in_flight >= cap:
                self._park(state)  # back in the heaps when a lease ends (lease_ended)
                continue
            got = take(state.name, kind, now)
            if got is None:
                # Only delayed retries are queued: sleep until the first is due.
                wake_at = self._earliest(state.name, kind)
                if wake_at is not None:
                    self.wake(state, kind, max(state.ready_at, wake_at, now + 1e-6))
                continue
            item, not_before = got
            taken.append((state, item))
            state.in_flight += 1
            lane.queued -= 1
            if not_before > 0:
                lane.delayed -= 1
            state.ready_at = max(
                state.ready_at, now + policy.effective_delay_s(state.record, default)
            )
            if state.in_flight >= cap:
                self._park(state)
            elif lane.queued > 0:
                self.wake(state, kind, self._eligible(state, kind, lane))
        return taken

    def view(self, domain: str, default: DomainPolicy) -> DomainView:
        """The domain's ``DomainView``; a default one for a domain not known yet."""
        state = self.domains.get(domain)
        return view(DomainState(domain) if state is None else state, default)

    def views(self, default: DomainPolicy, limit: int) -> list[DomainView]:
        """The ``limit`` domains with the most admissions, most first (then by name)."""
        busiest = sorted(self.domains.values(), key=lambda s: (-s.admitted, s.name))[:limit]
        return [view(state, default) for state in busiest]

    def _eligible(self, state: DomainState, kind: str, lane: Lane) -> float:
        """When the lane's queued work may be served: ``ready_at``, or a later not-before."""
        if lane.queued > lane.delayed:
            return state.ready_at
        return max(state.ready_at, self._earliest(state.name, kind) or 0.0)


def view(state: DomainState, default: DomainPolicy) -> DomainView:
    """The ``DomainView`` of a domain the schedule knows (or a fresh ``DomainState``)."""
    record = state.record
    return DomainView(
        domain=state.name,
        base_delay_s=policy.base_delay_s(record, default),
        delay_source=policy.delay_source(record.delay_source, default),
        max_in_flight=policy.max_in_flight(record, default),
        level=record.level,
        effective_delay_s=policy.effective_delay_s(record, default),
        ready_at=state.ready_at,
        cooldown_until=record.cooldown_until,
        block_reason=record.block_reason,
        retry_after_until=record.retry_after_until,
        strategy=dict(record.strategy),
        queued=state.queued,
        in_flight=state.in_flight,
        stats=CrawlStats(dict(state.counters)),
        drift={parser: test.copy() for parser, test in record.drift.items()},
    )
