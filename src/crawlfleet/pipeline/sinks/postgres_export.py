"""A crawl's items read back out of PostgreSQL, streamed through a server-side cursor.

Memory stays bounded by ``FETCH_ROWS`` whatever the table holds. Every read of one
``item_records`` block sees one snapshot (a read-only ``REPEATABLE READ`` transaction), so a
CSV export's two passes (header, then rows) agree while workers keep writing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import IsolationLevel, sql

from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import record
from crawlfleet.redact import redact

FETCH_ROWS = 2000
"""Rows fetched from the server at a time."""

Records = Callable[[], Iterator[dict[str, Any]]]
"""Streams the selected items as flat records (``hashing.record``), ordered by type and key."""


@contextmanager
def item_records(
    dsn: str, *, crawl_id: str, item_type: str | None = None, since: float | None = None
) -> Iterator[Records]:
    """The items of ``crawl_id`` (of ``item_type``; changed at or after ``since``, epoch s).

    ``since`` compares ``last_changed``: the time the item's content last changed (or it
    first appeared), not the last time a page showed it unchanged. ``StateError`` (one line,
    password redacted) when PostgreSQL cannot be read.
    """
    where = [sql.SQL("crawl_id = %s")]
    params: list[object] = [crawl_id]
    if item_type is not None:
        where.append(sql.SQL("item_type = %s"))
        params.append(item_type)
    if since is not None:
        where.append(sql.SQL("last_changed >= %s"))
        params.append(dt.datetime.fromtimestamp(since, dt.UTC))
    query = sql.SQL(
        "SELECT item_type, item_key, data FROM items WHERE {} ORDER BY item_type, item_key"
    ).format(sql.SQL(" AND ").join(where))
    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as exc:
        raise _error(dsn, exc) from None
    try:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        reads = 0

        def records() -> Iterator[dict[str, Any]]:
            nonlocal reads
            reads += 1
            with conn.cursor(name=f"crawlfleet_export_{reads}") as cursor:
                cursor.itersize = FETCH_ROWS
                cursor.execute(query, params)
                for kind, key, data in cursor:
                    yield record(Item(str(kind), data, key=str(key)))

        with conn.transaction():
            yield _reporting(records, dsn)
    except psycopg.Error as exc:
        raise _error(dsn, exc) from None
    finally:
        conn.close()


def _reporting(records: Records, dsn: str) -> Records:
    """``records`` with a failure while streaming made a one-line ``StateError``."""

    def read() -> Iterator[dict[str, Any]]:
        try:
            yield from records()
        except psycopg.Error as exc:
            raise _error(dsn, exc) from None

    return read


def _error(dsn: str, exc: psycopg.Error) -> StateError:
    text = " ".join(str(exc).split())
    return StateError(redact(f"PostgreSQL at {dsn}: {text}", dsn))
