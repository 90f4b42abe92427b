"""The ``crawlfleet`` command: one Typer app, each command group in its own module."""

from __future__ import annotations

import typer

from crawlfleet.cli import (
    crawl,
    dashboard,
    db,
    demo,
    demo_site,
    dlq,
    export,
    ops,
    parsers,
    shell,
    status,
    vacuum,
    worker,
)

app = typer.Typer(
    name="crawlfleet",
    help="Crawl and scrape the web: embedded, or distributed with Redis and Celery.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command()(crawl.crawl)
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
vacuum.register(app)
