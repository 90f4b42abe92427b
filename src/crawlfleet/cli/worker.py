"""``crawlfleet worker``: one Celery worker process serving every active distributed crawl.

The options, then ``runtime/celery/worker.py`` checks and runs the worker. Celery, Redis and
psycopg are imported when the command runs, so the embedded install (without the
``distributed`` extra) still loads the CLI.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Annotated, NoReturn

import typer

from crawlfleet.cli.collector import tune_collector
from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.errors import ConfigError, CrawlfleetError
from crawlfleet.monitoring.metric_snapshot import DEFAULT_BIND
from crawlfleet.redisurl import check_redis_url
from crawlfleet.settings.loading import load_settings

err = make_console(stderr=True)


def worker(
    ctx: typer.Context,
    redis: Annotated[
        str,
        typer.Option("--redis", envvar="CRAWLFLEET_REDIS_URL", help="Redis URL of the frontier"),
    ],
    postgres: Annotated[
        str | None,
        typer.Option("--postgres", envvar="CRAWLFLEET_POSTGRES_DSN", help="PostgreSQL DSN"),
    ] = None,
    queues: Annotated[str, typer.Option(help="queues to serve, comma-separated")] = "http",
    concurrency: Annotated[int, typer.Option(min=1, help="pages in flight")] = 16,
    broker: Annotated[
        str | None,
        typer.Option(
            envvar="CRAWLFLEET_BROKER_URL", help="Celery broker URL (default: the Redis URL)"
        ),
    ] = None,
    batch_s: Annotated[float, typer.Option(help="seconds a task keeps claiming pages")] = 2.0,
    loglevel: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")] = "INFO",
    accept_unsafe_redis: Annotated[
        bool,
        typer.Option(
            "--accept-unsafe-redis",
            help="serve a Redis without AOF, with eviction, or open without a password",
        ),
    ] = False,
    parsers: Annotated[
        str,
        typer.Option(
            help="parser modules or .py paths crawls may use, comma-separated (default: none "
            "beyond the built-in parser, selector parsers and installed entry points)"
        ),
    ] = "",
    metrics_port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="serve Prometheus /metrics on this port (0: any)"),
    ] = None,
    metrics_bind: Annotated[
        str, typer.Option(envvar="CRAWLFLEET_METRICS_BIND", help="address /metrics binds to")
    ] = DEFAULT_BIND,
    health: Annotated[
        bool,
        typer.Option(
            "--health",
            help="probe: exit 0 if a worker of this host sent a heartbeat within 30 s, else 1",
        ),
    ] = False,
) -> None:
    """Run a worker; extra arguments are passed to ``celery worker``.

    A crawl whose definition names a parser module not given to ``--parsers`` is refused:
    its tasks are skipped and logged.
    """
    from crawlfleet.runtime.backends import extra_missing

    if health:
        probe_health(redis)
    try:
        from crawlfleet.runtime.celery.worker import assemble
    except ImportError as exc:
        fail(extra_missing(exc), err)

    chosen = tuple(q.strip() for q in queues.split(",") if q.strip())
    allowed = tuple(p.strip() for p in parsers.split(",") if p.strip())
    try:
        celery_worker = assemble(
            redis,
            postgres,
            queues=chosen,
            parsers=allowed,
            concurrency=concurrency,
            batch_s=batch_s,
            broker_url=broker,
            accept_unsafe_redis=accept_unsafe_redis,
            browser_executable=load_settings().browser_executable,
        )
        metrics, server = None, None
        if metrics_port is not None:
            from crawlfleet.monitoring.metrics import Metrics

            metrics = Metrics()
            server = metrics.serve(metrics_port, metrics_bind)
    except CrawlfleetError as exc:
        fail(exc, err)
    if server is not None:
        err.print(f"metrics at {safe(server.url)}", soft_wrap=True)
    tune_collector()
    try:
        celery_worker.run(loglevel=loglevel, extra=list(ctx.args), metrics=metrics)
    finally:
        if server is not None:
            server.close()


def probe_health(redis: str) -> NoReturn:
    """Exit 0 with one line if a worker of this host has a fresh heartbeat, else 1 with why."""
    try:
        from crawlfleet.runtime.celery.health import host_health
    except ImportError as exc:
        from crawlfleet.runtime.backends import extra_missing

        fail(extra_missing(exc), err)
    try:
        url = check_redis_url(redis)
    except ConfigError as exc:
        fail(exc, err)
    ok, why = asyncio.run(host_health(url, socket.gethostname(), time.time()))
    (make_console() if ok else err).print(safe(why), soft_wrap=True)
    raise typer.Exit(0 if ok else 1)


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(worker)
