"""A live CSV file: every stored item appended as one row, as it is stored."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import record
from crawlfleet.pipeline.sinks.appender import Appender

EXTRA = "_extra"
"""The last column: fields missing from the header, as one JSON object (empty when none)."""


def cell(value: Any) -> str:
    """A field value as CSV text: strings as they are, None empty, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def header_of(records: Iterable[dict[str, Any]]) -> list[str]:
    """``type``, ``key``, then every field in the order first seen."""
    columns = {"type": None, "key": None}
    for row in records:
        columns.update(dict.fromkeys(row))
    return list(columns)


def row_of(columns: Sequence[str], data: dict[str, Any]) -> list[str]:
    return [cell(data.get(name)) for name in columns]


class CsvSink:
    """Appends one row per item; no upsert, so a re-seen item appears again.

    The header is ``type,key``, the fields of the first batch, then ``_extra``. An existing
    file keeps its header and is appended to. Each ``write`` lands whole or not at all (see
    ``Appender``); ``fsync`` as there.
    """

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self._columns = _existing_header(path)
        self._appender = Appender(path, fsync=fsync)

    async def write(self, items: Sequence[Item]) -> None:
        if not items:
            return
        records = [record(item) for item in items]
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        columns = self._columns
        if columns is None:
            columns = [*header_of(records), EXTRA]
            writer.writerow(columns)
        known = set(columns)
        for data in records:
            extra = {name: value for name, value in data.items() if name not in known}
            writer.writerow([*row_of(columns[:-1], data), cell(extra) if extra else ""])
        await self._appender.append(text.getvalue().encode())
        self._columns = columns

    async def close(self) -> None:
        await self._appender.close()


def _existing_header(path: Path) -> list[str] | None:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            first = next(csv.reader(handle), None)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise StateError(f"cannot read the header of {path}: {exc}") from exc
    if not first:
        return None
    if first[:2] != ["type", "key"] or first[-1] != EXTRA:
        raise StateError(f"{path} is not a crawlfleet CSV (header {first[:3]}...)")
    return first
