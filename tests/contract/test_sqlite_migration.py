"""State files of the previous release (schema version 1) open, migrated in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.schema import SCHEMA_VERSION
from crawlfleet.frontier.store_types import DelaySource, Report
from crawlfleet.models import Lease
from crawlfleet.records import QueueCounts
from tests.contract.test_queue_store import (
    FREE,
    KINDS,
    NO_BUDGET,
    T0,
    attempt,
    claim,
    complete,
    names,
    req,
)

# The statements of schema version 1, as the previous release wrote them (queue store, then
# its attempt log, which created its own table in the same file).
V1_SCHEMA = """
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
V1_ATTEMPTS = """
CREATE TABLE IF NOT EXISTS attempts (
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
    error TEXT
);
CREATE INDEX IF NOT EXISTS attempts_url ON attempts (url, id);
"""
V1_ATTEMPT = (
    "INSERT INTO attempts (url, fingerprint, domain, worker, outcome, status, bytes,"
    " latency_s, retry, at, error) VALUES (?, ?, ?, 'w:1', ?, ?, 10, 0.1, 0, ?, NULL)"
)


def v1_file(path: Path) -> None:
    """A version 1 crawl in progress: a.test with one of each state, b.test one queued."""
    with sqlite3.connect(path) as db:
        db.executescript(V1_SCHEMA + V1_ATTEMPTS)
        rows = [
            # fp, state, domain, name, attempt, not_before, hand_outs, expires_at, errors, died
            (req("1").fingerprint, 2, "a.test", "1", 0, 0, 1, None, "[]", None),
            (req("2").fingerprint, 1, "a.test", "2", 0, 0, 1, T0 + 60, "[]", None),
            (req("3").fingerprint, 0, "a.test", "3", 1, T0 + 30, 1, None, '["e"]', None),
            (req("4").fingerprint, 3, "a.test", "4", 3, 0, 4, None, '["e","e","e","e"]', T0),
            (req("5").fingerprint, 0, "a.test", "5", 0, 0, 0, None, "[]", None),
            (req("1", "b.test").fingerprint, 0, "b.test", "1", 0, 0, 0, None, "[]", None),
            ("fp-redirected", 4, "", "", 0, 0, 0, None, "[]", None),
        ]
        db.executemany(
            "INSERT INTO requests (fp, state, domain, url, attempt, not_before, hand_outs,"
            " expires_at, errors, died_at) VALUES (?, ?, ?, 'https://' || ?3 || '/' || ?4,"
            " ?5, ?6, ?7, ?8, ?9, ?10)",
            rows,
        )
        db.execute("INSERT INTO domains VALUES ('a.test', ?, 5, 2.0, 2)", (T0 + 1,))
        db.execute("INSERT INTO domains VALUES ('b.test', 0, 1, NULL, NULL)")
        db.execute(V1_ATTEMPT, ("https://a.test/1", req("1").fingerprint, "a.test", "ok", 200, T0))
        db.execute("PRAGMA user_version = 1")


async def test_a_version_1_file_opens_with_its_queue_policy_and_attempts(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    v1_file(path)
    store = await SqliteQueueStore.open(path)
    try:
        assert await store.counts() == QueueCounts(queued=3, leased=1, done=1, dead=1, seen=7)
        view = await store.domain("a.test", FREE)
        assert (view.base_delay_s, view.delay_source, view.max_in_flight) == (
            2.0,
            DelaySource.DEFAULT,  # the crawl-wide delay: its layer (FREE's)
            2,
        )
        assert (view.level, view.ready_at, view.queued, view.in_flight) == (0, T0 + 1, 2, 1)
        leased = req("2")
        token = f"{leased.fingerprint}:1"
        assert await complete(store, Lease(leased, token, T0 + 60), at=T0 + 2)
        assert sorted(names(await claim(store, now=T0 + 4))) == ["1", "5"]
        assert await store.next_ready_at(T0 + 5, KINDS) == T0 + 30
        (letter,) = await store.dead_letters()
        assert letter.errors == ("e",) * 4
        await store.set_delay("a.test", 3.0, DelaySource.ROBOTS)
    finally:
        await store.close()

    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        rows = db.execute("SELECT fingerprint, fetcher, detail FROM attempts ORDER BY id")
        assert rows.fetchall() == [
            (req("1").fingerprint, "http", None),
            (req("2").fingerprint, "http", None),
        ]
    again = await SqliteQueueStore.open(path)
    try:
        assert (await again.domain("a.test", FREE)).delay_source is DelaySource.ROBOTS
        assert (await again.stats()).get("attempts") == 1  # counted from the migration on
    finally:
        await again.close()


async def test_a_file_the_old_attempt_log_created_first_gets_the_new_columns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(V1_ATTEMPTS)
        db.execute(V1_ATTEMPT, ("https://a.test/0", "fp-0", "a.test", "ok", 200, T0))
    store = await SqliteQueueStore.open(path)
    try:
        await store.add([req("1", fetcher="browser")], NO_BUDGET)
        (lease,) = await claim(store, kinds=("browser",))
        assert await store.complete(lease, Report(attempt(lease, detail="why")), FREE)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT fingerprint, fetcher, detail FROM attempts ORDER BY id")
        assert rows.fetchall() == [("fp-0", "http", None), (req("1").fingerprint, "browser", "why")]
