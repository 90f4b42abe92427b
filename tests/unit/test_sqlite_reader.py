"""The read-only reader of a state file shows what the store holding the file shows."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from crawlfleet.errors import StateError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.reader import SqliteStateReader
from crawlfleet.frontier.store_types import Budget, DelaySource, DomainPolicy, Report
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, AttemptFilter, Outcome
from crawlfleet.sqlite_turns import COMMIT_EVERY_S

T0 = 1_000_000.0
POLICY = DomainPolicy(delay_s=0.0, max_in_flight=3)


def req(n: int, domain: str) -> CrawlRequest:
    return CrawlRequest(f"https://{domain}/{n}", f"fp-{domain}-{n}", domain)


def attempt(lease: Lease, outcome: Outcome, status: int | None, at: float) -> Attempt:
    r = lease.request
    return Attempt(
        url=r.url, fingerprint=r.fingerprint, domain=r.domain, worker="w", outcome=outcome,
        status=status, bytes=10, latency_s=0.2, retry=r.attempt, at=at,
        error=None if outcome is Outcome.OK else f"HTTP {status}",
    )  # fmt: skip


async def busy_store(path: Path) -> SqliteQueueStore:
    """A store mid-crawl: two domains, some done, one dead, some leased, a robots delay."""
    store = await SqliteQueueStore.open(path, policy=POLICY)
    await store.start(T0)
    await store.add([req(n, d) for d in ("a.test", "b.test") for n in range(6)], Budget())
    await store.add([req(n, "a.test") for n in range(6, 9)], Budget())
    await store.set_delay("b.test", 2.5, DelaySource.ROBOTS)
    leases = await store.claim(6, T0 + 1, 60.0, ("http",))
    for lease in leases[:3]:
        await store.complete(lease, Report(attempt(lease, Outcome.OK, 200, T0 + 2)))
    dead = leases[3]
    await store.bury(dead, "HTTP 500", T0 + 2, Report(attempt(dead, Outcome.DEAD, 500, T0 + 2)))  # fmt: skip
    return store


async def test_the_reader_sees_the_stores_counts_stats_and_domains_while_it_holds_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    store = await busy_store(path)
    reader = SqliteStateReader.open(path, POLICY)
    try:
        await asyncio.sleep(COMMIT_EVERY_S)  # the store commits at most this often
        assert await reader.counts() == await store.counts()
        assert await reader.stats() == await store.stats()
        assert await reader.domains(10) == await store.domains(10)
        assert await reader.dead_letters() == await store.dead_letters()
        # the store keeps writing while the reader is open
        more = await store.claim(1, T0 + 5, 60.0, ("http",))
        await store.complete(more[0], Report(attempt(more[0], Outcome.OK, 200, T0 + 6)))
        await asyncio.sleep(COMMIT_EVERY_S)  # the store commits at most this often
        assert await reader.counts() == await store.counts()
        assert await reader.domains(1) == await store.domains(1)
    finally:
        await reader.close()
        await store.close()


async def test_attempts_are_filtered_by_domain_outcome_and_status_newest_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    store = await busy_store(path)
    await store.close()
    reader = SqliteStateReader.open(path, POLICY)
    try:
        every = await reader.attempts(AttemptFilter())
        assert len(every) == 4
        assert [a.at for a in every] == sorted((a.at for a in every), reverse=True)
        dead = await reader.attempts(AttemptFilter(outcome="dead"))
        assert [(a.status, a.error) for a in dead] == [(500, "HTTP 500")]
        assert await reader.attempts(AttemptFilter(status=500, outcome="ok")) == []
        by_domain = await reader.attempts(AttemptFilter(domain="a.test"), limit=2)
        assert len(by_domain) == 2
        assert {a.domain for a in by_domain} == {"a.test"}
    finally:
        await reader.close()


async def test_the_reader_takes_no_lock_and_changes_no_byte(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    await (await busy_store(path)).close()
    before = path.read_bytes()
    reader = SqliteStateReader.open(path, POLICY)
    try:
        assert (await reader.counts()).seen == 15
        await reader.domains()
        await reader.attempts(AttemptFilter(domain="b.test"))
        store = await SqliteQueueStore.open(
            path, policy=POLICY
        )  # the lock is free while the reader reads
        await store.close()
    finally:
        await reader.close()
    assert path.read_bytes() == before


def test_a_missing_or_foreign_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="no crawl state"):
        SqliteStateReader.open(tmp_path / "none.sqlite", POLICY)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.close()
    with pytest.raises(StateError, match="schema version 0"):
        SqliteStateReader.open(other, POLICY)
