"""Exporting a crawl's items as JSONL, JSON, CSV, Parquet or SQLite: from an embedded
crawl's items file (``SqliteSink``'s file) or from PostgreSQL (``export_postgres``).

An export holds the items of one crawl (key namespace): the only one in the file, or the one
asked for when the file holds several (PostgreSQL: always the one asked for). Every format
lists items ordered by (type, key). JSONL: one ``{"type", "key", **fields}`` object per line.
JSON: one array of those objects, one per line. Parquet: see ``pipeline.parquet`` (pyarrow,
the ``parquet`` extra). CSV: a header of ``type,key`` and the union of all fields (in the
order first seen), nested values as JSON. SQLite (embedded only): a copy of the file (only
the selected rows). ``since`` keeps the items whose content changed (or that appeared) at or
after that time: it compares ``last_changed``, so an item fetched again unchanged is not
exported again. The output appears whole or not at all: it is written beside its final name,
then renamed.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
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


Records = Callable[[], Iterator[dict[str, Any]]]
"""Streams the items to export as flat records; called once per pass over them."""

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_AGE_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since_epoch(text: str, now: float) -> float:
    """Epoch seconds of a ``--since`` value: ISO-8601 (no zone = UTC) or an age like ``2h``.

    Ages: a number and one of ``s``, ``m``, ``h``, ``d``, ``w``, counted back from ``now``.
    """
    age = _AGE.fullmatch(text.strip().lower())
    if age is not None:
        return now - float(age.group(1)) * _AGE_UNIT_S[age.group(2)]
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"bad --since {text!r}: give an ISO-8601 time (2025-05-01T12:00:00Z) or an age "
            "such as 90s, 15m, 2h, 3d, 1w"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def export_items(
    items_db: Path,
    out: Path,
    *,
    item_type: str | None = None,
    fmt: str | None = None,
    crawl_id: str | None = None,
    since: float | None = None,
) -> int:
    """Writes the items of ``items_db`` (of ``item_type`` if given) to ``out``; returns how many.

    ``fmt`` (``jsonl``, ``json``, ``csv``, ``parquet``, ``sqlite``) defaults to the one
    ``out``'s suffix names.
    ``crawl_id`` picks the crawl; None is the only crawl in the file (``ConfigError`` naming
    them when there are several). ``since`` (epoch s): see the module's docstring.
    """
    fmt = _format(out, fmt)
    if fmt == "sqlite" and since is not None:
        raise ConfigError("--since exports jsonl, json, csv or parquet, not an sqlite copy")
    if not items_db.is_file():
        raise StateError(f"no items database at {items_db}")
    if out.resolve() == items_db.resolve():
        raise ConfigError(f"cannot export {items_db} onto itself")
    try:
        source = sqlite3.connect(items_db.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = _selection(source, items_db, item_type, crawl_id, since)
            with _landing(out) as landing:
                if fmt == "sqlite":
                    return _copy(source, landing, rows)
                return _write(partial(_records, source, rows), landing, fmt)
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise StateError(f"cannot export items from {items_db}: {exc}") from exc


def export_postgres(
    dsn: str,
    out: Path,
    *,
    crawl_id: str,
    item_type: str | None = None,
    fmt: str | None = None,
    since: float | None = None,
) -> int:
    """Writes the items of crawl ``crawl_id`` stored in PostgreSQL to ``out``; how many.

    Streamed with a server-side cursor (``sinks/postgres_export.py``): memory does not grow
    with the crawl. ``fmt``: any but ``sqlite`` (default: from ``out``'s suffix).
    """
    fmt = _format(out, fmt)
    if fmt == "sqlite":
        raise ConfigError(
            "a PostgreSQL export is jsonl, json, csv or parquet (sqlite copies an embedded crawl)"
        )
    from crawlfleet.pipeline.sinks.postgres_export import item_records

    with (
        item_records(dsn, crawl_id=crawl_id, item_type=item_type, since=since) as records,
        _landing(out) as landing,
    ):
        return _write(records, landing, fmt)


def _format(out: Path, fmt: str | None) -> str:
    fmt = fmt if fmt is not None else format_of(out)
    if fmt not in FORMATS.values():
        raise ConfigError(f"unknown export format {fmt!r}: use jsonl, json, csv, parquet or sqlite")
    if fmt == "parquet" and not parquet_available():
        raise ConfigError("Parquet needs pyarrow: pip install 'crawlfleet[parquet]'")
    return fmt


@contextlib.contextmanager
def _landing(out: Path) -> Iterator[Path]:
    """A file beside ``out`` to write; renamed to ``out`` when the block ends without error."""
    out.parent.mkdir(parents=True, exist_ok=True)
    landing = out.with_name(f".{out.name}.partial")
    try:
        yield landing
        os.replace(landing, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            landing.unlink()


def _write(records: Records, out: Path, fmt: str) -> int:
    if fmt == "csv":
        return _csv(records, out)
    if fmt == "json":
        return _json(records, out)
    if fmt == "parquet":
        return write_parquet(records, out)
    return _jsonl(records, out)


@dataclass(frozen=True, slots=True)
class _Rows:
    """The rows to export: a WHERE clause (for ``items`` and ``rejects``) and its parameters."""

    where: str
    params: tuple[str | float, ...]


def _selection(
    source: sqlite3.Connection,
    items_db: Path,
    item_type: str | None,
    crawl_id: str | None,
    since: float | None,
) -> _Rows:
    """Which rows to export; files from before crawl ids hold one crawl and have no column."""
    where: list[str] = ["1"]
    params: list[str | float] = []
    if item_type is not None:
        where.append("item_type = ?")
        params.append(item_type)
    if since is not None:
        where.append("last_changed >= ?")
        params.append(since)
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


def _jsonl(records: Records, out: Path) -> int:
    count = 0
    with out.open("wb") as handle:
        for row in records():
            handle.write(orjson.dumps(row) + b"\n")
            count += 1
    return count


def _json(records: Records, out: Path) -> int:
    count = 0
    with out.open("wb") as handle:
        handle.write(b"[")
        for row in records():
            handle.write((b",\n" if count else b"\n") + orjson.dumps(row))
            count += 1
        handle.write(b"\n]\n" if count else b"]\n")
    return count


def _csv(records: Records, out: Path) -> int:
    columns = header_of(records())
    count = 0
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in records():
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
