"""``crawlfleet changes``: a crawl's change feed (new, changed, gone items) as JSON lines.

``--state DIR`` reads an embedded crawl's items file; ``--postgres DSN --crawl-id ID`` a
distributed crawl's ``item_changes``. ``--since`` takes the times ``export --since`` takes.
"""

from __future__ import annotations

import os
import sys
import time
from enum import StrEnum
from typing import Annotated

import orjson
import typer

from crawlfleet.cli.console import fail
from crawlfleet.cli.target import (
    CRAWL_ID_ENV,
    DEFAULT_STATE,
    PostgresOpt,
    StateOpt,
    postgres_or_state,
)
from crawlfleet.errors import CrawlfleetError
from crawlfleet.ops.results import item_changes
from crawlfleet.pipeline.export import since_epoch


class ChangesFormat(StrEnum):
    jsonl = "jsonl"


def changes(
    state: StateOpt = None,
    postgres: PostgresOpt = None,
    crawl_id: Annotated[
        str | None,
        typer.Option("--crawl-id", envvar=CRAWL_ID_ENV, help="the crawl (needed with --postgres)"),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="changes from then on: ISO-8601 (UTC if no zone) or an age (2h, 3d)"
        ),
    ] = None,
    item_type: Annotated[str | None, typer.Option("--type", help="only items of this type")] = None,
    fmt: Annotated[ChangesFormat, typer.Option("--format")] = ChangesFormat.jsonl,
) -> None:
    """Print each item change (new, changed with old and new values, gone), oldest first."""
    try:
        after = since_epoch(since, time.time()) if since is not None else 0.0
        found = item_changes(
            postgres_dsn=postgres_or_state(postgres, state),
            state_dir=state or DEFAULT_STATE,
            crawl_id=crawl_id,
            since=after,
            item_type=item_type,
        )
        out = sys.stdout.buffer
        for change in found:
            out.write(orjson.dumps(change.to_dict()) + b"\n")
        out.flush()
    except BrokenPipeError:  # the reader stopped (| head): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (CrawlfleetError, OSError) as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    app.command("changes")(changes)
