"""Each worker's pages/s, from successive readings of its heartbeat's pages counter."""

from __future__ import annotations

import pytest

from crawlfleet.ops.workers import WorkerRates


def test_a_rate_needs_two_readings_and_ignores_a_heartbeat_read_twice() -> None:
    rates = WorkerRates(window_s=10.0)
    assert rates.observe("w", 100.0, 50) is None
    assert rates.observe("w", 100.0, 50) is None  # the same heartbeat again
    assert rates.observe("w", 102.0, 70) == pytest.approx(10.0)
    assert rates.observe("other", 102.0, 5) is None


def test_the_rate_is_over_the_window_and_forgotten_workers_start_over() -> None:
    rates = WorkerRates(window_s=10.0)
    for at, pages in ((0.0, 0), (5.0, 500), (10.0, 510), (15.0, 520)):
        rate = rates.observe("w", at, pages)
    assert rate == pytest.approx(2.0)  # 510 -> 520 over the last 5 s (first point dropped)
    rates.forget_except({"x"})
    assert rates.observe("w", 20.0, 600) is None
