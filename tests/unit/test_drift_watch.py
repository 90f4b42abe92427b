"""``DriftWatch`` over one store shared by two processes (two watches, two strategy caches):
one test for both, and the other process learns of the firing at its next page."""

from __future__ import annotations

from crawlfleet.frontier.drift import DriftPage
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.runtime.choice.strategy import Strategies
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.step.drift import DriftOptions, DriftWatch
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Settings
from tests.fixtures.clock import FakeClock

GOOD, BROKEN = DriftPage(False, 1, {"name": 1}), DriftPage(True, 1, {"name": 0})


def two_processes() -> tuple[DriftWatch, DriftWatch]:
    store = MemoryQueueStore(policy=domain_policy(Settings()))
    frontier = build_frontier(Settings(), store, ["https://a.test/"])
    clock = FakeClock()
    return tuple(  # type: ignore[return-value]
        DriftWatch(frontier, Strategies(frontier, clock), DriftOptions()) for _ in range(2)
    )


async def test_two_processes_feed_one_test_and_both_see_its_mark_at_their_next_page() -> None:
    first, second = two_processes()
    for n in range(30):
        await (first if n % 2 else second).observe("item", "a.test", GOOD)
    for watch in (first, second):
        assert not await watch.paused("item", "a.test")  # read now: cached for 2 s
    fired = None
    for n in range(7):  # the 7th broken page across both fires, as in one process
        fired = await (first if n % 2 else second).observe("item", "a.test", BROKEN)
    assert fired is not None
    assert (fired.pages, fired.mismatches) == (37, 7)
    assert await second.paused("item", "a.test")  # it fired there
    assert not await first.paused("item", "a.test")  # its cache is still 2 s fresh...
    assert await first.observe("item", "a.test", BROKEN) is None
    assert await first.paused("item", "a.test")  # ...until its next page there
