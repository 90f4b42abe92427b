"""``crawlfleet pause|resume|cancel|add|resume-parser``: operate a crawl while it runs.

``resume-parser PARSER DOMAIN`` re-opens a parser a drift paused on a domain
(``runtime/step/drift.py``), on both runtimes; with ``--parsers`` (the fixed ones), a crawl with
an archive parses its mismatched pages from the archive instead of fetching them again
(``runtime/reparse.py``; a distributed crawl's with ``--postgres``, ``reparse_jobs.py``).

``pause`` and ``resume`` work on both runtimes (``--state DIR`` or ``--redis URL --crawl-id
ID``); ``cancel`` and ``add`` on distributed crawls. Each opens the crawl's operations
(``crawlfleet.ops``); what each does to the running processes is told in
``runtime/control.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import CrawlIdOpt, PostgresOpt, RedisOpt, StateOpt, target_settings
from crawlfleet.errors import ConfigError, CrawlfleetError
from crawlfleet.frontier.drift_marks import drifts
from crawlfleet.monitoring.summary import CANCELLED_EXIT
from crawlfleet.ops.target import open_operations
from crawlfleet.settings import Settings
from crawlfleet.settings.loading import load_settings

if TYPE_CHECKING:
    from crawlfleet.ops.protocols import Operations

out = make_console()
err = make_console(stderr=True)


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        asyncio.run(coro)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)


def _name(ops: Operations, crawl_id: str) -> str:
    return safe(ops.describe(crawl_id))


def pause(state: StateOpt = None, redis: RedisOpt = None, crawl_id: CrawlIdOpt = None) -> None:
    """Stop claiming new pages (pages in flight finish); resume goes on where it stopped."""

    async def main() -> None:
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            await ops.set_paused(crawl, True)
        out.print(f"{_name(ops, crawl)} paused: no new page is fetched until it is resumed")

    _run(main())


def resume(state: StateOpt = None, redis: RedisOpt = None, crawl_id: CrawlIdOpt = None) -> None:
    """Go on with a paused crawl."""

    async def main() -> None:
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            await ops.set_paused(crawl, False)
        out.print(f"{_name(ops, crawl)} resumed")

    _run(main())


def cancel(redis: RedisOpt = None, crawl_id: CrawlIdOpt = None) -> None:
    """Stop a distributed crawl for good; its state stays for status and dlq."""

    async def main() -> None:
        async with open_operations(target_settings(None, redis, crawl_id)) as (ops, crawl):
            await ops.cancel(crawl)
        out.print(
            f"{_name(ops, crawl)} cancelled: its dispatcher exits with code {CANCELLED_EXIT} and "
            "workers stop serving it; crawl it again with --fresh to start over"
        )

    _run(main())


def add(
    urls: Annotated[list[str], typer.Argument(help="URLs to add as seeds")],
    redis: RedisOpt = None,
    crawl_id: CrawlIdOpt = None,
) -> None:
    """Add seed URLs to a running distributed crawl (its scope and robots.txt apply)."""

    async def main() -> None:
        async with open_operations(target_settings(None, redis, crawl_id)) as (ops, crawl):
            added = await ops.add_urls(crawl, urls)
        for url, reason in added.rejected:
            err.print(f"[yellow]not added:[/] {safe(url)}: {safe(reason)}", soft_wrap=True)
        out.print(
            f"added {added.admitted} URLs to {_name(ops, crawl)} "
            f"({added.not_admitted} seen before or over the page budget)"
        )
        if added.admitted and not added.dispatching:
            err.print(
                f"no dispatcher runs {_name(ops, crawl)} now: the URLs wait until "
                "crawlfleet crawl runs it again",
                soft_wrap=True,
            )
        if added.rejected and not added.admitted and not added.not_admitted:
            raise ConfigError("none of the URLs could be added")

    _run(main())


def resume_parser(
    parser: Annotated[str, typer.Argument(help="the parser a drift paused")],
    domain: Annotated[str, typer.Argument(help="the domain it was paused on")],
    state: StateOpt = None,
    redis: RedisOpt = None,
    crawl_id: CrawlIdOpt = None,
    parsers: Annotated[
        str | None,
        typer.Option(
            help="the fixed parsers (modules or .py files, comma-separated): a crawl with"
            " --archive parses its mismatched pages from the archive with them instead of"
            " fetching them again (a distributed one needs --postgres)"
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file")] = None,
    postgres: PostgresOpt = None,
) -> None:
    """Re-open a parser a drift paused on a domain, and requeue its mismatched pages there."""

    async def main() -> None:
        if parsers is not None:
            await _reparse(target_settings(state, redis, crawl_id))
            return
        async with open_operations(target_settings(state, redis, crawl_id)) as (ops, crawl):
            view = await (await ops.reader(crawl)).domain(domain)
            marks = drifts(view.strategy)
            if parser not in marks:
                known = ", ".join(f"{p} ({m})" for p, m in sorted(marks.items())) or "none"
                raise ConfigError(f"no drift of parser {parser!r} on {domain!r} (there: {known})")
            requeued = await ops.resume_parser(crawl, parser, domain)
        then = (
            "a running dispatcher sends them to the workers"
            if ops.mode == "distributed"
            else "run the crawl again to fetch them"
        )
        out.print(
            f"parser {safe(parser)} re-opened on {safe(domain)}: {requeued} pages requeued; {then}"
        )

    async def _reparse(target: Settings) -> None:
        names = [name.strip() for name in (parsers or "").split(",") if name.strip()]
        if target.redis_url is None:
            from crawlfleet.runtime.reparse import resume_reparsing

            settings = load_settings(config, state_dir=target.state_dir)
            settings.parsers = [*settings.parsers, *names]
            done = await resume_reparsing(settings, parser, domain)
            then = "run the crawl again (with the fixed parsers) to fetch them"
        else:
            if postgres is None:
                raise ConfigError("--parsers on a distributed crawl needs --postgres DSN")
            from crawlfleet.runtime.celery.reparse_jobs import resume_reparsing_distributed

            settings = target.model_copy(update={"parsers": names})
            done = await resume_reparsing_distributed(settings, postgres, parser, domain)
            then = "a running dispatcher sends them to the workers (deploy the fixed parsers)"
        out.print(
            f"parser {safe(parser)} re-opened on {safe(domain)}: {done.reparsed} pages parsed"
            f" from the archive ({done.items} items stored, no request made), {done.requeued}"
            f" pages requeued; {then}"
        )

    _run(main())


def register(app: typer.Typer) -> None:
    app.command()(pause)
    app.command()(resume)
    app.command("resume-parser")(resume_parser)
    app.command()(cancel)
    app.command()(add)
