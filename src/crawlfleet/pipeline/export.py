"""Exporting the items file of an embedded crawl (``SqliteSink``'s file): JSONL, JSON, CSV,
Parquet or SQLite.

An export holds the items of one crawl (key namespace): the only one in the file, or the one
asked for when the file holds several. Every format lists items ordered by (type, key). JSONL: one ``{"type", "key", **fields}``
object per line. JSON: one array of those objects, one per line. Parquet: see
``pipeline.parquet`` (pyarrow, the ``parquet`` extra). CSV: a header of ``type,key`` and the union of all fields (in the order first
seen), nested values as JSON. SQLite: a copy of the file (only ``item_type``'s rows if given).
The output appears whole or not at all: it is written beside its final name, then renamed.
"""

from __future__ import annotations

import contextlib
import csv
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.errors import ConfigError, StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import record
from crawlfleet.pipeline.parquet import parquet_available, write_parquet
from crawlfleet.pipeline.sinks.csv import header_of, row_of

ITEMS_FILE = "items.sqlite"
"""The items file of an embedded crawl, inside its state directory."""

FORMATS: dict[str, str] = {
    ".jsonl": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".sqlite": "sqlite",
    ".db": "sqlite",
}
"""File suffix -> export format."""


def format_of(out: Path) -> str:
    """The export format ``out``'s suffix asks for."""
    try:
        return FORMATS[out.suffix.lower()]
    except KeyError:
        raise ConfigError(
            f"cannot tell the export format of {out}: use .jsonl, .json, .csv, .parquet,"
            " .sqlite or .db"
        ) from None


def export_items(
    items_db: Path,
    out: Path,
    *,
    item_type: str | None = None,
    fmt: str | None = None,
    crawl_id: str | None = None,
) -> int:
    """Writes the items of ``items_db`` (of ``item_type`` if given) to ``out``; returns how many.

    ``fmt`` (``jsonl``, ``json``, ``csv``, ``parquet``, ``sqlite``) defaults to the one ``out``'s suffix names.
    ``crawl_id`` picks the crawl; None is the only crawl in the file (``ConfigError`` naming
    them when there are several).
    """
    fmt = fmt if fmt is not None else format_of(out)
    if fmt not in FORMATS.values():
        raise ConfigError(f"unknown export format {fmt!r}: use jsonl, json, csv, parquet or sqlite")
    if fmt == "parquet" and not parquet_available():
        raise ConfigError("Parquet needs pyarrow: pip install 'crawlfleet[parquet]'")
    if not items_db.is_file():
        raise StateError(f"no items database at {items_db}")
    if out.resolve() == items_db.resolve():
        raise ConfigError(f"cannot export {items_db} onto itself")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        source = sqlite3.connect(items_db.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = _selection(source, items_db, item_type, crawl_id)
            if fmt == "sqlite":
                count = _copy(source, partial, rows)
            elif fmt == "csv":
                count = _csv(source, partial, rows)
            elif fmt == "json":
                count = _json(source, partial, rows)
            elif fmt == "parquet":
                count = write_parquet(partial_records(source, rows), partial)
            else:
                count = _jsonl(source, partial, rows)
        finally:
            source.close()
        os.replace(partial, out)
    except sqlite3.Error as exc:
        raise StateError(f"cannot export items from {items_db}: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return count


@dataclass(frozen=True, slots=True)
class _Rows:
    """The rows to export: a WHERE clause (for ``items`` and ``rejects``) and its parameters."""

    where: str
    params: tuple[str, ...]


def _selection(
    source: sqlite3.Connection, items_db: Path, item_type: str | None, crawl_id: str | None
) -> _Rows:
    """Which rows to export; files from before crawl ids hold one crawl and have no column."""
    where, params = ["1"], []
    if item_type is not None:
        where.append("item_type = ?")
        params.append(item_type)
    columns = {row[1] for row in source.execute("PRAGMA table_info(items)")}
    if "crawl_id" not in columns:
        if crawl_id is not None:
            raise ConfigError(f"{items_db} is from before crawl ids: export it without one")
    elif crawl_id is not None:
        where.append("crawl_id = ?")
        params.append(crawl_id)
    else:
        crawls = [row[0] for row in source.execute("SELECT DISTINCT crawl_id FROM items")]
        if len(crawls) > 1:
            raise ConfigError(
                f"{items_db} holds the items of several crawls ({', '.join(sorted(crawls))}):"
                " choose one with --crawl-id"
            )
    return _Rows(" AND ".join(where), tuple(params))


def _records(source: sqlite3.Connection, rows: _Rows) -> Iterator[dict[str, Any]]:
    cursor = source.execute(
        f"SELECT item_type, item_key, data FROM items WHERE {rows.where}"
        " ORDER BY item_type, item_key",
        rows.params,
    )
    for kind, key, data in cursor:
        yield record(Item(kind, orjson.loads(data), key=key))


def _jsonl(source: sqlite3.Connection, out: Path, rows: _Rows) -> int:
    count = 0
    with out.open("wb") as handle:
        for row in _records(source, rows):
            handle.write(orjson.dumps(row) + b"\n")
            count += 1
    return count


def _json(source: sqlite3.Connection, out: Path, rows: _Rows) -> int:
    count = 0
    with out.open("wb") as handle:
        handle.write(b"[")
        for row in _records(source, rows):
            handle.write((b",\n" if count else b"\n") + orjson.dumps(row))
            count += 1
        handle.write(b"\n]\n" if count else b"]\n")
    return count


def partial_records(
    source: sqlite3.Connection, rows: _Rows
) -> Callable[[], Iterator[dict[str, Any]]]:
    """A function listing the rows afresh on every call (a writer may read them twice)."""
    return lambda: _records(source, rows)


def _csv(source: sqlite3.Connection, out: Path, rows: _Rows) -> int:
    columns = header_of(_records(source, rows))
    count = 0
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in _records(source, rows):
            writer.writerow(row_of(columns, row))
            count += 1
    return count


def _copy(source: sqlite3.Connection, out: Path, rows: _Rows) -> int:
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    target = sqlite3.connect(out)
    try:
        source.backup(target)
        if rows.params:
            with target:
                target.execute(f"DELETE FROM items WHERE NOT ({rows.where})", rows.params)
                target.execute(f"DELETE FROM rejects WHERE NOT ({rows.where})", rows.params)
            target.execute("VACUUM")
        target.execute("PRAGMA journal_mode=DELETE")
        count: int = target.execute("SELECT count(*) FROM items").fetchone()[0]
    finally:
        target.close()
    return count
