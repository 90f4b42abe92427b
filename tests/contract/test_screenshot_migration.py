"""SQLite schema step 4: a version 3 state file gains the attempt column ``screenshot``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.schema import SCHEMA, SCHEMA_VERSION
from crawlfleet.frontier.store_types import Report, Signal
from crawlfleet.monitoring.attempt_log import SqliteAttemptLog
from crawlfleet.records import Outcome
from tests.contract.test_queue_store import FREE, NO_BUDGET, attempt, claim, req


def v3_file(path: Path) -> None:
    """A version 3 state file: the attempts table without ``screenshot``."""
    with sqlite3.connect(path) as db:
        for statement in SCHEMA:
            db.execute(statement.replace(",\n    screenshot TEXT", ""))
        db.execute("PRAGMA user_version = 3")


async def test_a_version_3_file_records_screenshots_after_its_step(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    v3_file(path)
    with sqlite3.connect(path) as db:
        assert "screenshot" not in {row[1] for row in db.execute("PRAGMA table_info(attempts)")}
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        await store.add([req("a")], NO_BUDGET)
        (lease,) = await claim(store)
        shot = str(tmp_path / "screenshots" / "a-0.png")
        failed = attempt(lease, Outcome.FAILED, 500, screenshot=shot, fetcher="browser")
        assert await store.complete(lease, Report(failed, Signal.NONE))
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (5,)
    log = await SqliteAttemptLog.open(path)
    try:
        (logged,) = await log.recent()
    finally:
        await log.close()
    assert (logged.screenshot, logged.fetcher) == (shot, "browser")
