"""Run a crawl from Python: ``Crawl(settings).run()`` or ``await Crawl(settings).run_async()``.

The same ``Settings`` object as the CLI decides the runtime: embedded (asyncio + SQLite under
``state_dir``) by default, distributed when ``redis_url`` and ``postgres_dsn`` are set (this
process is then the dispatcher; ``crawlfleet worker`` processes do the fetching). Either way
the run returns a ``CrawlResult`` read from the store's counters. ``settings.output`` is
written when the run ends: from the items file (embedded) or from PostgreSQL (distributed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from crawlfleet.archive.exports import export_to
from crawlfleet.clock import Clock, SystemClock
from crawlfleet.counters import CrawlStats
from crawlfleet.errors import BadUrl, ConfigError, StateError
from crawlfleet.events import EventBus
from crawlfleet.monitoring.stats import Sample, StatsView
from crawlfleet.monitoring.summary import CrawlResult, RunContext, read_result
from crawlfleet.ops.results import reject_reasons
from crawlfleet.pipeline.export import export_items, export_postgres, format_of
from crawlfleet.pipeline.reject_reasons import TOP_REASONS
from crawlfleet.runtime.backends import extra_missing, open_embedded, open_proxy_stores
from crawlfleet.runtime.control import Control, FileControl, RunState
from crawlfleet.runtime.local import LocalRunner
from crawlfleet.runtime.loop import event_loop
from crawlfleet.runtime.wiring import build_crawl
from crawlfleet.settings import Settings
from crawlfleet.urls import UrlRules

if TYPE_CHECKING:  # prometheus-client is imported only when metrics are served
    from crawlfleet.monitoring.metrics import Metrics

STATS_FILE = "stats.json"
"""The statistics of an embedded run, written in its state directory when it ends."""

ProgressFn = Callable[[Sample], None]


def split_seeds(settings: Settings, seeds: Sequence[str]) -> tuple[list[str], list[str]]:
    """The seeds that are URLs a crawl can fetch, and the errors of the others."""
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    good: list[str] = []
    bad: list[str] = []
    for seed in seeds:
        try:
            rules.target(seed)
        except BadUrl as exc:
            bad.append(str(exc))
            continue
        good.append(seed)
    return good, bad


class Crawl:
    """One crawl of ``settings.seeds`` (plus ``seeds``), embedded or distributed.

    ``fresh`` forgets the crawl's saved state first (the embedded state files, or the
    crawl's keys in Redis). ``on_progress`` is called with a ``Sample`` about every
    ``progress_every_s`` while the crawl runs. A seed that is not a URL is a ``ConfigError``.
    ``metrics`` serves the crawl's Prometheus families, refreshed at the same tick.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        seeds: Sequence[str] = (),
        fresh: bool = False,
        on_progress: ProgressFn | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        good, bad = split_seeds(settings, [*settings.seeds, *seeds])
        if bad:
            raise ConfigError(f"bad seed: {bad[0]}")
        if not good:
            raise ConfigError("no seed URL given")
        self.seeds = good
        self._fresh = fresh
        self._on_progress = on_progress
        self._clock = clock or SystemClock()
        self._metrics = metrics
        self._stop: asyncio.Event | None = None
        self._stop_asked = False

    def run(self) -> CrawlResult:
        """Run the crawl to its end in a new event loop; see ``run_async``."""
        return event_loop.run(self.run_async())

    async def run_async(self) -> CrawlResult:
        """Run until nothing is pending or ``stop`` is called; the run's statistics.

        ``ConfigError`` for settings that cannot be honoured, ``StateError`` when the
        state (files, Redis, PostgreSQL) cannot be used: both one line, before any fetch.
        """
        if self.settings.redis_url is not None or self.settings.postgres_dsn is not None:
            return await self._distributed()
        return await self._embedded()

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called."""
        return self._stop_asked

    def stop(self) -> None:
        """Stop claiming work; pages in flight finish, and a later run resumes the crawl.

        Call it from the thread running the crawl (e.g. a signal handler of its loop).
        """
        self._stop_asked = True
        if self._stop is not None:
            self._stop.set()

    async def _embedded(self) -> CrawlResult:
        settings, clock = self.settings, self._clock
        started = clock.now()
        async with AsyncExitStack() as stack:
            backends = await open_embedded(settings, stack, seeds=self.seeds, fresh=self._fresh)
            events = EventBus()
            graph = await build_crawl(
                settings,
                seeds=self.seeds,
                backends=backends,
                events=events,
                clock=clock,
                stack=stack,
            )
            view = StatsView(graph.frontier)
            control = FileControl(settings.state_dir)
            target = f"--state {shlex.quote(str(settings.state_dir))}"
            context = self._context(await graph.frontier.stats(), target=target, distributed=False)
            if self._metrics is not None:
                proxies = graph.proxies.all if graph.proxies is not None else None
                self._metrics.watch(
                    settings.crawl_id, graph.frontier, runtime="embedded", proxies=proxies
                )
                quality = graph.crawler.parts.pipeline.quality
                self._metrics.track(settings.crawl_id, events=events, quality=quality)
                if graph.browser_pool is not None:
                    self._metrics.browser(settings.crawl_id, graph.browser_pool)
            runner = LocalRunner(
                graph.crawler,
                concurrency=settings.concurrency,
                clock=clock,
                events=events,
                crawl_id=settings.crawl_id,
                on_tick=lambda: self._progress(view, control),
                control=control,
                kind_limits={"browser": settings.browser_pages},
            )
            self._watch(runner.stop)
            run = await runner.run(
                self.seeds, sitemaps=settings.follow_sitemaps, revisit=settings.revisit
            )
            result = await read_result(
                graph.frontier,
                backends.attempts,
                crawl_id=settings.crawl_id,
                reason=run.reason,
                elapsed_s=clock.now() - started,
                context=context,
            )
        result = await self._with_reject_reasons(result, postgres_dsn=None)
        if settings.output is not None and backends.items_file is not None:
            written = await asyncio.to_thread(
                export_to, settings.output, partial(export_items, backends.items_file)
            )
            result = dataclasses.replace(result, exported_items=written)
        _write_stats(settings, result)
        return result

    async def _distributed(self) -> CrawlResult:
        try:
            from crawlfleet.runtime.celery.dispatched import open_crawl
            from crawlfleet.runtime.celery.dispatcher import Dispatcher
            from crawlfleet.runtime.control import RedisControl
        except ImportError as exc:
            raise extra_missing(exc) from None

        settings, clock = self.settings, self._clock
        if settings.archive is not None and settings.postgres_dsn is None:
            # Checked here, not in Settings: a stored definition has no DSN (workers add theirs).
            raise ConfigError(
                "archive: a distributed crawl keeps its archive index in postgres_dsn "
                "(give --postgres DSN)"
            )
        if settings.output is not None and format_of(Path(settings.output)) == "sqlite":
            raise ConfigError(
                "-o of a distributed crawl is exported from PostgreSQL: jsonl, json, csv or "
                "parquet (an .sqlite copy is for embedded crawls)"
            )
        started = clock.now()
        async with AsyncExitStack() as stack:
            crawl = await open_crawl(
                settings, self.seeds, broker_url=None, fresh=self._fresh, clock=clock, stack=stack
            )
            view = StatsView(crawl.frontier)
            target = (
                f"--redis {shlex.quote(settings.redis_url or '')} --crawl-id {settings.crawl_id}"
            )
            context = self._context(await crawl.frontier.stats(), target=target, distributed=True)
            if self._metrics is not None:
                proxies = None
                if settings.proxies is not None:
                    proxies = (await open_proxy_stores(settings, stack))[0].all
                self._metrics.watch(
                    settings.crawl_id,
                    crawl.frontier,
                    runtime="distributed",
                    beats=crawl.beats,
                    proxies=proxies,
                )
            control = RedisControl(crawl.client, settings.crawl_id)
            dispatcher = Dispatcher(
                crawl, clock=clock, on_tick=lambda: self._progress(view, control)
            )
            self._watch(dispatcher.stop)
            run = await dispatcher.run()
            result = await read_result(
                crawl.frontier,
                crawl.attempts,
                crawl_id=settings.crawl_id,
                reason=run.reason,
                elapsed_s=clock.now() - started,
                context=context,
            )
        result = await self._with_reject_reasons(result, postgres_dsn=settings.postgres_dsn)
        if settings.output is not None and settings.postgres_dsn is not None:
            write = partial(export_postgres, settings.postgres_dsn, crawl_id=settings.crawl_id)
            written = await asyncio.to_thread(export_to, settings.output, write)
            result = dataclasses.replace(result, exported_items=written)
        return result

    def _context(self, baseline: CrawlStats, *, target: str, distributed: bool) -> RunContext:
        """What the outcome judge needs to know of this run (read when it starts);
        ``target``: the options that name the crawl to the operating commands."""
        settings = self.settings
        rules = UrlRules(settings.strip_query_params, settings.politeness_key)
        return RunContext(
            seed_domains=[rules.politeness_key(rules.target(seed).url) for seed in self.seeds],
            baseline=baseline,
            target=target,
            distributed=distributed,
            revisit=settings.revisit,
        )

    async def _with_reject_reasons(
        self, result: CrawlResult, *, postgres_dsn: str | None
    ) -> CrawlResult:
        """``result`` with its top reject reasons, when items were rejected (``ops/results.py``)."""
        if not result.stats.items("invalid"):
            return result
        reasons = await asyncio.to_thread(
            partial(
                reject_reasons,
                postgres_dsn=postgres_dsn,
                state_dir=self.settings.state_dir,
                crawl_id=self.settings.crawl_id,
                limit=TOP_REASONS,
            )
        )
        top = tuple((r.reason, r.item_type, r.count) for r in reasons)
        return dataclasses.replace(result, top_reject_reasons=top)

    def _watch(self, stop: asyncio.Event) -> None:
        """Make ``stop`` the event this crawl's ``stop`` sets (set now if already asked)."""
        self._stop = stop
        if self._stop_asked:
            stop.set()

    async def _progress(self, view: StatsView, control: Control) -> None:
        sample = await view.sample(self._clock.now())
        if await control.state() is RunState.PAUSED:
            sample = dataclasses.replace(sample, paused=True)
        if self._metrics is not None:
            await self._metrics.refresh()
        if self._on_progress is not None:
            self._on_progress(sample)


def _write_stats(settings: Settings, result: CrawlResult) -> None:
    path = settings.state_dir / STATS_FILE
    try:
        path.write_bytes(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2))
    except OSError as exc:
        raise StateError(f"cannot write {path}: {exc}") from None
