"""State files of schema version 2 (no request payload) open, migrated in place."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.schema import SCHEMA, SCHEMA_VERSION
from tests.contract.test_queue_store import NO_BUDGET, T0, claim, req

# The requests table of schema version 2, as the previous release wrote it; its other
# tables and indexes are those of version 3.
V2_REQUESTS = """CREATE TABLE requests (
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
)"""


def v2_file(path: Path) -> None:
    """A version 2 crawl with one queued request of a.test and one dead one."""
    with sqlite3.connect(path) as db:
        db.execute(V2_REQUESTS)
        for statement in SCHEMA[1:]:
            db.execute(statement)
        db.executemany(
            "INSERT INTO requests (fp, state, domain, url, depth, errors, died_at)"
            " VALUES (?, ?, 'a.test', ?, 1, ?, ?)",
            [
                (req("old").fingerprint, 0, req("old").url, "[]", None),
                (req("dead").fingerprint, 3, req("dead").url, '["e"]', T0),
            ],
        )
        db.execute("INSERT INTO domains (domain, admitted) VALUES ('a.test', 2)")
        db.execute("PRAGMA user_version = 2")


async def test_a_version_2_file_reads_its_requests_as_plain_gets_and_takes_payloads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    v2_file(path)
    store = await SqliteQueueStore.open(path)
    try:
        (letter,) = await store.dead_letters()
        assert letter.request == replace(req("dead"), depth=1)
        (lease,) = await claim(store)
        assert lease.request == replace(req("old"), depth=1)
        assert (lease.request.data, lease.request.method, lease.request.body) == ({}, "GET", "")
        posted = replace(req("new"), data={"k": [1]}, method="POST", body="a=1", headers={"X": "y"})
        assert await store.add([posted], NO_BUDGET) == 1
        (new,) = await claim(store)
        assert new.request == posted
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
