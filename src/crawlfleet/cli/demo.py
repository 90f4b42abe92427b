"""``crawlfleet demo``: serve the bundled demo site and crawl it, with no network needed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.crawl import run_crawl
from crawlfleet.errors import CrawlfleetError
from crawlfleet.runtime.loop import event_loop
from crawlfleet.settings.loading import load_settings

DEMO_ROLES = ("shop", "quotes", "lab")


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to ``app``."""

    @app.command()
    def demo(
        output: Annotated[Path, typer.Option("-o", "--output")] = Path("demo-items.jsonl"),
        state: Annotated[Path, typer.Option(help="state directory")] = Path(".crawlfleet-demo"),
        delay: Annotated[float, typer.Option(help="seconds between requests to a host")] = 0.05,
        parsers: Annotated[
            str | None,
            typer.Option(help="parser modules or .py files, comma-separated (make demo: examples)"),
        ] = None,
    ) -> None:
        """Crawl the local demo site (shop, quotes, lab hosts on 127.0.0.x) into OUTPUT."""
        from crawlfleet.demosite import ThreadedDemoSite  # aiohttp's server: for this command

        console = make_console(stderr=True)
        with ThreadedDemoSite(port=0) as site:
            seeds = [site.url(role, "/") for role in DEMO_ROLES]
            console.print(f"demo site up: {safe(', '.join(seeds))}")
            try:
                settings = load_settings(
                    None,
                    output=output,
                    state_dir=state,
                    delay_s=delay,
                    concurrency=8,
                    allow_private_addresses=True,
                    max_retries=1,
                    backoff_base_s=0.1,
                    parsers=[p.strip() for p in parsers.split(",") if p.strip()]
                    if parsers
                    else None,
                )
                code = event_loop.run(run_crawl(settings, seeds, fresh=True))
            except (CrawlfleetError, OSError) as exc:
                fail(exc, console)
        raise typer.Exit(code)
