"""The Prometheus families ``Metrics`` serves, rendered from what it read and counted.

``crawl_families`` renders the crawls' snapshots (``metric_snapshot.py``), ``process_families``
this process's own work and the heartbeats (``docs/metrics.md`` lists every family).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from crawlfleet.counters import LATENCY_BUCKETS_S, Filtered, Limit, bucket_name, dropped_counter
from crawlfleet.monitoring.metric_snapshot import CrawlSnapshot, DomainRow
from crawlfleet.pipeline.quality import DataQuality
from crawlfleet.records import Outcome

OUTCOMES = tuple(outcome.value for outcome in Outcome)
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "other")
ITEM_RESULTS = ("stored", "invalid", "duplicate")
CHANGES = ("escalated", "recovered")


@dataclass(slots=True)
class ProcessWork:
    """What this process did for one crawl (``Metrics`` counts it; a scrape reads a copy)."""

    changes: Counter[str] = field(default_factory=Counter)
    worker: str | None = None
    """The worker's name, once it ran leases of the crawl (a worker process only)."""
    leases: int = 0
    quality: DataQuality | None = None
    fill: dict[str, dict[str, float]] = field(default_factory=dict)


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
    dropped = CounterMetricFamily(
        "crawlfleet_dropped_total",
        "Links, redirects, sitemap entries or sitemaps a limit dropped, by limit",
        labels=["crawl", "limit"],
    )
    filtered = CounterMetricFamily(
        "crawlfleet_filtered_total",
        "Links the crawl's scope left out by choice (off_site, deny, allow, bad_url)",
        labels=["crawl", "reason"],
    )
    parser_pages = CounterMetricFamily(
        "crawlfleet_parser_pages_total",
        "First parses by a parser with expectations, by whether the page met them",
        labels=[*crawl_domain, "parser", "expectations"],
    )
    drift = GaugeMetricFamily(
        "crawlfleet_parser_drift",
        "1 when the parser's pages drifted from its expectations on the domain, else 0",
        labels=[*crawl_domain, "parser"],
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
            for parser in sorted(_watched(c) | set(row.drifts)):
                drift.add_metric([*labels, parser], 1 if parser in row.drifts else 0)
            for parser in sorted(_watched(c)):
                met = c.get(f"quality.{parser}.met", 0.0)
                missed = c.get(f"quality.{parser}.pages", 0.0) - met
                parser_pages.add_metric([*labels, parser, "met"], met)
                parser_pages.add_metric([*labels, parser, "missed"], missed)
        for (result, item_type), value in sorted(_items(snap.totals).items()):
            items.add_metric([crawl, item_type, result], value)
        for limit in Limit:  # a fixed set of labels, each from the start
            dropped.add_metric([crawl, limit.value], snap.totals.get(dropped_counter(limit), 0.0))
        for reason in Filtered:
            left_out = snap.totals.get(dropped_counter(reason), 0.0)
            filtered.add_metric([crawl, reason.value], left_out)
    yield from (pages, attempts, latency, body, blocks, expired, queued, leased)
    yield from (level, delay, dead, items, info, started, proxies, dropped, filtered)
    yield from (parser_pages, drift)


def process_families(
    work: Mapping[str, ProcessWork], beats: Mapping[str, float]
) -> Iterator[Metric]:
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


def _watched(counters: Mapping[str, float]) -> set[str]:
    """The parsers with expectations that parsed pages of a domain (``quality.<p>.pages``)."""
    return {
        name[len("quality.") : -len(".pages")]
        for name in counters
        if name.startswith("quality.") and name.endswith(".pages")
    }


def _items(totals: Mapping[str, float]) -> dict[tuple[str, str], float]:
    """``{(result, item_type): count}`` of the ``items.<result>.<type>`` counters."""
    found = {}
    for name, value in totals.items():
        kind, _, rest = name.partition(".")
        result, _, item_type = rest.partition(".")
        if kind == "items" and result in ITEM_RESULTS and item_type:
            found[(result, item_type)] = value
    return found
