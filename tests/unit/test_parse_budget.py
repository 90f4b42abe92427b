"""ParseBudget: nesting pre-check, deadline (inline or in a thread), large pages off the
event loop, link cap."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from types import FrameType

import pytest

from crawlfleet.errors import ParseBudgetExceeded
from crawlfleet.models import FetchResult, Link, ParseResult, Revisit
from crawlfleet.parsing.budget import (
    INLINE_MAX_BYTES,
    ParseBudget,
    ParseLimits,
    nested_deeper_than,
)
from crawlfleet.parsing.default import default_parser
from crawlfleet.runtime.options import parse_limits
from crawlfleet.settings import Settings
from tests.loop_lag import max_loop_lag_s

URL = "http://hostile.test/page"
LIMITS = ParseLimits(max_nesting_depth=2000, max_parse_s=5.0, max_links=5000)


def html_result(body: str | bytes) -> FetchResult:
    return FetchResult(
        url=URL,
        final_url=URL,
        status=200,
        headers={"content-type": "text/html; charset=utf-8"},
        body=body.encode() if isinstance(body, str) else body,
        elapsed_s=0.0,
    )


@pytest.fixture
async def budget() -> AsyncIterator[ParseBudget]:
    parse_budget = ParseBudget(LIMITS)
    yield parse_budget
    parse_budget.close()


async def test_100000_unclosed_divs_fail_fast_without_a_parse(budget: ParseBudget) -> None:
    # default_parser on this page took 20 s of the event loop before the budget.
    page = html_result("<html><body>" + "<div>" * 100_000 + "<a href='/x'>x</a>")
    started = time.perf_counter()
    with pytest.raises(ParseBudgetExceeded, match="nested deeper than 2000 elements"):
        await budget.parse(default_parser, page)
    assert time.perf_counter() - started < 1.0


async def test_an_ordinary_page_parses_as_without_a_budget(budget: ParseBudget) -> None:
    page = html_result(
        "<html><head><title>T</title></head><body>"
        + "<div><p>para<ul><li><a href='/a'>a</a><li><a href='/b'>b</a></ul></div>" * 300
    )
    assert await budget.parse(default_parser, page) == (default_parser(page), 0)


async def test_a_parser_stuck_in_a_loop_is_stopped_at_its_deadline() -> None:
    # On the main thread the parse runs inline and is interrupted where it is, even through
    # the parser's own `except Exception`; in a thread it could only be abandoned.
    laps = 0

    def stuck(response: FetchResult) -> ParseResult:
        nonlocal laps
        while True:
            try:
                laps += 1
            except Exception:  # what a careless parser does
                continue

    budget = ParseBudget(ParseLimits(2000, max_parse_s=0.1, max_links=10))
    try:
        started = time.perf_counter()
        with pytest.raises(ParseBudgetExceeded, match=r"parsing took more than 0\.1 s"):
            await budget.parse(stuck, html_result("<p>x</p>"))
        elapsed_s = time.perf_counter() - started
    finally:
        budget.close()
    stopped_at = laps
    await asyncio.sleep(0.05)
    assert laps == stopped_at  # nothing runs on in the background
    assert elapsed_s < 0.5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


async def test_a_parse_that_ends_in_time_leaves_no_alarm_behind(budget: ParseBudget) -> None:
    for _ in range(3):
        assert (await budget.parse(default_parser, html_result("<p>x</p>")))[0].items
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_off_the_main_thread_a_parse_past_its_deadline_fails_and_the_loop_keeps_running() -> None:
    # A loop on another thread cannot take SIGALRM: the parse runs in a budget thread.
    release = threading.Event()

    def stuck(response: FetchResult) -> ParseResult:
        release.wait(5)
        return ParseResult()

    budget = ParseBudget(ParseLimits(2000, max_parse_s=0.1, max_links=10))

    async def parse() -> None:
        with pytest.raises(ParseBudgetExceeded, match=r"parsing took more than 0\.1 s"):
            await budget.parse(stuck, html_result("<p>x</p>"))

    async def measured() -> tuple[float, float]:
        started = time.perf_counter()
        lag_s = await max_loop_lag_s(parse())
        return time.perf_counter() - started, lag_s

    measures: list[tuple[float, float]] = []
    thread = threading.Thread(target=lambda: measures.append(asyncio.run(measured())))
    try:
        thread.start()
        thread.join(10)
    finally:
        release.set()
        budget.close()
    [(elapsed_s, lag_s)] = measures
    assert elapsed_s < 0.5
    assert lag_s < 0.05


@pytest.fixture
def own_alarm_handler() -> Iterator[list[int]]:
    """The process handles SIGALRM itself, as some applications do."""
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, handler)
    yield fired
    signal.signal(signal.SIGALRM, previous)


async def test_a_process_s_own_alarm_handler_is_left_alone(own_alarm_handler: list[int]) -> None:
    release = threading.Event()

    def stuck(response: FetchResult) -> ParseResult:
        release.wait(5)
        return ParseResult()

    handler = signal.getsignal(signal.SIGALRM)
    budget = ParseBudget(ParseLimits(2000, max_parse_s=0.1, max_links=10))
    try:
        with pytest.raises(ParseBudgetExceeded, match="parsing took more than"):
            await budget.parse(stuck, html_result("<p>x</p>"))
    finally:
        release.set()
        budget.close()
    assert signal.getsignal(signal.SIGALRM) is handler
    assert own_alarm_handler == []


async def test_a_heavy_parse_does_not_stall_the_event_loop(budget: ParseBudget) -> None:
    # 15,000 nested divs: 0.2 s of tree building, under the lifted depth limit; a page this
    # large is parsed in a thread.
    lifted = ParseBudget(ParseLimits(100_000, 5.0, 5000))
    page = html_result("<body>" + "<div>" * 15_000 + "</div>" * 15_000)
    assert len(page.body) > INLINE_MAX_BYTES
    try:
        lag_s = await max_loop_lag_s(lifted.parse(default_parser, page))
    finally:
        lifted.close()
    assert lag_s < 0.05


async def test_the_nesting_check_of_a_large_page_does_not_stall_the_event_loop(
    budget: ParseBudget,
) -> None:
    # 6 open elements around 1.2 million closed runs (9 MB): one re.sub over the whole page
    # held the GIL, and so the event loop, for ~100 ms; it runs a piece at a time.
    page = html_result(b"<a><b><c><d><e><f>" + b"<g>x</g>" * 1_200_000)
    lag_s = await max_loop_lag_s(budget.parse(lambda response: ParseResult(), page))
    assert lag_s < 0.05


async def test_links_of_any_parser_are_capped_and_the_cut_counted() -> None:
    wish = Revisit(after_s=60.0)

    def many(response: FetchResult) -> ParseResult:
        links = [Link(f"http://hostile.test/{i}") for i in range(100)]
        return ParseResult(links=links, revisit=wish)

    budget = ParseBudget(ParseLimits(2000, 5.0, max_links=7))
    try:
        parsed, cut = await budget.parse(many, html_result("<p>x</p>"))
    finally:
        budget.close()
    assert [link.url for link in parsed.links] == [f"http://hostile.test/{i}" for i in range(7)]
    assert cut == 93
    assert parsed.revisit == wish  # the cut kept the parser's revisit wish


async def test_parser_errors_are_raised_as_they_are(budget: ParseBudget) -> None:
    def broken(response: FetchResult) -> ParseResult:
        raise KeyError("price")

    with pytest.raises(KeyError, match="price"):
        await budget.parse(broken, html_result("<p>x</p>"))


async def test_non_html_is_not_scanned(budget: ParseBudget) -> None:
    body = b"<div>" * 10_000
    result = FetchResult(URL, URL, 200, {"content-type": "text/plain"}, body, 0.0)
    assert (await budget.parse(default_parser, result))[0].items[0].type == "resource"


@pytest.mark.parametrize(
    ("html", "deep"),
    [
        (b"<div>" * 101, True),
        (b"<div>" * 100, False),
        (b"<div></div>" * 10_000, False),
        (b"<DIV><span></Div>" * 101, True),  # the spans stay open
        (b"<div></span>" * 101, True),  # an end tag of another name closes nothing
        (b"<p>" * 10_000 + b"<li>" * 10_000 + b"<br><img src=x>" * 10_000, False),
        (b"<table><tr><td>cell" * 101, True),
        (b"<!-- < < < < --> a < b" * 1000, False),
        # Around the counting bounds (100 ``<`` or fewer; then the ``</`` taken off):
        (b"<div>" * 100 + b"</div>", False),
        (b"<div>" * 100 + b"</span><b>", True),
        (b"<div>" * 100 + b"<!-- a < b -->", False),
        (b"<div>" * 99 + b"<script>if (a < b) {}</script>", False),
        (b"<div>" * 100 + b"<script>if (a<b) {}</script>", True),  # as the scan reads it
    ],
)
def test_nesting_scan(html: bytes, deep: bool) -> None:
    assert nested_deeper_than(html, 100) is deep


def test_limits_from_settings() -> None:
    assert parse_limits(Settings()) == ParseLimits(2000, 10.0, 100_000)
