"""RedisQueueStore against a pure-Python model of request states, driven by hypothesis."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from crawlfleet.frontier.protocols import LEASE_EXPIRED, Budget, DomainPolicy
from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.models import CrawlRequest, Lease

pytestmark = pytest.mark.redis

T = TypeVar("T")
DOMAINS = ("a.test", "b.test", "c.test")
POOL = tuple(
    CrawlRequest(
        url=f"http://{d}/{i}", fingerprint=f"{d}-{i}", domain=d, priority=(0, 5, -1)[i % 3]
    )
    for d in DOMAINS
    for i in range(7)
)
DEFAULT = DomainPolicy(delay_s=1.0, max_in_flight=2)
BUDGET = Budget(max_per_domain=5)
LEASE_S = 30.0
_prefixes = itertools.count()


@dataclass
class Entry:
    """The model's view of one admitted fingerprint."""

    request: CrawlRequest
    state: str = "queued"  # queued | leased | done | dead | purged
    not_before: float = -math.inf
    token: str = ""
    expires_at: float = 0.0
    errors: list[str] = field(default_factory=list)


class QueueMachine(RuleBasedStateMachine):
    url = ""
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = self.run(
            RedisQueueStore.open(self.url, f"sm{next(_prefixes)}", **self.options)
        )
        self.now = 1_000_000.0
        self.entries: dict[str, Entry] = {}
        self.seen: set[str] = set()
        self.admitted: Counter[str] = Counter()
        self.ready_at: dict[str, float] = dict.fromkeys(DOMAINS, 0.0)
        self.policies: dict[str, DomainPolicy] = {}
        self.leases: list[Lease] = []
        self.parked: set[str] = set()  # domains a claim found or left at their in-flight limit

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.store.close())
        self.loop.close()

    def in_state(self, state: str) -> list[Entry]:
        return [e for e in self.entries.values() if e.state == state]

    def inflight(self, domain: str) -> int:
        return sum(e.request.domain == domain for e in self.in_state("leased"))

    def current(self, lease: Lease) -> Entry | None:
        entry = self.entries[lease.request.fingerprint]
        ok = entry.state == "leased" and entry.token == lease.token
        return entry if ok else None

    @initialize()
    def start(self) -> None:
        pass

    @rule(picks=st.lists(st.integers(0, len(POOL) - 1), max_size=8))
    def add(self, picks: list[int]) -> None:
        batch = [POOL[i] for i in picks]
        expected = 0
        for req in batch:
            fp = req.fingerprint
            if fp not in self.seen and self.admitted[req.domain] < BUDGET.max_per_domain:  # type: ignore[operator]
                self.seen.add(fp)
                self.admitted[req.domain] += 1
                self.entries[fp] = Entry(req)
                expected += 1
        assert self.run(self.store.add(batch, BUDGET)) == expected

    @rule(picks=st.lists(st.integers(0, len(POOL) - 1), max_size=3))
    def mark_seen(self, picks: list[int]) -> None:
        fps = [POOL[i].fingerprint for i in picks]
        self.seen.update(fps)
        self.run(self.store.mark_seen(fps))

    @rule(limit=st.integers(1, 6))
    def claim(self, limit: int) -> None:
        claimable: dict[str, list[Entry]] = {}
        for e in self.in_state("queued"):
            if e.not_before <= self.now:
                claimable.setdefault(e.request.domain, []).append(e)
        # Domains are visited earliest ready_at first (ties by name) until the limit is
        # reached; one found or left at its in-flight limit is parked.
        visits = sorted(
            (self.ready_at[d], d)
            for d in claimable
            if self.ready_at[d] <= self.now and d not in self.parked
        )
        plan: dict[str, int] = {}
        left = limit
        for _, d in visits:
            if left == 0:
                break
            policy = self.policies.get(d, DEFAULT)
            free = policy.max_in_flight - self.inflight(d)
            take = max(0, min(free, left, len(claimable[d]), 1 if policy.delay_s > 0 else free))
            if take > 0:
                plan[d] = take
                left -= take
            if take >= free:
                self.parked.add(d)
        leases = self.run(self.store.claim(limit, self.now, LEASE_S, DEFAULT))
        assert Counter(lease.request.domain for lease in leases) == Counter(plan)
        for d, n in plan.items():
            got = sorted(x.request.priority for x in leases if x.request.domain == d)
            best = sorted(e.request.priority for e in claimable[d])[-n:]
            assert got == best
        for lease in leases:
            entry = self.entries[lease.request.fingerprint]
            assert entry in claimable[lease.request.domain]
            assert lease.request == entry.request
            assert lease.expires_at == self.now + LEASE_S
            entry.state, entry.token, entry.expires_at = "leased", lease.token, lease.expires_at
            self.leases.append(lease)
        for d in plan:
            self.ready_at[d] = self.now + self.policies.get(d, DEFAULT).delay_s
            assert self.inflight(d) <= self.policies.get(d, DEFAULT).max_in_flight

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 100))
    def complete(self, index: int) -> None:
        lease = self.leases[index % len(self.leases)]
        entry = self.current(lease)
        if entry:
            entry.state = "done"
            self.parked.discard(entry.request.domain)
        assert self.run(self.store.complete(lease)) == (entry is not None)

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 100), delay_s=st.sampled_from([0.0, 2.0, 10.0]))
    def retry(self, index: int, delay_s: float) -> None:
        lease = self.leases[index % len(self.leases)]
        entry = self.current(lease)
        if entry:
            self.parked.discard(entry.request.domain)
            entry.state, entry.not_before = "queued", self.now + delay_s
            entry.request = replace(entry.request, attempt=entry.request.attempt + 1)
            entry.errors.append(f"err{index}")
        result = self.run(self.store.retry(lease, self.now + delay_s, f"err{index}"))
        assert result == (entry is not None)

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 100))
    def bury(self, index: int) -> None:
        lease = self.leases[index % len(self.leases)]
        entry = self.current(lease)
        if entry:
            self.parked.discard(entry.request.domain)
            entry.state = "dead"
            entry.errors.append("fatal")
        assert self.run(self.store.bury(lease, "fatal", self.now)) == (entry is not None)

    @rule(max_retries=st.integers(0, 2))
    def reap(self, max_retries: int) -> None:
        expired = [e for e in self.in_state("leased") if e.expires_at < self.now]
        for e in expired:
            self.parked.discard(e.request.domain)
            e.errors.append(LEASE_EXPIRED)
            if e.request.attempt >= max_retries:
                e.state = "dead"
            else:
                e.state, e.not_before = "queued", -math.inf
                e.request = replace(e.request, attempt=e.request.attempt + 1)
        assert self.run(self.store.reap(self.now, max_retries)) == len(expired)

    @rule(picks=st.none() | st.lists(st.integers(0, len(POOL) - 1), max_size=4))
    def requeue_dead(self, picks: list[int] | None) -> None:
        fps = None if picks is None else [POOL[i].fingerprint for i in picks]
        moved = [e for e in self.in_state("dead") if fps is None or e.request.fingerprint in fps]
        for e in moved:
            e.state, e.not_before, e.errors = "queued", -math.inf, []
            e.request = replace(e.request, attempt=0)
        assert self.run(self.store.requeue_dead(fps)) == len(moved)

    @rule(picks=st.none() | st.lists(st.integers(0, len(POOL) - 1), max_size=4))
    def purge_dead(self, picks: list[int] | None) -> None:
        fps = None if picks is None else [POOL[i].fingerprint for i in picks]
        purged = [e for e in self.in_state("dead") if fps is None or e.request.fingerprint in fps]
        for e in purged:
            e.state = "purged"
        assert self.run(self.store.purge_dead(fps)) == len(purged)

    @rule(
        domain=st.sampled_from(DOMAINS),
        delay_s=st.sampled_from([0.0, 1.0, 5.0]),
        max_in_flight=st.integers(1, 3),
    )
    def set_policy(self, domain: str, delay_s: float, max_in_flight: int) -> None:
        policy = DomainPolicy(delay_s, max_in_flight)
        self.policies[domain] = policy
        self.parked.discard(domain)
        self.run(self.store.set_policy(domain, policy))

    @rule(domain=st.sampled_from(DOMAINS), for_s=st.sampled_from([0.5, 4.0, 50.0]))
    def block(self, domain: str, for_s: float) -> None:
        self.ready_at[domain] = max(self.ready_at[domain], self.now + for_s)
        self.run(self.store.block(domain, self.now + for_s))

    @rule(step_s=st.sampled_from([0.0, 0.5, 1.0, 3.0, 40.0]))
    def advance(self, step_s: float) -> None:
        self.now += step_s

    @invariant()
    def counts_agree(self) -> None:
        counts = self.run(self.store.counts())
        states = Counter(e.state for e in self.entries.values())
        assert (counts.queued, counts.leased, counts.done, counts.dead) == (
            states["queued"],
            states["leased"],
            states["done"],
            states["dead"],
        )
        assert counts.seen == len(self.seen)

    @invariant()
    def dead_letters_agree(self) -> None:
        letters = self.run(self.store.dead_letters(limit=100))
        got = {d.request.fingerprint: (d.request, list(d.errors)) for d in letters}
        want = {e.request.fingerprint: (e.request, e.errors) for e in self.in_state("dead")}
        assert got == want

    @invariant()
    def next_ready_at_agrees(self) -> None:
        times = [
            max(e.not_before, self.ready_at[e.request.domain])
            for e in self.in_state("queued")
            if e.request.domain not in self.parked
        ]
        expected = max(min(times), self.now) if times else None
        assert self.run(self.store.next_ready_at(self.now)) == expected


# With 21 fingerprints in a filter sized for 1M, a Bloom false positive has odds ~1e-25.
@pytest.mark.parametrize(
    "options",
    [{}, {"dedup": "bloom", "bloom_capacity": 1_000_000}],
    ids=["exact", "bloom"],
)
def test_redis_store_follows_the_model(redis_url: str, options: dict[str, Any]) -> None:
    machine = type("Machine", (QueueMachine,), {"url": redis_url, "options": options})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=50,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
