"""Sitemap requests in the crawl step (decision 0052), over the in-memory store and fake clock."""

from __future__ import annotations

from itertools import pairwise

import pytest

from crawlfleet.clock import FakeClock
from crawlfleet.records import Outcome
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed

A = "http://a.test"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
XML = {"content-type": "application/xml"}


def index(*locs: str) -> Canned:
    entries = "".join(f"<sitemap><loc>{A}{loc}</loc></sitemap>" for loc in locs)
    return Canned(body=f'<sitemapindex xmlns="{NS}">{entries}</sitemapindex>'.encode(), headers=XML)


def urlset(*locs: str) -> Canned:
    entries = "".join(f"<url><loc>{A}{loc}</loc></url>" for loc in locs)
    return Canned(body=f'<urlset xmlns="{NS}">{entries}</urlset>'.encode(), headers=XML)


async def test_sitemaps_are_read_between_pages_at_the_domain_delay() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(
        clock,
        {
            f"{A}/": html("/a"),
            f"{A}/sitemap.xml": index("/s0.xml", "/s1.xml"),
            f"{A}/s0.xml": urlset("/p0", "/a"),
            f"{A}/s1.xml": urlset("/p1"),
            **{f"{A}{path}": html() for path in ("/a", "/p0", "/p1")},
        },
    )
    crawl = make_crawl(fetcher, seeds=[f"{A}/"], delay_s=1.0)
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run(concurrency=1)
    paths = [url.removeprefix(A) for url in fetcher.urls()]
    # a domain's queued pages first, then its next sitemap
    assert paths == ["/", "/a", "/sitemap.xml", "/s0.xml", "/p0", "/s1.xml", "/p1"]
    assert all(b.started - a.started >= 1.0 for a, b in pairwise(fetcher.fetched))
    stats = await crawl.frontier.stats()
    assert stats.get("sitemaps.read") == 3
    assert stats.get("sitemaps.entries") == 3
    assert stats.get("sitemaps.queued") == 2
    assert stats.get(f"outcome.{Outcome.OK.value}") == 7


async def test_a_sitemap_that_fails_is_retried_and_a_rerun_reads_none_again() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(
        clock,
        {
            f"{A}/": html(),
            f"{A}/sitemap.xml": [Canned(503, b"busy"), index("/s0.xml")],
            f"{A}/s0.xml": urlset("/p0"),
        },
    )
    crawl = make_crawl(fetcher, seeds=[f"{A}/"])
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run()
    assert len(fetcher.fetches(f"{A}/sitemap.xml")) == 2
    assert f"{A}/p0" in fetcher.urls()
    assert await crawl.admitter.seed_sitemaps([f"{A}/"]) == 0  # known: a rerun reads none


@pytest.mark.parametrize("budget", ["max_pages", "max_pages_per_domain"])
async def test_an_index_queues_child_sitemaps_into_half_the_budget_left(budget: str) -> None:
    clock = FakeClock(T0)
    children = [f"/c{n}.xml" for n in range(20)]
    pages = {f"{A}{child}": urlset(f"/p{n}-0", f"/p{n}-1") for n, child in enumerate(children)}
    fetcher = CannedFetcher(clock, {f"{A}/": html(), f"{A}/sitemap.xml": index(*children), **pages})
    crawl = make_crawl(fetcher, seeds=[f"{A}/"], **{budget: 10})
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run(concurrency=1)
    paths = [url.removeprefix(A) for url in fetcher.urls()]
    # 2 requests queued (the home page, the index): 4 of the 8 left go to child sitemaps
    assert len(paths) == 10
    assert paths[:5] == ["/", "/sitemap.xml", "/c0.xml", "/p0-0", "/p0-1"]
    assert sorted(p for p in paths if p.startswith("/c")) == [f"/c{n}.xml" for n in range(4)]
    stats = await crawl.frontier.stats()
    assert stats.get("sitemaps.queued") == 4
    assert stats.get("sitemaps.over_limits") == 16


async def test_a_child_sitemap_past_the_max_depth_is_counted_not_read() -> None:
    clock = FakeClock(T0)
    chain = {f"{A}/sitemap.xml": index("/i1.xml")}
    chain |= {f"{A}/i{n}.xml": index(f"/i{n + 1}.xml") for n in range(1, 4)}
    fetcher = CannedFetcher(clock, {f"{A}/": html(), **chain})
    crawl = make_crawl(fetcher, seeds=[f"{A}/"])
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run()
    assert f"{A}/i3.xml" in fetcher.urls()
    assert f"{A}/i4.xml" not in fetcher.urls()
    assert (await crawl.frontier.stats()).get("sitemaps.over_limits") == 1


async def test_a_url_read_as_a_sitemap_is_still_fetched_as_a_page_when_linked() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(
        clock, {f"{A}/": html("/sitemap.xml"), f"{A}/sitemap.xml": urlset("/p0")}
    )
    crawl = make_crawl(fetcher, seeds=[f"{A}/"])
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run()
    assert len(fetcher.fetches(f"{A}/sitemap.xml")) == 2
    assert f"{A}/p0" in fetcher.urls()


async def test_a_sitemap_is_revisited_like_a_page_and_read_again_only_when_changed() -> None:
    clock = FakeClock(T0)
    later = Canned(
        body=f'<urlset xmlns="{NS}"><url><loc>{A}/p0</loc><lastmod>2100-01-01</lastmod></url>'
        "</urlset>".encode(),
        headers=XML,
    )
    fetcher = CannedFetcher(
        clock,
        {f"{A}/": html(), f"{A}/sitemap.xml": [urlset("/p0"), later], f"{A}/p0": html()},
    )
    crawl = make_crawl(fetcher, seeds=[f"{A}/"], recrawl_after="1d", recrawl_min="1d")
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run()
    clock.advance(1.5 * 86_400)  # the sitemap and every page are due again
    assert await crawl.frontier.revisit(clock.now()) == 3
    await crawl.run(concurrency=1)
    assert len(fetcher.fetches(f"{A}/sitemap.xml")) == 2
    assert (await crawl.frontier.stats()).get("sitemaps.read") == 2  # changed: read again
    clock.advance(1.5 * 86_400)
    await crawl.frontier.revisit(clock.now())
    await crawl.run(concurrency=1)
    assert len(fetcher.fetches(f"{A}/sitemap.xml")) == 3
    stats = await crawl.frontier.stats()
    assert stats.get("sitemaps.read") == 2  # the same body: not read again
    assert stats.get("fresh.unchanged") >= 1
