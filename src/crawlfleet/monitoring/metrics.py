"""Prometheus metrics of the crawls a process watches and of the work it does itself.

Two kinds of families (``docs/metrics.md`` lists every one with its PromQL):

- **crawl families** (pages, attempts, latency, bytes, blocks, queue, dead letters, items,
  domain policy, worker heartbeats seen in the store): the crawl's statistics in its store,
  read into a snapshot by ``refresh`` at the runtime's tick (``metric_snapshot.CrawlWatch``).
  A scrape renders the last snapshot and never waits on the store. Every process watching a
  crawl (the embedded crawl, the dispatcher, the dashboard) serves the same values: take the
  ``max`` across instances, never the ``sum``.
- **process families** (strategy changes, field fill ratio, leases run, the worker's own
  heartbeat, the browser pool's pages and restarts: ``browser_metrics.py``): what this
  process did; ``sum`` them across instances.

``Metrics`` is a collector with its own registry (``metric_families.py`` renders the
families): ``serve`` starts prometheus_client's HTTP server (bound to 127.0.0.1 unless told
otherwise), ``asgi_app`` mounts the same families in another server (the dashboard).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, make_asgi_app, start_http_server
from prometheus_client.core import Metric

from crawlfleet.errors import StateError
from crawlfleet.events import DomainEscalated, DomainRecovered, EventBus
from crawlfleet.monitoring.browser_metrics import PoolFigures, browser_families
from crawlfleet.monitoring.metric_families import ProcessWork, crawl_families, process_families
from crawlfleet.monitoring.metric_snapshot import (
    DEFAULT_BIND,
    DEFAULT_TOP_DOMAINS,
    BeatsFn,
    CrawlSource,
    CrawlWatch,
    ProxiesFn,
)
from crawlfleet.pipeline.quality import DataQuality


class MetricsServer:
    """prometheus_client's HTTP server in a daemon thread; ``close`` stops it."""

    def __init__(self, registry: CollectorRegistry, port: int, bind: str) -> None:
        try:
            self._server, self._thread = start_http_server(port, addr=bind, registry=registry)
        except (OSError, ValueError) as exc:
            raise StateError(f"cannot serve metrics on {bind}:{port}: {exc}") from None
        self.bind = bind
        self.port: int = self._server.server_port

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class Metrics:
    """The families of the crawls this process watches and of its own work.

    ``top_domains`` bounds the domain label (``metric_snapshot.DomainLabels``). ``watch``,
    ``track``, ``ran``, ``beat`` and ``refresh`` are called from the crawl's event loop;
    ``collect`` (a scrape) from any thread.
    """

    def __init__(self, *, top_domains: int = DEFAULT_TOP_DOMAINS) -> None:
        if top_domains < 0:
            raise ValueError(f"top domains must be >= 0, not {top_domains}")
        self.top_domains = top_domains
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._lock = threading.Lock()
        self._watches: dict[str, CrawlWatch] = {}
        self._work: dict[str, ProcessWork] = {}
        self._beats: dict[str, float] = {}
        self._browsers: dict[str, PoolFigures] = {}

    def watch(
        self,
        crawl_id: str,
        source: CrawlSource,
        *,
        runtime: str,
        beats: BeatsFn | None = None,
        proxies: ProxiesFn | None = None,
    ) -> None:
        """Serve the crawl families of ``crawl_id``, read from ``source`` at each refresh."""
        watch = CrawlWatch(
            crawl_id,
            source,
            runtime=runtime,
            top_domains=self.top_domains,
            beats=beats,
            proxies=proxies,
        )
        with self._lock:
            self._watches[crawl_id] = watch

    def track(self, crawl_id: str, *, events: EventBus, quality: DataQuality | None = None) -> None:
        """Count this process's strategy changes of ``crawl_id`` and its items' fill ratio."""
        with self._lock:
            work = self._work.setdefault(crawl_id, ProcessWork())
            work.quality = quality
        events.subscribe(DomainEscalated, lambda _: self._changed(work, "escalated"))
        events.subscribe(DomainRecovered, lambda _: self._changed(work, "recovered"))

    def forget(self, crawl_id: str) -> None:
        """Stop serving ``crawl_id``'s crawl families (its process counters stay)."""
        with self._lock:
            self._watches.pop(crawl_id, None)

    def ran(self, crawl_id: str, worker: str, leases: int) -> None:
        """Count ``leases`` run by ``worker`` (this process) for ``crawl_id``."""
        with self._lock:
            work = self._work.setdefault(crawl_id, ProcessWork())
            work.worker = worker
            work.leases += leases

    def browser(self, crawl_id: str, pool: PoolFigures) -> None:
        """Serve the browser pool families of this process's pool for ``crawl_id``."""
        with self._lock:
            self._browsers[crawl_id] = pool

    def beat(self, worker: str, at: float) -> None:
        """This worker is alive at ``at`` (epoch seconds)."""
        with self._lock:
            self._beats[worker] = at

    async def refresh(self) -> None:
        """Read every watched crawl's store and this process's item fill ratios."""
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            await watch.refresh()
        with self._lock:
            for work in self._work.values():
                if work.quality is not None:
                    work.fill = work.quality.snapshot()["fill_rate"]

    def serve(self, port: int, bind: str = DEFAULT_BIND) -> MetricsServer:
        """Serve ``/metrics`` on ``bind:port`` (0: a free port); ``StateError`` if it cannot."""
        return MetricsServer(self.registry, port, bind)

    def asgi_app(self) -> Any:
        """An ASGI app serving these families (to mount at ``/metrics``)."""
        return make_asgi_app(self.registry)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshots = [w.snapshot for w in self._watches.values() if w.snapshot is not None]
            work = {
                crawl: ProcessWork(Counter(w.changes), w.worker, w.leases, None, w.fill)
                for crawl, w in self._work.items()
            }
            beats = dict(self._beats)
            browsers = dict(self._browsers)
        for snapshot in snapshots:
            for worker, seen_at in snapshot.beats:
                beats[worker] = max(seen_at, beats.get(worker, seen_at))
        yield from crawl_families(snapshots)
        yield from process_families(work, beats)
        yield from browser_families(browsers)

    def _changed(self, work: ProcessWork, change: str) -> None:
        with self._lock:
            work.changes[change] += 1
