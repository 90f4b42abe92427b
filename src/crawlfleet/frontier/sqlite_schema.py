"""The SQLite state file of an embedded crawl: its schema, statements and how it is opened.

Tables::

    requests   one row per fingerprint ever seen
               seq (admission order), fp, state (see below), domain, url, depth, priority,
               attempt, fetcher, parent, not_before (epoch s, retries), hand_outs (lease
               counter: the token of the current lease is "{fp}:{hand_outs}"), expires_at
               (lease expiry, epoch s), errors (JSON list of error texts), died_at (epoch s)
    domains    domain, ready_at (epoch s), admitted (budget count), delay_s and
               max_in_flight (policy override, NULL = the crawl default)

``state``: 0 queued, 1 leased, 2 done, 3 dead, 4 seen only (``mark_seen``, or a purged
dead letter). Partial indexes keep each hot query on a small index: queued rows by
(domain, priority DESC, seq), leases by expiry, dead letters by death time.

The file is guarded by an ``fcntl`` lock on a sibling ``<name>.lock`` file, so two crawls
cannot share one state file; other connections of the same process (the attempt log) are fine.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from crawlfleet import sqlitedb
from crawlfleet.errors import StateError

QUEUED, LEASED, DONE, DEAD, SEEN = 0, 1, 2, 3, 4
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
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
    died_at REAL
);
CREATE INDEX IF NOT EXISTS requests_queued
    ON requests (domain, priority DESC, seq, not_before) WHERE state = 0;
CREATE INDEX IF NOT EXISTS requests_leased ON requests (expires_at) WHERE state = 1;
CREATE INDEX IF NOT EXISTS requests_dead ON requests (died_at, seq) WHERE state = 3;
CREATE TABLE IF NOT EXISTS domains (
    domain TEXT PRIMARY KEY,
    ready_at REAL NOT NULL DEFAULT 0,
    admitted INTEGER NOT NULL DEFAULT 0,
    delay_s REAL,
    max_in_flight INTEGER
) WITHOUT ROWID;
"""

REQUEST_COLUMNS = "fp, url, domain, depth, priority, attempt, fetcher, parent"

FIND_SEEN = "SELECT fp FROM requests WHERE fp IN (SELECT value FROM json_each(?))"
INSERT_QUEUED = (
    "INSERT INTO requests (fp, url, domain, depth, priority, attempt, fetcher, parent, state)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
INSERT_SEEN = "INSERT OR IGNORE INTO requests (fp, state) VALUES (?, 4)"
SET_ADMITTED = (
    "INSERT INTO domains (domain, admitted) VALUES (?, ?)"
    " ON CONFLICT (domain) DO UPDATE SET admitted = excluded.admitted"
)
SET_READY = (
    "INSERT INTO domains (domain, ready_at) VALUES (?, ?)"
    " ON CONFLICT (domain) DO UPDATE SET ready_at = excluded.ready_at"
)
SET_POLICY = (
    "INSERT INTO domains (domain, delay_s, max_in_flight) VALUES (?, ?, ?)"
    " ON CONFLICT (domain) DO UPDATE"
    " SET delay_s = excluded.delay_s, max_in_flight = excluded.max_in_flight"
)
TAKE = (
    f"SELECT seq, not_before, hand_outs, {REQUEST_COLUMNS} FROM requests"
    " WHERE state = 0 AND domain = ? AND not_before <= ?"
    " ORDER BY priority DESC, seq LIMIT 1"
)
LEASE = "UPDATE requests SET state = 1, hand_outs = ?, expires_at = ? WHERE seq = ?"
EARLIEST = "SELECT min(not_before) FROM requests WHERE state = 0 AND domain = ?"
COMPLETE = (
    "UPDATE requests SET state = 2, expires_at = NULL WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
RETRY = (
    "UPDATE requests SET state = 0, attempt = attempt + 1, not_before = ?, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?) WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
BURY = (
    "UPDATE requests SET state = 3, died_at = ?, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?) WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
# Expired leases (?1 = now) count as failed attempts: past ?2 = max_retries they die (at
# their lease's expiry), the others go back to their queue; ?3 is the error recorded.
EXPIRED_BY_DOMAIN = (
    "SELECT domain, sum(attempt < ?2), sum(attempt >= ?2) FROM requests"
    " WHERE state = 1 AND expires_at < ?1 GROUP BY domain"
)
REAP_DEAD = (
    "UPDATE requests SET state = 3, died_at = expires_at, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?3) WHERE state = 1 AND expires_at < ?1"
    " AND attempt >= ?2"
)
REAP = (
    "UPDATE requests SET state = 0, attempt = attempt + 1, not_before = 0, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?3) WHERE state = 1 AND expires_at < ?1"
    " AND attempt < ?2"
)
DEAD_LETTERS = (
    f"SELECT {REQUEST_COLUMNS}, errors, died_at FROM requests WHERE state = 3"
    " ORDER BY died_at, seq LIMIT ? OFFSET ?"
)
# Dead-letter selections: all of them (?1 IS NULL) or those in a JSON list of fingerprints.
DEAD_WHERE = "state = 3 AND (?1 IS NULL OR fp IN (SELECT value FROM json_each(?1)))"
DEAD_BY_DOMAIN = f"SELECT domain, count(*) FROM requests WHERE {DEAD_WHERE} GROUP BY domain"
REQUEUE_DEAD = (
    "UPDATE requests SET state = 0, attempt = 0, not_before = 0, errors = '[]', died_at = NULL"
    f" WHERE {DEAD_WHERE}"
)
PURGE_DEAD = f"UPDATE requests SET state = 4, errors = '[]', died_at = NULL WHERE {DEAD_WHERE}"

COUNT_BY_STATE = "SELECT state, count(*) FROM requests GROUP BY state"
LOAD_DOMAINS = "SELECT domain, ready_at, admitted, delay_s, max_in_flight FROM domains"
LOAD_QUEUED = (
    "SELECT domain, count(*), sum(not_before > 0), min(not_before) FROM requests"
    " WHERE state = 0 GROUP BY domain"
)
LOAD_LEASED = "SELECT domain, count(*) FROM requests WHERE state = 1 GROUP BY domain"


class FileLock:
    """An exclusive ``flock`` on ``<path>.lock``, held until ``release``."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StateError(
                f"state file {path} is in use by another crawl (lock {self.path} is held)"
            ) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def connect(path: Path, schema: str) -> sqlite3.Connection:
    """An autocommit WAL connection to the state file with ``schema`` created."""
    return sqlitedb.connect(path, schema, what="state file")


def open_queue_db(path: Path) -> tuple[sqlite3.Connection, FileLock]:
    """The locked queue connection; StateError if the file is locked, corrupt or foreign."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        db = connect(path, SCHEMA)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            db.close()
            raise StateError(
                f"state file {path} has schema version {version}, expected {SCHEMA_VERSION}"
            )
    except BaseException:
        lock.release()
        raise
    return db, lock
