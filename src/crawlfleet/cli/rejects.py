"""``crawlfleet rejects``: why items were rejected, most frequent reason first.

``--state DIR`` reads an embedded crawl's items file; ``--postgres DSN --crawl-id ID`` a
distributed crawl's ``item_rejects``. One row per reason and item type, with a sample page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import CRAWL_ID_ENV, DEFAULT_STATE, POSTGRES_ENV, from_environment
from crawlfleet.errors import CrawlfleetError
from crawlfleet.pipeline.reject_reasons import RejectReason, sqlite_reasons
from crawlfleet.runtime.backends import extra_missing, state_paths

out = make_console()
err = make_console(stderr=True)


def rejects(
    state: Annotated[
        Path | None,
        typer.Option("--state", help="state directory of an embedded crawl [default: .crawlfleet]"),
    ] = None,
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres", envvar=POSTGRES_ENV, help="PostgreSQL DSN of a distributed crawl"
        ),
    ] = None,
    crawl_id: Annotated[
        str, typer.Option("--crawl-id", envvar=CRAWL_ID_ENV, help="the crawl")
    ] = "default",
    limit: Annotated[int, typer.Option(min=1, help="rows at most")] = 20,
) -> None:
    """Why items were rejected (failed validation), most frequent reason first."""
    try:
        if state is not None and from_environment(postgres, POSTGRES_ENV):
            postgres = None  # an explicit --state wins over the environment
        if postgres is not None and state is not None:
            raise CrawlfleetError("give --state DIR (embedded) or --postgres DSN, not both")
        if postgres is not None:
            found = _from_postgres(postgres, crawl_id, limit)
        else:
            _, items_file = state_paths(state or DEFAULT_STATE)
            found = sqlite_reasons(items_file, crawl_id=crawl_id, limit=limit)
    except CrawlfleetError as exc:
        fail(exc, err)
    table = Table(title=f"rejected items by reason ({sum(r.count for r in found)})")
    for column in ("count", "type", "reason", "sample URL"):
        table.add_column(column, justify="right" if column == "count" else "left")
    for row in found:
        table.add_row(str(row.count), safe(row.item_type), safe(row.reason), safe(row.sample_url))
    out.print(table)


def _from_postgres(dsn: str, crawl_id: str, limit: int) -> list[RejectReason]:
    try:
        from crawlfleet.pipeline.sinks.postgres_reject_reasons import postgres_reasons
    except ImportError as exc:
        raise extra_missing(exc) from None
    return postgres_reasons(dsn, crawl_id=crawl_id, limit=limit)


def register(app: typer.Typer) -> None:
    app.command("rejects")(rejects)
