"""The dispatcher side of ``crawlfleet crawl --redis URL --postgres DSN``.

The Celery broker is the crawl's Redis unless ``CRAWLFLEET_BROKER_URL`` (or the
``broker_url`` argument) names another, e.g. ``amqp://guest:guest@127.0.0.1:5672/``.
Celery, Redis and psycopg are imported when a distributed crawl starts, so that an install
without the ``distributed`` extra gets a one-line error instead of a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from contextlib import AsyncExitStack

from rich.console import Console

from crawlfleet.cli.progress import CrawlProgress, summary_table
from crawlfleet.clock import SystemClock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.monitoring.events import EventBus
from crawlfleet.monitoring.stats import LiveStats
from crawlfleet.settings import Settings

BROKER_ENV = "CRAWLFLEET_BROKER_URL"


def extra_missing(exc: ImportError) -> ConfigError:
    """The one-line error for a distributed command on an install without the extra."""
    return ConfigError(
        f"distributed mode needs crawlfleet installed with its distributed extra ({exc})"
    )


async def run_distributed(
    settings: Settings, seeds: list[str], *, fresh: bool, broker_url: str | None = None
) -> int:
    """Dispatch a crawl to the Celery workers and wait until it is done; the exit code.

    ``ConfigError``/``StateError`` (one line) before anything is stored if the broker cannot
    be imported or reached: the dispatcher's loop would retry it for minutes.
    """
    try:
        from crawlfleet.runtime.celery.app import check_broker
        from crawlfleet.runtime.celery.dispatcher import Dispatcher, open_crawl
    except ImportError as exc:
        raise extra_missing(exc) from None
    broker_url = broker_url or os.environ.get(BROKER_ENV) or settings.redis_url
    if broker_url is not None:
        await asyncio.to_thread(check_broker, broker_url)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    clock = SystemClock()
    events = EventBus()
    stats = LiveStats(events, clock.now())
    console = Console(stderr=True)
    async with AsyncExitStack() as stack:
        crawl = await open_crawl(
            settings,
            seeds,
            broker_url=broker_url,
            fresh=fresh,
            events=events,
            clock=clock,
            stack=stack,
        )
        with CrawlProgress(console, stats, enabled=sys.stderr.isatty()) as progress:

            async def tick() -> None:
                progress.refresh(clock.now())

            dispatcher = Dispatcher(crawl, clock=clock, events=events, on_tick=tick)
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGINT, dispatcher.stop.set)
            loop.add_signal_handler(signal.SIGTERM, dispatcher.stop.set)
            try:
                result = await dispatcher.run()
            finally:
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)
        try:
            console.print(summary_table(await crawl.attempt_log.summary()))
        except StateError as exc:
            console.print(f"[yellow]no summary:[/] {exc}")
    counts = result.counts
    console.print(
        f"crawl {settings.crawl_id}: {counts.done} done, {counts.dead} dead-lettered, "
        f"{counts.pending} pending"
    )
    if result.complete:
        return 0
    console.print(
        f"crawl interrupted with {counts.pending} URLs pending; run the same command "
        f"(crawl id {settings.crawl_id}) again to resume"
    )
    return 130
