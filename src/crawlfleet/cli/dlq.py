"""``crawlfleet dlq list|show|requeue|purge``: the dead-letter queue of a crawl's state."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from crawlfleet.cli.console import fail, safe
from crawlfleet.errors import CrawlfleetError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.runtime.wiring import open_frontier
from crawlfleet.settings import Settings

dlq_app = typer.Typer(help="Inspect and requeue dead-lettered URLs.", no_args_is_help=True)
out = Console()
err = Console(stderr=True)

StateOpt = Annotated[Path, typer.Option("--state", help="state directory of the crawl")]


@asynccontextmanager
async def open_store(state: Path) -> AsyncIterator[Frontier]:
    """The frontier of the crawl in ``state`` (``StateError`` if there is none)."""
    async with AsyncExitStack() as stack:
        yield await open_frontier(Settings(state_dir=state), stack)


def _run(coro: object) -> None:
    try:
        asyncio.run(coro)  # type: ignore[arg-type]
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)


@dlq_app.command("list")
def list_(state: StateOpt = Path(".crawlfleet"), limit: int = 100, offset: int = 0) -> None:
    """Dead letters: URL, attempts, last error, when."""

    async def main() -> None:
        async with open_store(state) as store:
            letters = await store.dead_letters(limit, offset)
            table = Table(title=f"dead letters ({(await store.counts()).dead})")
            for column in ("fingerprint", "url", "attempts", "last error", "died"):
                table.add_column(column)
            for letter in letters:
                died = dt.datetime.fromtimestamp(letter.died_at, dt.UTC).isoformat(
                    timespec="seconds"
                )
                last = letter.errors[-1] if letter.errors else ""
                table.add_row(
                    letter.request.fingerprint[:12],
                    safe(letter.request.url),
                    str(len(letter.errors)),
                    safe(last),
                    died,
                )
            out.print(table)

    _run(main())


@dlq_app.command()
def show(fingerprint: str, state: StateOpt = Path(".crawlfleet")) -> None:
    """Every attempt error of one dead letter (fingerprint or its prefix)."""

    async def main() -> None:
        async with open_store(state) as store:
            for letter in await store.dead_letters(limit=1_000_000):
                if letter.request.fingerprint.startswith(fingerprint):
                    request = letter.request
                    out.print(f"[bold]{safe(request.url)}[/] ({request.fingerprint})")
                    out.print(f"depth {request.depth}, parent {safe(request.parent)}")
                    for number, error in enumerate(letter.errors, 1):
                        out.print(f"  attempt {number}: {safe(error)}")
                    return
            raise CrawlfleetError(f"no dead letter with fingerprint {fingerprint!r}")

    _run(main())


@dlq_app.command()
def requeue(
    fingerprints: Annotated[list[str] | None, typer.Argument()] = None,
    state: StateOpt = Path(".crawlfleet"),
) -> None:
    """Put dead letters (all, or the given fingerprints) back in the queue."""

    async def main() -> None:
        async with open_store(state) as store:
            count = await store.requeue_dead(fingerprints or None)
            out.print(f"requeued {count}; run the crawl again to fetch them")

    _run(main())


@dlq_app.command()
def purge(
    fingerprints: Annotated[list[str] | None, typer.Argument()] = None,
    state: StateOpt = Path(".crawlfleet"),
) -> None:
    """Forget dead letters (all, or the given fingerprints)."""

    async def main() -> None:
        async with open_store(state) as store:
            out.print(f"purged {await store.purge_dead(fingerprints or None)}")

    _run(main())


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")
