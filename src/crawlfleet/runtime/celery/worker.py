"""A worker process: checked, assembled and run as one Celery worker serving every crawl.

``assemble`` checks everything a worker needs before it takes a task, each failure one line
(``ConfigError`` or ``StateError``): the queues it serves (a kind this machine cannot run),
the parser modules it may load, its PostgreSQL DSN and Redis URL, the broker, Redis's
safety and the PostgreSQL migrations (``worker_config.check_backends``); then it imports the
impersonate fetcher, which a crawl's first task would otherwise wait for. ``CeleryWorker.run``
registers the tasks over one ``WorkerRuntime`` (``executor.py``) and the idle heartbeat
(``health.py``), and runs ``celery worker`` with the solo pool (one process, N pages in
flight) until it stops.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from celery import Celery

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.redisurl import check_redis_url
from crawlfleet.runtime.celery.app import TaskLimits, check_broker, make_app
from crawlfleet.runtime.celery.executor import WorkerRuntime
from crawlfleet.runtime.celery.health import add_idle_heartbeat
from crawlfleet.runtime.celery.tasks import register as register_tasks
from crawlfleet.runtime.celery.worker_config import WorkerConfig, check_backends
from crawlfleet.runtime.choice.kinds import BASE_KINDS, IMPERSONATE, check_queues
from crawlfleet.runtime.fetcher_wiring import impersonate_fetcher

if TYPE_CHECKING:  # prometheus-client is imported only when metrics are served
    from crawlfleet.monitoring.metrics import Metrics


def celery_argv(queues: tuple[str, ...], loglevel: str, extra: list[str]) -> list[str]:
    """The ``celery worker`` arguments: solo pool (one process, N pages in flight)."""
    return [
        "worker",
        "--pool",
        "solo",
        "--concurrency",
        "1",
        "--queues",
        ",".join(queues),
        "--loglevel",
        loglevel,
        "--hostname",
        f"crawlfleet-{os.getpid()}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        *extra,
    ]


@dataclass(frozen=True, slots=True)
class CeleryWorker:
    """A checked worker: its configuration and its Celery app (no task registered yet)."""

    config: WorkerConfig
    app: Celery

    def run(self, *, loglevel: str, extra: list[str], metrics: Metrics | None) -> None:
        """Serve tasks until the worker is stopped; ``extra`` goes to ``celery worker``."""
        runtime = WorkerRuntime(self.config, metrics=metrics)
        register_tasks(self.app, runtime)
        add_idle_heartbeat(self.app, runtime)
        try:
            self.app.worker_main(celery_argv(self.config.queues, loglevel, extra))
        finally:
            runtime.shutdown()


def assemble(
    redis_url: str,
    postgres_dsn: str | None,
    *,
    queues: tuple[str, ...],
    parsers: tuple[str, ...],
    concurrency: int,
    batch_s: float,
    broker_url: str | None,
    accept_unsafe_redis: bool,
    browser_executable: Path | None,
) -> CeleryWorker:
    """Check what the worker needs, in that order (see the module's docstring); the broker
    is ``redis_url`` unless ``broker_url`` is given."""
    check_queues(queues, browser_executable)
    load_parsers(parsers, use_entry_points=False)  # one line if one cannot be imported
    if postgres_dsn is None:
        raise ConfigError("missing --postgres (or CRAWLFLEET_POSTGRES_DSN[_FILE])")
    config = WorkerConfig(
        check_redis_url(redis_url),
        postgres_dsn,
        concurrency,
        queues,
        batch_s,
        parsers=parsers,
        accept_unsafe_redis=accept_unsafe_redis,
    )
    broker = broker_url or redis_url
    check_broker(broker)
    app = make_app(broker, TaskLimits(batch_s=batch_s))
    check_backends(config)
    if IMPERSONATE in BASE_KINDS:  # imported now, not in the first task (decision 0066)
        impersonate_fetcher()
    return CeleryWorker(config, app)
