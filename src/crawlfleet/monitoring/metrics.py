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

``Metrics`` is a collector with its own registry: ``serve`` starts prometheus_client's HTTP
server (bound to 127.0.0.1 unless told otherwise), ``asgi_app`` mounts the same families in
another server (the dashboard).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, make_asgi_app, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from crawlfleet.counters import LATENCY_BUCKETS_S, bucket_name
from crawlfleet.errors import StateError
from crawlfleet.models import Outcome
from crawlfleet.monitoring.browser_metrics import PoolFigures, browser_families
from crawlfleet.monitoring.events import DomainEscalated, DomainRecovered, EventBus
from crawlfleet.monitoring.metric_snapshot import (
    DEFAULT_BIND,
    DEFAULT_TOP_DOMAINS,
    BeatsFn,
    CrawlSnapshot,
    CrawlSource,
    CrawlWatch,
    DomainRow,
    ProxiesFn,
)
from crawlfleet.pipeline.quality import DataQuality

OUTCOMES = tuple(outcome.value for outcome in Outcome)
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "other")
ITEM_RESULTS = ("stored", "invalid", "duplicate")
CHANGES = ("escalated", "recovered")


@dataclass(slots=True)
class _Work:
    """What this process did for one crawl."""

    changes: Counter[str] = field(default_factory=Counter)
    worker: str | None = None
    """The worker's name, once it ran leases of the crawl (a worker process only)."""
    leases: int = 0
    quality: DataQuality | None = None
    fill: dict[str, dict[str, float]] = field(default_factory=dict)


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
        self._work: dict[str, _Work] = {}
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
            work = self._work.setdefault(crawl_id, _Work())
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
            work = self._work.setdefault(crawl_id, _Work())
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
                crawl: _Work(Counter(w.changes), w.worker, w.leases, None, w.fill)
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

    def _changed(self, work: _Work, change: str) -> None:
        with self._lock:
            work.changes[change] += 1


def crawl_families(snapshots: list[CrawlSnapshot]) -> Iterator[Metric]:
    """The crawl families of ``snapshots``."""
    crawl_domain = ["crawl", "domain"]
    pages = CounterMetricFamily(
        "crawlfleet_pages_fetched_total",
        "HTTP responses received, by the outcome of their attempt and status class",
        labels=[*crawl_domain, "outcome", "status_class"],
    )
    attempts = CounterMetricFamily(
        "crawlfleet_attempts_total",
        "Attempts ended, by outcome (retry, dead and parse_error included)",
        labels=[*crawl_domain, "outcome"],
    )
    latency = HistogramMetricFamily(
        "crawlfleet_fetch_latency_seconds",
        "Seconds from request to the last body byte",
        labels=crawl_domain,
    )
    body = CounterMetricFamily(
        "crawlfleet_response_bytes_total", "Response body bytes", labels=crawl_domain
    )
    blocks = CounterMetricFamily(
        "crawlfleet_blocks_total",
        "Responses judged a block (403, 429, challenge)",
        labels=crawl_domain,
    )
    expired = CounterMetricFamily(
        "crawlfleet_leases_expired_total", "Leases that ran out (worker lost)", labels=crawl_domain
    )
    queued = GaugeMetricFamily("crawlfleet_queued_requests", "Requests queued", labels=crawl_domain)
    leased = GaugeMetricFamily("crawlfleet_leased_requests", "Requests leased", labels=crawl_domain)
    level = GaugeMetricFamily(
        "crawlfleet_domain_block_level", "Block level (delay x 2^level)", labels=crawl_domain
    )
    delay = GaugeMetricFamily(
        "crawlfleet_domain_delay_seconds", "Effective delay between requests", labels=crawl_domain
    )
    dead = GaugeMetricFamily("crawlfleet_dead_letters", "Requests in the DLQ", labels=["crawl"])
    items = CounterMetricFamily(
        "crawlfleet_items_total",
        "Items by type and result (stored, invalid, duplicate)",
        labels=["crawl", "item_type", "result"],
    )
    info = GaugeMetricFamily(
        "crawlfleet_crawl_info", "A watched crawl", labels=["crawl", "runtime"]
    )
    started = GaugeMetricFamily(
        "crawlfleet_crawl_start_time_seconds", "When the crawl started", labels=["crawl"]
    )
    proxies = GaugeMetricFamily(
        "crawlfleet_proxies", "Proxies of the crawl's pool by state", labels=["crawl", "state"]
    )
    for snap in snapshots:
        crawl = snap.crawl
        info.add_metric([crawl, snap.runtime], 1)
        for state, count in snap.proxies:
            proxies.add_metric([crawl, state], count)
        if snap.started_at is not None:
            started.add_metric([crawl], snap.started_at)
        dead.add_metric([crawl], snap.counts.dead)
        for row in snap.rows:
            labels, c = [crawl, row.domain], row.counters
            for outcome in OUTCOMES:
                for status in STATUS_CLASSES:
                    value = c.get(f"fetched.{outcome}.{status}")
                    if value:  # a series appears with its first response
                        pages.add_metric([*labels, outcome, status], value)
            for outcome in OUTCOMES:
                attempts.add_metric([*labels, outcome], c.get(f"outcome.{outcome}", 0.0))
            latency.add_metric(labels, latency_buckets(c), c.get("latency_s.sum", 0.0))
            body.add_metric(labels, c.get("bytes", 0.0))
            blocks.add_metric(labels, c.get("blocks", 0.0))
            expired.add_metric(labels, c.get("lease_expired", 0.0))
            queued.add_metric(labels, row.queued)
            leased.add_metric(labels, row.leased)
            _policy(level, delay, labels, row)
        for (result, item_type), value in sorted(_items(snap.totals).items()):
            items.add_metric([crawl, item_type, result], value)
    yield from (pages, attempts, latency, body, blocks, expired, queued, leased)
    yield from (level, delay, dead, items, info, started, proxies)


