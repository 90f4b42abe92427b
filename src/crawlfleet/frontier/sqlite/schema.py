"""The SQLite state file of an embedded crawl: its schema, its migration and how it is opened.

Tables::

    requests   one row per fingerprint ever seen
               seq (admission order), fp, state (see below), domain, url, depth, priority,
               attempt, fetcher (its lane), parent, not_before (epoch s, retries), hand_outs
               (lease counter: the token of the current lease is "{fp}:{hand_outs}"),
               expires_at (lease expiry, epoch s), errors (JSON list of error texts),
               died_at (epoch s); the request's payload: data (its context, a JSON
               object), method, body (text), headers (a JSON object)
    domains    one row per domain: ready_at (epoch s), admitted (budget count), and the
               policy record (``frontier.policy.PolicyRecord``): delay_s (base delay, NULL =
               the crawl default) and delay_source, max_in_flight (NULL = default), level,
               block_window ("b"/"o"/a refused URL's kind mark per judged response),
               streak, cooldown_until,
               block_reason, retry_after_until, strategy (JSON object of strings); its
               counters, its ``crawlfleet.counters`` as a JSON object (the crawl's are
               their sums); and drift, parser -> its drift test (``frontier/drift.py``,
               ``DriftTest.to_json``) as a JSON object
    meta       key, value: ``started_at`` (epoch s)
    attempts   the attempt log, one row per lease end or expired lease, written in the
               transaction of the lease change: url, fingerprint, domain, worker, outcome,
               status, bytes, latency_s, retry, at, error, fetcher, detail, session_id,
               proxy_id, tier, screenshot (the columns
               ``monitoring.attempt_log.SqliteAttemptLog`` reads)
    known      one row per fetched URL (``store_types.Visit``), by fp: etag, last_modified,
               content_hash (of its last 200), interval_s, next_at (epoch s; NULL: not
               due again until its next visit is recorded), priority (of its revisit),
               item_types (JSON list: the types its last parse yielded), visited_at (epoch s)

``state``: 0 queued, 1 leased, 2 done, 3 dead, 4 seen only (a purged dead letter; schema 1
also used it for ``mark_seen``). Partial indexes keep each hot query on a small index:
queued rows by lane (domain, fetcher) then (priority DESC, seq), leases by expiry, dead
letters by death time.

Schema versions (``PRAGMA user_version``): 1 had no lanes, policy record, counters, meta,
nor the attempt columns fetcher and detail (the attempt log created its own table); 2 had
no request payload (data, method, body, headers); 3 had no ``known`` table (added by
its own step, ``KNOWN_SCHEMA``). ``open_queue_db`` migrates an older file
in place: a version 1 file keeps a stored delay as the base delay with source ``config``;
requests stored before version 3 read as GETs without context, body or headers; version 3
had no attempt columns session_id, proxy_id, tier (``ROUTE_COLUMNS``) and screenshot (NULL
in older rows); version 4 had no ``domains.drift`` (the drift tests lived in each process).

The file is guarded by an ``fcntl`` lock on a sibling ``<name>.lock`` file
(``sqlitedb.FileLock``), so two crawls cannot share one state file; other connections of the
same process (the attempt log's readers) are fine. The statements the store runs are in ``statements.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet import sqlitedb
from crawlfleet.errors import StateError

QUEUED, LEASED, DONE, DEAD, SEEN = 0, 1, 2, 3, 4
SCHEMA_VERSION = 5

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY,
    fp TEXT NOT NULL UNIQUE,
    state INTEGER NOT NULL,
    domain TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL DEFAULT '',
    depth INTEGER NOT NULL DEFAULT 0,
    priority INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    fetcher TEXT NOT NULL DEFAULT 'http',
    parent TEXT,
    not_before REAL NOT NULL DEFAULT 0,
    hand_outs INTEGER NOT NULL DEFAULT 0,
    expires_at REAL,
    errors TEXT NOT NULL DEFAULT '[]',
    died_at REAL,
    data TEXT NOT NULL DEFAULT '{}',
    method TEXT NOT NULL DEFAULT 'GET',
    body TEXT NOT NULL DEFAULT '',
    headers TEXT NOT NULL DEFAULT '{}'
)""",
    """CREATE INDEX IF NOT EXISTS requests_lanes
    ON requests (domain, fetcher, priority DESC, seq, not_before) WHERE state = 0""",
    "CREATE INDEX IF NOT EXISTS requests_leased ON requests (expires_at) WHERE state = 1",
    "CREATE INDEX IF NOT EXISTS requests_dead ON requests (died_at, seq) WHERE state = 3",
    """CREATE TABLE IF NOT EXISTS domains (
    domain TEXT PRIMARY KEY,
    ready_at REAL NOT NULL DEFAULT 0,
    admitted INTEGER NOT NULL DEFAULT 0,
    delay_s REAL,
    max_in_flight INTEGER,
    delay_source TEXT NOT NULL DEFAULT 'config',
    level INTEGER NOT NULL DEFAULT 0,
    block_window TEXT NOT NULL DEFAULT '',
    streak INTEGER NOT NULL DEFAULT 0,
    cooldown_until REAL NOT NULL DEFAULT 0,
    block_reason TEXT NOT NULL DEFAULT '',
    retry_after_until REAL NOT NULL DEFAULT 0,
    strategy TEXT NOT NULL DEFAULT '{}',
    counters TEXT NOT NULL DEFAULT '{}',
    drift TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    """CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    domain TEXT NOT NULL,
    worker TEXT NOT NULL,
    outcome TEXT NOT NULL,
    status INTEGER,
    bytes INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    retry INTEGER NOT NULL,
    at REAL NOT NULL,
    error TEXT,
    fetcher TEXT NOT NULL DEFAULT 'http',
    detail TEXT,
    session_id TEXT,
    proxy_id TEXT,
    tier INTEGER,
    screenshot TEXT
)""",
    "CREATE INDEX IF NOT EXISTS attempts_url ON attempts (url, id)",
)

# Version 4 adds these columns: the crawl session, proxy id and tier of each attempt (runtime/fetching/proxy_link.py) and
# the browser fetcher's screenshot of a failed page.
ROUTE_COLUMNS = ("session_id TEXT", "proxy_id TEXT", "tier INTEGER")
SCREENSHOT_COLUMN = "screenshot TEXT"

# Version 4 also adds the known URLs and their next visit (decision 0014).
KNOWN_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS known (
    fp TEXT PRIMARY KEY,
    etag TEXT NOT NULL DEFAULT '',
    last_modified TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL DEFAULT '',
    interval_s REAL,
    next_at REAL,
    priority INTEGER NOT NULL DEFAULT 0,
    item_types TEXT NOT NULL DEFAULT '[]',
    visited_at REAL NOT NULL DEFAULT 0
) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS known_due ON known (next_at) WHERE next_at IS NOT NULL",
)

# Columns an older file lacks, by table (the attempt log's table may predate the store's).
ADDED_COLUMNS = {
    "requests": (
        "data TEXT NOT NULL DEFAULT '{}'",
        "method TEXT NOT NULL DEFAULT 'GET'",
        "body TEXT NOT NULL DEFAULT ''",
        "headers TEXT NOT NULL DEFAULT '{}'",
    ),
    "domains": (
        "delay_source TEXT NOT NULL DEFAULT 'config'",
        "level INTEGER NOT NULL DEFAULT 0",
        "block_window TEXT NOT NULL DEFAULT ''",
        "streak INTEGER NOT NULL DEFAULT 0",
        "cooldown_until REAL NOT NULL DEFAULT 0",
        "block_reason TEXT NOT NULL DEFAULT ''",
        "retry_after_until REAL NOT NULL DEFAULT 0",
        "strategy TEXT NOT NULL DEFAULT '{}'",
        "counters TEXT NOT NULL DEFAULT '{}'",
        "drift TEXT NOT NULL DEFAULT '{}'",
    ),
    "attempts": (
        "fetcher TEXT NOT NULL DEFAULT 'http'",
        "detail TEXT",
        *ROUTE_COLUMNS,
        SCREENSHOT_COLUMN,
    ),
}
DROPPED_INDEXES = ("requests_queued",)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def _add_columns(db: sqlite3.Connection, table: str, added: tuple[str, ...]) -> None:
    """Add the columns an existing ``table`` lacks (a new file gets them from ``SCHEMA``)."""
    have = _columns(db, table)
    for column in added:
        if have and column.split()[0] not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def _create(db: sqlite3.Connection, version: int) -> None:
    """Bring a version 0 (new), 1, 2, 3 or 4 file to ``SCHEMA_VERSION``, in one transaction."""
    with sqlitedb.write(db):
        if version == 1:
            for index in DROPPED_INDEXES:
                db.execute(f"DROP INDEX IF EXISTS {index}")
        for table, added in ADDED_COLUMNS.items():
            _add_columns(db, table, added)
        for statement in SCHEMA:
            db.execute(statement)
        for statement in KNOWN_SCHEMA:
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def open_queue_db(path: Path) -> tuple[sqlite3.Connection, sqlitedb.FileLock]:
    """The locked queue connection; StateError if the file is locked, corrupt or foreign."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = sqlitedb.FileLock(path)
    try:
        db = sqlitedb.connect(path, "", what="state file", cache_mib=sqlitedb.STATE_CACHE_MIB)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, 1, 2, 3, 4, SCHEMA_VERSION):
                raise StateError(
                    f"state file {path} has schema version {version}, expected {SCHEMA_VERSION}"
                )
            if version != SCHEMA_VERSION:
                _create(db, version)
        except sqlite3.Error as exc:
            db.close()
            raise StateError(f"state file {path} is not a usable crawl state: {exc}") from None
        except BaseException:
            db.close()
            raise
    except BaseException:
        lock.release()
        raise
    return db, lock
