"""A refused URL is not a ban (decision 0044): the crawl step over the in-memory store and the
fake clock, and the window's pure rules (``frontier/policy.py``)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from crawlfleet.events import DomainEscalated
from crawlfleet.frontier.policy import (
    BLOCKED,
    CLEAN,
    KIND_MARKS,
    REFUSAL_RULE,
    ban_rule,
    refused_again,
    url_kind,
    window_mark,
)
from crawlfleet.frontier.store_types import BlockRules, Report, Signal
from crawlfleet.records import Attempt, Outcome
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed

A = "http://a.test"
SECTIONS = ("news", "docs", "shop", "blog", "help")
FORBIDDEN = Canned(403, b"<html><title>Forbidden</title></html>")
DELAY_S = 1.0


def page(n: int) -> str:
    return f"{A}/{SECTIONS[n % len(SECTIONS)]}/{n}"


def locked(n: int) -> str:
    return f"{A}/{SECTIONS[n % len(SECTIONS)]}/locked-{n}"


def in_order(scattered: bool) -> list[str]:
    """200 pages and 10 refused URLs (5 %): one after every 20th page, or all at the end."""
    urls: list[str] = []
    for n in range(1, 201):
        urls.append(page(n))
        if scattered and n % 20 == 0:
            urls.append(locked(n // 20))
    if not scattered:
        urls.extend(locked(n) for n in range(1, 11))
    return urls


@pytest.mark.parametrize("scattered", [True, False], ids=["scattered", "clustered"])
async def test_five_percent_refused_urls_cost_one_delay_each(scattered: bool) -> None:
    clock = FakeClock(T0)
    urls = in_order(scattered)
    answers = {url: FORBIDDEN if "/locked-" in url else html() for url in urls}
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False, delay_s=DELAY_S, max_retries=3)
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, *urls)

    await crawl.run(concurrency=1)

    starts = [f.started for f in fetcher.fetched]
    assert len(starts) == 200 + 10 * 4  # each refused URL tried 1 + 3 times
    assert escalated == []
    assert {round(b - a, 6) for a, b in pairwise(starts)} == {DELAY_S}  # never a cooldown
    letters = await crawl.frontier.dead_letters()
    assert {d.errors[-1] for d in letters} == {"refused: HTTP 403"}
    assert len(letters) == 10
    view = await crawl.frontier.domain("a.test")
    assert (view.level, view.effective_delay_s) == (0, DELAY_S)


async def test_a_host_that_refuses_every_url_after_100_pages_escalates() -> None:
    clock = FakeClock(T0)
    urls = [page(n) for n in range(1, 201)]
    answers = {url: html() if n <= 100 else FORBIDDEN for n, url in enumerate(urls, start=1)}
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(
        fetcher,
        seeds=[A],
        obey_robots=False,
        delay_s=DELAY_S,
        max_retries=0,
        block_cooldown_s=10.0,
        ladder=["slow", "impersonate"],
    )
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, *urls)

    await crawl.run(concurrency=1)

    assert len(fetcher.fetched) == 200
    # 16 refused of a full window (80 %) across 5 kinds of URL; then, from an empty window,
    # 20 of 20
    reasons = [
        "16 of 20 recent responses refused or blocked (5 kinds of URL); last: HTTP 403",
        "20 of 20 recent responses refused or blocked (5 kinds of URL); last: HTTP 403",
    ]
    assert [(e.level, e.reason) for e in escalated[:2]] == [(1, reasons[0]), (2, reasons[1])]
    first = escalated[0]
    assert first.rung == "slow"  # the ladder's first rung
    refused = fetcher.fetched[100:]
    assert first.until == refused[15].ended + 10.0
    assert refused[16].started >= first.until  # the cooldown
    assert round(refused[18].started - refused[17].started, 6) == 2 * DELAY_S  # level 1
    view = await crawl.frontier.domain("a.test")
    assert view.level == 5  # the default block_max_level: every 20 more refusals, one level
    assert view.effective_delay_s == 32 * DELAY_S
    assert view.strategy.get("rung") == "slow"  # past the last rung ("impersonate" at 2)


async def test_refusals_across_kinds_escalate_though_some_urls_still_succeed() -> None:
    clock = FakeClock(T0)
    urls = [page(n) for n in range(1, 31)]
    # after 5 good pages, 4 of every 5 URLs refused, in every section: a ban with holes
    answers = {url: FORBIDDEN if n > 5 and n % 5 else html() for n, url in enumerate(urls, 1)}
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False, delay_s=DELAY_S, max_retries=0)
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, *urls)

    await crawl.run(concurrency=1)

    assert [e.level for e in escalated] == [1]
    assert escalated[0].reason.startswith("16 of 20 recent responses refused or blocked (4 kinds")


async def test_refusals_of_one_kind_with_some_successes_do_not_escalate() -> None:
    clock = FakeClock(T0)
    # a members-only folder: 4 of every 5 of its URLs refused, 80 % of the window
    urls = [f"{A}/members/{n}" for n in range(1, 61)]
    answers = {url: FORBIDDEN if n % 5 else html() for n, url in enumerate(urls, 1)}
    fetcher = CannedFetcher(clock, answers)
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False, delay_s=DELAY_S, max_retries=0)
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, *urls)

    await crawl.run(concurrency=1)

    assert escalated == []
    starts = [f.started for f in fetcher.fetched]
    assert starts[-1] - starts[0] == 59 * DELAY_S


async def test_one_url_refused_on_every_retry_never_escalates() -> None:
    clock = FakeClock(T0)
    forbidden = f"{A}/private/1"
    fetcher = CannedFetcher(clock, {forbidden: FORBIDDEN, f"{A}/1": html()})
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False, delay_s=DELAY_S, max_retries=30)
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, f"{A}/1", forbidden)

    await crawl.run(concurrency=1)

    assert len(fetcher.fetches(forbidden)) == 31
    assert escalated == []


async def test_a_host_that_refuses_its_seed_from_the_first_request_climbs() -> None:
    """No success yet: each retry's refusal counts (the README's "give the climb room")."""
    clock = FakeClock(T0)
    fetcher = CannedFetcher(clock, {f"{A}/": FORBIDDEN})
    crawl = make_crawl(
        fetcher,
        seeds=[A],
        obey_robots=False,
        max_retries=10,
        block_window=4,
        block_min_samples=2,
        block_cooldown_s=1.0,
    )
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, f"{A}/")

    await crawl.run(concurrency=1)

    assert len(fetcher.fetched) == 11
    assert [e.level for e in escalated] == [1, 2]  # a full window of 4 refusals each


async def test_a_401_or_451_fails_its_url_at_once() -> None:
    clock = FakeClock(T0)
    pages = {f"{A}/login": Canned(401, b""), f"{A}/legal": Canned(451, b""), f"{A}/1": html()}
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False, delay_s=DELAY_S, max_retries=3)
    await seed(crawl, *pages)

    await crawl.run(concurrency=1)

    assert sorted(fetcher.urls()) == sorted(pages)  # fetched once each: final, no retry
    stats = await crawl.frontier.stats()
    assert (stats.get("outcome.failed"), stats.get("blocks")) == (2, 0)


async def test_a_page_that_succeeded_before_and_is_now_refused_is_a_block() -> None:
    clock = FakeClock(T0)
    urls = [page(n) for n in range(1, 7)]
    fetcher = CannedFetcher(clock, dict.fromkeys(urls, html()))
    crawl = make_crawl(fetcher, seeds=[A], obey_robots=False, max_retries=0, recrawl_after="0s")
    escalated = crawl.collect(DomainEscalated)
    await seed(crawl, *urls)
    await crawl.run(concurrency=1)
    assert escalated == []

    fetcher.pages = {url: [FORBIDDEN] for url in urls}  # the revisits are refused: a ban
    clock.advance(10)
    assert await crawl.frontier.revisit(clock.now()) == 6
    await crawl.run(concurrency=1)

    why = "HTTP 403 to a URL that succeeded before"
    assert [(e.level, e.reason) for e in escalated] == [
        (1, f"6 of 12 recent responses blocked; last: {why}")
    ]
    letters = await crawl.frontier.dead_letters()  # each URL fails as a refused one
    assert {d.errors[-1] for d in letters} == {"refused: HTTP 403"}
    view = await crawl.frontier.domain("a.test")
    assert (view.level, view.block_reason) == (1, why)


# --- the window's rules --------------------------------------------------------------------


def report(signal: Signal, url: str = f"{A}/x/1", retry: int = 0) -> Report:
    attempt = Attempt(
        url=url, fingerprint="fp", domain="a.test", worker="w", outcome=Outcome.RETRY,
        status=403, bytes=0, latency_s=0.0, retry=retry, at=T0, fetcher="http",
    )  # fmt: skip
    return Report(attempt, signal, "HTTP 403")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://a.test/docs/api/x.html", "/docs/api/"),
        ("https://a.test/docs/api/y.html?q=1", "/docs/api/"),
        ("https://a.test/item/12/reviews", "/item/0/"),
        ("https://a.test/news/2024/05/story", "/news/0/0/"),
        ("https://a.test/index.html", "/"),
        ("https://a.test", "/"),
    ],
)
def test_url_kind(url: str, kind: str) -> None:
    assert url_kind(url) == kind


def test_the_marks_of_refusals_are_neither_block_nor_success() -> None:
    assert BLOCKED not in KIND_MARKS
    assert CLEAN not in KIND_MARKS
    assert window_mark(report(Signal.REFUSED)) in KIND_MARKS
    assert window_mark(report(Signal.REFUSED, f"{A}/x/2")) == window_mark(report(Signal.REFUSED))
    assert window_mark(report(Signal.REFUSED, retry=1)) == window_mark(report(Signal.REFUSED))
    assert refused_again(report(Signal.REFUSED, retry=1))
    assert not refused_again(report(Signal.REFUSED))
    assert not refused_again(report(Signal.BLOCK, retry=1))
    assert window_mark(report(Signal.BLOCK, retry=1)) == BLOCKED
    assert window_mark(report(Signal.NONE)) == ""


RULES = BlockRules(window=5, min_samples=3, threshold=0.5, refusal_threshold=0.8, refusal_kinds=3)


@pytest.mark.parametrize(
    ("window", "found"),
    [
        ("AAAA", None),  # not a full window
        ("AAAAA", (REFUSAL_RULE, 5, 1)),  # every recent URL refused
        ("oAAAA", None),  # 80 % refused, one kind
        ("oABCD", (REFUSAL_RULE, 4, 4)),
        ("ooABC", None),  # 60 %
        ("oAbbb", ("blocked", 3, 0)),  # the block rule first
        ("bAbBo", None),  # 80 % refused or blocked, but two kinds of refused URL
        ("bABCo", (REFUSAL_RULE, 4, 3)),
        ("bbbbb", ("blocked", 5, 0)),
    ],
)
def test_ban_rule(window: str, found: tuple[str, int, int] | None) -> None:
    assert ban_rule(window, RULES) == found
