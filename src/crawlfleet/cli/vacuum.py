"""``crawlfleet vacuum``: shrink a stopped embedded crawl's state directory on disk.

Keeps the newest attempts of the attempt log (``--keep-attempts``, default the
``attempt_log_max_rows`` setting), gives free pages back to the file system and prints the
bytes before and after and what each table and index of the state file now takes
(``frontier/sqlite/retention.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.errors import CrawlfleetError
from crawlfleet.frontier.sqlite.retention import table_bytes, vacuum
from crawlfleet.runtime.backends import state_paths
from crawlfleet.settings.loading import load_settings

out = make_console()
MB = 1_000_000


def vacuum_command(
    state: Annotated[
        Path, typer.Option("--state", help="state directory of a stopped embedded crawl")
    ] = Path(".crawlfleet"),
    config: Annotated[
        Path | None, typer.Option(help="crawl config (TOML): its attempt_log_max_rows")
    ] = None,
    keep_attempts: Annotated[
        int | None,
        typer.Option(min=0, help="newest attempts to keep [default: attempt_log_max_rows]"),
    ] = None,
) -> None:
    """Prune the attempt log and compact the state and items files of a stopped crawl."""
    try:
        keep = keep_attempts
        if keep is None:
            keep = load_settings(config).attempt_log_max_rows
        state_file, items_file = state_paths(state)
        report = vacuum(state_file, items_file, keep)
        sizes = table_bytes(state_file)
    except (CrawlfleetError, OSError) as exc:
        fail(exc)
    kept = "all attempts kept" if keep is None else f"{report.pruned} attempts deleted"
    out.print(
        f"vacuumed {safe(state)}: {kept}, {report.before_bytes / MB:.1f} MB -> "
        f"{report.after_bytes / MB:.1f} MB",
        soft_wrap=True,
    )
    for name, size in sizes.items():
        out.print(f"  {safe(name):<24} {size / MB:9.1f} MB")


def register(app: typer.Typer) -> None:
    app.command("vacuum")(vacuum_command)
