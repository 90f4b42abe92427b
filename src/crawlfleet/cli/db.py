"""``crawlfleet db migrate``: create or update the PostgreSQL schema of the distributed runtime."""

from __future__ import annotations

from typing import Annotated

import typer

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.errors import CrawlfleetError
from crawlfleet.redact import redact

db_app = typer.Typer(help="PostgreSQL schema of the distributed runtime.", no_args_is_help=True)
out = make_console()
err = make_console(stderr=True)


@db_app.command()
def migrate(
    postgres: Annotated[
        str, typer.Option("--postgres", envvar="CRAWLFLEET_POSTGRES_DSN", help="PostgreSQL DSN")
    ],
) -> None:
    """Apply the migrations not applied yet (idempotent); prints what it applied."""
    from crawlfleet.pipeline.sinks.postgres_schema import migrate as apply_migrations

    try:
        applied = apply_migrations(postgres)
    except CrawlfleetError as exc:
        fail(redact(str(exc), postgres), err)
    where = safe(postgres)
    if applied:
        out.print(f"applied migrations {', '.join(map(str, applied))} to {where}", soft_wrap=True)
    else:
        out.print(f"schema of {where} is up to date", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
