"""The capture index of a distributed crawl: ``archive_captures`` in PostgreSQL (migration 8).

One synchronous autocommit connection; ``IndexBatch(threaded=True)`` calls it from a
thread, so a worker's event loop never waits on it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import psycopg

from crawlfleet.archive.protocols import Capture
from crawlfleet.errors import StateError
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.redact import redact

_COLUMNS = 'url, at, status, digest, file, "offset", length, kind, mime'


class PostgresCaptureIndex:
    """A ``CaptureIndex`` of one crawl id in PostgreSQL; safe to call from several threads."""

    def __init__(self, dsn: str, crawl_id: str) -> None:
        self.path = f"PostgreSQL ({crawl_id})"
        self._dsn = dsn
        self._crawl_id = crawl_id
        self._lock = threading.Lock()
        migrate(dsn)
        try:
            self._db = psycopg.connect(dsn, connect_timeout=10, autocommit=True)
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: psycopg.Error) -> StateError:
        return StateError(redact(f"archive index in PostgreSQL at {self._dsn}: {exc}", self._dsn))

    def _rows(self, sql: str, args: Sequence[object]) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except psycopg.Error as exc:
                raise self._error(exc) from None

    @property
    def root(self) -> str | None:
        rows = self._rows("SELECT root FROM archive_roots WHERE crawl_id = %s", (self._crawl_id,))
        return None if not rows else str(rows[0][0])

    def set_root(self, root: str) -> None:
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO archive_roots (crawl_id, root) VALUES (%s, %s) "
                    "ON CONFLICT (crawl_id) DO UPDATE SET root = EXCLUDED.root",
                    (self._crawl_id, root),
                )
            except psycopg.Error as exc:
                raise self._error(exc) from None

    def add(self, captures: Sequence[Capture]) -> None:
        rows = [
            (
                self._crawl_id,
                c.url,
                c.at,
                c.status,
                c.digest,
                c.file,
                c.offset,
                c.length,
                c.kind,
                c.mime,
            )
            for c in captures
        ]
        with self._lock:
            try:
                with self._db.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO archive_captures (crawl_id, {_COLUMNS}) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        rows,
                    )
            except psycopg.Error as exc:
                raise self._error(exc) from None

    def latest(self, url: str) -> Capture | None:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM archive_captures WHERE crawl_id = %s AND url = %s "
            "AND kind = 'response' ORDER BY at DESC LIMIT 1",
            (self._crawl_id, url),
        )
        return _capture(rows[0]) if rows else None

    def find(self, url: str | None = None, *, limit: int | None = None) -> list[Capture]:
        where = "crawl_id = %s" + (" AND url = %s" if url is not None else "")
        args: tuple[object, ...] = (self._crawl_id,) if url is None else (self._crawl_id, url)
        cap = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM archive_captures WHERE {where} ORDER BY url, at{cap}", args
        )
        return [_capture(row) for row in rows]

    def forget_files(self, names: Sequence[str]) -> int:
        rows = self._rows(
            "WITH gone AS (DELETE FROM archive_captures WHERE crawl_id = %s AND file = ANY(%s) "
            "RETURNING 1) SELECT count(*) FROM gone",
            (self._crawl_id, list(names)),
        )
        return int(str(rows[0][0]))

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _capture(row: tuple[object, ...]) -> Capture:
    url, at, status, digest, file, offset, length, kind, mime = row
    return Capture(
        str(url),
        float(str(at)),
        int(str(status)),
        str(digest),
        str(file),
        int(str(offset)),
        int(str(length)),
        str(kind),
        str(mime),
    )
