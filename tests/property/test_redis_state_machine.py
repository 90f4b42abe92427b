"""RedisQueueStore against the in-memory store (the contract's reference), driven by hypothesis.

Every operation runs on both stores and must give the same answer: claims (which requests,
in which order, across fetcher-kind lanes), lease ends (current or not, block level
changes), counts, dead letters, domain views (policy, queue, statistics), crawl statistics
and pending attempts. Lease tokens differ between the stores, so leases are paired by the
hand-out they came from.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.frontier.store_types import (
    BlockRules,
    Budget,
    DelaySource,
    DomainPolicy,
    DomainView,
    Ended,
    Report,
    Signal,
)
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome

pytestmark = pytest.mark.redis

T = TypeVar("T")
DOMAINS = ("a.test", "b.test", "c.test")
POOL = tuple(
    CrawlRequest(
        url=f"http://{d}/{i}",
        fingerprint=f"{d}-{i}",
        domain=d,
        priority=(0, 5, -1)[i % 3],
        fetcher=("http", "browser")[i % 2 if d != "c.test" else 0],
    )
    for d in DOMAINS
    for i in range(7)
)
KIND_SETS = (("http",), ("browser",), ("http", "browser"), ("browser", "http"))
# Small rules so that escalations and recoveries happen within a few steps.
DEFAULT = DomainPolicy(
    delay_s=1.0,
    max_in_flight=2,
    blocks=BlockRules(
        window=4,
        min_samples=2,
        threshold=0.5,
        recover_after=1,
        max_level=3,
        cooldown_s=5.0,
        ladder=("session", "tier", "impersonate"),
    ),
)
BUDGET = Budget(max_per_domain=6)
LEASE_S = 30.0
_prefixes = itertools.count()


@dataclass(frozen=True)
class Pair:
    """One hand-out, as each store's lease."""

    model: Lease
    redis: Lease


def same_stats(model: CrawlStats, got: CrawlStats) -> None:
    assert got == model


def same_view(model: DomainView, got: DomainView) -> None:
    same_stats(model.stats, got.stats)
    assert {**vars_of(got), "stats": None} == {**vars_of(model), "stats": None}


def vars_of(view: DomainView) -> dict[str, Any]:
    return {name: getattr(view, name) for name in view.__dataclass_fields__}


