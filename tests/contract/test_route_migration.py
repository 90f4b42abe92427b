"""A version 3 state file gains the attempt columns session_id, proxy_id and tier (version 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.schema import ROUTE_COLUMNS
from crawlfleet.frontier.store_types import Report
from crawlfleet.monitoring.attempt_log import SqliteAttemptLog
from tests.contract.test_queue_store import FREE, NO_BUDGET, attempt, claim, req


def make_version_3(path: Path) -> None:
    """Turn a new state file into what version 3 wrote: no route columns."""
    with sqlite3.connect(path) as db:
        for column in ROUTE_COLUMNS:
            db.execute(f"ALTER TABLE attempts DROP COLUMN {column.split()[0]}")
        db.execute(
            "INSERT INTO attempts (url, fingerprint, domain, worker, outcome, status, bytes,"
            " latency_s, retry, at) VALUES ('https://a.test/old', 'fp', 'a.test', 'w', 'ok',"
            " 200, 1, 0.1, 0, 1)"
        )
        db.execute("PRAGMA user_version = 3")


async def test_old_attempts_read_without_a_route_and_new_ones_keep_theirs(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    await (await SqliteQueueStore.open(path)).close()
    make_version_3(path)
    store = await SqliteQueueStore.open(path)
    await store.add([req("new")], NO_BUDGET)
    (lease,) = await claim(store)
    routed = attempt(lease, session_id="s1", proxy_id="px-0123456789", tier=2)
    await store.complete(lease, Report(routed), FREE)
    await store.close()
    log = await SqliteAttemptLog.open(path)
    try:
        found = {a.url: a for a in await log.recent()}
    finally:
        await log.close()
    old, new = found["https://a.test/old"], found["https://a.test/new"]
    assert (old.session_id, old.proxy_id, old.tier) == (None, None, None)
    assert (new.session_id, new.proxy_id, new.tier) == ("s1", "px-0123456789", 2)
