"""The embedded crawl's session store: ``login_sessions`` and ``crawl_sessions`` of its state file.

Its own connection to ``state.sqlite`` (WAL: the queue store's connection is not blocked for
longer than one short write), so a resumed crawl keeps its sessions and ``--fresh`` forgets
them with the rest of the state.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import orjson

from crawlfleet.sessions.protocols import CrawlSession, StoredSession
from crawlfleet.sqlitedb import ThreadedConnection, write

SCHEMA = """
CREATE TABLE IF NOT EXISTS login_sessions (
    domain TEXT PRIMARY KEY,
    cookies TEXT NOT NULL,
    version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS crawl_sessions (
    domain TEXT NOT NULL,
    id TEXT NOT NULL,
    proxy TEXT NOT NULL,
    tier INTEGER NOT NULL,
    profile TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    cookies TEXT NOT NULL,
    PRIMARY KEY (domain, id)
);
"""


class SqliteSessionStore:
    """A ``SessionStore`` and ``CrawlSessionStore`` in an SQLite file; calls run in a thread."""

    def __init__(self, db: ThreadedConnection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> SqliteSessionStore:
        return cls(await ThreadedConnection.open(path, SCHEMA, what="session store"))

    async def load(self, domain: str) -> StoredSession | None:
        row = await self._db.run(
            lambda db: db.execute(
                "SELECT cookies, version FROM login_sessions WHERE domain = ?", (domain,)
            ).fetchone()
        )
        return None if row is None else StoredSession(orjson.loads(row[0]), row[1])

    async def save(self, domain: str, cookies: Mapping[str, str]) -> StoredSession:
        stored = StoredSession(dict(cookies), secrets.token_hex(8))

        def upsert(connection: sqlite3.Connection) -> None:
            with write(connection) as db:
                db.execute(
                    "INSERT INTO login_sessions (domain, cookies, version) VALUES (?, ?, ?)"
                    " ON CONFLICT (domain) DO UPDATE SET cookies = excluded.cookies,"
                    " version = excluded.version",
                    (domain, orjson.dumps(dict(cookies)).decode(), stored.version),
                )

        await self._db.run(upsert)
        return stored

    async def drop(self, domain: str) -> None:
        def delete(connection: sqlite3.Connection) -> None:
            with write(connection) as db:
                db.execute("DELETE FROM login_sessions WHERE domain = ?", (domain,))

        await self._db.run(delete)

    async def crawl_sessions(self, domain: str) -> list[CrawlSession]:
        rows = await self._db.run(
            lambda db: db.execute(
                "SELECT id, domain, proxy, tier, profile, epoch, cookies FROM crawl_sessions"
                " WHERE domain = ?",
                (domain,),
            ).fetchall()
        )
        return [
            CrawlSession(
                str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), int(r[5]),
                orjson.loads(r[6]),
            )
            for r in rows
        ]  # fmt: skip

    async def put(self, session: CrawlSession) -> None:
        def upsert(connection: sqlite3.Connection) -> None:
            with write(connection) as db:
                db.execute(
                    "INSERT OR REPLACE INTO crawl_sessions"
                    " (domain, id, proxy, tier, profile, epoch, cookies)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (session.domain, session.id, session.proxy, session.tier, session.profile,
                     session.epoch, orjson.dumps(dict(session.cookies)).decode()),
                )  # fmt: skip

        await self._db.run(upsert)

    async def retire(self, domain: str, session_id: str) -> None:
        def delete(connection: sqlite3.Connection) -> None:
            with write(connection) as db:
                db.execute(
                    "DELETE FROM crawl_sessions WHERE domain = ? AND id = ?", (domain, session_id)
                )

        await self._db.run(delete)

    async def close(self) -> None:
        await self._db.close()
