"""``crawlfleet status``: crawls, their counts and per-domain state, and the workers seen.

``--redis URL``: the distributed crawls in that Redis (one with ``--crawl-id``) and the
workers; ``--state DIR``: the embedded crawl in that state directory. Both read through the
crawl's operations (``crawlfleet.ops``). A crawl's state says
whether it was paused or cancelled (``crawlfleet pause|resume|cancel``), and a dispatching
crawl no live worker serves says why (``crawls.no_worker_reason``). With one crawl, a
table per domain: queued, in flight, done, failed, dead, what limits dropped, delay, block
state and the fetch strategy slot (the ladder's ``rung``, ``fetcher``, ...; what the adaptive
fetcher learned), then one line of what limits dropped, by limit; then, per (parser, domain)
with expectations, its quality figures and drift mark, and a line per (parser, domain) whose
drift test fired (``runtime/step/drift.py``).

``--postgres DSN`` with ``--crawl-id``: also (or, without ``--redis``, only) the quality
scores the crawl's dispatcher last wrote to PostgreSQL (``monitoring/postgres_quality.py``):
they outlast the crawl's Redis state.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import CRAWL_ID_ENV, REDIS_ENV, from_environment
from crawlfleet.errors import CrawlfleetError, StateError
from crawlfleet.frontier.drift_marks import PAUSED, drifts
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.monitoring.quality_scores import scores
from crawlfleet.monitoring.summary import block_state, dropped_line, strategy_text
from crawlfleet.ops.target import open_operations
from crawlfleet.records import Outcome
from crawlfleet.redact import redact
from crawlfleet.redisurl import check_redis_url
from crawlfleet.runtime.control import WORKER_SEEN_S, RunState
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.ops.protocols import CrawlReader, Operations

out = make_console()
err = make_console(stderr=True)

DOMAIN_ROWS = 50


def domain_table(views: list[DomainView], now: float, title: str) -> Table:
    """One row per domain; ``done`` counts finished requests, ``failed`` those without a page."""
    table = Table(title=title)
    columns = ("domain", "queued", "in flight", "done", "failed", "dead", "dropped")
    for column in (*columns, "delay", "block", "strategy"):
        left = column in ("domain", "block", "strategy")
        table.add_column(column, justify="left" if left else "right")
    for view in views:
        s = view.stats
        failed = s.get(f"outcome.{Outcome.FAILED.value}") + s.get(
            f"outcome.{Outcome.PARSE_ERROR.value}"
        )
        done = (
            failed
            + s.get(f"outcome.{Outcome.OK.value}")
            + s.get(f"outcome.{Outcome.SKIPPED.value}")
        )
        table.add_row(
            safe(view.domain),
            str(view.queued),
            str(view.in_flight),
            str(done),
            str(failed),
            str(s.get(f"outcome.{Outcome.DEAD.value}")),
            str(sum(s.dropped().values())),
            f"{view.effective_delay_s:g} s ({view.delay_source.value})",
            safe(block_state(view, now)),
            safe(strategy_text(view)),
        )
    return table


def quality_table(views: list[DomainView]) -> Table | None:
    """Per (parser, domain) with expectations: pages, share met, items per page, fill rates
    and the drift mark (None without such a parser)."""
    table = Table(title="parsers with expectations")
    for column in ("parser", "domain", "pages", "met", "items/page", "fill rates", "drift"):
        left = column in ("parser", "domain", "fill rates", "drift")
        table.add_column(column, justify="left" if left else "right")
    for view in views:
        marks = drifts(view.strategy)
        for parser, score in scores(view.stats).items():
            rates = " ".join(f"{f}:{r:.0%}" for f, r in score.fill_rates().items())
            table.add_row(
                safe(parser),
                safe(view.domain),
                str(score.pages),
                f"{score.met_share or 0:.0%}",
                f"{score.items_per_page or 0:.1f}",
                safe(rates),
                safe(marks.get(parser, "-")),
            )
    return table if table.row_count else None


async def _domains(reader: CrawlReader, title: str) -> None:
    views = await reader.domains(DOMAIN_ROWS)
    out.print(domain_table(views, time.time(), title))
    dropped = dropped_line(await reader.stats())
    out.print(dropped or "dropped by limits: nothing", soft_wrap=True)
    quality = quality_table(views)
    if quality is not None:
        out.print(quality)
    for view in views:
        for parser, mark in sorted(drifts(view.strategy).items()):
            then = (
                f"paused: crawlfleet resume-parser {parser} {view.domain}"
                if mark == PAUSED
                else "crawl goes on"
            )
            out.print(f"drift: parser {safe(parser)} on {safe(view.domain)} ({safe(then)})")


async def _embedded(ops: Operations, crawl_id: str) -> None:
    """The state file read read-only (as the dashboard does): a running crawl is shown too."""
    reader = await ops.reader(crawl_id)
    c = await reader.counts()
    paused = await ops.asked(crawl_id) is RunState.PAUSED
    out.print(
        f"{safe(ops.describe(crawl_id))}{' (paused)' if paused else ''}: {c.queued} queued, "
        f"{c.leased} leased, {c.done} done, {c.dead} dead, {c.seen} seen"
    )
    await _domains(reader, "domains")


async def _distributed(ops: Operations, crawl_id: str | None, where: str) -> None:
    ids = await ops.crawl_ids()
    if crawl_id is not None:
        if crawl_id not in ids:
            raise StateError(f"no crawl {crawl_id!r} in {where}")
        ids = [crawl_id]
    crawls = Table(title="crawls")
    for column in ("crawl", "state", "queued", "leased", "done", "dead (DLQ)", "seen", "dropped"):
        crawls.add_column(column, justify="left" if column in ("crawl", "state") else "right")
    unserved: list[str] = []
    reader: CrawlReader | None = None
    for name in ids:
        reader = await ops.reader(name)
        c = await reader.counts()
        state = await ops.run_state(name, c)
        why = await ops.no_worker(name) if c.pending else None
        if state == "dispatching" and why is not None:
            state = "dispatching, no worker"
            unserved.append(f"crawl {name}: no live worker serves it ({why})")
        dropped = sum((await reader.stats()).dropped().values())
        row = (c.queued, c.leased, c.done, c.dead, c.seen, dropped)
        crawls.add_row(safe(name), state, *(str(n) for n in row))
    out.print(crawls)
    for line in unserved:
        out.print(f"[yellow]{safe(line)}[/]", soft_wrap=True)
    if crawl_id is not None and reader is not None:
        await _domains(reader, f"domains of {crawl_id}")
    workers = Table(title=f"workers (live: heartbeat within {WORKER_SEEN_S:.0f} s)")
    for column in ("worker", "live", "last seen", "crawl", "concurrency", "queues"):
        workers.add_column(column)
    for worker in await ops.workers():
        live = "yes" if worker.live else "no"
        workers.add_row(
            safe(worker.name), live, f"{worker.seen_ago_s:.0f} s ago", safe(worker.crawl),
            str(worker.concurrency), safe(",".join(worker.queues)),
        )  # fmt: skip
    out.print(workers)


def postgres_quality_table(report: dict[str, Any], crawl_id: str) -> Table:
    """The quality scores of ``read_quality``: a row per parser (domain ``all``), then per
    (parser, domain)."""
    written = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(report["updated_at"]))
    table = Table(title=f"quality scores of {safe(crawl_id)} in PostgreSQL (written {written} UTC)")
    for column in ("parser", "domain", "pages", "met", "items/page", "fill rates"):
        left = column in ("parser", "domain", "fill rates")
        table.add_column(column, justify="left" if left else "right")
    for parser, score in report["parsers"].items():
        rows = [("all", score), *score["domains"].items()]
        for domain, figures in rows:
            rates = " ".join(f"{f}:{r:.0%}" for f, r in figures["fill_rates"].items())
            table.add_row(
                safe(parser),
                safe(domain),
                str(figures["pages"]),
                f"{figures['met_share'] or 0:.0%}",
                f"{figures['items_per_page'] or 0:.1f}",
                safe(rates),
            )
    return table


async def _postgres_quality(dsn: str, crawl_id: str) -> None:
    from crawlfleet.monitoring.postgres_quality import PostgresQualityScores

    scores_log = await PostgresQualityScores.open(dsn, crawl_id=crawl_id)
    try:
        report = await scores_log.read()
    finally:
        await scores_log.close()
    if report is None:
        out.print(f"no quality scores of crawl {safe(crawl_id)} in PostgreSQL")
    else:
        out.print(postgres_quality_table(report, crawl_id))


def status(
    redis: Annotated[
        str | None,
        typer.Option("--redis", envvar=REDIS_ENV, help="Redis URL of the distributed crawls"),
    ] = None,
    crawl_id: Annotated[
        str | None,
        typer.Option(envvar=CRAWL_ID_ENV, help="show only this crawl, per domain"),
    ] = None,
    state: Annotated[
        Path | None, typer.Option("--state", help="state directory of an embedded crawl")
    ] = None,
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres",
            help="PostgreSQL DSN: with --crawl-id, the quality scores its dispatcher wrote",
        ),
    ] = None,
) -> None:
    """Counts per state, DLQ size and per-domain rows of crawls, and the workers seen."""
    try:
        if state is not None and from_environment(redis, REDIS_ENV):
            redis = None  # an explicit --state wins over the environment
        if redis is not None and state is not None:
            raise CrawlfleetError("give --redis URL (distributed) or --state DIR, not both")
        if postgres is not None and state is not None:
            raise CrawlfleetError("give --state DIR (embedded) or --postgres DSN, not both")
        settings: Settings | None = None
        if redis is not None:
            settings = Settings(redis_url=check_redis_url(redis))
        elif state is not None:
            settings = Settings(state_dir=state, redis_url=None)
        elif postgres is None:
            raise CrawlfleetError(
                "give --redis URL (distributed), --state DIR (embedded)"
                " or --postgres DSN --crawl-id ID (a distributed crawl's quality scores)"
            )
        if postgres is not None and crawl_id is None and redis is None:
            raise CrawlfleetError("--postgres shows a crawl's quality scores: give --crawl-id ID")
        if settings is not None:
            asyncio.run(_status(settings, crawl_id))
        if postgres is not None and crawl_id is not None:
            asyncio.run(_postgres_quality(postgres, crawl_id))
    except CrawlfleetError as exc:
        fail(exc, err)


async def _status(settings: Settings, crawl_id: str | None) -> None:
    async with open_operations(settings) as (ops, crawl):
        if ops.mode == "embedded":
            await _embedded(ops, crawl)
        else:
            await _distributed(ops, crawl_id, f"Redis at {redact(settings.redis_url or '')}")


def register(app: typer.Typer) -> None:
    app.command()(status)
