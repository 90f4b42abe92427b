"""A store holds its crawl's default domain policy; the frontier reads it from there."""

from __future__ import annotations

import pytest

from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Settings

SEED = "http://a.test/"


async def test_the_frontier_and_the_store_views_use_the_policy_the_store_was_opened_with() -> None:
    settings = Settings(delay_s=2.5, per_domain_concurrency=3)
    store = MemoryQueueStore(policy=domain_policy(settings))
    frontier = build_frontier(settings, store, [SEED])
    assert frontier.default_policy is store.default_policy
    view = await frontier.domain("a.test")
    assert (view.base_delay_s, view.max_in_flight) == (2.5, 3)


def test_a_store_opened_with_another_crawl_s_policy_is_refused() -> None:
    store = MemoryQueueStore(policy=domain_policy(Settings(delay_s=0.0)))
    with pytest.raises(ValueError, match="default domain policy"):
        build_frontier(Settings(delay_s=1.0), store, [SEED])
