"""The embedded crawl's proxy states: the ``proxies`` table of its state file.

Its own connection to ``state.sqlite`` (WAL), like ``sessions.sqlite``: a resumed crawl keeps
its quarantines and ``--fresh`` forgets them with the rest of the state. Each change reads and
writes one row in one ``BEGIN IMMEDIATE`` transaction, so two processes on one state file
cannot lose each other's update.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from crawlfleet.proxies.protocols import Cooldown, ProxyState, penalized, succeeded
from crawlfleet.sqlitedb import ThreadedConnection, write

SCHEMA = """
CREATE TABLE IF NOT EXISTS proxies (
    id TEXT PRIMARY KEY,
    successes INTEGER NOT NULL,
    bans INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    strikes INTEGER NOT NULL,
    quarantined_until REAL NOT NULL,
    last_used REAL NOT NULL,
    latency_s REAL NOT NULL,
    tier INTEGER NOT NULL DEFAULT 0,
    label TEXT NOT NULL DEFAULT ''
);
"""
_COLUMNS = (
    "id, successes, bans, errors, strikes, quarantined_until, last_used, latency_s, tier, label"
)


class SqliteProxyStates:
    """A ``ProxyStateStore`` in an SQLite file; every call runs in a worker thread."""

    def __init__(self, db: ThreadedConnection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> SqliteProxyStates:
        return cls(await ThreadedConnection.open(path, SCHEMA, what="proxy states"))

    async def register(self, proxy: str, tier: int, label: str) -> None:
        await self._change(proxy, lambda state: replace(state, tier=tier, label=label))

    async def all(self) -> list[ProxyState]:
        rows = await self._db.run(
            lambda db: db.execute(f"SELECT {_COLUMNS} FROM proxies ORDER BY id").fetchall()
        )
        return [ProxyState(*row) for row in rows]

    async def load(self, ids: list[str]) -> Mapping[str, ProxyState]:
        rows = await self._db.run(
            lambda db: db.execute(f"SELECT {_COLUMNS} FROM proxies").fetchall()
        )
        found = {row[0]: ProxyState(*row) for row in rows}
        return {proxy: found.get(proxy, ProxyState(proxy)) for proxy in ids}

    async def success(self, proxy: str, now: float, latency_s: float, count: int = 1) -> ProxyState:
        return await self._change(proxy, lambda state: succeeded(state, now, latency_s, count))

    async def penalize(
        self, proxy: str, now: float, *, error: bool, quarantine: bool, cooldown: Cooldown
    ) -> ProxyState:
        return await self._change(
            proxy,
            lambda state: penalized(
                state, now, error=error, quarantine=quarantine, cooldown=cooldown
            ),
        )

    async def close(self) -> None:
        await self._db.close()

    async def _change(self, proxy: str, rule: Callable[[ProxyState], ProxyState]) -> ProxyState:
        def change(connection: sqlite3.Connection) -> ProxyState:
            with write(connection) as db:
                row = db.execute(
                    f"SELECT {_COLUMNS} FROM proxies WHERE id = ?", (proxy,)
                ).fetchone()
                state = rule(ProxyState(*row) if row else ProxyState(proxy))
                db.execute(
                    f"INSERT OR REPLACE INTO proxies ({_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (state.id, state.successes, state.bans, state.errors, state.strikes,
                     state.quarantined_until, state.last_used, state.latency_s, state.tier,
                     state.label),
                )  # fmt: skip
                return state

        return await self._db.run(change)
