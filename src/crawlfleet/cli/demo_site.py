"""The ``crawlfleet demo-site`` command: serve the local demo site until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from crawlfleet.cli.console import safe
from crawlfleet.demosite import DemoSite

DEFAULT_PORT = 8800


def register(app: typer.Typer) -> None:
    """Add the ``demo-site`` command to ``app``."""

    @app.command("demo-site")
    def demo_site(
        port: Annotated[int, typer.Option(help="TCP port on every address (0: any free one).")] = (
            DEFAULT_PORT
        ),
        access_log: Annotated[
            Path | None, typer.Option(help="Append every request to this file as JSON lines.")
        ] = None,
        crawl_delay_s: Annotated[
            float, typer.Option(help="Crawl-delay announced by the slow-robots host.")
        ] = 2.0,
    ) -> None:
        """Serve the demo site (shop, quotes, lab, ...) on loopback addresses until Ctrl-C."""
        site = DemoSite(port=port, access_log_path=access_log, crawl_delay_s=crawl_delay_s)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(site, Console()))


async def _serve(site: DemoSite, console: Console) -> None:
    await site.start()
    try:
        table = Table(title="crawlfleet demo site")
        table.add_column("role")
        table.add_column("url")
        for role in site.addresses:
            table.add_row(safe(role), safe(site.url(role, "/")))
        console.print(table)
        console.print("Serving until Ctrl-C.")
        await asyncio.Event().wait()
    finally:
        await site.stop()
