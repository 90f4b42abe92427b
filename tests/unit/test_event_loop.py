"""The event loop crawlfleet starts for its own crawls (decision 0030)."""

from __future__ import annotations

import asyncio
import signal

import pytest
import uvloop

from crawlfleet.errors import ParseBudgetExceeded
from crawlfleet.models import FetchResult, ParseResult
from crawlfleet.parsing.budget import ParseBudget, ParseLimits
from crawlfleet.runtime.loop import event_loop


def test_a_crawl_s_coroutine_runs_on_uvloop_and_the_loop_is_closed_after() -> None:
    async def which() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    loop = event_loop.run(which())
    assert isinstance(loop, uvloop.Loop)
    assert loop.is_closed()


def test_on_uvloop_a_parser_stuck_in_a_loop_is_still_stopped_at_its_deadline() -> None:
    # The parse deadline is a SIGALRM handler run between bytecodes: uvloop must not delay it.
    def stuck(response: FetchResult) -> ParseResult:
        while True:
            pass

    async def parse() -> None:
        budget = ParseBudget(ParseLimits(2000, max_parse_s=0.1, max_links=10))
        page = FetchResult(
            url="http://hostile.test/",
            final_url="http://hostile.test/",
            status=200,
            headers={"content-type": "text/html"},
            body=b"<p>x</p>",
            elapsed_s=0.0,
        )
        try:
            await budget.parse(stuck, page)
        finally:
            budget.close()

    with pytest.raises(ParseBudgetExceeded, match=r"parsing took more than 0\.1 s"):
        event_loop.run(parse())
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
