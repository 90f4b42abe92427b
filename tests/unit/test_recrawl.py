"""Revisits over the in-memory twin with the fake clock: conditional requests, unchanged pages,
the change feed and the adaptive interval (``runtime/step/freshness.py``, ``recrawl.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.sitemaps import SitemapEntry, SitemapTally, read_sitemap
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.parsing.plugins import Revisit, marked, parser, spec_of
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.pipeline.changes import CHANGED, GONE, NEW
from crawlfleet.recrawl import RecrawlPolicy, RecrawlRule, adapt, duration_s
from crawlfleet.settings.loading import load_settings
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import HTML, T0, Canned, CannedFetcher, make_crawl, seed

SITE = "https://shop.test/"
PAGE = "https://shop.test/item"


class ConditionalFetcher(CannedFetcher):
    """Answers a page from ``pages``; 304 when ``If-None-Match`` names its current ETag.

    Records the conditional headers of every request it got.
    """

    def __init__(self, clock: FakeClock, pages: dict[str, Canned]) -> None:
        super().__init__(clock, pages)
        self.sent: list[tuple[str, str | None, str | None]] = []

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        match = request.headers.get("If-None-Match")
        self.sent.append((request.url, match, request.headers.get("If-Modified-Since")))
        result = await self.fetch_url(request.url)
        if match is not None and match == result.headers.get("etag"):
            result.status, result.body = 304, b""
        return result


def page(price: str, etag: str | None = None) -> Canned:
    headers = dict(HTML)
    if etag is not None:
        headers |= {"etag": etag, "last-modified": "Mon, 01 Jan 2024 00:00:00 GMT"}
    body = f'<html><title>item</title><p class="price">{price}</p></html>'.encode()
    return Canned(body=body, headers=headers)


@parser("shop.test", pattern="/item", item_type="product")
def item(response: Any) -> Any:
    yield {"key": "p1", "price": response.css_first("p.price").text()}


@parser("shop.test", pattern="/", item_type="home")
def home(response: Any) -> Any:
    yield PAGE
    yield Revisit(priority=7)


def registry() -> ParserRegistry:
    reg = ParserRegistry()
    for function in (item, home):
        meta = marked(function)
        assert meta is not None
        reg.add(spec_of(function, meta, __name__))
    return reg


def crawl_of(fetcher: CannedFetcher, **settings: Any) -> Any:
    return make_crawl(fetcher, seeds=[SITE], obey_robots=False, parsers=registry(), **settings)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


async def test_a_304_without_validators_is_not_parsed(clock: FakeClock) -> None:
    fetcher = CannedFetcher(clock, {SITE: Canned(304, b"", dict(HTML))})
    crawl = make_crawl(fetcher, seeds=[SITE], obey_robots=False)
    await seed(crawl, SITE)
    await crawl.run()
    assert await crawl.sink.stored() == []
    stats = await crawl.frontier.stats()
    assert stats.counters.get("outcome.failed") == 1


async def test_a_revisit_sends_validators_and_a_304_is_unchanged(clock: FakeClock) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x", '"h"'), PAGE: page("£1", '"a"')})
    crawl = crawl_of(fetcher, recrawl_after="0s")
    await seed(crawl, SITE)
    await crawl.run()
    first_seen = {i.item_key: i.last_seen for i in await crawl.sink.stored("product")}
    assert [c.change for c in crawl.sink.changes] == [NEW]
    clock.advance(10)
    assert await crawl.frontier.revisit(clock.now()) == 2
    await crawl.run()
    modified = "Mon, 01 Jan 2024 00:00:00 GMT"
    assert sorted(fetcher.sent[-2:]) == [(SITE, '"h"', modified), (PAGE, '"a"', modified)]
    counters = (await crawl.frontier.stats()).counters
    assert counters["fresh.not_modified"] == 2
    assert counters["fresh.unchanged"] == 2
    assert len(crawl.sink.changes) == 1  # nothing new
    (product,) = await crawl.sink.stored("product")
    assert product.last_seen == first_seen["p1"] + 10  # seen again, not parsed


async def test_same_body_is_unchanged_and_a_new_price_is_a_diff(clock: FakeClock) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x"), PAGE: page("£1")})
    crawl = crawl_of(fetcher, recrawl_after="0s")
    await seed(crawl, SITE)
    await crawl.run()
    clock.advance(10)
    await crawl.frontier.revisit(clock.now())
    await crawl.run()
    assert (await crawl.frontier.stats()).counters["fresh.unchanged"] == 2
    assert "fresh.not_modified" not in (await crawl.frontier.stats()).counters
    fetcher.pages[PAGE] = [page("£2")]
    clock.advance(10)
    await crawl.frontier.revisit(clock.now())
    await crawl.run()
    change = crawl.sink.changes[-1]
    assert (change.item_type, change.item_key, change.change) == ("product", "p1", CHANGED)
    assert change.diff == {"price": {"old": "£1", "new": "£2"}}


async def test_a_page_now_404_makes_its_items_gone(clock: FakeClock) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x"), PAGE: page("£1")})
    crawl = crawl_of(fetcher, recrawl_after="0s")
    await seed(crawl, SITE)
    await crawl.run()
    fetcher.pages[PAGE] = [Canned(404, b"gone", dict(HTML))]
    clock.advance(10)
    await crawl.frontier.revisit(clock.now())
    await crawl.run()
    assert [(c.item_key, c.change) for c in crawl.sink.changes if c.change == GONE] == [
        ("p1", GONE)
    ]
    assert await crawl.frontier.next_visit_at() is not None  # the home page, not the 404


async def test_a_parser_raises_the_revisit_priority(clock: FakeClock) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x"), PAGE: page("£1")})
    crawl = crawl_of(fetcher, recrawl_after="1h")
    await seed(crawl, SITE)
    await crawl.run()
    home = await crawl.frontier.visit(crawl.frontier.requests_for([SITE], None)[0][0].fingerprint)
    assert home is not None
    assert home.priority == 7
    assert home.next_at == pytest.approx(clock.now() + 3600, abs=1)


async def test_nothing_is_remembered_without_a_recrawl_rule(clock: FakeClock) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x", '"h"')})
    crawl = crawl_of(fetcher)
    await seed(crawl, SITE)
    await crawl.run()
    assert await crawl.frontier.next_visit_at() is None
    assert fetcher.sent == [(SITE, None, None), (PAGE, None, None)]


@pytest.mark.parametrize("changes", [True, False])
async def test_the_adaptive_interval_converges(clock: FakeClock, changes: bool) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("0")})
    crawl = make_crawl(
        fetcher,
        seeds=[SITE],
        obey_robots=False,
        recrawl_after="1h",
        recrawl_adaptive=True,
        recrawl_min="10m",
        recrawl_max="1d",
    )
    await seed(crawl, SITE)
    await crawl.run()
    fp = crawl.frontier.requests_for([SITE], None)[0][0].fingerprint
    for visit_number in range(1, 12):
        if changes:
            fetcher.pages[SITE] = [page(str(visit_number))]
        due = await crawl.frontier.next_visit_at()
        assert due is not None
        clock.advance(due - clock.now())
        assert await crawl.frontier.revisit(clock.now()) == 1
        await crawl.run()
    visit = await crawl.frontier.visit(fp)
    assert visit is not None
    assert visit.interval_s == (600.0 if changes else 86400.0)


def test_adapt_halves_and_doubles_within_bounds() -> None:
    rule = RecrawlRule(pattern="", after="1h", adaptive=True, min="10m", max="4h")
    assert adapt(rule, None, changed=True) == 3600
    assert adapt(rule, 3600, changed=True) == 1800
    assert adapt(rule, 700, changed=True) == 600
    assert adapt(rule, 3600, changed=False) == 7200
    assert adapt(rule, 10000, changed=False) == 14400
    fixed = RecrawlRule(pattern="", after="6h")
    assert adapt(fixed, 100, changed=True) == 6 * 3600


def test_rules_by_pattern_then_item_type_then_the_default() -> None:
    policy = RecrawlPolicy(
        [RecrawlRule(pattern="/hot/", after="5m"), RecrawlRule(item_type="review", after="1w")],
        RecrawlRule(pattern="", after="1d"),
    )
    assert policy.next_due("https://a/hot/1", [], previous_s=None, changed=True).interval_s == 300
    assert policy.next_due("https://a/r", ["review"], previous_s=None, changed=True).interval_s == (
        7 * 86400
    )
    assert policy.next_due("https://a/x", [], previous_s=None, changed=True).interval_s == 86400


@pytest.mark.parametrize("text", ["6x", "-1", "h"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration_s(text)


async def test_a_sitemap_lastmod_after_the_last_visit_makes_a_known_url_due(
    clock: FakeClock,
) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x"), PAGE: page("£1")})
    crawl = crawl_of(fetcher, recrawl_after="1d")
    await seed(crawl, SITE)
    await crawl.run()
    visited = clock.now()
    clock.advance(3600)
    (request,), _ = crawl.frontier.requests_for([PAGE], None)
    assert not await crawl.frontier.expedite(request, visited - 60, clock.now())  # older
    assert await crawl.frontier.revisit(clock.now()) == 0
    assert await crawl.frontier.expedite(request, visited + 60, clock.now())
    assert await crawl.frontier.revisit(clock.now()) == 1
    await crawl.run()
    assert fetcher.urls()[-1] == PAGE


def test_sitemap_pages_carry_their_lastmod() -> None:
    sitemap = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>https://shop.test/a</loc><lastmod>2024-05-01T12:00:00+02:00</lastmod></url>"
        b"<url><lastmod>2024-05-02</lastmod><loc>https://shop.test/b</loc></url>"
        b"<url><loc>https://shop.test/c</loc><lastmod>yesterday</lastmod></url>"
        b"<url><loc>https://shop.test/d</loc></url></urlset>"
    )

    read = read_sitemap("https://shop.test/sitemap.xml", sitemap, SitemapTally())
    found = [entry for pages, _children in read for entry in pages]
    assert found == [
        SitemapEntry("https://shop.test/a", 1714557600.0),
        SitemapEntry("https://shop.test/b", 1714608000.0),
        SitemapEntry("https://shop.test/c", None),
        SitemapEntry("https://shop.test/d", None),
    ]


async def test_a_known_page_that_fails_stays_due_with_its_validators(clock: FakeClock) -> None:
    fetcher = ConditionalFetcher(clock, {SITE: page("x", '"h"')})
    crawl = crawl_of(fetcher, recrawl_after="1h")
    await seed(crawl, SITE)
    await crawl.run()
    fetcher.pages[SITE] = [Canned(401, b"<html>log in</html>", dict(HTML))]
    clock.advance(3600)
    assert await crawl.frontier.revisit(clock.now()) == 1
    await crawl.run(concurrency=1)
    fp = crawl.frontier.requests_for([SITE], None)[0][0].fingerprint
    known = await crawl.frontier.visit(fp)
    assert known is not None
    assert known.etag == '"h"'
    assert known.next_at == pytest.approx(clock.now() + 3600)
    assert (await crawl.frontier.stats()).counters["outcome.failed"] == 2  # and /item: 404


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"recrawl_min": "1h"}, "need recrawl_after"),
        ({"revisit": "pass"}, "no page is ever due again"),
        ({"recrawl_after": "1h", "recrawl_min": "2h", "recrawl_adaptive": True}, "min must be"),
        ({"recrawl": [{"after": "1h"}]}, "a pattern or an item_type"),
        ({"recrawl_after": "soon"}, "duration"),
    ],
)
def test_recrawl_settings_that_cannot_be_honoured_are_refused(
    settings: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError, match=error):
        load_settings(**settings)
