"""``crawlfleet export``: a crawl's stored items as JSONL, JSON, CSV, Parquet or an SQLite copy."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crawlfleet.cli.console import fail, safe
from crawlfleet.errors import CrawlfleetError
from crawlfleet.pipeline.export import export_items
from crawlfleet.runtime.backends import state_paths


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    json = "json"
    csv = "csv"
    parquet = "parquet"
    sqlite = "sqlite"


def export(
    output: Annotated[Path, typer.Option("-o", "--output", help="file to write")],
    state: Annotated[Path, typer.Option("--state", help="state directory of the crawl")] = Path(
        ".crawlfleet"
    ),
    fmt: Annotated[
        ExportFormat | None,
        typer.Option("--format", help="default: from the output's suffix"),
    ] = None,
    item_type: Annotated[str | None, typer.Option("--type", help="only items of this type")] = None,
    crawl_id: Annotated[
        str | None,
        typer.Option("--crawl-id", help="the crawl to export when the file holds several"),
    ] = None,
) -> None:
    """Write the items a crawl stored, ordered by type and key."""
    try:
        _, items_file = state_paths(state)
        count = export_items(
            items_file,
            output,
            item_type=item_type,
            fmt=fmt.value if fmt is not None else None,
            crawl_id=crawl_id,
        )
    except (CrawlfleetError, OSError) as exc:
        fail(exc)
    Console(stderr=True).print(f"wrote {count} items to {safe(output)}")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
