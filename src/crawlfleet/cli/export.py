"""``crawlfleet export``: a crawl's stored items as JSONL, JSON, CSV, Parquet or an SQLite copy.

``--state DIR`` reads an embedded crawl's items file; ``--postgres DSN --crawl-id ID`` a
distributed crawl's items, streamed from PostgreSQL (JSONL or CSV). ``-o s3://bucket/key``
writes the file locally, then uploads it (``archive/exports.py``). ``--since``
(``last_changed``) as in ``pipeline/export.py``.
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from crawlfleet.archive.exports import is_object_url
from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import (
    CRAWL_ID_ENV,
    DEFAULT_STATE,
    PostgresOpt,
    StateOpt,
    postgres_or_state,
)
from crawlfleet.errors import CrawlfleetError
from crawlfleet.ops.results import export_stored
from crawlfleet.pipeline.export import since_epoch


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    json = "json"
    csv = "csv"
    parquet = "parquet"
    sqlite = "sqlite"


def export(
    output: Annotated[
        str, typer.Option("-o", "--output", help="file to write, or s3://bucket/prefix/NAME")
    ],
    state: StateOpt = None,
    postgres: PostgresOpt = None,
    fmt: Annotated[
        ExportFormat | None,
        typer.Option("--format", help="default: from the output's suffix"),
    ] = None,
    item_type: Annotated[str | None, typer.Option("--type", help="only items of this type")] = None,
    crawl_id: Annotated[
        str | None,
        typer.Option(
            "--crawl-id",
            envvar=CRAWL_ID_ENV,
            help="the crawl to export (needed with --postgres; embedded: when the file holds several)",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="only items new or changed since then: ISO-8601 (UTC if no zone) or an age (2h, 3d)",
        ),
    ] = None,
) -> None:
    """Write the items a crawl stored, ordered by type and key."""
    try:
        after = since_epoch(since, time.time()) if since is not None else None
        chosen = fmt.value if fmt is not None else None
        count = export_stored(
            _target(output),
            postgres_dsn=postgres_or_state(postgres, state),
            state_dir=state or DEFAULT_STATE,
            crawl_id=crawl_id,
            item_type=item_type,
            fmt=chosen,
            since=after,
        )
    except (CrawlfleetError, OSError) as exc:
        fail(exc)
    make_console(stderr=True).print(f"wrote {count} items to {safe(output)}")


def _target(output: str) -> Path | str:
    """An ``s3://`` URL as given, anything else a path."""
    return output if is_object_url(output) else Path(output)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
