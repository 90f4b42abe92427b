"""Parser expectations, mismatches and the drift breaker over the in-memory store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from crawlfleet.counters import CrawlStats
from crawlfleet.dashboard.pages import parsers_html
from crawlfleet.events import FetchAttempted, ParserDrifted
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.monitoring.deadletters import by_class
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.monitoring.quality_scores import quality_report
from crawlfleet.parsing.expect import Expect
from crawlfleet.parsing.plugins import PluginFunction, marked, parser, spec_of
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.parsing.response import Response
from crawlfleet.records import Outcome
from crawlfleet.runtime.step.drift import resume
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, make_crawl, seed
from tests.unit.test_metrics import scrape

A = "http://a.test"
B = "http://b.test"
EXPECT = Expect(selectors=(".price",), fields=("name", "price"), min_items=1)


def product(number: int, *, redesigned: bool = False, links: int = 0) -> Canned:
    nav = "".join(f'<a href="/p/{n}">{n}</a>' for n in range(number + 1, number + 1 + links))
    if redesigned:
        body = f'<h2 class="title">item {number}</h2><span class="cost">{number}.99</span>'
    else:
        body = f'<h1 class="name">item {number}</h1><p class="price">{number}.99</p>'
    return Canned(body=f"<html><body>{body}{nav}</body></html>".encode())


def read(page: Response, *, fixed: bool) -> dict[str, Any]:
    name = page.css_first(".name, .title" if fixed else ".name")
    price = page.css_first(".price, .cost" if fixed else ".price")
    return {
        "host": page.url.split("/")[2],
        "name": name.text() if name is not None else None,
        "price": price.text() if price is not None else None,
    }


def samples_in(root: Path) -> tuple[list[Path], list[dict[str, Any]]]:
    """The files kept under ``root`` and the accounts (``.json``) among them."""
    kept = list(root.glob("item-*/*"))
    return kept, [orjson.loads(p.read_bytes()) for p in kept if p.suffix == ".json"]


def registry(*, fixed: bool = False) -> ParserRegistry:
    expect = Expect(selectors=(".price, .cost",), fields=("name", "price")) if fixed else EXPECT

    @parser(pattern="/p/*", expect=expect)
    def item(page: Response) -> dict[str, Any]:
        return read(page, fixed=fixed)

    function: PluginFunction = item
    meta = marked(function)
    assert meta is not None
    return ParserRegistry([spec_of(function, meta, "test")])


async def test_a_page_missing_its_expectations_is_retried_then_dead_lettered(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    pages = {f"{A}/p/1": product(1, redesigned=True, links=2)}
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(
        fetcher, seeds=[A], parsers=registry(), obey_robots=False, samples_dir=tmp_path
    )
    attempts = crawl.collect(FetchAttempted)
    await seed(crawl, f"{A}/p/1")

    await crawl.run()

    assert fetcher.urls() == [f"{A}/p/1"] * 4  # the first try and max_retries 3; links not followed
    assert [a.attempt.outcome for a in attempts] == [Outcome.MISMATCH] * 4
    error = attempts[0].attempt.error
    assert error == (
        "mismatch: item: missing selector '.price'; field 'name' (1 of 1 items); "
        "field 'price' (1 of 1 items)"
    )
    assert not await crawl.sink.stored()
    counts = await crawl.frontier.counts()
    assert (counts.done, counts.dead) == (0, 1)
    assert [(g.name, g.count) for g in await by_class(crawl.frontier)] == [("mismatch: item", 1)]
    stats = await crawl.frontier.stats()
    assert stats.get("outcome.mismatch") == 4
    assert stats.pages == 0
    assert stats.errors == 4
    # the first parse of a page is its quality figure (the retries are not)
    assert stats.get("mismatch.item") == 1
    assert stats.get("quality.item.pages") == 1
    assert stats.get("quality.item.met") == 0
    kept, meta = samples_in(tmp_path)
    assert len(kept) == 6  # a page and its account per reason: selector, name, price
    assert {m["reason"] for m in meta} == {"selector '.price'", "field 'name'", "field 'price'"}
    assert {m["url"] for m in meta} == {f"{A}/p/1"}


async def test_pages_that_meet_them_count_toward_the_quality_figures() -> None:
    clock = FakeClock(T0)
    pages = {f"{A}/p/{n}": product(n) for n in range(1, 4)}
    pages[f"{A}/p/3"] = Canned(body=b'<html><h1 class="name"></h1><p class="price">1</p></html>')
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(fetcher, seeds=[A], parsers=registry(), obey_robots=False, max_retries=0)
    await seed(crawl, *pages)

    await crawl.run()

    stats = await crawl.frontier.stats()
    domains = {view.domain: view.stats for view in await crawl.frontier.domains()}
    assert quality_report(stats, domains) == {
        "parsers": {
            "item": {
                "pages": 3,
                "met_share": 0.6667,
                "items_per_page": 1.0,
                "fill_rates": {"name": 0.6667, "price": 1.0},
                "domains": {
                    "a.test": {
                        "pages": 3,
                        "met_share": 0.6667,
                        "items_per_page": 1.0,
                        "fill_rates": {"name": 0.6667, "price": 1.0},
                    }
                },
            }
        },
        "item_types": {
            "item": {
                "stored": 2,
                "invalid": 0,
                "duplicate": 0,
                "invalid_share": 0.0,
                "duplicate_share": 0.0,
            }
        },
    }
    figures = {name: stats.get(name) for name in stats.counters if name.startswith("quality.")}
    assert figures == {
        "quality.item.pages": 3,
        "quality.item.met": 2,
        "quality.item.items": 3,
        "quality.item.filled.name": 2,
        "quality.item.filled.price": 3,
    }
    assert stats.get("mismatch.item") == 1
    assert len(await crawl.sink.stored()) == 2


async def test_a_drift_pauses_the_parser_on_its_domain_only_and_resume_reopens_it() -> None:
    clock = FakeClock(T0)
    # a.test is redesigned from its 41st page on; b.test never is
    pages = {f"{A}/p/{n}": product(n, redesigned=n > 40) for n in range(1, 101)}
    pages |= {f"{B}/p/{n}": product(n) for n in range(1, 101)}
    fetcher = CannedFetcher(clock, pages)
    store = MemoryQueueStore()
    crawl = make_crawl(fetcher, seeds=[A, B], parsers=registry(), obey_robots=False, store=store)
    drifted = crawl.collect(ParserDrifted)
    await seed(crawl, *pages)

    await crawl.run(concurrency=1)

    assert [(d.parser, d.domain, d.paused) for d in drifted] == [("item", "a.test", True)]
    broken_fetched = {
        u for u in fetcher.urls() if u.startswith(f"{A}/p/") and int(u.rsplit("/", 1)[1]) > 40
    }
    assert len(broken_fetched) == 7  # decision 0051: a full break after 40 pages fires on its 7th
    stored = await crawl.sink.stored()
    assert {i.data["name"] for i in stored if i.data["host"] == "b.test"} == {
        f"item {n}" for n in range(1, 101)
    }  # the other domain finished
    assert len([i for i in stored if i.data["host"] == "a.test"]) == 40
    counts = await crawl.frontier.counts()
    assert counts.pending == 0
    assert counts.dead == 60  # 7 mismatched, 53 paused unfetched: one class
    assert [(g.name, g.count) for g in await by_class(crawl.frontier)] == [("mismatch: item", 60)]
    assert (await crawl.frontier.strategy("a.test")).get("drift.item") == "paused"
    metrics = Metrics()
    metrics.watch("c", crawl.frontier, runtime="embedded")
    await metrics.refresh()
    drift = {s.labels["domain"]: s.value for s in scrape(metrics)["crawlfleet_parser_drift"]}
    assert drift == {"a.test": 1.0, "b.test": 0.0}
    pages_by = {
        (s.labels["domain"], s.labels["expectations"]): s.value
        for s in scrape(metrics)["crawlfleet_parser_pages"]
        if s.name.endswith("_total")
    }
    assert pages_by == {
        ("a.test", "met"): 40.0,
        ("a.test", "missed"): 7.0,
        ("b.test", "met"): 100.0,
        ("b.test", "missed"): 0.0,
    }

    assert await resume(crawl.frontier, "item", "a.test") == 60
    assert "drift.item" not in await crawl.frontier.strategy("a.test")
    fixed = make_crawl(
        fetcher, seeds=[A, B], parsers=registry(fixed=True), obey_robots=False,
        store=store,
    )  # fmt: skip
    await fixed.run(concurrency=1)
    again = await fixed.sink.stored()
    assert {i.data["name"] for i in again} == {f"item {n}" for n in range(41, 101)}
    assert {i.data["price"] for i in again} == {f"{n}.99" for n in range(41, 101)}
    assert (await fixed.frontier.counts()).dead == 0


def test_the_dashboard_shows_each_parsers_quality() -> None:
    stats = CrawlStats(
        {
            "quality.item.pages": 3,
            "quality.item.met": 2,
            "quality.item.items": 3,
            "quality.item.filled.name": 2,
            "quality.item.filled.price": 3,
        }
    )
    html = parsers_html(stats)
    assert '<div id="parsers">' in html
    assert "66.7 %" in html
    assert "name:67% price:100%" in html
    assert parsers_html(CrawlStats({"outcome.ok": 4})) == ""


async def test_with_on_drift_continue_the_drift_is_marked_and_every_page_still_fetched() -> None:
    clock = FakeClock(T0)
    pages = {f"{A}/p/{n}": product(n, redesigned=n > 40) for n in range(1, 61)}
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(
        fetcher, seeds=[A], parsers=registry(), obey_robots=False, on_drift="continue",
        max_retries=0,
    )  # fmt: skip
    drifted = crawl.collect(ParserDrifted)
    await seed(crawl, *pages)

    await crawl.run(concurrency=1)

    assert [(d.domain, d.pages, d.paused) for d in drifted] == [("a.test", 47, False)]
    assert sorted(fetcher.urls()) == sorted(pages)  # nothing paused
    assert (await crawl.frontier.strategy("a.test")).get("drift.item") == "seen"
    assert [(g.name, g.count) for g in await by_class(crawl.frontier)] == [("mismatch: item", 20)]
