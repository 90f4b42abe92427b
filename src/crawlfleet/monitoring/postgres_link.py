"""The one PostgreSQL connection a monitoring table's reader or writer keeps (the attempt log,
the quality scores): autocommit, opened on first use and again once it closed or broke, its
errors one-line ``StateError``s naming the server with the password redacted."""

from __future__ import annotations

from typing import Any

import psycopg

from crawlfleet.errors import StateError
from crawlfleet.redact import redact

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresLink:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: Connection | None = None

    def error(self, exc: psycopg.Error) -> StateError:
        return StateError(redact(f"PostgreSQL at {self.dsn}: {exc}".strip(), self.dsn))

    async def connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = await psycopg.AsyncConnection.connect(
                    self.dsn, connect_timeout=10, autocommit=True
                )
            except psycopg.Error as exc:
                raise self.error(exc) from None
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
