"""The ``QueueStore`` contract (``crawlfleet.frontier.protocols``), run against every backend.

Times are fake epoch seconds passed as ``now``; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import random

from crawlfleet.frontier.protocols import Budget, DomainPolicy, QueueStore
from crawlfleet.models import CrawlRequest, Lease, QueueCounts

T0 = 1_000_000.0
FREE = DomainPolicy(delay_s=0.0, max_in_flight=100)
POLITE = DomainPolicy(delay_s=1.0, max_in_flight=1)
NO_BUDGET = Budget()
LEASE_S = 60.0


def req(name: str, domain: str = "a.test", priority: int = 0, **kw: object) -> CrawlRequest:
    return CrawlRequest(
        url=f"https://{domain}/{name}",
        fingerprint=f"fp-{domain}-{name}",
        domain=domain,
        priority=priority,
        **kw,  # type: ignore[arg-type]
    )


def names(leases: list[Lease]) -> list[str]:
    return [lease.request.url.rsplit("/", 1)[1] for lease in leases]


async def claim(
    store: QueueStore, limit: int = 100, now: float = T0, policy: DomainPolicy = FREE
) -> list[Lease]:
    return await store.claim(limit, now, LEASE_S, policy)


# --- add, dedup, budgets -------------------------------------------------------------------


async def test_add_admits_new_requests(store: QueueStore) -> None:
    assert await store.add([req("1"), req("2"), req("3", "b.test")], NO_BUDGET) == 3
    assert await store.counts() == QueueCounts(queued=3, leased=0, done=0, dead=0, seen=3)


async def test_add_skips_seen_and_duplicates_within_a_batch(store: QueueStore) -> None:
    assert await store.add([req("1"), req("1"), req("2")], NO_BUDGET) == 2
    assert await store.add([req("1"), req("3"), req("3")], NO_BUDGET) == 1
    assert await store.add([], NO_BUDGET) == 0
    counts = await store.counts()
    assert (counts.queued, counts.seen) == (3, 3)


async def test_concurrent_adds_admit_each_fingerprint_once(store: QueueStore) -> None:
    batch = [req(str(i), f"d{i % 3}.test") for i in range(40)]
    shuffled = [random.Random(seed).sample(batch, len(batch)) for seed in range(8)]
    admitted = await asyncio.gather(*(store.add(b, NO_BUDGET) for b in shuffled))
    assert sum(admitted) == 40
    assert (await store.counts()).queued == 40


async def test_mark_seen_blocks_later_admission(store: QueueStore) -> None:
    await store.mark_seen([req("1").fingerprint, req("1").fingerprint])
    assert await store.add([req("1"), req("2")], NO_BUDGET) == 1
    counts = await store.counts()
    assert (counts.queued, counts.seen) == (1, 2)


async def test_total_budget_refuses_without_marking_seen(store: QueueStore) -> None:
    batch = [req(str(i)) for i in range(5)]
    assert await store.add(batch, Budget(max_total=3)) == 3
    assert (await store.counts()).seen == 3
    assert await store.add(batch, Budget(max_total=3)) == 0
    assert await store.add(batch, Budget(max_total=5)) == 2


async def test_per_domain_budget_refuses_without_marking_seen(store: QueueStore) -> None:
    batch = [req(str(i), d) for d in ("a.test", "b.test") for i in range(3)]
    assert await store.add(batch, Budget(max_per_domain=2)) == 4
    assert await store.add(batch, Budget(max_per_domain=2)) == 0
    assert await store.add(batch, NO_BUDGET) == 2


async def test_budget_counts_every_admission_not_just_the_queue(store: QueueStore) -> None:
    await store.add([req("1"), req("2")], Budget(max_total=2))
    for lease in await claim(store):
        assert await store.complete(lease)
    assert await store.add([req("3")], Budget(max_total=2)) == 0
    assert await store.add([req("3")], Budget(max_total=3, max_per_domain=2)) == 0
    assert await store.add([req("3")], Budget(max_total=3)) == 1


# --- claim order and politeness ------------------------------------------------------------


async def test_higher_priority_first_then_admission_order(store: QueueStore) -> None:
    await store.add([req("low", priority=0), req("high", priority=5)], NO_BUDGET)
    await store.add([req("mid", priority=1), req("high2", priority=5)], NO_BUDGET)
    await store.add([req("low2", priority=0)], NO_BUDGET)
    assert names(await claim(store)) == ["high", "high2", "mid", "low", "low2"]


async def test_equal_priority_is_fifo(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(10)], NO_BUDGET)
    got: list[str] = []
    for _ in range(5):
        got += names(await claim(store, limit=2))
    assert got == [str(i) for i in range(10)]


async def test_claim_respects_limit(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(10)], NO_BUDGET)
    assert await claim(store, limit=0) == []
    assert len(await claim(store, limit=3)) == 3
    assert (await store.counts()).leased == 3


async def test_lease_carries_the_request_and_expiry(store: QueueStore) -> None:
    original = req("x", depth=3, fetcher="browser", parent="https://a.test/", priority=2)
    await store.add([original], NO_BUDGET)
    (lease,) = await store.claim(5, T0, 30.0, FREE)
    assert lease.request == original
    assert lease.expires_at == T0 + 30.0


async def test_delay_spaces_claims_of_one_domain(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    policy = DomainPolicy(delay_s=2.0, max_in_flight=10)
    assert len(await claim(store, now=T0, policy=policy)) == 1
    assert await claim(store, now=T0 + 1.9, policy=policy) == []
    assert await store.next_ready_at(T0 + 1.0) == T0 + 2.0
    assert len(await claim(store, now=T0 + 2.0, policy=policy)) == 1


async def test_one_claim_serves_every_due_domain(store: QueueStore) -> None:
    await store.add([req(str(i), d) for d in ("a.test", "b.test", "c.test") for i in range(3)], NO_BUDGET)  # fmt: skip
    leases = await claim(store, policy=POLITE)
    assert sorted(lease.request.domain for lease in leases) == ["a.test", "b.test", "c.test"]


async def test_max_in_flight_caps_leases_per_domain(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(5)], NO_BUDGET)
    policy = DomainPolicy(delay_s=0.0, max_in_flight=2)
    first = await claim(store, policy=policy)
    assert len(first) == 2
    assert await claim(store, now=T0 + 1, policy=policy) == []
    assert await store.complete(first[0])
    assert len(await claim(store, now=T0 + 2, policy=policy)) == 1


async def test_set_policy_overrides_the_default_for_one_domain(store: QueueStore) -> None:
    await store.add([req(str(i), d) for d in ("a.test", "b.test") for i in range(4)], NO_BUDGET)
    await store.set_policy("a.test", DomainPolicy(delay_s=5.0, max_in_flight=1))
    leases = await claim(store)
    assert sorted(lease.request.domain for lease in leases) == ["a.test"] + ["b.test"] * 4
    assert await claim(store, now=T0 + 4) == []
    await store.complete(next(x for x in leases if x.request.domain == "a.test"))
    assert [x.request.domain for x in await claim(store, now=T0 + 5)] == ["a.test"]


async def test_set_policy_raising_max_in_flight_frees_slots(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    await store.set_policy("a.test", DomainPolicy(delay_s=0.0, max_in_flight=1))
    assert len(await claim(store)) == 1
    await store.set_policy("a.test", DomainPolicy(delay_s=0.0, max_in_flight=3))
    assert len(await claim(store)) == 2


async def test_block_holds_a_domain_and_is_never_shortened(store: QueueStore) -> None:
    await store.block("a.test", T0 + 10)
    await store.add([req("1"), req("2"), req("1", "b.test")], NO_BUDGET)
    assert [x.request.domain for x in await claim(store)] == ["b.test"]
    await store.block("a.test", T0 + 5)
    assert await claim(store, now=T0 + 6) == []
    assert await store.next_ready_at(T0 + 6) == T0 + 10
    assert len(await claim(store, now=T0 + 10)) == 2


async def test_block_after_claim_extends_the_delay(store: QueueStore) -> None:
    await store.add([req("1"), req("2")], NO_BUDGET)
    assert len(await claim(store, policy=POLITE, limit=1)) == 1
    await store.block("a.test", T0 + 30)
    await store.reap(float("inf"))
    assert await claim(store, now=T0 + 29, policy=POLITE) == []
    assert len(await claim(store, now=T0 + 30, policy=POLITE)) == 1


async def test_next_ready_at(store: QueueStore) -> None:
    assert await store.next_ready_at(T0) is None
    await store.add([req("1"), req("2")], NO_BUDGET)
    assert await store.next_ready_at(T0) == T0
    leases = await claim(store, policy=DomainPolicy(delay_s=3.0, max_in_flight=5))
    assert await store.next_ready_at(T0 + 1) == T0 + 3
    await store.retry(leases[0], T0 + 50, "e")
    for lease in await claim(store, now=T0 + 3):
        await store.complete(lease)
    assert await store.next_ready_at(T0 + 4) == T0 + 50
    for lease in await claim(store, now=T0 + 50):
        await store.complete(lease)
    assert await store.next_ready_at(T0 + 60) is None


async def test_next_ready_at_is_none_with_only_leases_out(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    await claim(store)
    assert await store.next_ready_at(T0) is None
    assert (await store.counts()).pending == 1
