"""The browser pool's Prometheus families, rendered from what a pool counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prometheus_client import generate_latest

from crawlfleet.monitoring.metrics import Metrics


@dataclass
class Figures:
    pages: int = 0
    rss_bytes: int = 0
    in_use: int = 0
    launches: Counter[str] = field(default_factory=Counter)


def test_pages_restarts_and_memory_of_the_pool_are_served() -> None:
    metrics = Metrics()
    assert b"crawlfleet_browser" not in generate_latest(metrics.registry)
    pool = Figures(pages=12, rss_bytes=700 * 2**20, in_use=3, launches=Counter(start=1, crash=2))
    metrics.browser("js", pool)
    text = generate_latest(metrics.registry).decode()
    assert 'crawlfleet_browser_pages_total{crawl="js"} 12.0' in text
    assert 'crawlfleet_browser_launches_total{crawl="js",reason="crash"} 2.0' in text
    assert 'crawlfleet_browser_launches_total{crawl="js",reason="memory"} 0.0' in text
    assert 'crawlfleet_browser_memory_bytes{crawl="js"} 7.340032e+08' in text
    assert 'crawlfleet_browser_pages_in_use{crawl="js"} 3.0' in text
    pool.pages += 1  # read at every scrape: the pool's own counters
    assert (
        'crawlfleet_browser_pages_total{crawl="js"} 13.0'
        in generate_latest(metrics.registry).decode()
    )
