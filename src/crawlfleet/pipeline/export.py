"""Exporting the items file of an embedded crawl (``SqliteSink``'s file) as JSONL, CSV or SQLite.

Every format lists items ordered by (type, key). JSONL: one ``{"type", "key", **fields}``
object per line. CSV: a header of ``type,key`` and the union of all fields (in the order first
seen), nested values as JSON. SQLite: a copy of the file (only ``item_type``'s rows if given).
The output appears whole or not at all: it is written beside its final name, then renamed.
"""

from __future__ import annotations

import contextlib
import csv
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.errors import ConfigError, StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import record
from crawlfleet.pipeline.sinks.csv import header_of, row_of

ITEMS_FILE = "items.sqlite"
"""The items file of an embedded crawl, inside its state directory."""

FORMATS: dict[str, str] = {".jsonl": "jsonl", ".csv": "csv", ".sqlite": "sqlite", ".db": "sqlite"}
"""File suffix -> export format."""


def format_of(out: Path) -> str:
    """The export format ``out``'s suffix asks for."""
    try:
        return FORMATS[out.suffix.lower()]
    except KeyError:
        raise ConfigError(
            f"cannot tell the export format of {out}: use .jsonl, .csv, .sqlite or .db"
        ) from None


def export_items(
    items_db: Path, out: Path, *, item_type: str | None = None, fmt: str | None = None
) -> int:
    """Writes the items of ``items_db`` (of ``item_type`` if given) to ``out``; returns how many.

    ``fmt`` (``jsonl``, ``csv``, ``sqlite``) defaults to the one ``out``'s suffix names.
    """
    fmt = fmt if fmt is not None else format_of(out)
    if fmt not in FORMATS.values():
        raise ConfigError(f"unknown export format {fmt!r}: use jsonl, csv or sqlite")
    if not items_db.is_file():
        raise StateError(f"no items database at {items_db}")
    if out.resolve() == items_db.resolve():
        raise ConfigError(f"cannot export {items_db} onto itself")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        source = sqlite3.connect(items_db.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            if fmt == "sqlite":
                count = _copy(source, partial, item_type)
            elif fmt == "csv":
                count = _csv(source, partial, item_type)
            else:
                count = _jsonl(source, partial, item_type)
        finally:
            source.close()
        os.replace(partial, out)
    except sqlite3.Error as exc:
        raise StateError(f"cannot export items from {items_db}: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return count


def _records(source: sqlite3.Connection, item_type: str | None) -> Iterator[dict[str, Any]]:
    cursor = source.execute(
        "SELECT item_type, item_key, data FROM items WHERE ? IS NULL OR item_type = ?"
        " ORDER BY item_type, item_key",
        (item_type, item_type),
    )
    for kind, key, data in cursor:
        yield record(Item(kind, orjson.loads(data), key=key))


def _jsonl(source: sqlite3.Connection, out: Path, item_type: str | None) -> int:
    count = 0
    with out.open("wb") as handle:
        for row in _records(source, item_type):
            handle.write(orjson.dumps(row) + b"\n")
            count += 1
    return count


def _csv(source: sqlite3.Connection, out: Path, item_type: str | None) -> int:
    columns = header_of(_records(source, item_type))
    count = 0
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in _records(source, item_type):
            writer.writerow(row_of(columns, row))
            count += 1
    return count


def _copy(source: sqlite3.Connection, out: Path, item_type: str | None) -> int:
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    target = sqlite3.connect(out)
    try:
        source.backup(target)
        if item_type is not None:
            with target:
                target.execute("DELETE FROM items WHERE item_type <> ?", (item_type,))
                target.execute("DELETE FROM rejects WHERE item_type <> ?", (item_type,))
            target.execute("VACUUM")
        target.execute("PRAGMA journal_mode=DELETE")
        count: int = target.execute("SELECT count(*) FROM items").fetchone()[0]
    finally:
        target.close()
    return count
