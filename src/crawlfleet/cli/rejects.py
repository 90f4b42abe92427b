"""``crawlfleet rejects``: why items were rejected, most frequent reason first.

``--state DIR`` reads an embedded crawl's items file; ``--postgres DSN --crawl-id ID`` a
distributed crawl's ``item_rejects`` (``ops/results.py``). One row per reason and item type,
with a sample page.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import (
    CRAWL_ID_ENV,
    DEFAULT_STATE,
    PostgresOpt,
    StateOpt,
    postgres_or_state,
)
from crawlfleet.errors import CrawlfleetError
from crawlfleet.ops.results import reject_reasons

out = make_console()
err = make_console(stderr=True)


def rejects(
    state: StateOpt = None,
    postgres: PostgresOpt = None,
    crawl_id: Annotated[
        str, typer.Option("--crawl-id", envvar=CRAWL_ID_ENV, help="the crawl")
    ] = "default",
    limit: Annotated[int, typer.Option(min=1, help="rows at most")] = 20,
) -> None:
    """Why items were rejected (failed validation), most frequent reason first."""
    try:
        found = reject_reasons(
            postgres_dsn=postgres_or_state(postgres, state),
            state_dir=state or DEFAULT_STATE,
            crawl_id=crawl_id,
            limit=limit,
        )
    except CrawlfleetError as exc:
        fail(exc, err)
    table = Table(title=f"rejected items by reason ({sum(r.count for r in found)})")
    for column in ("count", "type", "reason", "sample URL"):
        table.add_column(column, justify="right" if column == "count" else "left")
    for row in found:
        table.add_row(str(row.count), safe(row.item_type), safe(row.reason), safe(row.sample_url))
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command("rejects")(rejects)
