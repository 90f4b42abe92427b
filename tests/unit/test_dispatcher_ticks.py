"""How long the dispatcher waits between ticks."""

from __future__ import annotations

import pytest

from crawlfleet.records import QueueCounts
from crawlfleet.runtime.celery.dispatcher import END_TICK_S, FEW_PENDING, TICK_S, tick_s
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
