"""The attempt logs: the ``AttemptLog`` contract (memory, PostgreSQL) and the SQLite reader."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from crawlfleet.errors import StateError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Report
from crawlfleet.monitoring.attempt_log import AttemptLog, MemoryAttemptLog, SqliteAttemptLog
from crawlfleet.records import Attempt, Outcome
from tests.contract.test_queue_store import FREE, LEASE_S, NO_BUDGET, T0, req


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def log(request: pytest.FixtureRequest) -> AsyncIterator[AttemptLog]:
    impl: AttemptLog
    if request.param == "memory":
        impl = MemoryAttemptLog()
    else:
        from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
        from crawlfleet.pipeline.sinks.postgres_schema import migrate

        dsn = request.getfixturevalue("postgres_dsn")
        migrate(dsn)
        impl = await PostgresAttemptLog.open(dsn, crawl_id="c1")
    yield impl
    await impl.close()


def attempt(
    path: str,
    outcome: Outcome = Outcome.OK,
    status: int | None = 200,
    domain: str = "a.test",
    **kw: object,
) -> Attempt:
    fields: dict[str, object] = {
        "url": f"https://{domain}/{path}",
        "fingerprint": f"fp-{path}",
        "domain": domain,
        "worker": "host:1",
        "outcome": outcome,
        "status": status,
        "bytes": 1000,
        "latency_s": 0.1,
        "retry": 0,
        "at": T0,
    } | kw
    return Attempt(**fields)  # type: ignore[arg-type]


async def test_recent_is_newest_first_and_limited(log: AttemptLog) -> None:
    await log.record([attempt(str(i), at=T0 + i) for i in range(5)])
    await log.record([attempt("5", at=T0 + 5)])
    await log.record([])
    assert [a.at for a in await log.recent(limit=3)] == [T0 + 5, T0 + 4, T0 + 3]
    assert len(await log.recent()) == 6


async def test_recent_for_one_url(log: AttemptLog) -> None:
    failed = attempt("x", Outcome.RETRY, 503, retry=0, error="HTTP 503", at=T0)
    worked = attempt("x", Outcome.OK, 200, retry=1, at=T0 + 9)
    await log.record([failed, attempt("y"), worked, attempt("z", at=T0 + 1)])
    assert await log.recent(url=failed.url) == [worked, failed]
    assert await log.recent(limit=1, url=failed.url) == [worked]
    assert await log.recent(url="https://a.test/never") == []


async def test_attempts_round_trip_every_field(log: AttemptLog) -> None:
    odd = attempt(
        "odd",
        Outcome.PARSE_ERROR,
        200,
        domain="b.test",
        worker="w-9",
        bytes=0,
        latency_s=2.5,
        retry=3,
        at=T0 + 0.125,
        error="ValueError: no price",
        fetcher="file",
        detail="Traceback (most recent call last): ...",
        session_id="a1b2c3",
        proxy_id="px-0123456789",
        tier=2,
    )
    await log.record([odd])
    assert await log.recent() == [odd]


async def test_recording_an_attempt_twice_keeps_one(log: AttemptLog) -> None:
    batch = [attempt(str(i), at=T0 + i) for i in range(3)]
    await log.record(batch)
    await log.record([*batch, attempt("3", at=T0 + 3)])
    assert len(await log.recent()) == 4


async def test_one_batch_holding_an_attempt_twice_keeps_one(log: AttemptLog) -> None:
    """A copier that read a row again within one batch (the store re-sent it) stores it once
    and keeps the batch's order."""
    first, second = attempt("1", at=T0 + 1), attempt("2", at=T0 + 2)
    await log.record([first, second, first, attempt("3", at=T0 + 3)])
    assert [a.url for a in await log.recent()] == [
        "https://a.test/3",
        "https://a.test/2",
        "https://a.test/1",
    ]


async def test_a_batch_mixing_whole_and_fractional_numbers_is_recorded(log: AttemptLog) -> None:
    """A latency of 0 (an int, e.g. from a clock of whole seconds) beside 0.5 in one batch:
    the PostgreSQL log sends a column as one array, which takes one type."""
    batch = [attempt("0", latency_s=0, at=T0), attempt("1", latency_s=0.5, at=T0 + 1)]
    await log.record(batch)
    assert sorted(a.latency_s for a in await log.recent()) == [0.0, 0.5]


