"""The ``crawlfleet`` command: one Typer app, each command group in its own module."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from crawlfleet.cli import (
    archive,
    changes,
    crawl,
    dashboard,
    db,
    demo,
    demo_site,
    dlq,
    export,
    ops,
    parsers,
    proxies,
    rejects,
    reparse,
    shell,
    status,
    vacuum,
    worker,
)
from crawlfleet.cli.console import fail
from crawlfleet.cli.logs import LogFormat, chosen_level, configure_logging
from crawlfleet.envfiles import load_env_files
from crawlfleet.errors import ConfigError

app = typer.Typer(
    name="crawlfleet",
    help="Crawl and scrape the web: embedded, or distributed with Redis and Celery.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _before_any_command(
    verbose: Annotated[
        int, typer.Option("-v", "--verbose", count=True, help="log more (-v: DEBUG)")
    ] = 0,
    quiet: Annotated[
        int, typer.Option("-q", "--quiet", count=True, help="log less (-q: WARNING, -qq: ERROR)")
    ] = 0,
    log_level: Annotated[
        str | None,
        typer.Option(
            envvar="CRAWLFLEET_LOG_LEVEL",
            help="DEBUG, INFO (default), WARNING, ERROR; wins over -v/-q",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat, typer.Option(envvar="CRAWLFLEET_LOG_FORMAT", help="log lines as text or JSON")
    ] = LogFormat.TEXT,
) -> None:
    """Crawl and scrape the web: embedded, or distributed with Redis and Celery.

    Logs go to stderr (``cli/logs.py``); secrets given as ``CRAWLFLEET_*_FILE`` are read
    (``envfiles.py``) before any command.
    """
    try:
        configure_logging(chosen_level(verbose, quiet, log_level), log_format)
        load_env_files(os.environ)
    except ConfigError as exc:
        fail(exc)


app.command()(crawl.crawl)
archive.register(app)
reparse.register(app)
changes.register(app)
dlq.register(app)
demo.register(app)
demo_site.register(app)
export.register(app)
parsers.register(app)
shell.register(app)
worker.register(app)
status.register(app)
db.register(app)
dashboard.register(app)
ops.register(app)
proxies.register(app)
rejects.register(app)
vacuum.register(app)
