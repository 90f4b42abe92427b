"""``crawlfleet crawl``: run a crawl embedded (default) or distributed (``--redis``)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crawlfleet.cli.console import fail, safe
from crawlfleet.cli.progress import CrawlProgress, summary_table
from crawlfleet.clock import SystemClock
from crawlfleet.errors import BadUrl, CrawlfleetError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.monitoring.attempt_log import SqliteAttemptLog
from crawlfleet.monitoring.events import EventBus
from crawlfleet.monitoring.recorder import AttemptRecorder
from crawlfleet.monitoring.stats import LiveStats
from crawlfleet.pipeline.export import export_items
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from crawlfleet.runtime.local import LocalRunner
from crawlfleet.runtime.wiring import build_crawl, state_paths
from crawlfleet.settings import Settings, load_settings
from crawlfleet.urls import UrlRules

err = Console(stderr=True)


def valid_seeds(settings: Settings, seeds: list[str]) -> list[str]:
    """The seeds that are URLs we can fetch; each bad one is reported on stderr."""
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    good = []
    for seed in seeds:
        try:
            rules.canonical(seed)
        except BadUrl as exc:
            err.print(f"[yellow]skipping seed:[/] {safe(exc)}")
            continue
        good.append(seed)
    return good


async def run_embedded(settings: Settings, seeds: list[str], *, fresh: bool) -> int:
    """Crawl in this process with state under ``settings.state_dir``; the exit code."""
    state_dir = settings.state_dir
    state_dir.mkdir(parents=True, exist_ok=True)
    state_file, items_file = state_paths(state_dir)
    if fresh:
        for path in state_dir.glob("*.sqlite*"):
            path.unlink()
    clock = SystemClock()
    events = EventBus()
    stats = LiveStats(events, clock.now())
    console = Console(stderr=True)
    async with AsyncExitStack() as stack:
        store = await SqliteQueueStore.open(state_file)
        stack.push_async_callback(store.close)
        attempt_log = await SqliteAttemptLog.open(state_file)
        stack.push_async_callback(attempt_log.close)
        sink = await SqliteSink.open(items_file)
        stack.push_async_callback(sink.close)
        graph = await build_crawl(
            settings,
            seeds=seeds,
            store=store,
            sink=sink,
            attempt_log=attempt_log,
            events=events,
            clock=clock,
            stack=stack,
            rejects=sink,
        )
        recorder = AttemptRecorder(events, attempt_log)
        with CrawlProgress(console, stats, enabled=sys.stderr.isatty()) as progress:

            async def tick() -> None:
                await recorder.flush()
                progress.refresh(clock.now())

            runner = LocalRunner(
                graph.crawler,
                concurrency=settings.concurrency,
                clock=clock,
                events=events,
                crawl_id=settings.crawl_id,
                on_tick=tick,
            )
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGINT, _on_interrupt, runner, loop)
            loop.add_signal_handler(signal.SIGTERM, runner.stop.set)
            try:
                result = await runner.run(seeds, sitemaps=settings.follow_sitemaps)
            finally:
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)
                await recorder.flush()
        console.print(summary_table(await attempt_log.summary()))
        if settings.output is not None:
            written = await asyncio.to_thread(export_items, items_file, settings.output)
            console.print(f"wrote {written} items to {safe(settings.output)}")
    counts = result.counts
    console.print(
        f"{counts.done} done, {counts.dead} dead-lettered, {counts.pending} pending; "
        f"{stats.items} items stored this run"
    )
    if result.complete:
        return 0
    err.print(f"crawl interrupted with {counts.pending} URLs pending; run again to resume")
    return 130


def _on_interrupt(runner: LocalRunner, loop: asyncio.AbstractEventLoop) -> None:
    """First Ctrl-C: stop claiming and finish in-flight pages; second: stop now."""
    if runner.stop.is_set():
        for task in asyncio.all_tasks(loop):
            task.cancel()
        return
    err.print("stopping: finishing in-flight pages (Ctrl-C again to stop now)")
    runner.stop.set()


def crawl(
    seeds: Annotated[list[str] | None, typer.Argument(help="start URLs")] = None,
    config: Annotated[Path | None, typer.Option(help="crawl config (TOML)")] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help=".jsonl/.csv/.sqlite")
    ] = None,
    state: Annotated[Path | None, typer.Option(help="state directory")] = None,
    fresh: Annotated[bool, typer.Option(help="forget the saved state and start over")] = False,
    concurrency: Annotated[int | None, typer.Option()] = None,
    per_domain_concurrency: Annotated[int | None, typer.Option()] = None,
    delay: Annotated[
        float | None, typer.Option(help="seconds between requests to a domain")
    ] = None,
    max_pages: Annotated[int | None, typer.Option()] = None,
    max_depth: Annotated[int | None, typer.Option()] = None,
    allow_private_addresses: Annotated[
        bool | None, typer.Option("--allow-private-addresses", help="fetch loopback/private hosts")
    ] = None,
    user_agent: Annotated[str | None, typer.Option()] = None,
    parsers: Annotated[
        str | None, typer.Option(help="parser modules or .py files, comma-separated")
    ] = None,
    sitemaps: Annotated[
        bool | None, typer.Option("--sitemaps", help="also seed from sitemaps")
    ] = None,
    obey_robots: Annotated[bool | None, typer.Option("--obey-robots/--ignore-robots")] = None,
    redis: Annotated[
        str | None, typer.Option("--redis", help="Redis URL: crawl distributed")
    ] = None,
    postgres: Annotated[
        str | None, typer.Option("--postgres", help="PostgreSQL DSN for items")
    ] = None,
    crawl_id: Annotated[str | None, typer.Option(help="name of a distributed crawl")] = None,
) -> None:
    """Crawl from SEEDS within their domains (or the config's allowed_domains)."""
    try:
        settings = load_settings(
            config,
            output=output,
            state_dir=state,
            concurrency=concurrency,
            per_domain_concurrency=per_domain_concurrency,
            delay_s=delay,
            max_pages=max_pages,
            max_depth=max_depth,
            allow_private_addresses=allow_private_addresses,
            user_agent=user_agent,
            follow_sitemaps=sitemaps,
            obey_robots=obey_robots,
            redis_url=redis,
            postgres_dsn=postgres,
            crawl_id=crawl_id,
        )
        if parsers:
            settings.parsers = [*settings.parsers, *(p.strip() for p in parsers.split(",") if p)]
        all_seeds = valid_seeds(settings, [*settings.seeds, *(seeds or [])])
        if not all_seeds:
            raise CrawlfleetError("no valid seed URL given")
        if settings.redis_url is not None:
            from crawlfleet.cli.distributed import run_distributed

            code = asyncio.run(run_distributed(settings, all_seeds, fresh=fresh))
        else:
            code = asyncio.run(run_embedded(settings, all_seeds, fresh=fresh))
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    except (KeyboardInterrupt, asyncio.CancelledError):
        err.print("stopped; run the same command again to resume")
        raise typer.Exit(130) from None
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    raise typer.Exit(code)
