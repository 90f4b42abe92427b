"""What a crawl stored, read from where its runtime keeps it: items, changes, rejects, archive.

An embedded crawl keeps its items, their change feed and its rejects in its items file
(``<state>/items.sqlite``) and its archive's capture index in ``<state>/archive.sqlite``; a
distributed crawl keeps them in PostgreSQL, read with ``postgres_dsn`` (``None``: the state
directory). ``crawlfleet export``, ``changes``, ``rejects`` and ``archive``, and the
end-of-run summary (``api.Crawl``), read them here. Blocking: call these in a thread from
async code. psycopg is imported only for a DSN (``ConfigError`` without the distributed
extra); ``StateError`` (one line) when a store cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

from crawlfleet.archive.exports import export_to
from crawlfleet.archive.index import INDEX_FILE, SqliteCaptureIndex
from crawlfleet.archive.protocols import CaptureIndex
from crawlfleet.errors import ConfigError
from crawlfleet.pipeline.changes import Change, sqlite_changes
from crawlfleet.pipeline.export import export_items, export_postgres
from crawlfleet.pipeline.reject_reasons import RejectReason, sqlite_reasons
from crawlfleet.runtime.backends import extra_missing, state_paths


def reject_reasons(
    *, postgres_dsn: str | None, state_dir: Path, crawl_id: str, limit: int
) -> list[RejectReason]:
    """The ``limit`` most frequent reasons items were rejected (none without an items file)."""
    if postgres_dsn is None:
        _, items_file = state_paths(state_dir)
        return sqlite_reasons(items_file, crawl_id=crawl_id, limit=limit)
    try:
        from crawlfleet.pipeline.sinks.postgres_reject_reasons import postgres_reasons
    except ImportError as exc:
        raise extra_missing(exc) from None
    return postgres_reasons(postgres_dsn, crawl_id=crawl_id, limit=limit)


def item_changes(
    *,
    postgres_dsn: str | None,
    state_dir: Path,
    crawl_id: str | None,
    since: float,
    item_type: str | None,
) -> Iterator[Change]:
    """The crawl's change feed from ``since`` (epoch s), oldest first; ``crawl_id`` None: every
    crawl of the items file (a DSN needs one)."""
    if postgres_dsn is None:
        _, items_file = state_paths(state_dir)
        return sqlite_changes(items_file, crawl_id=crawl_id, since=since, item_type=item_type)
    if crawl_id is None:
        raise ConfigError("--postgres needs --crawl-id ID: the crawl whose changes to show")
    try:
        from crawlfleet.pipeline.sinks.postgres_changes import postgres_changes
    except ImportError as exc:
        raise extra_missing(exc) from None
    return postgres_changes(postgres_dsn, crawl_id=crawl_id, since=since, item_type=item_type)


def export_stored(
    target: Path | str,
    *,
    postgres_dsn: str | None,
    state_dir: Path,
    crawl_id: str | None,
    item_type: str | None,
    fmt: str | None,
    since: float | None,
) -> int:
    """Write the crawl's items to ``target`` (a path or an ``s3://`` URL); how many.

    ``crawl_id`` None: the only crawl of the items file (a DSN needs one).
    """
    if postgres_dsn is None:
        _, items_file = state_paths(state_dir)
        write = partial(
            export_items, items_file, item_type=item_type, fmt=fmt, crawl_id=crawl_id, since=since
        )
        return export_to(target, write)
    if crawl_id is None:
        raise ConfigError("--postgres needs --crawl-id ID: the crawl whose items to export")
    write = partial(
        export_postgres,
        postgres_dsn,
        crawl_id=crawl_id,
        item_type=item_type,
        fmt=fmt,
        since=since,
    )
    try:
        return export_to(target, write)
    except ImportError as exc:
        raise extra_missing(exc) from None


def capture_index(*, postgres_dsn: str | None, state_dir: Path, crawl_id: str) -> CaptureIndex:
    """The crawl's archive index as it is (``StateError`` for an embedded crawl without one)."""
    if postgres_dsn is None:
        return SqliteCaptureIndex.existing(state_dir / INDEX_FILE)
    from crawlfleet.archive.postgres_index import PostgresCaptureIndex  # psycopg

    return PostgresCaptureIndex(postgres_dsn, crawl_id)
