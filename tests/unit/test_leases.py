"""The lease renewer of the claim loop, over the in-memory and SQLite stores and a fake clock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.models import Lease
from crawlfleet.runtime.loop.leases import LeaseRenewer
from crawlfleet.settings.loading import load_settings
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, CannedFetcher, Crawl, make_crawl, seed

A = "http://a.test"
LEASE_S = 30.0


async def claimed(count: int, **kw: object) -> tuple[Crawl, list[Lease]]:
    crawl = make_crawl(CannedFetcher(FakeClock(T0), {}), seeds=[A], lease_s=LEASE_S, **kw)
    await seed(crawl, *(f"{A}/{n}" for n in range(count)))
    leases = await crawl.frontier.claim(count, T0, {"http"})
    assert len(leases) == count
    return crawl, leases


async def test_held_leases_are_renewed_together_every_third_of_a_lease() -> None:
    crawl, (held, dropped) = await claimed(2, per_domain_concurrency=2)
    renewer = LeaseRenewer(crawl.frontier, crawl.clock)
    assert renewer.wait_s(T0) is None
    renewer.hold(held)
    renewer.hold(dropped)
    renewer.release(dropped)

    assert renewer.wait_s(T0) == pytest.approx(LEASE_S / 3)
    for elapsed_s in (5.0, 10.0, 20.0, 30.0, 40.0, 50.0):  # a round when one is due
        assert await renewer.renew_due(T0 + elapsed_s) == []
    assert renewer.wait_s(T0 + 50) == pytest.approx(10.0)

    assert await crawl.frontier.reap(T0 + 75) == 1  # the released lease, expired at T0 + 30
    assert await crawl.frontier.reap(T0 + 79) == 0  # renewed at T0 + 50: until T0 + 80
    assert await crawl.frontier.reap(T0 + 81) == 1


async def test_a_lease_reaped_meanwhile_is_reported_lost_and_dropped() -> None:
    crawl, (lease,) = await claimed(1)
    renewer = LeaseRenewer(crawl.frontier, crawl.clock)
    renewer.hold(lease)

    assert await crawl.frontier.reap(T0 + LEASE_S + 1) == 1
    assert await renewer.renew_due(T0 + LEASE_S + 1) == [lease]
    assert renewer.wait_s(T0 + LEASE_S + 1) is None


async def test_a_store_error_is_logged_and_the_leases_stay_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await SqliteQueueStore.open(tmp_path / "state.sqlite")
    crawl, (lease,) = await claimed(1, store=store)
    renewer = LeaseRenewer(crawl.frontier, crawl.clock)
    renewer.hold(lease)
    await store.close()  # every statement now fails

    with caplog.at_level(logging.WARNING, logger="crawlfleet.runtime.leases"):
        assert await renewer.renew_due(T0 + LEASE_S / 3) == []

    assert "1 of 1 leases not renewed: state file" in caplog.text
    assert renewer.wait_s(T0 + LEASE_S / 3) == pytest.approx(LEASE_S / 3)


def test_max_step_s_must_leave_room_for_a_step_s_own_timeouts() -> None:
    assert load_settings().max_step_s == 300.0
    assert load_settings(total_timeout_s=20, max_parse_s=5, max_step_s=65).max_step_s == 65
    with pytest.raises(ConfigError, match=r"max_step_s \(64\) must be >= 3 x total_timeout_s"):
        load_settings(total_timeout_s=20, max_parse_s=5, max_step_s=64)
    with pytest.raises(ConfigError, match="max_step_s"):
        load_settings(max_step_s=float("inf"))
