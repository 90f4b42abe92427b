"""Renewing many leases at once on the Redis store: a round never exhausts the client's pool."""

from __future__ import annotations

import logging

import pytest

from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.runtime.loop.leases import LeaseRenewer
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, CannedFetcher, make_crawl, seed

pytestmark = pytest.mark.redis

A = "http://a.test"
LEASE_S = 30.0
HELD = 150  # more than the Redis client's pool (100 connections)


async def test_a_round_renews_more_leases_than_the_pool_has_connections(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = await RedisQueueStore.open(redis_url, "renew:{many}")
    try:
        crawl = make_crawl(
            CannedFetcher(FakeClock(T0), {}),
            seeds=[A],
            store=store,
            obey_robots=False,
            lease_s=LEASE_S,
            per_domain_concurrency=HELD,
        )
        await seed(crawl, *(f"{A}/{n}" for n in range(HELD)))
        leases = await crawl.frontier.claim(HELD, T0, {"http"})
        assert len(leases) == HELD
        renewer = LeaseRenewer(crawl.frontier, crawl.clock)
        for lease in leases:
            renewer.hold(lease)

        with caplog.at_level(logging.WARNING, logger="crawlfleet.runtime.leases"):
            assert await renewer.renew_due(T0 + LEASE_S / 3) == []

        assert "not renewed" not in caplog.text  # was: "Too many connections"
        assert await crawl.frontier.reap(T0 + LEASE_S + 1) == 0  # renewed until T0 + 40
        assert await crawl.frontier.reap(T0 + LEASE_S * 4 / 3 + 1) == HELD
    finally:
        await store.close()
