"""How many rows the embedded crawl's attempt log keeps, and ``vacuum`` of a state directory.

The ``attempts`` table of the state file gains one row per lease end: left alone, a crawl of
1,000,000 pages keeps 1,100,000 rows (~190 MB with its index), more than its items. The
store keeps the newest ``attempt_log_max_rows`` (a setting): every ``PRUNE_EVERY`` attempts
it writes, in the transaction of that lease end, it deletes the rows older than the newest
``keep_rows``. Row ids grow by one per attempt (``INTEGER PRIMARY KEY``), so "older" is one
range delete on the primary key. What the log feeds keeps working on the rows kept: the
latest attempts (``status``, the dashboard) and the summary's top parse errors (the most
frequent among the rows kept); the counts and sums come from the store's counters.

``vacuum`` does the same to a stopped crawl's state file on demand (``crawlfleet vacuum``),
then gives the freed pages back to the file system (``VACUUM``) for both databases and
refreshes the query planner's statistics (``PRAGMA optimize``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from crawlfleet.errors import StateError
from crawlfleet.frontier.sqlite.schema import open_queue_db

PRUNE_EVERY = 1000
"""Attempts written between two prunes of the attempt log."""

NEWEST = "SELECT max(id) FROM attempts"
DROP_OLDER = "DELETE FROM attempts WHERE id <= ?"
SIZES = "SELECT name, sum(pgsize) FROM dbstat GROUP BY name"


class AttemptRetention:
    """Counts the attempts a store writes and prunes the log every ``PRUNE_EVERY`` of them."""

    def __init__(self, keep_rows: int | None) -> None:
        self.keep_rows = keep_rows
        self._since_prune = 0

    def written(self, db: sqlite3.Connection, newest_id: int | None, count: int = 1) -> None:
        """``count`` attempts were written, the last with row id ``newest_id``; inside the
        transaction that wrote them."""
        if self.keep_rows is None or newest_id is None:
            return
        self._since_prune += count
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
            db.execute(DROP_OLDER, (newest_id - self.keep_rows,))


def prune(db: sqlite3.Connection, keep_rows: int) -> int:
    """Delete all but the newest ``keep_rows`` attempts; how many went."""
    newest = db.execute(NEWEST).fetchone()[0]
    if newest is None:
        return 0
    deleted: int = db.execute(DROP_OLDER, (newest - keep_rows,)).rowcount
    return deleted


@dataclass(frozen=True, slots=True)
class VacuumReport:
    """What ``vacuum`` did: attempts deleted, bytes on disk before and after (all files)."""

    pruned: int
    before_bytes: int
    after_bytes: int


def disk_bytes(database: Path) -> int:
    """The size of a database with its ``-wal`` file (0 for files that do not exist)."""
    total = 0
    for suffix in ("", "-wal"):
        path = database.with_name(database.name + suffix)
        if path.exists():
            total += path.stat().st_size
    return total


def table_bytes(database: Path) -> dict[str, int]:
    """Bytes per table and index of a database (``dbstat``), largest first."""
    db = sqlite3.connect(database.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        found = {str(name): int(size) for name, size in db.execute(SIZES)}
    finally:
        db.close()
    return dict(sorted(found.items(), key=lambda pair: -pair[1]))


def vacuum(state_file: Path, items_file: Path, keep_rows: int | None) -> VacuumReport:
    """Prune the attempt log to ``keep_rows`` (None: keep all), then ``VACUUM`` both files.

    Takes the state file's lock: ``StateError`` while a crawl (or another command) holds it.
    """
    if not state_file.is_file():
        raise StateError(f"no crawl state at {state_file}")
    files = [path for path in (state_file, items_file) if path.is_file()]
    before = sum(disk_bytes(path) for path in files)
    db, lock = open_queue_db(state_file)
    try:
        pruned = prune(db, keep_rows) if keep_rows is not None else 0
        _compact(db)
        if items_file.is_file():
            items = sqlite3.connect(items_file, timeout=5.0, isolation_level=None)
            try:
                _compact(items)
            finally:
                items.close()
    except sqlite3.Error as exc:
        raise StateError(f"cannot vacuum {state_file.parent}: {exc}") from None
    finally:
        db.close()
        lock.release()
    return VacuumReport(pruned, before, sum(disk_bytes(path) for path in files))


def _compact(db: sqlite3.Connection) -> None:
    db.execute("VACUUM")
    db.execute("PRAGMA optimize")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
