"""Sitemap requests in the crawl step (decision 0052), over the in-memory store and fake clock."""

from __future__ import annotations

import gzip
import logging
from itertools import pairwise
from typing import Any

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.events import FetchAttempted, RequestSkipped
from crawlfleet.records import Outcome
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, Crawl, html, make_crawl, seed
from tests.unit.test_dropped_counts import dropped_of

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


# Scope, robots.txt, pacing, limits and failures: what the crawl step does with each sitemap.


async def crawl_of(
    pages: dict[str, Canned | list[Canned]], **settings: Any
) -> tuple[CannedFetcher, Crawl]:
    """A crawl of a.test from its home page and its sitemaps, started but not yet run."""
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, {f"{A}/": html(), **pages})
    crawl = make_crawl(fetcher, seeds=[f"{A}/"], **settings)
    await seed(crawl, f"{A}/")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    return fetcher, crawl


def body(content: bytes) -> Canned:
    return Canned(body=content, headers=XML)


async def test_every_sitemap_is_fetched_once_and_a_missing_one_fails_with_its_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listed = ["/pages.xml", "/more.xml.gz", "/broken.xml", "/list.txt", "/missing.xml"]
    fetcher, crawl = await crawl_of(
        {
            f"{A}/sitemap.xml": index(*listed, "/nested.xml", "/pages.xml"),
            f"{A}/pages.xml": urlset("/p/1", "/p/2"),
            f"{A}/more.xml.gz": body(gzip.compress(urlset("/gz/1").body)),
            f"{A}/broken.xml": body(f"<urlset><url><loc>{A}/b/1</loc></url></urlse>".encode()),
            f"{A}/list.txt": Canned(body=f"{A}/t/1\nnot a url\n{A}/t/2".encode(), headers={}),
            f"{A}/nested.xml": index("/deep.xml", "/sitemap.xml", "/nested.xml"),  # a cycle
            f"{A}/deep.xml": urlset("/deep/1"),
        }
    )
    attempts = crawl.collect(FetchAttempted)
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        await crawl.run()
    sitemaps = [*listed, "/nested.xml", "/deep.xml", "/sitemap.xml"]
    assert all(len(fetcher.fetches(f"{A}{path}")) == 1 for path in sitemaps)
    pages = ["/p/1", "/p/2", "/gz/1", "/b/1", "/t/1", "/t/2", "/deep/1"]
    assert {f"{A}{path}" for path in pages} <= set(fetcher.urls())
    assert f"{A}/broken.xml: 0 broken entries skipped, 2 XML faults read past" in caplog.text
    missing = [a.attempt for a in attempts if a.attempt.url == f"{A}/missing.xml"]
    assert [(a.outcome, a.error) for a in missing] == [(Outcome.FAILED, "HTTP 404")]


async def test_a_sitemap_that_cannot_be_fetched_is_dead_with_its_reason() -> None:
    down = Canned(error=FetchError("ConnectError: refused"))
    fetcher, crawl = await crawl_of(
        {
            f"{A}/sitemap.xml": index("/down.xml", "/up.xml"),
            f"{A}/down.xml": down,
            f"{A}/up.xml": urlset("/p0"),
        },
        max_retries=1,
    )
    attempts = crawl.collect(FetchAttempted)
    await crawl.run()
    down_attempts = [a.attempt for a in attempts if a.attempt.url == f"{A}/down.xml"]
    assert [(a.outcome, a.error) for a in down_attempts] == [
        (Outcome.RETRY, "ConnectError: refused"),
        (Outcome.DEAD, "ConnectError: refused"),
    ]
    assert f"{A}/p0" in fetcher.urls()  # the other sitemaps are read on


async def test_a_child_sitemap_out_of_scope_is_not_fetched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    elsewhere = "http://b.test/elsewhere.xml"
    listed = f"<sitemap><loc>{elsewhere}</loc></sitemap><sitemap><loc>{A}/here.xml</loc></sitemap>"
    fetcher, crawl = await crawl_of(
        {
            f"{A}/sitemap.xml": body(f"<sitemapindex>{listed}</sitemapindex>".encode()),
            f"{A}/here.xml": urlset("/p/1"),
            elsewhere: urlset("/p/2"),
        }
    )
    with caplog.at_level(logging.WARNING, logger="crawlfleet.runtime.admission"):
        await crawl.run()
    assert fetcher.fetches(elsewhere) == []
    assert f"{A}/p/1" in fetcher.urls()
    assert f"skipping sitemap {elsewhere}: " in caplog.text
    assert (await crawl.frontier.stats()).get("sitemaps.skipped") == 1


