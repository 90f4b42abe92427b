"""The items file's schema (``<state_dir>/items.sqlite``) and its migration from older files.

Tables (version 3, kept in ``PRAGMA user_version``)::

    items(crawl_id TEXT, item_type TEXT, item_key TEXT, data TEXT (JSON object),
          content_hash TEXT, fetched_at REAL, first_seen REAL, last_seen REAL,
          last_changed REAL, PRIMARY KEY (crawl_id, item_type, item_key))
    rejects(id INTEGER PRIMARY KEY, crawl_id TEXT, item_type TEXT, item_key TEXT NULL,
            url TEXT, reason TEXT, data TEXT (JSON object), at REAL)
    changes(id INTEGER PRIMARY KEY, crawl_id TEXT, at REAL, item_type TEXT, item_key TEXT,
            change TEXT (new | changed | gone), diff TEXT NULL (JSON, ``pipeline/changes.py``))
    page_items(crawl_id TEXT, page TEXT (request URL), item_type TEXT, item_key TEXT):
            what each page yielded at its last parse (``PageTracker``)

Version 1 (user_version 0, before crawl ids) keyed items by (item_type, item_key) alone and
had no ``fetched_at``: ``prepare`` gives its rows to the crawl that opens the file, with
``fetched_at = last_seen``. Version 2 had no ``changes`` nor ``page_items`` (a separate
step, ``CHANGE_TABLES``). A file of a newer version is refused.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.errors import StateError

VERSION = 3

CREATE_ITEMS = """
CREATE TABLE IF NOT EXISTS items (
    crawl_id TEXT NOT NULL,
    item_type TEXT NOT NULL,
    item_key TEXT NOT NULL,
    data TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    fetched_at REAL NOT NULL,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    last_changed REAL NOT NULL,
    PRIMARY KEY (crawl_id, item_type, item_key)
)
"""

CREATE_REJECTS = """
CREATE TABLE IF NOT EXISTS rejects (
    id INTEGER PRIMARY KEY,
    crawl_id TEXT NOT NULL DEFAULT '',
    item_type TEXT NOT NULL,
    item_key TEXT,
    url TEXT NOT NULL,
    reason TEXT NOT NULL,
    data TEXT NOT NULL,
    at REAL NOT NULL
)
"""

# Version 3: the change feed (decision 0014).
CHANGE_TABLES = (
    """CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY,
    crawl_id TEXT NOT NULL,
    at REAL NOT NULL,
    item_type TEXT NOT NULL,
    item_key TEXT NOT NULL,
    change TEXT NOT NULL,
    diff TEXT
)""",
    "CREATE INDEX IF NOT EXISTS changes_at ON changes (crawl_id, at)",
    """CREATE TABLE IF NOT EXISTS page_items (
    crawl_id TEXT NOT NULL,
    page TEXT NOT NULL,
    item_type TEXT NOT NULL,
    item_key TEXT NOT NULL,
    PRIMARY KEY (crawl_id, page, item_type, item_key)
) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS page_items_item ON page_items (crawl_id, item_type, item_key)",
)

FROM_VERSION_1 = (
    "ALTER TABLE items RENAME TO items_v1",
    CREATE_ITEMS,
    "INSERT INTO items SELECT ?, item_type, item_key, data, content_hash, last_seen,"
    " first_seen, last_seen, last_changed FROM items_v1",
    "DROP TABLE items_v1",
    "ALTER TABLE rejects ADD COLUMN crawl_id TEXT NOT NULL DEFAULT ''",
    "UPDATE rejects SET crawl_id = ?",
)


def prepare(db: sqlite3.Connection, path: Path, crawl_id: str) -> None:
    """Creates the tables of an empty file, or migrates an older one, in one transaction."""
    if _version(db, path) == VERSION:
        return  # no write lock needed: a file in use by another writer opens fine
    db.execute("BEGIN IMMEDIATE")
    try:
        if _version(db, path) < VERSION:
            if _columns(db, "items") and "crawl_id" not in _columns(db, "items"):
                for statement in FROM_VERSION_1:
                    db.execute(statement, (crawl_id,) if "?" in statement else ())
            db.execute(CREATE_ITEMS)
            db.execute(CREATE_REJECTS)
            for statement in CHANGE_TABLES:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _version(db: sqlite3.Connection, path: Path) -> int:
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    if version > VERSION:
        raise StateError(
            f"items database {path} has schema version {version}; this crawlfleet knows up to"
            f" {VERSION}"
        )
    return version


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
