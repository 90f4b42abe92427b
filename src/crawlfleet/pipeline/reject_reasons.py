"""Why items were rejected, most frequent first: the reasons the rejects store kept.

``sqlite_reasons`` reads an embedded crawl's items file (read-only); the distributed twin is
``sinks/postgres_reject_reasons.py``. The summary's top reject reasons and ``crawlfleet
rejects`` are both this grouping: one row per (reason, item type), with a sample URL.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from crawlfleet.errors import StateError

TOP_REASONS = 5
"""Reasons the end-of-crawl summary lists."""

SQLITE_REASONS = (
    "SELECT reason, item_type, count(*), min(url) FROM rejects WHERE crawl_id = ?"
    " GROUP BY reason, item_type ORDER BY count(*) DESC, reason, item_type LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class RejectReason:
    """How many items of ``item_type`` were rejected for ``reason``, and one page they came from."""

    reason: str
    item_type: str
    count: int
    sample_url: str


def sqlite_reasons(items_db: Path, *, crawl_id: str, limit: int) -> list[RejectReason]:
    """The ``limit`` most frequent reasons of the crawl's rejects (none without an items file)."""
    if not items_db.is_file():
        return []
    try:
        db = sqlite3.connect(f"file:{items_db}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StateError(f"items database {items_db}: {exc}") from None
    try:
        rows = db.execute(SQLITE_REASONS, (crawl_id, limit)).fetchall()
    except sqlite3.Error as exc:
        raise StateError(f"items database {items_db}: {exc}") from None
    finally:
        db.close()
    return [RejectReason(str(r), str(t), int(n), str(u)) for r, t, n, u in rows]
