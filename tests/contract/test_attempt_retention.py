"""The embedded attempt log's retention (``attempt_log_max_rows``) and ``crawlfleet vacuum``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.retention import PRUNE_EVERY
from crawlfleet.frontier.store_types import Report
from crawlfleet.records import Attempt, Outcome
from tests.contract.test_queue_store import FREE, LEASE_S, NO_BUDGET, T0, req
from tests.fixtures.cli import assert_one_line_error, run_cli


async def crawl_attempts(path: Path, pages: int, keep_attempts: int | None) -> None:
    """``pages`` requests added, leased and completed, one attempt each."""
    store = await SqliteQueueStore.open(path, keep_attempts=keep_attempts)
    try:
        await store.add([req(str(n)) for n in range(pages)], NO_BUDGET)
        n = 0
        while leases := await store.claim(100, T0 + n, LEASE_S, FREE, ("http",)):
            for lease in leases:
                r = lease.request
                row = Attempt(
                    url=r.url, fingerprint=r.fingerprint, domain=r.domain, worker="w",
                    outcome=Outcome.OK, status=200, bytes=1, latency_s=0.01, retry=0, at=T0 + n,
                )  # fmt: skip
                assert await store.complete(lease, Report(row), FREE)
                n += 1
        assert n == pages
    finally:
        await store.close()


def attempt_times(path: Path) -> list[float]:
    db = sqlite3.connect(path)
    try:
        return [row[0] for row in db.execute("SELECT at FROM attempts ORDER BY id")]
    finally:
        db.close()


async def test_the_store_keeps_the_newest_attempts_within_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    keep, pages = 1000, 3500
    await crawl_attempts(path, pages, keep_attempts=keep)
    kept = attempt_times(path)
    assert keep <= len(kept) < keep + PRUNE_EVERY
    assert kept == [T0 + n for n in range(pages - len(kept), pages)]  # the newest, in order


async def test_without_a_bound_every_attempt_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    await crawl_attempts(path, 1200, keep_attempts=None)
    assert len(attempt_times(path)) == 1200


async def test_vacuum_prunes_the_log_and_shrinks_the_files(tmp_path: Path) -> None:
    state = tmp_path / "state"
    await crawl_attempts(state / "state.sqlite", 3000, keep_attempts=None)
    before = (state / "state.sqlite").stat().st_size
    result = run_cli("vacuum", "--state", str(state), "--keep-attempts", "100", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2900 attempts deleted" in result.stdout
    assert "attempts" in result.stdout  # the per-table sizes
    kept = attempt_times(state / "state.sqlite")
    assert kept == [T0 + n for n in range(2900, 3000)]
    assert (state / "state.sqlite").stat().st_size < before
    # The store still opens and reads the vacuumed file.
    store = await SqliteQueueStore.open(state / "state.sqlite")
    try:
        assert (await store.counts()).done == 3000
    finally:
        await store.close()


async def test_vacuum_refuses_a_state_in_use_and_a_missing_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = await SqliteQueueStore.open(state / "state.sqlite")
    try:
        line = assert_one_line_error(run_cli("vacuum", "--state", str(state), cwd=tmp_path))
        assert "in use" in line
    finally:
        await store.close()
    line = assert_one_line_error(run_cli("vacuum", "--state", str(tmp_path / "no"), cwd=tmp_path))
    assert "no crawl state" in line