class StoreMachine(RuleBasedStateMachine):
    url = ""
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.model = MemoryQueueStore(policy=DEFAULT)
        self.redis = self.run(
            RedisQueueStore.open(
                self.url, f"sm:{{{next(_prefixes)}}}", policy=DEFAULT, **self.options
            )
        )
        self.now = 1_000_000.0
        self.live: list[Pair] = []  # hand-outs not ended yet
        self.ended: list[Pair] = []  # ended or reaped: their tokens are stale

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def both(self, call: str, *args: Any) -> tuple[Any, Any]:
        model = self.run(getattr(self.model, call)(*args))
        return model, self.run(getattr(self.redis, call)(*args))

    def teardown(self) -> None:
        self.run(self.redis.close())
        self.loop.close()

    def report(self, lease: Lease, signal: Signal, outcome: Outcome, block_for_s: float) -> Report:
        r = lease.request
        status = {Signal.BLOCK: 403, Signal.SUCCESS: 200}.get(signal)
        attempt = Attempt(
            r.url, r.fingerprint, r.domain, "w1", outcome, status, 120, 0.3, r.attempt,
            self.now, fetcher=r.fetcher,
        )  # fmt: skip
        block_until = self.now + block_for_s if block_for_s else 0.0
        counters = {"items.stored.page": 2} if outcome is Outcome.OK else {}
        return Report(attempt, signal, f"reason at {self.now}", counters, block_until)

    def pick(self, index: int) -> Pair:
        """Mostly a live hand-out (then it ends), sometimes a stale one."""
        if self.live and (index < 80 or not self.ended):
            pair = self.live.pop(index % len(self.live))
            self.ended.append(pair)
            return pair
        return self.ended[index % len(self.ended)]

    @staticmethod
    def note(ended: Ended) -> None:
        """Tell hypothesis's statistics how lease ends went (``--hypothesis-show-statistics``)."""
        event("lease end: " + (ended.change.change if ended.change else str(bool(ended))))

    @initialize(picks=st.lists(st.integers(0, len(POOL) - 1), min_size=6, max_size=20))
    def start(self, picks: list[int]) -> None:
        self.both("start", self.now)
        self.add(picks)

    @rule(picks=st.lists(st.integers(0, len(POOL) - 1), max_size=8))
    def add(self, picks: list[int]) -> None:
        model, got = self.both("add", [POOL[i] for i in picks], BUDGET)
        assert got == model

    @rule(limit=st.integers(1, 6), kinds=st.sampled_from(KIND_SETS))
    def claim(self, limit: int, kinds: tuple[str, ...]) -> None:
        model, got = self.both("claim", limit, self.now, LEASE_S, kinds)
        assert [x.request for x in got] == [x.request for x in model]
        assert all(x.expires_at == self.now + LEASE_S for x in got)
        self.live += [Pair(m, r) for m, r in zip(model, got, strict=True)]
        event(f"claim of {len(kinds)} kinds: {len(got)} leases" if got else "empty claim")

    signals = st.sampled_from([Signal.SUCCESS, Signal.BLOCK, Signal.BLOCK, Signal.NONE])
    blocks = st.sampled_from([0.0, 0.0, 3.0, 40.0])

    @precondition(lambda self: self.live or self.ended)
    @rule(index=st.integers(0, 100), signal=signals, skipped=st.booleans(), block_for_s=blocks)
    def complete(self, index: int, signal: Signal, skipped: bool, block_for_s: float) -> None:
        outcome = Outcome.SKIPPED if skipped else Outcome.OK
        self.end(self.pick(index), signal, outcome, block_for_s)

    @rule(kinds=st.sampled_from(KIND_SETS), signals=st.lists(signals, min_size=1, max_size=3))
    def crawl_step(self, kinds: tuple[str, ...], signals: list[Signal]) -> None:
        """A crawl loop's turn: wait until work is due, claim, complete it all with ``signals``."""
        due = self.run(self.model.next_ready_at(self.now, kinds))
        self.now = self.now if due is None else due
        before = len(self.live)
        self.claim(3, kinds)
        for pair, signal in zip(self.live[before:], itertools.cycle(signals)):
            self.ended.append(pair)
            self.end(pair, signal, Outcome.OK, 0.0)
        del self.live[before:]

    def end(self, pair: Pair, signal: Signal, outcome: Outcome, block_for_s: float) -> None:
        report = self.report(pair.model, signal, outcome, block_for_s)
        model = self.run(self.model.complete(pair.model, report))
        assert self.run(self.redis.complete(pair.redis, report)) == model
        self.note(model)

    @precondition(lambda self: self.live or self.ended)
    @rule(
        index=st.integers(0, 100),
        delay_s=st.sampled_from([0.0, 2.0, 10.0]),
        signal=signals,
        block_for_s=blocks,
    )
    def retry(self, index: int, delay_s: float, signal: Signal, block_for_s: float) -> None:
        pair = self.pick(index)
        report = self.report(pair.model, signal, Outcome.RETRY, block_for_s)
        not_before, error = self.now + delay_s, f"err{index}"
        model = self.run(self.model.retry(pair.model, not_before, error, report))
        got = self.run(self.redis.retry(pair.redis, not_before, error, report))
        assert got == model
        self.note(model)

    @precondition(lambda self: self.live or self.ended)
    @rule(index=st.integers(0, 100), signal=signals)
    def bury(self, index: int, signal: Signal) -> None:
        pair = self.pick(index)
        report = self.report(pair.model, signal, Outcome.DEAD, 0.0)
        model = self.run(self.model.bury(pair.model, "fatal", self.now, report))
        got = self.run(self.redis.bury(pair.redis, "fatal", self.now, report))
        assert got == model
        self.note(model)

    @rule(max_retries=st.integers(0, 2))
    def reap(self, max_retries: int) -> None:
        model, got = self.both("reap", self.now, max_retries)
        assert got == model
        expired = [p for p in self.live if p.model.expires_at < self.now]
        self.live = [p for p in self.live if p not in expired]
        self.ended += expired

    @rule(picks=st.none() | st.lists(st.integers(0, len(POOL) - 1), max_size=4))
    def requeue_dead(self, picks: list[int] | None) -> None:
        fps = None if picks is None else [POOL[i].fingerprint for i in picks]
        model, got = self.both("requeue_dead", fps)
        assert got == model

    @rule(picks=st.none() | st.lists(st.integers(0, len(POOL) - 1), max_size=4))
    def purge_dead(self, picks: list[int] | None) -> None:
        fps = None if picks is None else [POOL[i].fingerprint for i in picks]
        model, got = self.both("purge_dead", fps)
        assert got == model

    @rule(
        domain=st.sampled_from(DOMAINS),
        delay_s=st.sampled_from([0.0, 1.0, 5.0]),
        source=st.sampled_from(DelaySource),
    )
    def set_delay(self, domain: str, delay_s: float, source: DelaySource) -> None:
        self.both("set_delay", domain, delay_s, source)

    @rule(domain=st.sampled_from(DOMAINS), max_in_flight=st.integers(1, 3))
    def set_concurrency(self, domain: str, max_in_flight: int) -> None:
        self.both("set_concurrency", domain, max_in_flight)

    @rule(domain=st.sampled_from(DOMAINS), tier=st.sampled_from(["direct", "proxy"]))
    def set_strategy(self, domain: str, tier: str) -> None:
        self.both("set_strategy", domain, {"fetcher": "http", "proxy": tier})

    @rule(domain=st.sampled_from(DOMAINS), n=st.integers(1, 3))
    def add_counters(self, domain: str, n: int) -> None:
        self.both("add_counters", domain, {"items.invalid.page": n})

    @rule(count=st.integers(0, 4))
    def ack_attempts(self, count: int) -> None:
        self.pending_attempts_agree()
        self.both("ack_attempts", count)

    @rule(step_s=st.sampled_from([0.0, 0.5, 1.0, 3.0, 40.0]))
    def advance(self, step_s: float) -> None:
        self.now += step_s

    @invariant()
    def counts_agree(self) -> None:
        model, got = self.both("counts")
        assert got == model

    @invariant()
    def dead_letters_agree(self) -> None:
        model, got = self.both("dead_letters", 100, 0)
        assert got == model

    @invariant()
    def next_ready_at_agrees(self) -> None:
        for kinds in KIND_SETS[:3]:
            model, got = self.both("next_ready_at", self.now, kinds)
            assert got == model, kinds

    @invariant()
    def domains_agree(self) -> None:
        model, got = self.both("domains", 10)
        assert [v.domain for v in got] == [v.domain for v in model]
        for m, g in zip(model, got, strict=True):
            same_view(m, g)
        for domain in DOMAINS:
            same_view(*self.both("domain", domain))

    @invariant()
    def stats_agree(self) -> None:
        same_stats(*self.both("stats"))

    @invariant()
    def pending_attempts_agree(self) -> None:
        # Leases that expire at one time are reaped in token order: tokens differ between the
        # stores but start with the fingerprint, and no fingerprint of POOL prefixes another.
        model, got = self.both("pending_attempts", 100)
        assert got == model


# With 21 fingerprints in a filter sized for 1M, a Bloom false positive has odds ~1e-25.
@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{}, {"dedup": "bloom", "bloom_capacity": 1_000_000}],
    ids=["exact", "bloom"],
)
def test_redis_store_follows_the_memory_store(redis_url: str, options: dict[str, Any]) -> None:
    machine = type("Machine", (StoreMachine,), {"url": redis_url, "options": options})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=40,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
