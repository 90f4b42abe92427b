"""``crawlfleet crawl``: run a crawl embedded (default) or distributed (``--redis``).

A thin layer over ``crawlfleet.Crawl``: flags to settings, progress and summary on stderr,
signals, the outcome judge's lines (``monitoring/outcome.py``), exit codes (0 complete, 2 bad
input or state, 3 pages failed to parse beyond ``--max-parse-errors``, 4 cancelled, 5 finished
with a shortfall: got nothing or lost something, unless ``--allow-shortfall``; 130 interrupted).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crawlfleet.api import Crawl, split_seeds
from crawlfleet.cli.collector import tune_collector
from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.progress import LOG_EVERY_S, CrawlProgress, summary
from crawlfleet.errors import ConfigError, CrawlfleetError
from crawlfleet.monitoring.metric_snapshot import DEFAULT_BIND, DEFAULT_TOP_DOMAINS
from crawlfleet.monitoring.outcome import SHORTFALL_EXIT
from crawlfleet.monitoring.summary import CANCELLED_EXIT, PARSE_ERROR_EXIT, dropped_line
from crawlfleet.runtime.loop import event_loop
from crawlfleet.settings import Settings
from crawlfleet.settings.loading import load_settings

if TYPE_CHECKING:
    from crawlfleet.monitoring.metrics import Metrics

err = make_console(stderr=True)


async def run_crawl(
    settings: Settings,
    seeds: list[str],
    *,
    fresh: bool,
    max_parse_errors: int = 0,
    allow_shortfall: bool = False,
    log_every_s: float = LOG_EVERY_S,
    metrics: Metrics | None = None,
) -> int:
    """Run a crawl (``crawlfleet.Crawl``) with progress and a summary on stderr; the exit code."""
    good, bad = split_seeds(settings, [*settings.seeds, *seeds])
    for error in bad:
        err.print(f"[yellow]skipping seed:[/] {safe(error)}")
    if not good:
        raise ConfigError("no valid seed URL given")
    settings = settings.model_copy(update={"seeds": []})
    console = make_console(stderr=True)
    with CrawlProgress(console, tty=sys.stderr.isatty(), log_every_s=log_every_s) as progress:
        crawl = Crawl(
            settings, seeds=good, fresh=fresh, on_progress=progress.update, metrics=metrics
        )
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, _on_interrupt, crawl, loop)
        loop.add_signal_handler(signal.SIGTERM, crawl.stop)
        try:
            result = await crawl.run_async()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            loop.remove_signal_handler(signal.SIGTERM)
    console.print(summary(result))
    if result.exported_items is not None:
        console.print(f"wrote {result.exported_items} items to {safe(str(settings.output))}")
    counts = result.counts
    console.print(
        f"crawl {safe(settings.crawl_id)}: {counts.done} done, {counts.dead} dead-lettered, "
        f"{counts.pending} pending"
    )
    for finding in result.findings:
        colour = "red" if finding.shortfall else "yellow"
        console.print(f"[{colour}]{safe(finding.line)}[/]", soft_wrap=True, highlight=False)
    dropped = dropped_line(result.stats)
    if dropped is not None:  # the last word: a crawl that lost links to a limit says so
        console.print(f"[yellow]{dropped}[/]", soft_wrap=True)
    code = result.exit_code(max_parse_errors, allow_shortfall=allow_shortfall)
    if code == CANCELLED_EXIT:
        err.print("crawl cancelled; crawl again with --fresh to start over")
    elif not result.complete:
        again = (
            f"run the same command (crawl id {settings.crawl_id}) again"
            if settings.redis_url
            else "run again"
        )
        err.print(
            f"crawl interrupted with {counts.pending} URLs pending; {safe(again)} to resume",
            soft_wrap=True,
        )
    elif code == PARSE_ERROR_EXIT:
        err.print(
            f"[red]error:[/] {result.parse_errors} pages failed to parse "
            f"(--max-parse-errors {max_parse_errors})",
            soft_wrap=True,
        )
    elif code == SHORTFALL_EXIT:
        err.print(
            f"[red]error:[/] the crawl finished with a shortfall (exit {SHORTFALL_EXIT}); "
            "--allow-shortfall accepts it",
            soft_wrap=True,
        )
    return code


def _on_interrupt(crawl: Crawl, loop: asyncio.AbstractEventLoop) -> None:
    """First Ctrl-C: stop claiming and finish in-flight pages; second: stop now."""
    if crawl.stopping:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        return
    err.print("stopping: finishing in-flight pages (Ctrl-C again to stop now)")
    crawl.stop()


def crawl(
    seeds: Annotated[list[str] | None, typer.Argument(help="start URLs")] = None,
    config: Annotated[Path | None, typer.Option(help="crawl config (TOML)")] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o", "--output", help=".jsonl/.json/.csv/.parquet/.sqlite file, or s3://bucket/key"
        ),
    ] = None,
    state: Annotated[Path | None, typer.Option(help="state directory")] = None,
    fresh: Annotated[bool, typer.Option(help="forget the saved state and start over")] = False,
    recrawl: Annotated[
        bool, typer.Option("--recrawl", help="fetch the known URLs that are due once, then exit")
    ] = False,
    continuous: Annotated[
        bool, typer.Option("--continuous", help="keep running, fetching what becomes due")
    ] = False,
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
    robots_token: Annotated[
        str | None, typer.Option(help="the name robots.txt groups address us by")
    ] = None,
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
    partitions: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=4096,
            help="frontier partitions of a new distributed crawl (spread over a Redis Cluster)",
        ),
    ] = None,
    wait_for_workers: Annotated[
        bool | None,
        typer.Option(
            "--wait-for-workers",
            help="distributed: wait for ever for a worker that serves the crawl (else: stop"
            " after worker_wait_s, 60 s, with exit 2 and the reason)",
        ),
    ] = None,
    accept_unsafe_redis: Annotated[
        bool | None,
        typer.Option(
            "--accept-unsafe-redis",
            help="crawl on a Redis without AOF, with eviction, or open without a password",
        ),
    ] = None,
    http_cache: Annotated[
        Path | None,
        typer.Option("--http-cache", help="store responses in DIR and replay them (development)"),
    ] = None,
    archive: Annotated[
        str | None,
        typer.Option(
            "--archive", help="keep every response fetched as WARC files in this directory"
        ),
    ] = None,
    secrets: Annotated[
        Path | None,
        typer.Option("--secrets", help="TOML file of per-domain login and Basic auth secrets"),
    ] = None,
    max_parse_errors: Annotated[
        int,
        typer.Option(min=0, help=f"pages allowed to fail parsing before exit {PARSE_ERROR_EXIT}"),
    ] = 0,
    allow_shortfall: Annotated[
        bool,
        typer.Option(
            "--allow-shortfall",
            envvar="CRAWLFLEET_ALLOW_SHORTFALL",
            help=f"exit 0, not {SHORTFALL_EXIT}, when the crawl got nothing or lost something",
        ),
    ] = False,
    progress_every: Annotated[
        float,
        typer.Option(min=0.1, help="seconds between progress lines when stderr is no terminal"),
    ] = LOG_EVERY_S,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="serve Prometheus /metrics on this port (0: any)"),
    ] = None,
    metrics_bind: Annotated[
        str, typer.Option(envvar="CRAWLFLEET_METRICS_BIND", help="address /metrics binds to")
    ] = DEFAULT_BIND,
    metrics_top_domains: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="CRAWLFLEET_METRICS_TOP_DOMAINS",
            help="domains with a metrics label of their own; the rest are 'other'",
        ),
    ] = DEFAULT_TOP_DOMAINS,
) -> None:
    """Crawl from SEEDS within their domains (or the config's allowed_domains)."""
    stack = contextlib.ExitStack()
    try:
        if recrawl and continuous:
            raise ConfigError("give --recrawl (one pass) or --continuous, not both")
        if (recrawl or continuous) and fresh:
            raise ConfigError("--fresh forgets the known URLs that --recrawl/--continuous revisit")
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
            robots_token=robots_token,
            follow_sitemaps=sitemaps,
            obey_robots=obey_robots,
            redis_url=redis,
            postgres_dsn=postgres,
            crawl_id=crawl_id,
            frontier_partitions=partitions,
            accept_unsafe_redis=accept_unsafe_redis,
            worker_wait_s=0.0 if wait_for_workers else None,
            http_cache_dir=http_cache,
            archive=archive,
            secrets_file=secrets,
            revisit="continuous" if continuous else "pass" if recrawl else None,
        )
        if parsers:
            settings.parsers = [*settings.parsers, *(p.strip() for p in parsers.split(",") if p)]
        if settings.frontier_partitions is not None and settings.redis_url is None:
            raise ConfigError("--partitions splits a distributed frontier: give --redis URL too")
        metrics = None
        if metrics_port is not None:
            from crawlfleet.monitoring.metrics import Metrics

            metrics = Metrics(top_domains=metrics_top_domains)
            server = metrics.serve(metrics_port, metrics_bind)
            stack.callback(server.close)
            err.print(f"metrics at {safe(server.url)}", soft_wrap=True)
        tune_collector()
        code = event_loop.run(
            run_crawl(
                settings,
                seeds or [],
                fresh=fresh,
                max_parse_errors=max_parse_errors,
                allow_shortfall=allow_shortfall,
                log_every_s=progress_every,
                metrics=metrics,
            )
        )
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    except (KeyboardInterrupt, asyncio.CancelledError):
        err.print("stopped; run the same command again to resume")
        raise typer.Exit(130) from None
    finally:
        stack.close()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    raise typer.Exit(code)
