"""``QueueStore.move``: a leased request handed to another fetcher kind's lane, atomically.

The crawl step moves an HTTP-lane request of a domain whose strategy says ``browser`` to the
browser lane when its process has no browser (``runtime/choice/strategy.py``).
"""

from __future__ import annotations

from crawlfleet.frontier.protocols import QueueStore
from tests.contract.test_queue_store import NO_BUDGET, POLITE, T0, claim, complete, names, req


async def test_a_moved_request_waits_in_the_other_lane_with_its_retry_count(
    store: QueueStore,
) -> None:
    await store.add([req("a", attempt=2), req("b")], NO_BUDGET)
    (lease, other) = await claim(store, kinds=("http",))
    assert await store.move(lease, "browser")
    counts = await store.counts()
    assert (counts.queued, counts.leased, counts.done) == (1, 1, 0)
    assert await claim(store, kinds=("http",)) == []
    (moved,) = await claim(store, kinds=("browser",))
    assert names([moved]) == ["a"]
    assert (moved.request.fetcher, moved.request.attempt) == ("browser", 2)
    assert (await complete(store, moved)).current
    assert (await complete(store, other)).current
    assert (await store.counts()).done == 2
    stats = await store.stats()
    assert stats.get("outcome.ok") == 2
    assert stats.get("outcome.retry") == 0


async def test_a_stale_lease_moves_nothing(store: QueueStore) -> None:
    await store.add([req("a")], NO_BUDGET)
    (lease,) = await claim(store)
    assert await store.move(lease, "browser")
    assert not await store.move(lease, "browser")
    assert not (await complete(store, lease)).current
    assert (await store.counts()).queued == 1


async def test_a_move_frees_the_domain_slot_and_keeps_its_politeness(store: QueueStore) -> None:
    await store.add([req("a"), req("b")], NO_BUDGET)
    (lease,) = await claim(store, policy=POLITE)
    assert await claim(store, now=T0 + 5, policy=POLITE) == []  # one in flight: capped
    assert await store.move(lease, "browser")
    (next_one,) = await claim(store, now=T0 + 5, policy=POLITE, kinds=("http", "browser"))
    assert names([next_one]) in (["a"], ["b"])
