"""The known-URL part of the ``QueueStore`` contract: visits, due times and ``revisit``.

Run against every backend by the ``store`` fixture (memory, SQLite, Redis).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.schema import SCHEMA_VERSION
from crawlfleet.frontier.store_types import Budget, Visit
from crawlfleet.records import QueueCounts
from tests.contract.test_queue_store import NO_BUDGET, T0, claim, complete, names, req

INF = float("inf")


def visit(next_at: float, etag: str = '"v1"', priority: int = 0) -> Visit:
    modified = "Mon, 01 Jan 2024 00:00:00 GMT"
    return Visit(etag, modified, "ab" * 32, 60.0, next_at, priority, ("product",), T0 - 1)


async def fetch_all(store: QueueStore, now: float = T0) -> list[str]:
    """Claim and complete everything due at ``now``; the names fetched."""
    leases = await claim(store, now=now)
    for lease in leases:
        assert await complete(store, lease, at=now)
    return names(leases)


async def test_unknown_url_has_no_visit(store: QueueStore) -> None:
    assert await store.visit("fp-a.test-1") is None
    assert await store.next_visit_at() is None


async def test_remember_keeps_the_validators(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await store.remember(lease.request, visit(T0 + 60))
    assert await store.visit(lease.request.fingerprint) == visit(T0 + 60)
    await store.remember(lease.request, visit(INF, etag='"v2"'))
    assert await store.visit(lease.request.fingerprint) == visit(INF, etag='"v2"')


async def test_a_due_done_url_is_queued_again_once(store: QueueStore) -> None:
    await store.add([req("1"), req("2")], NO_BUDGET)
    for lease in await claim(store):
        await store.remember(
            lease.request, visit(T0 + 60 if lease.request.url.endswith("1") else INF)
        )
        await complete(store, lease)
    assert await store.next_visit_at() == T0 + 60
    assert await store.revisit(T0 + 59, 100) == 0
    assert await store.revisit(T0 + 60, 100) == 1
    assert await store.counts() == QueueCounts(queued=1, leased=0, done=1, dead=0, seen=2)
    assert await store.revisit(T0 + 120, 100) == 0  # its due time is cleared until remembered
    assert await store.next_visit_at() is None
    assert await fetch_all(store, T0 + 60) == ["1"]
    assert (await store.visit("fp-a.test-1")) is not None  # still known


async def test_discovery_of_a_known_url_admits_nothing(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await store.remember(lease.request, visit(T0))
    await complete(store, lease)
    assert await store.add([req("1")], NO_BUDGET) == 0
    assert await store.revisit(T0, 100) == 1
    assert await store.add([req("1")], NO_BUDGET) == 0
    assert (await store.counts()).queued == 1


async def test_revisit_leaves_queued_and_leased_requests_alone(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await store.remember(lease.request, visit(T0))
    assert await store.revisit(T0, 100) == 0  # still leased: not queued twice
    assert await store.counts() == QueueCounts(queued=0, leased=1, done=0, dead=0, seen=1)
    await complete(store, lease)
    assert await store.revisit(T0, 100) == 0  # its due time went with the first revisit


async def test_revisit_takes_the_earliest_first_within_the_limit(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(5)], NO_BUDGET)
    for lease in await claim(store):
        i = int(lease.request.url.rsplit("/", 1)[1])
        await store.remember(lease.request, visit(T0 + 10 - i))
        await complete(store, lease)
    assert await store.revisit(T0 + 100, 2) == 2
    assert sorted(await fetch_all(store, T0 + 100)) == ["3", "4"]
    assert await store.revisit(T0 + 100, 100) == 3


async def test_a_revisit_carries_its_visit_priority(store: QueueStore) -> None:
    await store.add([req("low"), req("high")], NO_BUDGET)
    for lease in await claim(store):
        high = lease.request.url.endswith("high")
        await store.remember(lease.request, visit(T0, priority=5 if high else 0))
        await complete(store, lease)
    assert await store.revisit(T0, 100) == 2
    leases = await claim(store, limit=1, now=T0)
    assert names(leases) == ["high"]
    assert leases[0].request.priority == 5
    assert leases[0].request.attempt == 0


async def test_revisits_charge_no_budget(store: QueueStore) -> None:
    await store.add([req("1")], Budget(max_total=1))
    (lease,) = await claim(store)
    await store.remember(lease.request, visit(T0))
    await complete(store, lease)
    for _ in range(3):
        assert await store.revisit(T0, 100) == 1
        (lease,) = await claim(store)
        await store.remember(lease.request, visit(T0))
        await complete(store, lease)
    assert await store.add([req("2")], Budget(max_total=1)) == 0


async def test_a_version_3_state_file_gains_the_known_table(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await complete(store, lease)
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE known")
        db.execute("PRAGMA user_version = 3")
    db.close()
    store = await SqliteQueueStore.open(path)
    try:
        assert await store.counts() == QueueCounts(queued=0, leased=0, done=1, dead=0, seen=1)
        await store.remember(lease.request, visit(T0))
        assert await store.revisit(T0, 10) == 1
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    db.close()


async def test_a_completed_lease_records_its_reports_visit(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    assert await complete(store, lease, visit=visit(T0 + 5))
    assert await store.visit(lease.request.fingerprint) == visit(T0 + 5)
    assert await store.revisit(T0 + 5, 10) == 1
