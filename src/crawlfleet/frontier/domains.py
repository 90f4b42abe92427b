"""Per-domain scheduling shared by the embedded queue stores.

A ``DomainSchedule`` keeps, for each domain, its ready time, in-flight count, queued count,
admission count and policy override, plus a heap of domains keyed by the earliest time each may
have claimable work (lazy invalidation: a heap entry counts only while it matches the domain's
``heap_key``). ``delayed`` counts queued requests that carry a not-before time (retries): only
when every queued request is delayed does the schedule ask the store for the earliest one.
A domain a claim finds or leaves at its in-flight limit is **parked**: out of the heap, even
when requests join its queue, until one of its leases ends or its policy changes, so
``next_ready_at`` does not report a domain that cannot be served.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from crawlfleet.frontier.protocols import DomainPolicy

T = TypeVar("T")

# Rebuild the heap when stale entries outnumber live domains by this factor.
COMPACT_FACTOR = 4


@dataclass(slots=True)
class DomainState:
    """What the schedule knows about one domain."""

    name: str
    ready_at: float = 0.0
    in_flight: int = 0
    queued: int = 0
    delayed: int = 0
    admitted: int = 0
    policy: DomainPolicy | None = None
    heap_key: float | None = None
    parked: bool = False


class DomainSchedule:
    """Domains by the time they may next be served."""

    def __init__(self) -> None:
        self.domains: dict[str, DomainState] = {}
        self._heap: list[tuple[float, str]] = []

    def get(self, domain: str) -> DomainState:
        state = self.domains.get(domain)
        if state is None:
            state = self.domains[domain] = DomainState(domain)
        return state

    def wake(self, state: DomainState, at: float) -> None:
        """Put the domain in the heap at ``at`` (replacing any earlier entry)."""
        state.heap_key = at
        heapq.heappush(self._heap, (at, state.name))
        if len(self._heap) > COMPACT_FACTOR * len(self.domains) + 64:
            self._heap = [
                (d.heap_key, d.name) for d in self.domains.values() if d.heap_key is not None
            ]
            heapq.heapify(self._heap)

    def enqueued(self, state: DomainState, count: int, not_before: float = 0.0) -> None:
        """Record ``count`` requests joining the domain's queue, due from ``not_before``."""
        state.queued += count
        if not_before > 0:
            state.delayed += count
        eligible = max(state.ready_at, not_before)
        if not state.parked and (state.heap_key is None or state.heap_key > eligible):
            self.wake(state, eligible)

    def lease_ended(self, state: DomainState, count: int = 1) -> None:
        """``count`` of the domain's leases completed, failed or expired."""
        state.in_flight -= count
        self._unpark(state)

    def _unpark(self, state: DomainState) -> None:
        state.parked = False
        if state.queued > 0 and state.heap_key is None:
            self.wake(state, state.ready_at)

    def block(self, state: DomainState, until: float) -> None:
        if until <= state.ready_at:
            return
        state.ready_at = until
        if state.heap_key is not None and state.heap_key < until:
            self.wake(state, until)

    def set_policy(self, state: DomainState, policy: DomainPolicy) -> None:
        state.policy = policy
        self._unpark(state)

    def _peek(self) -> DomainState | None:
        heap = self._heap
        while heap:
            key, name = heap[0]
            state = self.domains[name]
            if state.heap_key == key:
                return state
            heapq.heappop(heap)
        return None

    def has_due(self, now: float) -> bool:
        top = self._peek()
        return top is not None and top.heap_key is not None and top.heap_key <= now

    def next_ready_at(self, now: float) -> float | None:
        """Earliest wake time of a domain with queued work (at least ``now``); None if none."""
        top = self._peek()
        if top is None or top.heap_key is None:
            return None
        return max(now, top.heap_key)

    def claim(
        self,
        limit: int,
        now: float,
        default: DomainPolicy,
        take: Callable[[str, float], tuple[T, float] | None],
        earliest: Callable[[str], float | None],
    ) -> list[tuple[DomainState, T]]:
        """Pick up to ``limit`` requests from due domains, one per domain visit.

        ``take(domain, now)`` removes the domain's best request due at ``now`` and returns it
        with its not-before time (None if nothing is due); ``earliest(domain)`` is the earliest
        not-before time among its queued requests. Each claim moves the domain's ready time to
        ``now + delay_s`` and counts a lease.
        """
        taken: list[tuple[DomainState, T]] = []
        heap = self._heap
        while len(taken) < limit:
            state = self._peek()
            if state is None or state.heap_key is None or state.heap_key > now:
                break
            heapq.heappop(heap)
            state.heap_key = None
            policy = state.policy or default
            if state.in_flight >= policy.max_in_flight:
                state.parked = True  # back in the heap when a lease ends (lease_ended)
                continue
            got = take(state.name, now)
            if got is None:
                # Only delayed retries are queued: sleep until the first is due.
                wake_at = earliest(state.name)
                if wake_at is not None:
                    self.wake(state, max(state.ready_at, wake_at, now + 1e-6))
                continue
            item, not_before = got
            taken.append((state, item))
            state.in_flight += 1
            state.queued -= 1
            if not_before > 0:
                state.delayed -= 1
            state.ready_at = max(state.ready_at, now + policy.delay_s)
            if state.in_flight >= policy.max_in_flight:
                state.parked = True
            elif state.queued > 0:
                self.wake(state, self._eligible(state, earliest))
        return taken

    @staticmethod
    def _eligible(state: DomainState, earliest: Callable[[str], float | None]) -> float:
        if state.queued > state.delayed:
            return state.ready_at
        return max(state.ready_at, earliest(state.name) or 0.0)