async def test_top_errors_most_frequent_first(log: AttemptLog) -> None:
    await log.record(
        [
            attempt("1", Outcome.PARSE_ERROR, error="KeyError: 'price'", at=T0 + 1),
            attempt("2", Outcome.PARSE_ERROR, error="KeyError: 'price'", at=T0 + 2),
            attempt("3", Outcome.PARSE_ERROR, error="ValueError: bad", at=T0 + 3),
            attempt("4", Outcome.RETRY, 503, error="HTTP 503", at=T0 + 4),
        ]
    )
    assert await log.top_errors(Outcome.PARSE_ERROR) == [
        ("KeyError: 'price'", 2),
        ("ValueError: bad", 1),
    ]
    assert await log.top_errors(Outcome.PARSE_ERROR, limit=1) == [("KeyError: 'price'", 2)]
    assert await log.top_errors(Outcome.DEAD) == []


@pytest.mark.postgres
async def test_postgres_logs_of_two_crawls_stay_apart(postgres_dsn: str) -> None:
    from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
    from crawlfleet.pipeline.sinks.postgres_schema import migrate

    migrate(postgres_dsn)
    one = await PostgresAttemptLog.open(postgres_dsn, crawl_id="one")
    two = await PostgresAttemptLog.open(postgres_dsn, crawl_id="two")
    try:
        same = attempt("1")
        await one.record([same])
        await two.record([same])
        assert await one.recent() == [same]
        assert await two.recent() == [same]
    finally:
        await one.close()
        await two.close()
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM attempts").fetchone() == (2,)


@pytest.mark.postgres
async def test_postgres_records_an_error_quoting_a_nul_without_it(postgres_dsn: str) -> None:
    """PostgreSQL takes no NUL in text: a parser's error that quotes one (from the page) is
    stored without it, rather than holding up every attempt copied after it."""
    from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
    from crawlfleet.pipeline.sinks.postgres_schema import migrate

    migrate(postgres_dsn)
    log = await PostgresAttemptLog.open(postgres_dsn, crawl_id="c1")
    odd = attempt("0", Outcome.PARSE_ERROR, error="KeyError: 'a\x00b'", detail="line\x00")
    await log.record([odd, attempt("1", at=T0 + 1)])
    recent = await log.recent()
    await log.close()
    assert [(a.error, a.detail) for a in recent] == [(None, None), ("KeyError: 'ab'", "line")]


async def test_sqlite_reader_reads_what_the_store_wrote(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    reader = await SqliteAttemptLog.open(path)
    try:
        await store.add([req("1"), req("2")], NO_BUDGET)
        leases = await store.claim(10, T0, LEASE_S, ("http",))
        for n, lease in enumerate(leases):
            r = lease.request
            outcome = Outcome.PARSE_ERROR if n else Outcome.OK
            row = attempt(r.url.rsplit("/", 1)[1], outcome, at=T0 + n, error="E" if n else None)
            row = Attempt(**{**row.to_dict(), "url": r.url, "fingerprint": r.fingerprint,
                             "outcome": outcome})  # fmt: skip
            assert await store.complete(lease, Report(row))
        await asyncio.sleep(0)  # the store commits when the event loop's turn ends
        assert [a.at for a in await reader.recent()] == [T0 + 1, T0]
        assert await reader.top_errors(Outcome.PARSE_ERROR) == [("E", 1)]
    finally:
        await reader.close()
        await store.close()


async def test_sqlite_reader_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"not a database" * 500)
    with pytest.raises(StateError, match=str(path)):
        await SqliteAttemptLog.open(path)


async def test_a_reader_that_settles_sees_what_the_store_has_not_committed_yet(
    tmp_path: Path,
) -> None:
    """The store commits at most every ``COMMIT_EVERY_S`` (decision 0065); the crawl's summary
    reads through ``settle`` and sees every attempt at once."""
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    settled = await SqliteAttemptLog.open(path, settle=store.commit_now)
    plain = await SqliteAttemptLog.open(path)
    try:
        await store.add([req("1")], NO_BUDGET)
        [lease] = await store.claim(10, T0, LEASE_S, ("http",))
        await asyncio.sleep(0)  # the first commit: at the turn's end
        r = lease.request
        row = attempt("1", Outcome.PARSE_ERROR, at=T0, error="E")
        row = Attempt(**{**row.to_dict(), "url": r.url, "fingerprint": r.fingerprint,
                         "outcome": Outcome.PARSE_ERROR})  # fmt: skip
        assert await store.complete(lease, Report(row))
        await asyncio.sleep(0)  # within the window: (normally) not committed at this turn's end
        assert await settled.top_errors(Outcome.PARSE_ERROR) == [("E", 1)]
        assert [a.url for a in await plain.recent()] == [r.url]  # committed by the settle
    finally:
        await settled.close()
        await plain.close()
        await store.close()
