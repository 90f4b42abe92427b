"""ParseBudget: nesting pre-check, parsing off the event loop, deadline, link cap."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator

import pytest

from crawlfleet.errors import ParseBudgetExceeded
from crawlfleet.models import FetchResult, Link, ParseResult
from crawlfleet.parsing.budget import ParseBudget, ParseLimits, nested_deeper_than
from crawlfleet.parsing.default import default_parser
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
    assert await budget.parse(default_parser, page) == default_parser(page)


async def test_a_parse_past_its_deadline_fails_and_the_loop_keeps_running() -> None:
    release = threading.Event()

    def stuck(response: FetchResult) -> ParseResult:
        release.wait(5)
        return ParseResult()

    budget = ParseBudget(ParseLimits(2000, max_parse_s=0.1, max_links=10))

    async def parse() -> None:
        with pytest.raises(ParseBudgetExceeded, match=r"parsing took more than 0\.1 s"):
            await budget.parse(stuck, html_result("<p>x</p>"))

    try:
        started = time.perf_counter()
        lag_s = await max_loop_lag_s(parse())
        elapsed_s = time.perf_counter() - started
    finally:
        release.set()
        budget.close()
    assert elapsed_s < 0.5
    assert lag_s < 0.05


async def test_a_heavy_parse_does_not_stall_the_event_loop(budget: ParseBudget) -> None:
    # 15,000 nested divs: 0.2 s of tree building, under the lifted depth limit.
    lifted = ParseBudget(ParseLimits(100_000, 5.0, 5000))
    page = html_result("<body>" + "<div>" * 15_000 + "</div>" * 15_000)
    try:
        lag_s = await max_loop_lag_s(lifted.parse(default_parser, page))
    finally:
        lifted.close()
    assert lag_s < 0.05


async def test_links_of_any_parser_are_capped() -> None:
    def many(response: FetchResult) -> ParseResult:
        return ParseResult(links=[Link(f"http://hostile.test/{i}") for i in range(100)])

    budget = ParseBudget(ParseLimits(2000, 5.0, max_links=7))
    try:
        parsed = await budget.parse(many, html_result("<p>x</p>"))
    finally:
        budget.close()
    assert [link.url for link in parsed.links] == [f"http://hostile.test/{i}" for i in range(7)]


async def test_parser_errors_are_raised_as_they_are(budget: ParseBudget) -> None:
    def broken(response: FetchResult) -> ParseResult:
        raise KeyError("price")

    with pytest.raises(KeyError, match="price"):
        await budget.parse(broken, html_result("<p>x</p>"))


async def test_non_html_is_not_scanned(budget: ParseBudget) -> None:
    body = b"<div>" * 10_000
    result = FetchResult(URL, URL, 200, {"content-type": "text/plain"}, body, 0.0)
    assert (await budget.parse(default_parser, result)).items[0].type == "resource"


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
    ],
)
def test_nesting_scan(html: bytes, deep: bool) -> None:
    assert nested_deeper_than(html, 100) is deep


def test_limits_from_settings() -> None:
    assert ParseLimits.from_settings(Settings()) == ParseLimits(2000, 10.0, 5000)
