"""The capture index of an embedded crawl: ``archive.sqlite`` in its state directory.

Tables: ``captures`` (one row a record: URL, time, status, digest, file, offset, length, kind,
MIME type; indexed by URL and time) and ``meta`` (``root``: where the archive's files are, so
a capture is found from the index alone).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from crawlfleet.archive.protocols import Capture
from crawlfleet.errors import StateError
from crawlfleet.sqlitedb import connect, write

INDEX_FILE = "archive.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS captures (
    url TEXT NOT NULL, at REAL NOT NULL, status INTEGER NOT NULL, digest TEXT NOT NULL,
    file TEXT NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL,
    kind TEXT NOT NULL, mime TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS captures_by_url ON captures (url, at);
CREATE INDEX IF NOT EXISTS captures_by_file ON captures (file);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "url, at, status, digest, file, offset, length, kind, mime"
_SLOTS = ", ".join("?" * 9)


class SqliteCaptureIndex:
    """A ``CaptureIndex`` in one SQLite file (WAL: readers never block the crawl)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = connect(path, _SCHEMA, what="archive index")

    @classmethod
    def existing(cls, path: Path) -> SqliteCaptureIndex:
        """The index at ``path``; ``StateError`` when there is none (the crawl kept no archive)."""
        if not path.exists():
            raise StateError(f"no archive index at {path}: was the crawl run with --archive?")
        return cls(path)

    @property
    def root(self) -> str | None:
        """Where the archive's files are (a directory or an ``s3://`` URL), once recorded."""
        row = self._db.execute("SELECT value FROM meta WHERE name = 'root'").fetchone()
        return None if row is None else str(row[0])

    def set_root(self, root: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('root', ?)", (root,))

    def add(self, captures: Sequence[Capture]) -> None:
        rows = [
            (c.url, c.at, c.status, c.digest, c.file, c.offset, c.length, c.kind, c.mime)
            for c in captures
        ]
        try:
            with write(self._db) as db:
                db.executemany(f"INSERT INTO captures ({_COLUMNS}) VALUES ({_SLOTS})", rows)
        except sqlite3.Error as exc:
            raise StateError(f"cannot write the archive index {self.path}: {exc}") from None

    def latest(self, url: str) -> Capture | None:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM captures WHERE url = ? AND kind = 'response' "
            "ORDER BY at DESC LIMIT 1",
            (url,),
        ).fetchone()
        return None if row is None else Capture(*row)

    def find(self, url: str | None = None, *, limit: int | None = None) -> list[Capture]:
        where, args = ("WHERE url = ?", (url,)) if url is not None else ("", ())
        cap = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM captures {where} ORDER BY url, at{cap}", args
        ).fetchall()
        return [Capture(*row) for row in rows]

    def forget_files(self, names: Sequence[str]) -> int:
        """Drop the captures in the files ``names`` (pruned); how many rows went."""
        try:
            with write(self._db) as db:
                return sum(
                    db.execute("DELETE FROM captures WHERE file = ?", (name,)).rowcount
                    for name in names
                )
        except sqlite3.Error as exc:
            raise StateError(f"cannot write the archive index {self.path}: {exc}") from None

    def close(self) -> None:
        self._db.close()
