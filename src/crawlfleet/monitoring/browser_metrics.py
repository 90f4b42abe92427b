"""The browser pool's Prometheus families (process families: what this process's pool did).

``crawlfleet_browser_pages_total``    counter  crawl                 pages the pool ran
``crawlfleet_browser_launches_total`` counter  crawl, reason         browsers launched, by why:
                                                                     start, pages, memory, crash
``crawlfleet_browser_memory_bytes``   gauge    crawl                 summed RSS of the Chromium
                                                                     processes, last check
``crawlfleet_browser_pages_in_use``   gauge    crawl                 pages running now

A restart is a launch whose reason is not ``start``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

LAUNCH_REASONS = ("start", "pages", "memory", "crash")


class PoolFigures(Protocol):
    """What a browser pool counts (``fetchers.browser.slots.PoolStats``)."""

    pages: int
    rss_bytes: int
    in_use: int

    @property
    def launches(self) -> Mapping[str, int]: ...


def browser_families(pools: Mapping[str, PoolFigures]) -> Iterator[Metric]:
    """The families of every crawl's pool in this process (none without a pool)."""
    if not pools:
        return
    pages = CounterMetricFamily(
        "crawlfleet_browser_pages", "Pages this process's browser pool ran", labels=["crawl"]
    )
    launches = CounterMetricFamily(
        "crawlfleet_browser_launches",
        "Browsers this process's pool launched, by reason (not start: a restart)",
        labels=["crawl", "reason"],
    )
    memory = GaugeMetricFamily(
        "crawlfleet_browser_memory_bytes",
        "Summed RSS of the pool's Chromium processes at the last check",
        labels=["crawl"],
    )
    in_use = GaugeMetricFamily(
        "crawlfleet_browser_pages_in_use", "Browser pages running now", labels=["crawl"]
    )
    for crawl, pool in sorted(pools.items()):
        pages.add_metric([crawl], pool.pages)
        for reason in LAUNCH_REASONS:
            launches.add_metric([crawl, reason], pool.launches.get(reason, 0))
        memory.add_metric([crawl], pool.rss_bytes)
        in_use.add_metric([crawl], pool.in_use)
    yield from (pages, launches, memory, in_use)
