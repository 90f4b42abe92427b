"""The ``QueueStore`` contract (``crawlfleet.frontier.protocols``), run against every backend.

Times are fake epoch seconds passed as ``now``; nothing sleeps. Lease ends report an attempt
made at ``T0`` unless a test says otherwise, so with the ``FREE`` policy (no delay) the rest
after a lease end changes nothing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace

from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.store_types import (
    LEASE_EXPIRED,
    Budget,
    DelaySource,
    DomainPolicy,
    Ended,
    Report,
    Signal,
)
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome, QueueCounts

T0 = 1_000_000.0
FREE = DomainPolicy(delay_s=0.0, max_in_flight=100)
POLITE = DomainPolicy(delay_s=1.0, max_in_flight=1)

StoreFor = Callable[[DomainPolicy], Awaitable[QueueStore]]
"""The ``store_for`` fixture (``conftest.py``): a new store of the backend under test holding
the given default domain policy."""
NO_BUDGET = Budget()
LEASE_S = 60.0
MAX_RETRIES = 3
KINDS = ("http",)


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


def attempt(
    lease: Lease,
    outcome: Outcome = Outcome.OK,
    status: int | None = 200,
    at: float = T0,
    **kw: object,
) -> Attempt:
    r = lease.request
    fields: dict[str, object] = {
        "url": r.url,
        "fingerprint": r.fingerprint,
        "domain": r.domain,
        "worker": "w:1",
        "outcome": outcome,
        "status": status,
        "bytes": 100,
        "latency_s": 0.2,
        "retry": r.attempt,
        "at": at,
        "fetcher": r.fetcher,
    } | kw
    return Attempt(**fields)  # type: ignore[arg-type]


async def claim(
    store: QueueStore,
    limit: int = 100,
    now: float = T0,
    kinds: tuple[str, ...] = KINDS,
) -> list[Lease]:
    return await store.claim(limit, now, LEASE_S, kinds)


async def complete(
    store: QueueStore,
    lease: Lease,
    at: float = T0,
    signal: Signal = Signal.NONE,
    **report: object,
) -> Ended:
    done = Report(attempt(lease, at=at), signal, **report)  # type: ignore[arg-type]
    return await store.complete(lease, done)


async def retry(
    store: QueueStore,
    lease: Lease,
    not_before: float,
    error: str,
    at: float = T0,
    signal: Signal = Signal.NONE,
    **report: object,
) -> Ended:
    tried = Report(attempt(lease, Outcome.RETRY, 503, at, error=error), signal, **report)  # type: ignore[arg-type]
    return await store.retry(lease, not_before, error, tried)


async def bury(
    store: QueueStore,
    lease: Lease,
    error: str,
    now: float,
    signal: Signal = Signal.NONE,
    **report: object,
) -> Ended:
    died = Report(attempt(lease, Outcome.DEAD, 500, now, error=error), signal, **report)  # type: ignore[arg-type]
    return await store.bury(lease, error, now, died)


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
        assert await complete(store, lease)
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
    (lease,) = await store.claim(5, T0, 30.0, ("browser",))
    assert lease.request == original
    assert lease.expires_at == T0 + 30.0


async def test_delay_spaces_claims_of_one_domain(store_for: StoreFor) -> None:
    policy = DomainPolicy(delay_s=2.0, max_in_flight=10)
    store = await store_for(policy)
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    assert len(await claim(store, now=T0)) == 1
    assert await claim(store, now=T0 + 1.9) == []
    assert await store.next_ready_at(T0 + 1.0, KINDS) == T0 + 2.0
    assert len(await claim(store, now=T0 + 2.0)) == 1


async def test_one_claim_serves_every_due_domain(store_for: StoreFor) -> None:
    store = await store_for(POLITE)
    await store.add([req(str(i), d) for d in ("a.test", "b.test", "c.test") for i in range(3)], NO_BUDGET)  # fmt: skip
    leases = await claim(store)
    assert sorted(lease.request.domain for lease in leases) == ["a.test", "b.test", "c.test"]


async def test_max_in_flight_caps_leases_per_domain(store_for: StoreFor) -> None:
    policy = DomainPolicy(delay_s=0.0, max_in_flight=2)
    store = await store_for(policy)
    await store.add([req(str(i)) for i in range(5)], NO_BUDGET)
    first = await claim(store)
    assert len(first) == 2
    assert await claim(store, now=T0 + 1) == []
    assert await complete(store, first[0])
    assert len(await claim(store, now=T0 + 2)) == 1


async def test_per_domain_overrides_replace_the_default(store: QueueStore) -> None:
    await store.add([req(str(i), d) for d in ("a.test", "b.test") for i in range(4)], NO_BUDGET)
    await store.set_delay("a.test", 5.0, DelaySource.OVERRIDE)
    await store.set_concurrency("a.test", 1)
    leases = await claim(store)
    assert sorted(lease.request.domain for lease in leases) == ["a.test"] + ["b.test"] * 4
    assert await claim(store, now=T0 + 4) == []
    await complete(store, next(x for x in leases if x.request.domain == "a.test"))
    assert [x.request.domain for x in await claim(store, now=T0 + 5)] == ["a.test"]


async def test_set_concurrency_raising_max_in_flight_frees_slots(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    await store.set_concurrency("a.test", 1)
    assert len(await claim(store)) == 1
    assert await store.next_ready_at(T0, KINDS) is None
    await store.set_concurrency("a.test", 3)
    assert await store.next_ready_at(T0, KINDS) == T0
    assert len(await claim(store)) == 2


async def test_block_until_holds_a_domain_and_is_never_shortened(store: QueueStore) -> None:
    await store.add([req("1"), req("2"), req("3")], NO_BUDGET)
    one, two = await claim(store, limit=2)
    await store.add([req("1", "b.test")], NO_BUDGET)
    await retry(store, one, 0.0, "HTTP 429", block_until=T0 + 10, reason="Retry-After: 10")
    await complete(store, two, block_until=T0 + 5, reason="Retry-After: 5")
    assert [x.request.domain for x in await claim(store, now=T0 + 1)] == ["b.test"]
    assert await claim(store, now=T0 + 6) == []
    assert await store.next_ready_at(T0 + 6, KINDS) == T0 + 10
    view = await store.domain("a.test")
    assert (view.retry_after_until, view.ready_at) == (T0 + 10, T0 + 10)
    assert len(await claim(store, now=T0 + 10)) == 2


async def test_a_lease_end_rests_its_domain_for_the_delay(store_for: StoreFor) -> None:
    store = await store_for(POLITE)
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    (lease,) = await claim(store)
    assert await complete(store, lease, at=T0 + 3)
    assert await claim(store, now=T0 + 3.9) == []
    assert await store.next_ready_at(T0 + 2, KINDS) == T0 + 4
    (lease,) = await claim(store, now=T0 + 4)
    skipped = Report(attempt(lease, Outcome.SKIPPED, None, T0 + 9))
    assert await store.complete(lease, skipped)
    assert await store.next_ready_at(T0 + 4, KINDS) == T0 + 5


async def test_next_ready_at(store_for: StoreFor) -> None:
    store = await store_for(DomainPolicy(delay_s=3.0, max_in_flight=5))
    assert await store.next_ready_at(T0, KINDS) is None
    await store.add([req("1"), req("2")], NO_BUDGET)
    assert await store.next_ready_at(T0, KINDS) == T0
    leases = await claim(store)
    assert await store.next_ready_at(T0 + 1, KINDS) == T0 + 3
    await retry(store, leases[0], T0 + 50, "e")
    for lease in await claim(store, now=T0 + 3):
        await complete(store, lease)
    assert await store.next_ready_at(T0 + 4, KINDS) == T0 + 50
    for lease in await claim(store, now=T0 + 50):
        await complete(store, lease)
    assert await store.next_ready_at(T0 + 60, KINDS) is None


async def test_next_ready_at_leaves_out_domains_with_full_slots(store_for: StoreFor) -> None:
    store = await store_for(DomainPolicy(delay_s=0.0, max_in_flight=1))
    await store.add([req("1"), req("2"), req("1", "b.test")], NO_BUDGET)
    await store.set_delay("b.test", 5.0, DelaySource.OVERRIDE)
    await store.set_concurrency("b.test", 3)
    leases = await claim(store, limit=2)
    assert sorted(lease.request.domain for lease in leases) == ["a.test", "b.test"]
    assert await store.next_ready_at(T0 + 1, KINDS) is None
    await store.add([req("3"), req("4")], NO_BUDGET)
    assert await store.next_ready_at(T0 + 1, KINDS) is None
    await complete(store, next(x for x in leases if x.request.domain == "a.test"))
    assert await store.next_ready_at(T0 + 1, KINDS) == T0 + 1
    assert (
        await store.next_ready_at(T0 - 1, KINDS) == T0
    )  # never earlier than the domain's ready_at


async def test_requests_put_back_keep_their_queue_position(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(1, 5)], NO_BUDGET)
    retried, reaped, buried = await claim(store, limit=3)
    await retry(store, retried, T0 + 5, "e")
    await bury(store, buried, "e", T0)
    assert await store.reap(float("inf"), MAX_RETRIES) == 1
    assert await store.requeue_dead() == 1
    await store.add([req("5")], NO_BUDGET)
    assert names(await claim(store, now=T0 + 5)) == ["1", "2", "3", "4", "5"]
    assert reaped.request.fingerprint == req("2").fingerprint


async def test_next_ready_at_is_none_with_only_leases_out(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    await claim(store)
    assert await store.next_ready_at(T0, KINDS) is None
    assert (await store.counts()).pending == 1


# --- leases, retries, reaping --------------------------------------------------------------


async def test_complete_marks_done_once(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    assert await complete(store, lease)
    assert await store.counts() == QueueCounts(queued=0, leased=0, done=1, dead=0, seen=1)
    assert not await complete(store, lease)
    assert not await retry(store, lease, T0, "late")
    assert not await bury(store, lease, "late", T0)
    assert (await store.counts()).done == 1


async def test_each_hand_out_gets_a_new_token(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (first,) = await claim(store)
    await retry(store, first, 0.0, "e")
    (second,) = await claim(store, now=T0 + 1)
    assert first.token != second.token
    assert not await complete(store, first)
    assert await complete(store, second)


async def test_forged_token_is_refused(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    for token in ("", "nonsense", f"{lease.token}9", f"{lease.request.fingerprint}:x"):
        assert not await complete(store, Lease(lease.request, token, lease.expires_at))
    assert await complete(store, lease)


async def test_reap_returns_expired_leases_and_stales_them(store: QueueStore) -> None:
    await store.add([req("1"), req("2")], NO_BUDGET)
    early, late = (
        await store.claim(1, T0, 10.0, KINDS),
        await store.claim(1, T0 + 5, 10.0, KINDS),
    )
    assert await store.reap(T0 + 10, MAX_RETRIES) == 0
    assert await store.reap(T0 + 11, MAX_RETRIES) == 1
    counts = await store.counts()
    assert (counts.queued, counts.leased) == (1, 1)
    assert not await complete(store, early[0])
    (again,) = await claim(store, now=T0 + 11)
    assert again.request == replace(early[0].request, attempt=1)
    assert again.token != early[0].token
    assert await complete(store, again)
    assert await complete(store, late[0])


async def test_reap_infinity_returns_every_lease(store: QueueStore) -> None:
    await store.add([req(str(i), d) for d in ("a.test", "b.test") for i in range(3)], NO_BUDGET)
    leases = await store.claim(10, T0, 1e9, KINDS)
    assert len(leases) == 6
    assert await store.reap(float("inf"), MAX_RETRIES) == 6
    assert (await store.counts()).queued == 6
    assert all([not await complete(store, lease) for lease in leases])
    assert len(await claim(store, now=T0 + 1)) == 6


async def test_renew_keeps_a_lease_alive_past_its_first_expiry(store: QueueStore) -> None:
    await store.add([req("1"), req("2")], NO_BUDGET)
    renewed, left = await store.claim(2, T0, 10.0, KINDS)
    assert await store.renew(renewed, T0 + 15)
    assert await store.renew(renewed, T0 + 20)
    assert await store.reap(T0 + 12, MAX_RETRIES) == 1  # only the lease left alone
    assert await store.reap(T0 + 20, MAX_RETRIES) == 0
    assert await complete(store, renewed)
    assert not await complete(store, left)
    counts = await store.counts()
    assert (counts.done, counts.leased, counts.queued) == (1, 0, 1)


async def test_renew_refuses_a_lease_no_longer_current(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (first,) = await store.claim(1, T0, 10.0, KINDS)
    assert await store.reap(T0 + 11, MAX_RETRIES) == 1
    (again,) = await store.claim(1, T0 + 11, 10.0, KINDS)
    assert not await store.renew(first, T0 + 30)  # reaped, and handed out again
    assert await store.renew(again, T0 + 30)
    forged = Lease(again.request, f"{again.request.fingerprint}:x", again.expires_at)
    assert not await store.renew(forged, T0 + 30)
    assert await complete(store, again)
    assert not await store.renew(again, T0 + 40)
    assert await store.counts() == QueueCounts(queued=0, leased=0, done=1, dead=0, seen=1)


async def test_renew_never_shortens_a_lease(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await store.claim(1, T0, 10.0, KINDS)
    assert await store.renew(lease, T0 + 30)
    assert await store.renew(lease, T0 + 5)  # current, so True; the expiry stays T0 + 30
    assert await store.reap(T0 + 29, MAX_RETRIES) == 0
    assert await store.reap(T0 + 31, MAX_RETRIES) == 1
    assert not await complete(store, lease)


async def test_reaped_request_frees_its_domain_slot(store_for: StoreFor) -> None:
    policy = DomainPolicy(delay_s=0.0, max_in_flight=1)
    store = await store_for(policy)
    await store.add([req("1"), req("2")], NO_BUDGET)
    assert len(await store.claim(5, T0, 10.0, KINDS)) == 1
    assert await store.claim(5, T0 + 5, 10.0, KINDS) == []
    await store.reap(T0 + 20, MAX_RETRIES)
    assert len(await store.claim(5, T0 + 20, 10.0, KINDS)) == 1


async def test_poison_page_ends_in_the_dead_letter_queue(store: QueueStore) -> None:
    await store.add([req("poison")], NO_BUDGET)
    now = T0
    for attempt in range(MAX_RETRIES + 1):
        (lease,) = await store.claim(5, now, 10.0, KINDS)
        assert lease.request.attempt == attempt
        now += 11
        assert await store.reap(now, MAX_RETRIES) == 1
        assert not await complete(store, lease)
    assert await store.counts() == QueueCounts(queued=0, leased=0, done=0, dead=1, seen=1)
    assert await store.claim(5, now, 10.0, KINDS) == []
    (letter,) = await store.dead_letters()
    assert letter.request.attempt == MAX_RETRIES
    assert letter.errors == (LEASE_EXPIRED,) * (MAX_RETRIES + 1)
    assert letter.died_at == now - 1  # the expiry of its last lease


async def test_reap_joins_the_history_of_ordinary_failures(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await retry(store, lease, T0 + 1, "HTTP 503")
    (lease,) = await store.claim(5, T0 + 1, 10.0, KINDS)
    assert await store.reap(T0 + 12, 1) == 1
    (letter,) = await store.dead_letters()
    assert letter.errors == ("HTTP 503", LEASE_EXPIRED)
    assert letter.request.attempt == 1
    assert await store.requeue_dead() == 1
    (lease,) = await claim(store, now=T0 + 13)
    assert lease.request.attempt == 0
    assert await bury(store, lease, "HTTP 500", T0 + 14)
    assert [d.errors for d in await store.dead_letters()] == [("HTTP 500",)]


async def test_retry_waits_for_not_before_and_counts_attempts(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    assert lease.request.attempt == 0
    assert await retry(store, lease, T0 + 30, "timeout")
    assert (await store.counts()).queued == 1
    assert await claim(store, now=T0 + 29) == []
    assert await store.next_ready_at(T0 + 10, KINDS) == T0 + 30
    (again,) = await claim(store, now=T0 + 30)
    assert again.request.attempt == 1
    assert again.request.url == lease.request.url
    assert not await complete(store, lease)


async def test_waiting_retry_does_not_hold_up_its_domain(store: QueueStore) -> None:
    await store.add([req("1", priority=9), req("2")], NO_BUDGET)
    (first,) = await claim(store, limit=1)
    await retry(store, first, T0 + 100, "e")
    assert names(await claim(store, now=T0 + 1)) == ["2"]
    assert names(await claim(store, now=T0 + 100)) == ["1"]


async def test_bury_keeps_the_error_history(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await retry(store, lease, T0 + 1, "timeout")
    (lease,) = await claim(store, now=T0 + 1)
    await retry(store, lease, T0 + 2, "HTTP 503")
    (lease,) = await claim(store, now=T0 + 2)
    assert await bury(store, lease, "HTTP 500", T0 + 3)
    assert not await complete(store, lease)
    assert await store.counts() == QueueCounts(queued=0, leased=0, done=0, dead=1, seen=1)
    (letter,) = await store.dead_letters()
    assert letter.errors == ("timeout", "HTTP 503", "HTTP 500")
    assert letter.request.url == req("1").url
    assert letter.request.attempt == 2
    assert letter.died_at == T0 + 3


# --- dead letters --------------------------------------------------------------------------


async def bury_all(store: QueueStore, count: int) -> list[str]:
    """Admit ``count`` requests and bury each; their fingerprints in death order."""
    await store.add([req(str(i)) for i in range(count)], NO_BUDGET)
    died: list[str] = []
    for i, lease in enumerate(await claim(store)):
        await bury(store, lease, f"error {i}", T0 + i)
        died.append(lease.request.fingerprint)
    return died


async def test_dead_letters_page_in_death_order(store: QueueStore) -> None:
    died = await bury_all(store, 5)
    assert [d.request.fingerprint for d in await store.dead_letters()] == died
    page = await store.dead_letters(limit=2, offset=1)
    assert [d.request.fingerprint for d in page] == died[1:3]
    assert [d.errors for d in page] == [("error 1",), ("error 2",)]
    assert await store.dead_letters(limit=10, offset=5) == []


async def test_requeue_dead_all(store: QueueStore) -> None:
    await bury_all(store, 3)
    assert await store.requeue_dead() == 3
    assert await store.counts() == QueueCounts(queued=3, leased=0, done=0, dead=0, seen=3)
    leases = await claim(store, now=T0 + 10)
    assert len(leases) == 3
    assert {lease.request.attempt for lease in leases} == {0}
    assert await store.requeue_dead() == 0


async def test_requeue_dead_by_fingerprint(store: QueueStore) -> None:
    died = await bury_all(store, 3)
    assert await store.requeue_dead([died[1], "fp-unknown", req("x").fingerprint]) == 1
    assert [d.request.fingerprint for d in await store.dead_letters()] == [died[0], died[2]]
    (lease,) = await claim(store, now=T0 + 10)
    assert lease.request.fingerprint == died[1]
    assert await complete(store, lease)


async def test_requeued_letter_keeps_admission_done_requests_untouched(store: QueueStore) -> None:
    await store.add([req("ok")], NO_BUDGET)
    (ok,) = await claim(store)
    await complete(store, ok)
    assert await store.requeue_dead([ok.request.fingerprint]) == 0
    assert (await store.counts()).done == 1


async def test_purge_dead_forgets_but_stays_seen(store: QueueStore) -> None:
    died = await bury_all(store, 4)
    assert await store.purge_dead([died[0]]) == 1
    assert len(await store.dead_letters()) == 3
    assert await store.purge_dead() == 3
    assert await store.dead_letters() == []
    counts = await store.counts()
    assert (counts.dead, counts.queued, counts.seen) == (0, 0, 4)
    assert await store.add([req("0"), req("3")], NO_BUDGET) == 0
    assert await store.requeue_dead() == 0


# --- invariants ----------------------------------------------------------------------------


async def test_counts_in_every_state(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(6)], NO_BUDGET)
    done, retried, dead, leased = (await claim(store, limit=4))[:4]
    await complete(store, done)
    await retry(store, retried, T0 + 5, "e")
    await bury(store, dead, "e", T0)
    assert leased.token
    assert await store.counts() == QueueCounts(queued=3, leased=1, done=1, dead=1, seen=6)
    assert (await store.counts()).pending == 4


async def test_random_operations_keep_every_fingerprint_in_one_state(store_for: StoreFor) -> None:
    rng = random.Random(7)
    model: dict[str, str] = {}
    leases: dict[str, Lease] = {}
    now = T0
    policy = DomainPolicy(delay_s=0.5, max_in_flight=2)
    store = await store_for(policy)
    ended = expired_total = 0
    for _step in range(300):
        now += rng.choice((0.0, 0.25, 1.0))
        op = rng.random()
        if op < 0.3:
            batch = [req(str(rng.randrange(80)), f"d{rng.randrange(4)}.test") for _ in range(5)]
            fresh = {r.fingerprint for r in batch} - model.keys()
            assert await store.add(batch, Budget(max_total=60)) == min(len(fresh), 60 - len(model))
            for r in batch:
                if r.fingerprint not in model and len(model) < 60:
                    model[r.fingerprint] = "queued"
        elif op < 0.55:
            for lease in await store.claim(rng.randrange(1, 6), now, 5.0, KINDS):
                fp = lease.request.fingerprint
                assert model[fp] == "queued"
                model[fp] = "leased"
                leases[fp] = lease
        elif op < 0.9 and leases:
            fp = rng.choice(sorted(leases))
            lease = leases.pop(fp)
            fate = rng.choice(("done", "queued", "dead"))
            if fate == "done":
                ok = await complete(store, lease)
            elif fate == "queued":
                ok = await retry(store, lease, now + rng.choice((0.0, 2.0)), "e")
            else:
                ok = await bury(store, lease, "e", now)
            assert ok, "a lease stays current until it is reaped"
            model[fp] = fate
            ended += 1
        elif op < 0.95:
            reaped = await store.reap(now, 1)
            expired = [fp for fp, lease in leases.items() if lease.expires_at < now]
            assert reaped == len(expired)
            ended += reaped
            expired_total += reaped
            for fp in expired:
                model[fp] = "dead" if leases.pop(fp).request.attempt >= 1 else "queued"
        else:
            assert await store.requeue_dead() == sum(s == "dead" for s in model.values())
            model.update({fp: "queued" for fp, s in model.items() if s == "dead"})
        states = list(model.values())
        counts = await store.counts()
        assert counts == QueueCounts(
            queued=states.count("queued"),
            leased=states.count("leased"),
            done=states.count("done"),
            dead=states.count("dead"),
            seen=len(model),
        )
    stats = await store.stats()
    assert (stats.get("attempts"), stats.get("lease_expired")) == (ended, expired_total)
    assert expired_total > 0
