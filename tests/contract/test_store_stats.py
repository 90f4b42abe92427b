"""The ``QueueStore`` contract for statistics counters and the attempt log."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from crawlfleet.counters import Filtered, Limit, dropped_counter
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import LEASE_EXPIRED, Budget, Report, Signal
from crawlfleet.records import Attempt, Outcome
from tests.contract.test_queue_store import (
    NO_BUDGET,
    T0,
    attempt,
    bury,
    claim,
    complete,
    req,
    retry,
)

ATTEMPT_COLUMNS = (
    "url, fingerprint, domain, worker, outcome, status, bytes, latency_s, retry, at, error, "
    "fetcher, detail"
)


async def recorded(store: QueueStore) -> list[Attempt]:
    """Every attempt the store recorded, oldest first (SQLite: its ``attempts`` table)."""
    if isinstance(store, SqliteQueueStore):
        assert await store.pending_attempts(100) == []
        await asyncio.sleep(0)  # the store commits when the event loop's turn ends
        with sqlite3.connect(store.path) as db:
            rows = db.execute(f"SELECT {ATTEMPT_COLUMNS} FROM attempts ORDER BY id").fetchall()
        fields = ATTEMPT_COLUMNS.split(", ")
        return [Attempt.from_dict(dict(zip(fields, row, strict=True))) for row in rows]
    return await store.pending_attempts(100)


async def end_one_of_each(store: QueueStore) -> None:
    """a.test: one done (2 items), one retried as a block; b.test: one dead; c.test: reaped."""
    await store.add([req("1"), req("2"), req("1", "b.test"), req("1", "c.test")], NO_BUDGET)
    leases = sorted(await claim(store, limit=4), key=lambda lease: lease.request.url)
    done, retried, dead, lost = leases
    # One second apart: a partitioned store orders attempts of its partitions by time only.
    assert await complete(store, done, T0 + 1, counters={"items.stored.product": 2})
    assert await retry(
        store, retried, T0 + 5, "HTTP 429", T0 + 2, signal=Signal.BLOCK, reason="429"
    )
    assert await bury(store, dead, "HTTP 500", T0 + 3)
    assert await store.reap(T0 + 100, 0) == 1
    assert lost.request.domain == "c.test"


async def test_lease_ends_count_by_domain_and_crawl(store: QueueStore) -> None:
    await end_one_of_each(store)
    stats = await store.stats()
    expected = {
        "attempts": 4,
        "outcome.ok": 1,
        "outcome.retry": 1,
        "outcome.dead": 2,
        "fetched": 3,
        "status.2xx": 1,
        "status.5xx": 2,
        "fetched.ok.2xx": 1,
        "fetched.retry.5xx": 1,
        "fetched.dead.5xx": 1,
        "bytes": 300,
        "latency_s.le.0.25": 3,
        "blocks": 1,
        "lease_expired": 1,
        "items.stored.product": 2,
    }
    assert {k: v for k, v in stats.counters.items() if k != "latency_s.sum"} == expected
    assert stats.counters["latency_s.sum"] == pytest.approx(0.6)
    assert (stats.pages, stats.errors, stats.items("stored")) == (1, 3, {"product": 2})
    a_test = (await store.domain("a.test")).stats
    assert (a_test.get("attempts"), a_test.get("blocks"), a_test.get("outcome.ok")) == (2, 1, 1)
    by_domain = {v.domain: v.stats for v in await store.domains()}
    assert by_domain["c.test"].counters == {
        "attempts": 1,
        "outcome.dead": 1,
        "lease_expired": 1,
    }
    assert by_domain["b.test"].get("status.5xx") == 1


async def test_a_stale_lease_end_counts_nothing(store: QueueStore) -> None:
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    assert await complete(store, lease)
    before = (await store.stats(), await recorded(store))
    assert not await complete(store, lease, counters={"items.stored.product": 1})
    assert not await retry(store, lease, T0, "late", signal=Signal.BLOCK)
    assert not await bury(store, lease, "late", T0)
    assert (await store.stats(), await recorded(store)) == before


async def test_add_counters_counts_for_the_domain_and_the_crawl(store: QueueStore) -> None:
    await store.add_counters("a.test", {"items.invalid.product": 2})
    await store.add_counters("b.test", {"items.invalid.product": 1, "items.duplicate.x": 1})
    stats = await store.stats()
    assert stats.items("invalid") == {"product": 3}
    assert stats.items("duplicate") == {"x": 1}
    assert (await store.domain("a.test")).stats.items("invalid") == {"product": 2}


async def test_start_time_is_recorded_once(store: QueueStore) -> None:
    assert (await store.stats()).started_at is None
    await store.start(T0)
    await store.start(T0 + 60)
    assert (await store.stats()).started_at == T0


async def test_every_lease_end_and_reap_records_an_attempt(store: QueueStore) -> None:
    await end_one_of_each(store)
    got = await recorded(store)
    assert [(a.url, a.outcome, a.status) for a in got] == [
        ("https://a.test/1", Outcome.OK, 200),
        ("https://a.test/2", Outcome.RETRY, 503),
        ("https://b.test/1", Outcome.DEAD, 500),
        ("https://c.test/1", Outcome.DEAD, None),
    ]
    (lost,) = await store.dead_letters(offset=1)
    assert got[3] == Attempt(
        url="https://c.test/1",
        fingerprint=lost.request.fingerprint,
        domain="c.test",
        worker="?",
        outcome=Outcome.DEAD,
        status=None,
        bytes=0,
        latency_s=0.0,
        retry=0,
        at=lost.died_at,
        error=LEASE_EXPIRED,
        fetcher="http",
    )


async def test_attempt_fields_survive_the_log(store: QueueStore) -> None:
    await store.add([req("1", fetcher="browser")], NO_BUDGET)
    (lease,) = await claim(store, kinds=("browser",))
    detail = "Traceback (most recent call last):\n  ...\nValueError: no price"
    failed = attempt(lease, Outcome.PARSE_ERROR, error="ValueError: no price", detail=detail)
    assert await store.complete(lease, Report(failed))
    assert await recorded(store) == [failed]


async def test_pending_attempts_stay_until_acknowledged(store: QueueStore) -> None:
    if isinstance(store, SqliteQueueStore):
        pytest.skip("the SQLite store keeps its attempt log itself")
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    for lease in await claim(store):
        await complete(store, lease)
    first = await store.pending_attempts(2)
    assert [a.url for a in first] == ["https://a.test/0", "https://a.test/1"]
    assert await store.pending_attempts(2) == first
    await store.ack_attempts(2)
    assert [a.url for a in await store.pending_attempts(10)] == ["https://a.test/2"]
    await store.ack_attempts(5)
    assert await store.pending_attempts(10) == []


async def test_what_limits_dropped_is_counted_by_reason_per_domain_and_crawl(
    store: QueueStore,
) -> None:
    # A page's links cut or refused, with its lease's end; sitemaps dropped, with no lease.
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    refused = {
        dropped_counter(Limit.MAX_LINKS_PER_PAGE): 1040.0,
        dropped_counter(Limit.MAX_DEPTH): 3.0,
        dropped_counter(Filtered.OFF_SITE): 7.0,
    }
    assert await complete(store, lease, T0 + 1, counters=refused)
    await store.add_counters("b.test", {dropped_counter(Limit.SITEMAP_MAX_BYTES): 2.0})
    await store.add_counters("a.test", {dropped_counter(Limit.MAX_DEPTH): 1.0})
    stats = await store.stats()
    assert stats.dropped() == {
        Limit.MAX_LINKS_PER_PAGE: 1040,
        Limit.MAX_DEPTH: 4,
        Limit.SITEMAP_MAX_BYTES: 2,
    }
    assert stats.filtered() == {Filtered.OFF_SITE: 7}
    a, b = await store.domain("a.test"), await store.domain("b.test")
    assert a.stats.dropped() == {Limit.MAX_LINKS_PER_PAGE: 1040, Limit.MAX_DEPTH: 4}
    assert b.stats.dropped() == {Limit.SITEMAP_MAX_BYTES: 2}


async def test_requests_refused_by_the_budget_are_counted_by_limit(store: QueueStore) -> None:
    assert await store.add([req("1"), req("2"), req("3", "b.test")], Budget(max_per_domain=1)) == 2
    assert await store.add([req("4", "c.test"), req("5", "c.test")], Budget(max_total=3)) == 1
    assert await store.add([req("1"), req("6", "d.test")], Budget(max_total=3)) == 0  # 1: seen
    stats = await store.stats()
    assert stats.dropped() == {Limit.MAX_PAGES: 2, Limit.MAX_PAGES_PER_DOMAIN: 1}
    by_domain = {view.domain: view.stats.dropped() for view in await store.domains()}
    assert by_domain["a.test"] == {Limit.MAX_PAGES_PER_DOMAIN: 1}
    assert by_domain["c.test"] == {Limit.MAX_PAGES: 1}
    assert by_domain["d.test"] == {Limit.MAX_PAGES: 1}
