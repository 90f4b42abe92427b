"""What limits drop is counted by reason, whoever drops it: a page's step, a redirect, the
seeds, the sitemaps; and every view reads it from the store (decision 0043)."""

from __future__ import annotations

from crawlfleet.counters import LIMIT_UNITS, CrawlStats, Filtered, Limit, dropped_counter
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.monitoring.summary import dropped_line
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed
from tests.unit.test_metrics import scrape

A = "http://a.test"


async def dropped_of(frontier: Frontier, domain: str) -> dict[str, int]:
    stats = await frontier.domains(100)
    view = next(v for v in stats if v.domain == domain)
    counts: dict[str, int] = {r.value: n for r, n in view.stats.dropped().items()}
    counts.update({f"filtered.{r.value}": n for r, n in view.stats.filtered().items()})
    return counts


async def test_a_page_step_counts_its_cut_and_refused_links_with_its_end() -> None:
    clock = FakeClock(T0)
    links = [f"/p/{i}" for i in range(10)] + ["http://elsewhere.test/x", "/" + "a" * 100]
    fetcher = CannedFetcher(clock, {f"{A}/": html(*links)})
    crawl = make_crawl(
        fetcher, seeds=[f"{A}/"], obey_robots=False, max_links_per_page=11, max_url_chars=64
    )
    await seed(crawl, f"{A}/")
    await crawl.run()
    # 12 links, 11 kept: the long one cut; of the kept, the off-site one filtered.
    assert await dropped_of(crawl.frontier, "a.test") == {
        "max_links_per_page": 1,
        "filtered.off_site": 1,
    }
    assert len(fetcher.urls()) == 11


async def test_a_redirect_past_max_redirects_is_counted() -> None:
    clock = FakeClock(T0)
    hop = Canned(302, b"", {"location": f"{A}/next"})
    fetcher = CannedFetcher(clock, {f"{A}/": hop, f"{A}/next": hop})
    crawl = make_crawl(fetcher, seeds=[f"{A}/"], obey_robots=False, max_redirects=1)
    await seed(crawl, f"{A}/")
    await crawl.run()
    assert await dropped_of(crawl.frontier, "a.test") == {"max_redirects": 1}


async def test_seeds_and_sitemap_entries_refused_are_counted_under_their_domain() -> None:
    clock = FakeClock(T0)

    def index(*urls: str) -> Canned:
        body = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls)
        return Canned(body=f"<sitemapindex>{body}</sitemapindex>".encode(), headers={})

    urlset = "".join(f"<url><loc>{A}/{p}</loc></url>" for p in ("ok", "b" * 80))
    pages = {
        f"{A}/sitemap.xml": index(f"{A}/s1.xml"),
        f"{A}/s1.xml": index(f"{A}/s2.xml"),
        f"{A}/s2.xml": index(f"{A}/s3.xml", f"{A}/urls.xml"),
        f"{A}/s3.xml": index(f"{A}/s4.xml"),  # s4.xml: an index 4 levels down, not read
        f"{A}/urls.xml": Canned(body=f"<urlset>{urlset}</urlset>".encode(), headers={}),
    }
    crawl = make_crawl(
        CannedFetcher(clock, pages),
        seeds=[f"{A}/"],
        obey_robots=False,
        max_url_chars=64,
        deny=["/denied"],
    )
    await seed(crawl, f"{A}/", f"{A}/denied")
    await crawl.admitter.seed_sitemaps([f"{A}/"])
    await crawl.run()  # sitemaps are read as requests of the crawl (decision 0052)
    assert await dropped_of(crawl.frontier, "a.test") == {
        "filtered.deny": 1,  # the seed
        "max_url_chars": 1,  # the long sitemap entry
        "sitemap_max_depth": 1,  # s4.xml
    }


def test_the_end_line_sums_by_unit_and_names_each_limit() -> None:
    stats = CrawlStats(
        {
            dropped_counter(Limit.MAX_LINKS_PER_PAGE): 200,
            dropped_counter(Limit.MAX_DEPTH): 12,
            dropped_counter(Limit.SITEMAP_MAX_BYTES): 1,
            dropped_counter(Filtered.OFF_SITE): 99,  # a choice of scope, not a limit
        }
    )
    assert dropped_line(stats) == (
        "dropped by limits: 212 links (max_links_per_page 200, max_depth 12), "
        "1 sitemaps (sitemap_max_bytes 1); raise the setting to keep them"
    )
    assert dropped_line(CrawlStats({dropped_counter(Filtered.OFF_SITE): 5})) is None


async def test_metrics_serve_every_limit_as_a_label_from_the_start() -> None:
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, {f"{A}/": html("/a", "/b", "/c")})
    crawl = make_crawl(fetcher, seeds=[f"{A}/"], obey_robots=False, max_links_per_page=1)
    await seed(crawl, f"{A}/")
    await crawl.run()
    metrics = Metrics()
    metrics.watch("c", crawl.frontier, runtime="embedded")
    await metrics.refresh()
    samples = scrape(metrics)["crawlfleet_dropped"]
    by_limit = {s.labels["limit"]: s.value for s in samples if s.name.endswith("_total")}
    assert by_limit == {limit.value: 2.0 if limit is Limit.MAX_LINKS_PER_PAGE else 0.0
                        for limit in Limit}  # fmt: skip
    filtered = scrape(metrics)["crawlfleet_filtered"]
    assert {s.labels["reason"] for s in filtered if s.name.endswith("_total")} == {
        reason.value for reason in Filtered
    }


def test_every_limit_has_a_unit_for_the_end_line() -> None:
    assert set(LIMIT_UNITS) == set(Limit)
