"""A robots ``Crawl-delay``: honoured as written up to ``max_crawl_delay_s``, read again on
every robots.txt refetch (the crawl step over the in-memory store and the fake clock)."""

from __future__ import annotations

import logging
from itertools import pairwise

import pytest

from crawlfleet.frontier.store_types import DelaySource
from crawlfleet.settings.domains import DomainOverride
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, make_crawl, seed

A = "http://a.test"
ROBOTS = f"{A}/robots.txt"


def robots(body: bytes, status: int = 200) -> Canned:
    return Canned(status, body, headers={"content-type": "text/plain"})


def pages(count: int) -> dict[str, Canned | list[Canned]]:
    return {f"{A}/{n}": Canned() for n in range(1, count + 1)}


def gaps_s(fetcher: CannedFetcher) -> list[float]:
    starts = [f.started for f in fetcher.fetched]
    return [round(b - a, 6) for a, b in pairwise(starts)]


async def test_a_long_crawl_delay_is_honoured_as_written() -> None:
    clock = FakeClock(T0)
    answers = pages(3) | {ROBOTS: robots(b"User-agent: *\nCrawl-delay: 3600\n")}
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0)
    await seed(crawl, *answers)
    await crawl.run()

    assert gaps_s(fetcher) == [3600.0, 3600.0]
    view = await crawl.frontier.domain("a.test")
    assert (view.base_delay_s, view.delay_source) == (3600.0, DelaySource.ROBOTS)


async def test_a_crawl_delay_over_the_cap_is_cut_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(T0)
    answers = pages(3) | {ROBOTS: robots(b"User-agent: *\nCrawl-delay: 86400\n")}
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0, max_crawl_delay_s=600.0)
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.frontier"):
        await seed(crawl, *answers)
        await crawl.run()

    assert gaps_s(fetcher) == [600.0, 600.0]
    view = await crawl.frontier.domain("a.test")
    assert (view.base_delay_s, view.delay_source) == (600.0, DelaySource.ROBOTS_CAPPED)
    assert "Crawl-delay of 86400 s; waiting 600 s (max_crawl_delay_s" in caplog.text


async def test_a_changed_robots_txt_changes_the_delay_at_its_refetch() -> None:
    clock = FakeClock(T0)
    answers = pages(5) | {
        ROBOTS: [
            robots(b"User-agent: *\nCrawl-delay: 5\n"),
            robots(b"User-agent: *\nCrawl-delay: 2\n"),
        ]
    }
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0, robots_ttl_s=7.0)
    await seed(crawl, *answers)
    assert (await crawl.frontier.domain("a.test")).base_delay_s == 5.0
    await crawl.run()

    # Read at T0 (5 s) and again by the third page's step at T0 + 10, whose claim had set
    # the next start 5 s on; from there on 2 s.
    assert gaps_s(fetcher) == [5.0, 5.0, 5.0, 2.0]
    assert fetcher.fetches(ROBOTS)[1].started == T0 + 10
    view = await crawl.frontier.domain("a.test")
    assert (view.base_delay_s, view.delay_source) == (2.0, DelaySource.ROBOTS)


async def test_a_crawl_delay_taken_out_of_robots_txt_gives_the_default_back() -> None:
    clock = FakeClock(T0)
    answers = pages(4) | {
        ROBOTS: [robots(b"User-agent: *\nCrawl-delay: 5\n"), robots(b"", status=404)]
    }
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], delay_s=1.0, robots_ttl_s=3.0)
    await seed(crawl, *answers)
    await crawl.run()

    view = await crawl.frontier.domain("a.test")
    # the crawl's own delay again, shown as the layer that gave it (a keyword: ``cli``)
    assert (view.base_delay_s, view.delay_source) == (1.0, DelaySource.CLI)
    assert gaps_s(fetcher)[-1] == 1.0


async def test_a_refetched_crawl_delay_never_replaces_an_override() -> None:
    clock = FakeClock(T0)
    answers = pages(4) | {
        ROBOTS: [robots(b"User-agent: *\nCrawl-delay: 5\n"), robots(b"", status=404)]
    }
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(
        fetcher,
        seeds=[A],
        delay_s=1.0,
        robots_ttl_s=3.0,
        domains={"a.test": DomainOverride(delay_s=4.0)},
    )
    await seed(crawl, *answers)
    await crawl.run()

    assert gaps_s(fetcher) == [4.0, 4.0, 4.0]
    view = await crawl.frontier.domain("a.test")
    assert (view.base_delay_s, view.delay_source) == (4.0, DelaySource.OVERRIDE)
