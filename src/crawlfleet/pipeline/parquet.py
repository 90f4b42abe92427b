"""Items as a Parquet file (pyarrow, the ``parquet`` extra), written in bounded row groups.

Columns: ``type``, ``key``, then every field in the order first seen (as the CSV export). A
column whose values (None aside) are all booleans, all integers, all numbers or all strings
gets that Arrow type (integers mixed with floats: ``double``); any other column (objects,
lists, mixed kinds) holds each value as JSON text, so every item fits one schema. Two passes
over the records: one for the schema, one writing ``batch_rows`` rows at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.errors import ConfigError

BATCH_ROWS = 1000
"""Rows held in memory and written as one row group."""

_KINDS = ("bool", "int", "float", "str")


def parquet_available() -> bool:
    """Whether pyarrow can be imported (``pip install 'crawlfleet[parquet]'``)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(
    records: Callable[[], Iterable[dict[str, Any]]], out: Path, *, batch_rows: int = BATCH_ROWS
) -> int:
    """Write the records ``records()`` yields (called twice) to ``out``; returns how many."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet needs pyarrow: pip install 'crawlfleet[parquet]'") from None
    kinds = column_kinds(records())
    arrow = {
        "bool": pa.bool_(),
        "int": pa.int64(),
        "float": pa.float64(),
        "str": pa.string(),
        "json": pa.string(),
    }
    schema = pa.schema([(name, arrow[kind]) for name, kind in kinds.items()])
    count = 0
    with pq.ParquetWriter(out, schema) as writer:
        for batch in _batches(records(), batch_rows):
            columns = {
                name: [_cell(row.get(name), kind) for row in batch] for name, kind in kinds.items()
            }
            writer.write_table(pa.table(columns, schema=schema))
            count += len(batch)
    return count


def column_kinds(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Column name -> ``bool``, ``int``, ``float``, ``str`` or ``json`` (stored as JSON text)."""
    seen: dict[str, set[str]] = {"type": set(), "key": set()}
    for row in records:
        for name, value in row.items():
            kinds = seen.setdefault(name, set())
            if value is not None:
                kinds.add(_kind(value))
    return {name: _one_kind(kinds) for name, kinds in seen.items()}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "json"


def _one_kind(kinds: set[str]) -> str:
    if kinds == {"int", "float"}:
        return "float"
    if len(kinds) == 1 and next(iter(kinds)) in _KINDS:
        return next(iter(kinds))
    return "str" if not kinds or kinds == {"str"} else "json"


def _cell(value: Any, kind: str) -> Any:
    if value is None or kind != "json":
        return float(value) if kind == "float" and value is not None else value
    return orjson.dumps(value).decode()


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