def process_families(work: Mapping[str, _Work], beats: Mapping[str, float]) -> Iterator[Metric]:
    """This process's families, and the heartbeats of this worker and of those in the store."""
    changes = CounterMetricFamily(
        "crawlfleet_strategy_changes_total",
        "Domain block level changes this process caused",
        labels=["crawl", "change"],
    )
    fill = GaugeMetricFamily(
        "crawlfleet_field_fill_ratio",
        "Share of this process's stored items with the field filled",
        labels=["crawl", "item_type", "field"],
    )
    leases = CounterMetricFamily(
        "crawlfleet_worker_leases_total", "Leases this worker ran", labels=["crawl", "worker"]
    )
    for crawl, done in work.items():
        for change in CHANGES:
            changes.add_metric([crawl, change], done.changes[change])
        for item_type, fields in done.fill.items():
            for name, ratio in fields.items():
                fill.add_metric([crawl, item_type, name], ratio)
        if done.worker is not None:
            leases.add_metric([crawl, done.worker], done.leases)
    heartbeat = GaugeMetricFamily(
        "crawlfleet_worker_heartbeat_timestamp_seconds",
        "A worker's last heartbeat",
        labels=["worker"],
    )
    for worker, at in sorted(beats.items()):
        heartbeat.add_metric([worker], at)
    yield from (changes, fill, leases, heartbeat)


def latency_buckets(counters: Mapping[str, float]) -> list[tuple[str, float]]:
    """The store's latency buckets made cumulative, as Prometheus wants them."""
    buckets, running = [], 0.0
    for bound in LATENCY_BUCKETS_S:
        running += counters.get(bucket_name(bound), 0.0)
        buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", running))
    return buckets


def _policy(
    level: GaugeMetricFamily, delay: GaugeMetricFamily, labels: list[str], row: DomainRow
) -> None:
    if row.level is not None:
        level.add_metric(labels, row.level)
    if row.delay_s is not None:
        delay.add_metric(labels, row.delay_s)


def _items(totals: Mapping[str, float]) -> dict[tuple[str, str], float]:
    """``{(result, item_type): count}`` of the ``items.<result>.<type>`` counters."""
    found = {}
    for name, value in totals.items():
        kind, _, rest = name.partition(".")
        result, _, item_type = rest.partition(".")
        if kind == "items" and result in ITEM_RESULTS and item_type:
            found[(result, item_type)] = value
    return found
