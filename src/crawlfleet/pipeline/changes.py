"""The change feed: what changed in a crawl's items, and when.

Every upserting sink (SQLite, PostgreSQL) appends one row per item change, in the
transaction that makes it: ``new`` (a key stored the first time), ``changed`` (a newer
version with another content hash; ``diff`` holds the old and new value of each top-level
field that differs, volatile fields such as ``fetched_at`` left out) and ``gone`` (its page
answered 404/410 or no longer yields it, and no other page does; ``PageTracker``). The row
of a gone item stays in ``items``; it comes back as ``changed`` or keeps its data.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.errors import StateError
from crawlfleet.pipeline.hashing import VOLATILE_FIELDS

NEW, CHANGED, GONE = "new", "changed", "gone"
KINDS = (NEW, CHANGED, GONE)

Diff = dict[str, dict[str, Any]]
"""field -> ``{"old": value, "new": value}`` (a missing field is ``None``)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One row of the change feed; ``at`` is epoch seconds."""

    at: float
    item_type: str
    item_key: str
    change: str
    diff: Diff | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON record ``crawlfleet changes`` prints (``at`` as UTC ISO-8601)."""
        record: dict[str, Any] = {"at": iso(self.at), "type": self.item_type,
                                  "key": self.item_key, "change": self.change}  # fmt: skip
        if self.diff is not None:
            record["fields"] = self.diff
        return record


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> Diff:
    """The top-level fields whose values differ, volatile fields left out."""
    names = sorted((set(old) | set(new)) - VOLATILE_FIELDS)
    return {
        name: {"old": old.get(name), "new": new.get(name)}
        for name in names
        if old.get(name) != new.get(name)
    }


SQLITE_CHANGES = (
    "SELECT at, item_type, item_key, change, diff FROM changes"
    " WHERE (?1 IS NULL OR crawl_id = ?1) AND at >= ?2 AND (?3 IS NULL OR item_type = ?3)"
    " ORDER BY at, id"
)


def sqlite_changes(
    items_db: Path, *, crawl_id: str | None, since: float, item_type: str | None
) -> Iterator[Change]:
    """The change feed of an embedded crawl's items file, oldest first (read-only)."""
    if not items_db.is_file():
        raise StateError(f"no items database at {items_db}")
    try:
        db = sqlite3.connect(f"file:{items_db}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StateError(f"items database {items_db}: {exc}") from None
    try:
        if not db.execute(HAS_CHANGES).fetchone():
            raise StateError(
                f"items database {items_db} has no change feed (written by an older crawlfleet)"
            )
        for at, kind, key, change, fields in db.execute(
            SQLITE_CHANGES, (crawl_id, since, item_type)
        ):
            yield Change(at, kind, key, change, None if fields is None else orjson.loads(fields))
    except sqlite3.Error as exc:
        raise StateError(f"items database {items_db}: {exc}") from None
    finally:
        db.close()


HAS_CHANGES = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'changes'"


def iso(epoch_s: float) -> str:
    """UTC ISO-8601 with microseconds and a ``Z``."""
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).isoformat().replace("+00:00", "Z")
