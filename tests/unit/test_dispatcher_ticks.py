"""How long the dispatcher waits between ticks, and how it sees the crawl end between them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from redis.exceptions import RedisError

from crawlfleet.clock import SystemClock
from crawlfleet.errors import StateError
from crawlfleet.records import QueueCounts
from crawlfleet.runtime.celery.dispatcher import (
    END_TICK_S,
    FEW_PENDING,
    TICK_S,
    Dispatcher,
    EndRate,
    may_end_within,
    tick_s,
)
from crawlfleet.runtime.control import RunState


def counts(queued: int, leased: int) -> QueueCounts:
    return QueueCounts(queued=queued, leased=leased, done=0, dead=0, seen=queued + leased)


@pytest.mark.parametrize(
    ("queued", "leased", "state", "wait"),
    [
        (FEW_PENDING, 1, RunState.RUNNING, TICK_S),  # many pending
        (FEW_PENDING - 64, 64, RunState.RUNNING, END_TICK_S),  # the crawl's last pages
        (0, 3, RunState.RUNNING, END_TICK_S),
        (4, 0, RunState.RUNNING, END_TICK_S),  # the seeds, before their links
        (0, 0, RunState.RUNNING, TICK_S),  # a continuous crawl between revisits
        (10, 0, RunState.PAUSED, TICK_S),  # a paused crawl waits as long as ever
    ],
)
def test_a_running_crawl_with_few_pending_is_watched_closely(
    queued: int, leased: int, state: RunState, wait: float
) -> None:
    assert tick_s(counts(queued, leased), state) == wait
    assert END_TICK_S < TICK_S


def finished(done: int, dead: int = 0, queued: int = 0, leased: int = 0) -> QueueCounts:
    return QueueCounts(queued=queued, leased=leased, done=done, dead=dead, seen=done + dead)


def test_the_end_rate_is_the_requests_finished_a_second_between_two_ticks() -> None:
    rate = EndRate()
    assert rate.observe(10.0, finished(0)) == 0.0  # the first tick has nothing to compare
    assert rate.observe(10.5, finished(200, dead=50)) == 500.0
    assert rate.observe(10.5, finished(300)) == 0.0  # no time passed
    assert rate.observe(11.5, finished(300)) == 0.0  # nothing finished meanwhile


@pytest.mark.parametrize(
    ("pending", "per_s", "state", "watched"),
    [
        (400, 500.0, RunState.RUNNING, True),  # could be done in 0.4 s: before the next tick
        (600, 500.0, RunState.RUNNING, False),  # needs more than twice the tick at that rate
        (1, 0.0, RunState.RUNNING, False),  # nothing finished lately: a slow or stalled crawl
        (0, 500.0, RunState.RUNNING, False),  # over: the tick ends it
        (10, 500.0, RunState.PAUSED, False),  # a paused crawl does not end
    ],
)
def test_the_dispatcher_watches_the_counts_when_the_crawl_may_end_before_its_next_tick(
    pending: int, per_s: float, state: RunState, watched: bool
) -> None:
    assert may_end_within(counts(0, pending), state, per_s, TICK_S) is watched


class Counting:
    """A frontier whose counts go to nothing pending after ``reads`` reads, or fail."""

    def __init__(self, reads: int, error: Exception | None = None) -> None:
        self.reads = 0
        self._left = reads
        self._error = error

    async def counts(self) -> QueueCounts:
        self.reads += 1
        if self._error is not None:
            raise self._error
        self._left -= 1
        return counts(0, 0 if self._left <= 0 else 3)


def dispatcher_over(frontier: Counting) -> Dispatcher:
    crawl = SimpleNamespace(
        definition=SimpleNamespace(crawl_id="c"), client=None, frontier=frontier
    )
    return Dispatcher(crawl, clock=SystemClock())  # type: ignore[arg-type]


async def test_the_end_watch_returns_when_the_last_page_is_done_not_at_the_next_tick() -> None:
    frontier = Counting(reads=3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await dispatcher_over(frontier)._watch_end(30.0)
    assert frontier.reads == 3
    assert loop.time() - started < 30.0


@pytest.mark.parametrize("error", [RedisError("gone"), StateError("lost")])
async def test_a_failed_read_ends_the_end_watch_and_leaves_the_outage_to_the_tick(
    error: Exception,
) -> None:
    frontier = Counting(reads=0, error=error)
    await dispatcher_over(frontier)._watch_end(30.0)
    assert frontier.reads == 1


async def test_the_end_watch_stops_with_the_dispatcher() -> None:
    frontier = Counting(reads=1_000_000)
    dispatcher = dispatcher_over(frontier)
    dispatcher.stop.set()
    await dispatcher._watch_end(30.0)
    assert frontier.reads == 0
