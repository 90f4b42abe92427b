"""The politeness-aware ETA, with numbers (``monitoring.eta``)."""

from __future__ import annotations

import pytest

from crawlfleet.cli.progress import progress_line
from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.store_types import DelaySource, DomainView
from crawlfleet.monitoring.eta import DomainLoad, estimate, load_of, naive_eta_s
from crawlfleet.monitoring.stats import Sample
from crawlfleet.records import QueueCounts

SLOW = DomainLoad("slow.example", queued=100, effective_delay_s=2.0, max_in_flight=1)
FAST = DomainLoad("fast.example", queued=1000, effective_delay_s=0.0, max_in_flight=8)


def test_a_domain_is_served_once_per_delay_plus_latency_with_one_slot() -> None:
    load = DomainLoad("a", queued=10, effective_delay_s=2.0, max_in_flight=1, mean_latency_s=0.5)
    assert load.period_s == pytest.approx(2.5)
    # waits 0 s, then 9 more periods, then the last response's latency
    assert load.bound_s == pytest.approx(9 * 2.5 + 0.5)


def test_more_slots_never_serve_a_domain_faster_than_its_delay() -> None:
    four = DomainLoad("a", queued=10, effective_delay_s=2.0, max_in_flight=4, mean_latency_s=0.5)
    assert four.period_s == pytest.approx(2.0)
    slow_server = DomainLoad(
        "b", queued=10, effective_delay_s=1.0, max_in_flight=4, mean_latency_s=11.0
    )
    assert slow_server.period_s == pytest.approx(3.0)  # (1 + 11) / 4


def test_a_domain_resting_or_blocked_waits_first_and_an_empty_one_needs_nothing() -> None:
    blocked = DomainLoad("a", queued=3, effective_delay_s=1.0, max_in_flight=1, ready_in_s=30.0)
    assert blocked.bound_s == pytest.approx(30.0 + 2 * 1.0)
    assert DomainLoad("b", queued=0, effective_delay_s=5.0, max_in_flight=1).bound_s == 0.0


def test_the_slowest_domain_sets_the_eta_when_the_fleet_rate_would_promise_less() -> None:
    eta = estimate(remaining=1100, rate=50.0, loads=[FAST, SLOW])
    assert eta.naive_s == pytest.approx(22.0)
    assert eta.politeness_s == pytest.approx(198.0)
    assert eta.eta_s == pytest.approx(198.0)
    assert eta.bottleneck == "slow.example"


def test_the_fleet_rate_sets_the_eta_when_no_domain_is_slower_and_names_no_bottleneck() -> None:
    eta = estimate(remaining=5000, rate=10.0, loads=[FAST, SLOW])
    assert eta.eta_s == pytest.approx(500.0)
    assert eta.bottleneck is None


def test_without_a_rate_there_is_no_eta_but_the_politeness_bound_is_kept() -> None:
    eta = estimate(remaining=1100, rate=0.0, loads=[SLOW])
    assert eta.eta_s is None
    assert eta.politeness_s == pytest.approx(198.0)
    assert eta.bottleneck is None


def test_nothing_remaining_is_done_now_and_old_loads_count_down() -> None:
    assert estimate(remaining=0, rate=0.0, loads=[SLOW]).eta_s == 0.0
    assert naive_eta_s(0, 0.0) == 0.0
    aged = estimate(remaining=1100, rate=50.0, loads=[SLOW], loads_age_s=48.0)
    assert aged.eta_s == pytest.approx(150.0)


def view(domain: str, queued: int, delay_s: float, ready_at: float) -> DomainView:
    stats = CrawlStats({"fetched": 4, "latency_s.sum": 1.0})
    return DomainView(
        domain=domain, base_delay_s=delay_s / 2, delay_source=DelaySource.ROBOTS,
        max_in_flight=2, level=1, effective_delay_s=delay_s, ready_at=ready_at,
        cooldown_until=0.0, block_reason="", retry_after_until=0.0, strategy={},
        queued=queued, in_flight=1, stats=stats,
    )  # fmt: skip


def test_a_store_domain_view_becomes_a_load_read_at_a_time() -> None:
    load = load_of(view("slow.example", 40, 3.0, ready_at=1010.0), now=1000.0)
    assert load == DomainLoad(
        "slow.example",
        queued=40,
        effective_delay_s=3.0,
        max_in_flight=2,
        mean_latency_s=0.25,
        ready_in_s=10.0,
    )


def test_the_progress_line_names_the_bottleneck_domain() -> None:
    counts = QueueCounts(queued=1100, leased=0, done=100, dead=0, seen=1200)
    sample = Sample(1000.0, counts, CrawlStats(), 50.0, (FAST, SLOW), loads_at=1000.0)
    assert progress_line(sample) == (
        "100/1200 done · queue 1100 · 50.0 pages/s · 0 errors · ETA 03:18 "
        "(bottleneck: slow.example)"
    )
    fleet_bound = Sample(1000.0, counts, CrawlStats(), 5.0, (FAST, SLOW), loads_at=1000.0)
    assert progress_line(fleet_bound).endswith("ETA 03:40")
