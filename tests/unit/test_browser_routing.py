"""Routing between fetchers: the router's precedence, kinds at start-up, learned lanes, the
strategy slot's ``fetcher``, and the claim loop's own bound on the browser lane."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.learned import RECHECK_EVERY, lane_for, rechecked
from crawlfleet.models import Link
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.parsing.plugins import marked, parser, spec_of
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.choice.kinds import check_kinds, named_kinds
from crawlfleet.runtime.choice.routing import Router
from crawlfleet.runtime.choice.strategy import Strategies
from crawlfleet.runtime.loop.claim import ClaimLoop
from crawlfleet.settings.domains import DomainOverride
from crawlfleet.urls import fingerprint
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed

CHROMIUM = Path("/usr/bin/chromium")


def registry(*functions: object) -> ParserRegistry:
    specs = []
    for function in functions:
        meta = marked(function)
        assert meta is not None
        specs.append(spec_of(function, meta, "test"))  # type: ignore[arg-type]
    return ParserRegistry(specs)


@parser("js.test", pattern="/app/*", fetcher="browser", wait="css:.name")
def app_page(response: object) -> None:
    return None


@parser("js.test", pattern="/mixed/*", fetcher="auto")
def mixed_page(response: object) -> None:
    return None


@parser("js.test", pattern="/plain/*")
def plain_page(response: object) -> None:
    return None


def router(**overrides: DomainOverride) -> Router:
    return Router(registry(app_page, mixed_page, plain_page), overrides, "load")


def test_a_rule_beats_the_parser_which_beats_the_domain() -> None:
    route = router(**{"js.test": DomainOverride(fetcher="browser")})
    assert route.kind("http://js.test/app/1", "http") == "http"
    assert route.kind("http://js.test/app/1", None) == "browser"
    assert route.kind("http://js.test/plain/1", None) == "browser"  # the domain's
    assert router().kind("http://js.test/plain/1", None) == "http"
    assert router().kind("file:///tmp/a.html", None) == "file"
    assert route.kind("http://other.test/", None) == "http"


def test_auto_becomes_the_lane_of_its_parser() -> None:
    route = router(**{"auto.test": DomainOverride(fetcher="auto")})
    assert route.kind("http://js.test/mixed/1", None) == "auto:mixed_page"
    assert route.auto_key("http://js.test/mixed/1") == "auto:mixed_page"
    assert route.auto_key("http://js.test/app/1") is None
    assert route.kind("http://auto.test/x", None) == "auto:default"


def test_a_crawl_naming_no_fetcher_routes_the_same_without_matching_parsers() -> None:
    # No parser or domain names a fetcher: the router skips the parser match per link.
    plain = Router(registry(plain_page), {"x.test": DomainOverride(delay_s=1.0)}, "load")
    assert plain.kind("http://js.test/plain/1", None) == "http"
    assert plain.kind("http://x.test/a", None) == "http"
    assert plain.kind("http://js.test/plain/1", "browser") == "browser"
    assert plain.kind("http://js.test/plain/1", "auto") == "auto:plain_page"
    assert plain.kind("http://other.test/", "auto") == "auto:default"
    assert plain.kind("file:///tmp/a.html", None) == "file"


def test_wait_rules_come_from_the_parser_else_the_crawl() -> None:
    assert router().wait_for("http://js.test/app/1") == "css:.name"
    assert router().wait_for("http://js.test/plain/1") == "load"
    bad = replace(spec_of(app_page, app_page.__crawlfleet_parser__, "t"), wait="soon")  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="parser 'app_page' \\(t\\): wait rule 'soon'"):
        Router(ParserRegistry([bad]), {}, "load")


def test_named_kinds_cover_parsers_and_domains_and_refuse_auto_on_a_rule() -> None:
    found = list(named_kinds(registry(app_page), {"x.test": DomainOverride(fetcher="auto")}))
    assert found == [("browser", "parser 'app_page' (test)"), ("auto", "domain 'x.test'")]
    rule = {
        "name": "listing",
        "domain": "x.test",
        "fields": {"t": {"css": "h1"}},
        "follow": [{"pattern": "/p/", "fetcher": "auto"}],
    }
    with pytest.raises(ConfigError, match="follow rule 1 names fetcher 'auto'"):
        list(named_kinds(load_parsers([], [rule], use_entry_points=False)))


def test_a_browser_kind_without_chromium_names_what_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "chromium"
    with pytest.raises(ConfigError) as caught:
        check_kinds([("browser", "parser 'p'")], ("http",), browser_executable=missing)
    assert str(caught.value) == (
        f"parser 'p' names fetcher 'browser', which needs a browser: no Chromium at {missing}"
        " (apt-get install chromium, or set browser_executable)"
    )
    with pytest.raises(ConfigError, match="'ftp', which is not a fetcher kind"):
        check_kinds([("ftp", "parser 'p'")], ("http",), browser_executable=CHROMIUM)
    check_kinds([("browser", "parser 'p'")], ("http", "browser"), browser_executable=CHROMIUM)


def test_a_learned_http_parser_sends_one_request_in_recheck_every_to_the_browser() -> None:
    urls = [f"http://x.test/p/{n}" for n in range(2000)]
    learned = {"auto:p": "http"}
    lanes = [lane_for(learned, "auto:p", fingerprint(url)) for url in urls]
    checks = lanes.count("browser")
    assert checks == sum(rechecked(fingerprint(url)) for url in urls)
    assert len(urls) / RECHECK_EVERY / 2 < checks < 2 * len(urls) / RECHECK_EVERY
    assert lane_for({}, "auto:p", fingerprint(urls[0])) == "browser"
    assert lane_for({"auto:p": "browser"}, "auto:p", fingerprint(urls[0])) == "browser"


async def test_the_frontier_admits_auto_requests_to_their_learned_lane() -> None:
    crawl = make_crawl(
        CannedFetcher(FakeClock(T0), {}), seeds=["http://js.test/"], obey_robots=False
    )
    frontier = crawl.frontier
    await frontier.set_strategy("js.test", {"auto:mixed_page": "http", "tier": "1"})
    requests, _ = frontier.requests_for([Link("http://js.test/mixed/1", fetcher=None)], None)
    learned = [replace(r, fetcher="auto:mixed_page") for r in requests]
    assert await frontier.add(learned) == 1
    lane = "browser" if rechecked(learned[0].fingerprint) else "http"
    (lease,) = await frontier.claim(10, T0, (lane,))
    assert lease.request.fetcher == lane
    assert (await frontier.strategy("js.test"))["tier"] == "1"


async def test_a_process_without_a_browser_hands_a_browser_strategy_domain_to_its_lane() -> None:
    clock = FakeClock(T0)
    page = "http://js.test/plain/1"
    http = CannedFetcher(clock, {page: html()})
    crawl = make_crawl(http, seeds=[page], obey_robots=False)
    crawl.crawler.parts = replace(
        crawl.crawler.parts, strategies=Strategies(crawl.frontier, crawl.clock)
    )
    await seed(crawl, page)
    await crawl.frontier.set_strategy("js.test", {"fetcher": "browser", "tier": "2"})
    ran = await crawl.run(kinds=("http",))
    assert ran.reason == "stranded"
    assert http.urls() == []
    (lease,) = await crawl.frontier.claim(10, crawl.clock.now(), ("browser",))
    assert (lease.request.url, lease.request.fetcher, lease.request.attempt) == (page, "browser", 0)
    assert (await crawl.frontier.stats()).get("outcome.retry") == 0


async def test_the_browser_lane_has_its_own_bound_on_steps_in_flight() -> None:
    clock = FakeClock(T0)
    pages = {f"http://js.test/app/{n}": Canned(latency_s=1.0) for n in range(6)}
    plain = {f"http://other.test/{n}": Canned(latency_s=1.0) for n in range(6)}
    browser = CannedFetcher(clock, pages, kind="browser")
    http = CannedFetcher(clock, plain)
    crawl = make_crawl(
        {"http": http, "browser": browser},
        seeds=[*pages, *plain],
        obey_robots=False,
        per_domain_concurrency=10,
    )
    await crawl.frontier.start(T0)
    links = [Link(u, fetcher="browser") for u in pages] + [Link(u) for u in plain]
    await crawl.admitter.seed(links)
    loop = ClaimLoop(
        crawl.crawler,
        kinds=frozenset({"http", "browser"}),
        concurrency=6,
        clock=clock,
        kind_limits={"browser": 2},
    )
    await loop.run(stop=asyncio.Event(), until_empty=True)
    assert max(_overlap(browser)) == 2
    assert max(_overlap(http)) == 6


def _overlap(fetcher: CannedFetcher) -> list[int]:
    """How many of ``fetcher``'s fetches were running at each fetch's start."""
    spans = [(f.started, f.ended) for f in fetcher.fetched]
    return [sum(1 for s, e in spans if s <= start < e) for start, _ in spans]
