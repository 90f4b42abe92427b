"""The ``AttemptLog`` contract, run against the in-memory and SQLite logs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from crawlfleet.errors import StateError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.models import Attempt, Outcome
from crawlfleet.monitoring.attempt_log import (
    AttemptLog,
    DomainSummary,
    MemoryAttemptLog,
    SqliteAttemptLog,
)
from tests.contract.test_queue_store import NO_BUDGET, T0, claim, complete, req


@pytest.fixture(params=["memory", "sqlite"])
async def log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AttemptLog]:
    impl: AttemptLog
    if request.param == "memory":
        impl = MemoryAttemptLog()
    else:
        impl = await SqliteAttemptLog.open(tmp_path / "state.sqlite")
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
    await log.record([failed, attempt("y"), worked, attempt("z")])
    assert await log.recent(url=failed.url) == [worked, failed]
    assert await log.recent(limit=1, url=failed.url) == [worked]
    assert await log.recent(url="https://a.test/never") == []


async def test_attempts_round_trip_every_field(log: AttemptLog) -> None:
    odd = attempt(
        "odd",
        Outcome.FAILED,
        None,
        domain="b.test",
        worker="w-9",
        bytes=0,
        latency_s=2.5,
        retry=3,
        at=T0 + 0.125,
        error="connect refused",
    )
    await log.record([odd])
    assert await log.recent() == [odd]


async def test_summary_per_domain(log: AttemptLog) -> None:
    await log.record(
        [
            attempt("1", latency_s=0.1, bytes=100),
            attempt("2", latency_s=0.3, bytes=300),
            attempt("3", Outcome.RETRY, 503, latency_s=0.2, bytes=50),
            attempt("3", Outcome.DEAD, 503, latency_s=0.2, bytes=50, retry=1),
            attempt("4", Outcome.RETRY, None, latency_s=30.0, bytes=0, error="timeout"),
            attempt("5", Outcome.SKIPPED, None, latency_s=0.0, bytes=0),
            attempt("1", domain="b.test", status=404, bytes=7, latency_s=1.0),
        ]
    )
    summary = await log.summary()
    assert set(summary) == {"a.test", "b.test"}
    a = summary["a.test"]
    assert (a.pages, a.bytes, a.retries, a.dead, a.skipped) == (2, 500, 2, 1, 1)
    assert a.statuses == {200: 2, 503: 2}
    assert a.mean_latency_s == pytest.approx(0.2)
    assert summary["b.test"] == DomainSummary(
        pages=1, statuses={404: 1}, bytes=7, mean_latency_s=1.0
    )


async def test_summary_of_an_empty_log(log: AttemptLog) -> None:
    assert await log.summary() == {}


async def test_domain_without_responses_has_zero_latency(log: AttemptLog) -> None:
    await log.record([attempt("1", Outcome.RETRY, None, latency_s=10.0, error="timeout")])
    assert (await log.summary())["a.test"].mean_latency_s == 0.0


async def test_sqlite_log_persists_and_shares_the_queue_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    log = await SqliteAttemptLog.open(path)
    try:
        await store.add([req("1")], NO_BUDGET)
        await log.record([attempt("1")])
        (lease,) = await claim(store)
        assert await complete(store, lease, at=T0 + 1)  # the store writes its own row
        await log.record([attempt("2")])
    finally:
        await log.close()
        await store.close()
    reopened = await SqliteAttemptLog.open(path)
    try:
        recent = await reopened.recent()
        assert [a.fingerprint for a in recent] == ["fp-2", req("1").fingerprint, "fp-1"]
        assert (await reopened.summary())["a.test"].pages == 3
    finally:
        await reopened.close()


async def test_sqlite_log_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"not a database" * 500)
    with pytest.raises(StateError, match=str(path)):
        await SqliteAttemptLog.open(path)
