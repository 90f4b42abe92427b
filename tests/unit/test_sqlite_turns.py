"""``TurnWriter``: the writes of the event loop's turns are committed together, at most every
``COMMIT_EVERY_S``, and each is in the file within that time."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from crawlfleet.errors import StateError
from crawlfleet.sqlite_turns import COMMIT_EVERY_S, TurnWriter


def rows(path: Path) -> int:
    with sqlite3.connect(path) as other:
        return int(other.execute("SELECT count(*) FROM t").fetchone()[0])


def test_busy_turns_share_a_commit_and_every_write_is_in_the_file_within_the_window(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE t (n INTEGER)")
    commits: list[str] = []
    db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    writer = TurnWriter(db, path, lambda exc: StateError(str(exc)))

    async def run() -> float:
        started = time.monotonic()
        for n in range(200):  # 200 turns, each with one write
            writer.execute("INSERT INTO t VALUES (?)", (n,))
            await asyncio.sleep(0)
        elapsed = time.monotonic() - started
        await asyncio.sleep(COMMIT_EVERY_S)
        assert rows(path) == 200  # the last turns' writes too, within the window
        return elapsed

    elapsed = asyncio.run(run())
    writer.close()
    assert len(commits) <= 2 + elapsed / COMMIT_EVERY_S
    assert rows(path) == 200
