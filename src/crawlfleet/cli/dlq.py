"""``crawlfleet dlq list|classes|show|requeue|purge``: the dead-letter queue of a crawl.

Embedded (``--state DIR``) or distributed (``--redis URL --crawl-id ID``), through the
crawl's operations (``crawlfleet.ops``). Dead letters are grouped by the class of their last
error (``monitoring/deadletters.py``): ``classes`` lists them, ``requeue --class NAME`` and
``purge --class NAME`` act on one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Coroutine
from typing import Annotated, Any, cast

import typer
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import CrawlIdOpt, RedisOpt, StateOpt, target_settings
from crawlfleet.errors import ConfigError, CrawlfleetError
from crawlfleet.frontier.protocols import DeadLetters
from crawlfleet.monitoring.deadletters import by_class, letter_class
from crawlfleet.ops.target import open_operations

dlq_app = typer.Typer(help="Inspect, requeue and purge dead-lettered URLs.", no_args_is_help=True)
out = make_console()
err = make_console(stderr=True)

FingerprintsArg = Annotated[
    list[str] | None,
    typer.Argument(help="fingerprints or their prefixes, as list prints them (default: all)"),
]
ClassOpt = Annotated[
    str | None, typer.Option("--class", help="only the dead letters of this error class")
]


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        asyncio.run(coro)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)


def _when(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).isoformat(timespec="seconds")


@dlq_app.command("list")
def list_(
    state: StateOpt = None,
    redis: RedisOpt = None,
    crawl_id: CrawlIdOpt = None,
    limit: int = 100,
    offset: int = 0,
    by_class_: Annotated[
        bool, typer.Option("--by-class", help="one row per error class (as dlq classes)")
    ] = False,
) -> None:
    """Dead letters, oldest first: fingerprint, URL, attempts, error class, last error."""
    if by_class_:
        classes(state, redis, crawl_id)
        return

    async def main() -> None:
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            reader = await ops.reader(crawl)
            letters = await reader.dead_letters(limit, offset)
            table = Table(title=f"dead letters ({(await reader.counts()).dead})")
            for column in ("fingerprint", "url", "attempts", "class", "last error", "died"):
                table.add_column(column)
            for letter in letters:
                table.add_row(
                    letter.request.fingerprint[:12],
                    safe(letter.request.url),
                    str(len(letter.errors)),
                    safe(letter_class(letter)),
                    safe(letter.errors[-1] if letter.errors else ""),
                    _when(letter.died_at),
                )
            out.print(table)

    _run(main())


@dlq_app.command()
def classes(
    state: StateOpt = None,
    redis: RedisOpt = None,
    crawl_id: CrawlIdOpt = None,
    limit: Annotated[int, typer.Option(help="dead letters read at most")] = 10_000,
) -> None:
    """Dead letters grouped by the class of their last error, most first, with sample URLs."""

    async def main() -> None:
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            # by_class only reads (dead_letters)
            groups = await by_class(cast(DeadLetters, await ops.reader(crawl)), limit)
            table = Table(title=f"dead letters by error class ({sum(g.count for g in groups)})")
            for column in ("class", "count", "sample URLs"):
                table.add_column(column, justify="right" if column == "count" else "left")
            for group in groups:
                urls = "\n".join(safe(url) for url in group.sample_urls)
                table.add_row(safe(group.name), str(group.count), urls)
            out.print(table)

    _run(main())


@dlq_app.command()
def show(
    fingerprint: str, state: StateOpt = None, redis: RedisOpt = None, crawl_id: CrawlIdOpt = None
) -> None:
    """Every attempt error of one dead letter (fingerprint or its prefix)."""

    async def main() -> None:
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            for letter in await (await ops.reader(crawl)).dead_letters(limit=1_000_000):
                if letter.request.fingerprint.startswith(fingerprint):
                    request = letter.request
                    out.print(f"[bold]{safe(request.url)}[/] ({safe(request.fingerprint)})")
                    out.print(f"depth {request.depth}, parent {safe(request.parent)}")
                    out.print(f"class {safe(letter_class(letter))}, died {_when(letter.died_at)}")
                    for number, error in enumerate(letter.errors, 1):
                        out.print(f"  attempt {number}: {safe(error)}")
                    return
            raise CrawlfleetError(f"no dead letter with fingerprint {fingerprint!r}")

    _run(main())


def _one_selection(fingerprints: list[str] | None, class_name: str | None) -> None:
    if fingerprints and class_name is not None:
        raise ConfigError("give fingerprints or --class NAME, not both")


@dlq_app.command()
def requeue(
    fingerprints: FingerprintsArg = None,
    class_name: ClassOpt = None,
    state: StateOpt = None,
    redis: RedisOpt = None,
    crawl_id: CrawlIdOpt = None,
) -> None:
    """Put dead letters (all, the given fingerprints, or one class) back in the queue."""

    async def main() -> None:
        _one_selection(fingerprints, class_name)
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            if class_name is not None:
                count = await ops.requeue_class(crawl, class_name)
            else:
                count = await ops.requeue_dead(crawl, fingerprints or None)
        then = (
            "a running dispatcher sends them to the workers; if it has finished, run the crawl again"
            if ops.mode == "distributed"
            else "run the crawl again to fetch them"
        )
        out.print(f"requeued {count}; {then}")

    _run(main())


@dlq_app.command()
def purge(
    fingerprints: FingerprintsArg = None,
    class_name: ClassOpt = None,
    state: StateOpt = None,
    redis: RedisOpt = None,
    crawl_id: CrawlIdOpt = None,
) -> None:
    """Forget dead letters (all, the given fingerprints, or one class); they stay seen."""

    async def main() -> None:
        _one_selection(fingerprints, class_name)
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            if class_name is not None:
                count = await ops.purge_class(crawl, class_name)
            else:
                count = await ops.purge_dead(crawl, fingerprints or None)
        out.print(f"purged {count}")

    _run(main())


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")
