"""The ``crawlfleet`` command: one Typer app, each command group in its own module."""

from __future__ import annotations

import os

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
    reparse,
    shell,
    status,
    vacuum,
    worker,
)
from crawlfleet.cli.console import fail
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
def _secret_files() -> None:
    """Read the secrets given as ``CRAWLFLEET_*_FILE`` (``envfiles.py``) before any command."""
    try:
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
vacuum.register(app)
