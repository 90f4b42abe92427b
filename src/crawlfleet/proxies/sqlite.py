"""The embedded crawl's proxy states: the ``proxies`` table of its state file.

Its own connection to ``state.sqlite`` (WAL), like ``sessions.sqlite``: a resumed crawl keeps
its quarantines and ``--fresh`` forgets them with the rest of the state. Each change reads and
writes one row in one ``BEGIN IMMEDIATE`` transaction, so two processes on one state file
cannot lose each other's update.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from crawlfleet.errors import StateError
from crawlfleet.proxies.protocols import Cooldown, ProxyState, penalized, succeeded
from crawlfleet.sqlitedb import connect, write

T = TypeVar("T")

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

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self._path = path
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path) -> SqliteProxyStates:
        db = await asyncio.to_thread(
            connect, path, SCHEMA, what="state file", check_same_thread=False
        )
        return cls(db, path)

    async def register(self, proxy: str, tier: int, label: str) -> None:
        await self._change(proxy, lambda state: replace(state, tier=tier, label=label))

    async def all(self) -> list[ProxyState]:
        rows = await self._run(
            lambda: self._db.execute(f"SELECT {_COLUMNS} FROM proxies ORDER BY id").fetchall()
        )
        return [ProxyState(*row) for row in rows]

    async def load(self, ids: list[str]) -> Mapping[str, ProxyState]:
        rows = await self._run(
            lambda: self._db.execute(f"SELECT {_COLUMNS} FROM proxies").fetchall()
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
        await self._run(self._db.close)

    async def _change(self, proxy: str, rule: Callable[[ProxyState], ProxyState]) -> ProxyState:
        def change() -> ProxyState:
            with write(self._db) as db:
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

        return await self._run(change)

    async def _run(self, call: Callable[[], T]) -> T:
        async with self._lock:
            try:
                return await asyncio.to_thread(call)
            except sqlite3.Error as exc:
                raise StateError(f"proxy states in {self._path}: {exc}") from None
