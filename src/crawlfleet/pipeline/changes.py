"""The change feed: what changed in a crawl's items, and when.

Every upserting sink (SQLite, PostgreSQL) appends one row per item change, in the
transaction that makes it: ``new`` (a key stored the first time), ``changed`` (a newer
version with another content hash; ``diff`` holds the old and new value of each top-level
field that differs, volatile fields such as ``fetched_at`` left out) and ``gone`` (its page
answered 404/410 or no longer yields it, and no other page does; ``PageTracker``). The row
of a gone item stays in ``items``; it comes back as ``changed`` or keeps its data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

    def to_dict(self, *, at_text: str) -> dict[str, Any]:
        record: dict[str, Any] = {"at": at_text, "type": self.item_type, "key": self.item_key,
                                  "change": self.change}  # fmt: skip
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
