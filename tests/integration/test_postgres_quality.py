"""A distributed crawl's quality scores in PostgreSQL (``monitoring/postgres_quality.py``),
against a private server: written from the counters, read back as ``stats.json``'s
``quality`` section, exactly."""

from __future__ import annotations

import time

from crawlfleet.counters import CrawlStats
from crawlfleet.monitoring.postgres_quality import PostgresQualityScores
from crawlfleet.monitoring.quality_scores import quality_report
from crawlfleet.pipeline.sinks.postgres_schema import migrate

A = CrawlStats(
    {
        "quality.item.pages": 8, "quality.item.met": 6, "quality.item.items": 10,
        "quality.item.filled.name": 10, "quality.item.filled.price": 7,
        "mismatch.item": 2, "items.stored.item": 9, "items.invalid.item": 1,
    }
)  # fmt: skip
B = CrawlStats(
    {
        "quality.item.pages": 2, "quality.item.met": 2, "quality.item.items": 2,
        "quality.item.filled.name": 2, "quality.item.filled.price": 2,
        "items.stored.item": 1, "items.duplicate.item": 1,
    }
)  # fmt: skip


def total(*parts: CrawlStats) -> CrawlStats:
    counters: dict[str, float] = {}
    for part in parts:
        for name, value in part.counters.items():
            counters[name] = counters.get(name, 0) + value
    return CrawlStats(counters)


async def test_the_scores_read_back_as_the_summary_gives_them(postgres_dsn: str) -> None:
    migrate(postgres_dsn)
    domains = {"a.test": A, "b.test": B}
    scores = await PostgresQualityScores.open(postgres_dsn, crawl_id="q1")
    other = await PostgresQualityScores.open(postgres_dsn, crawl_id="q2")
    try:
        assert await scores.read() is None
        before = time.time()
        await scores.write(total(A), {"a.test": A})
        await scores.write(total(A, B), domains)  # replaces what the last write left
        await other.write(total(B), {"b.test": B})
        report = await scores.read()
    finally:
        await scores.close()
        await other.close()
    assert report is not None
    assert report.pop("updated_at") >= before - 1
    assert report == quality_report(total(A, B), domains)
    assert report["parsers"]["item"]["met_share"] == 0.8
    assert report["parsers"]["item"]["domains"]["a.test"]["fill_rates"] == {
        "name": 1.0,
        "price": 0.7,
    }
    assert report["item_types"]["item"]["duplicate_share"] == round(1 / 12, 4)