async def test_a_child_sitemap_robots_txt_disallows_is_not_fetched() -> None:
    robots = Canned(body=b"User-agent: *\nDisallow: /private/\n", headers={})
    fetcher, crawl = await crawl_of(
        {
            f"{A}/robots.txt": robots,
            f"{A}/sitemap.xml": index("/private/secret.xml", "/open.xml"),
            f"{A}/private/secret.xml": urlset("/secret"),
            f"{A}/open.xml": urlset("/open"),
        }
    )
    skipped = crawl.collect(RequestSkipped)
    await crawl.run()
    assert fetcher.fetches(f"{A}/private/secret.xml") == []
    assert f"{A}/open" in fetcher.urls()
    assert [(s.url, s.reason) for s in skipped] == [
        (f"{A}/private/secret.xml", "disallowed by robots.txt")
    ]


async def test_sitemap_fetches_keep_the_crawl_delay_over_the_delay() -> None:
    robots = Canned(body=b"User-agent: *\nCrawl-delay: 7\n", headers={})
    fetcher, crawl = await crawl_of(
        {
            f"{A}/robots.txt": robots,
            f"{A}/sitemap.xml": index("/a.xml", "/b.xml"),
            f"{A}/a.xml": urlset(),
            f"{A}/b.xml": urlset(),
        },
        delay_s=5.0,
    )
    await crawl.run()
    assert [url.removeprefix(A) for url in fetcher.urls()] == [
        "/",
        "/sitemap.xml",
        "/a.xml",
        "/b.xml",
    ]
    starts = [f.started for f in fetcher.fetched]
    assert [later - earlier for earlier, later in pairwise(starts)] == [7.0, 7.0, 7.0]


async def test_sitemap_max_urls_leaves_the_rest_counted() -> None:
    fetcher, crawl = await crawl_of(
        {
            f"{A}/sitemap.xml": index("/one.xml", "/two.xml"),
            f"{A}/one.xml": urlset(*(f"/{i}" for i in range(100))),
            f"{A}/two.xml": urlset("/x"),
        },
        sitemap_max_urls=10,
    )
    await crawl.run()
    assert [url for url in fetcher.urls() if not url.endswith(".xml")] == [f"{A}/"] + [
        f"{A}/{i}" for i in range(10)
    ]
    assert (await crawl.frontier.stats()).get("sitemaps.entries") == 10
    # URLs, not sitemaps: one.xml's last 90 and two.xml's one
    assert await dropped_of(crawl.frontier, "a.test") == {"sitemap_max_urls": 91}


async def test_exactly_sitemap_max_urls_drops_nothing() -> None:
    fetcher, crawl = await crawl_of(
        {f"{A}/sitemap.xml": urlset(*(f"/{i}" for i in range(10)))}, sitemap_max_urls=10
    )
    await crawl.run()
    assert len(fetcher.urls()) == 12  # the home page, the sitemap, its 10 pages
    assert await dropped_of(crawl.frontier, "a.test") == {}


async def test_sitemaps_past_the_most_and_too_large_are_counted() -> None:
    children = ["/big.xml", "/zeros.xml.gz", *(f"/s{i}.xml" for i in range(5))]
    fetcher, crawl = await crawl_of(
        {
            f"{A}/sitemap.xml": index(*children),
            f"{A}/big.xml": urlset(*(f"/big/{i}" for i in range(100))),  # over 2048 bytes
            f"{A}/zeros.xml.gz": body(gzip.compress(b"<urlset>" + b" " * 5_000)),
            **{f"{A}/s{i}.xml": urlset(f"/p{i}") for i in range(5)},
        },
        sitemap_max_sitemaps=4,
        sitemap_max_bytes=2048,
    )
    await crawl.run()
    # big.xml, zeros.xml.gz, s0 and s1 are the 4 queued; s2 .. s4 are past the most
    assert [f"{A}{path}" for path in children[:4]] == [
        url for url in fetcher.urls() if url.endswith((".xml", ".gz")) and "sitemap" not in url
    ]
    assert not any("/big/" in url for url in fetcher.urls())
    assert await dropped_of(crawl.frontier, "a.test") == {
        "sitemap_max_sitemaps": 3,
        "sitemap_max_bytes": 2,  # big.xml as fetched, zeros.xml.gz once inflated
    }


async def test_an_external_entity_is_never_fetched() -> None:
    xxe = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "{A}/secret">'
        f'<!ENTITY % dtd SYSTEM "{A}/secret"> %dtd;]>'
        f'<urlset xmlns="{NS}"><url><loc>&xxe;</loc></url><url><loc>{A}/ok</loc></url></urlset>'
    )
    doctype = f'<!DOCTYPE urlset SYSTEM "{A}/secret"><urlset><url><loc>{A}/dt</loc></url></urlset>'
    fetcher, crawl = await crawl_of(
        {
            f"{A}/sitemap.xml": index("/xxe.xml", "/doctype.xml"),
            f"{A}/xxe.xml": body(xxe.encode()),
            f"{A}/doctype.xml": body(doctype.encode()),
            f"{A}/secret": html(),
        }
    )
    await crawl.run()
    assert {f"{A}/ok", f"{A}/dt"} <= set(fetcher.urls())
    assert fetcher.fetches(f"{A}/secret") == []
    assert (await crawl.frontier.stats()).get("sitemaps.broken_entries") == 1
