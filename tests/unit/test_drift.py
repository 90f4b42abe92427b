"""The drift test: a one-sided Bernoulli CUSUM with a learned baseline (decision 0051)."""

from __future__ import annotations

import random

import pytest

from crawlfleet.frontier.drift import BASELINE_CAP, BASELINE_FLOOR, THRESHOLD, DriftTest
from crawlfleet.frontier.drift_marks import drifts


def run(test: DriftTest, pages: str) -> int | None:
    """Feed ``pages`` (``x`` mismatched, ``.`` met); the page number that fired, if any."""
    for mismatched in pages:
        if test.observe(mismatched == "x"):
            return test.pages
    return None


def test_one_odd_page_never_fires_nor_does_one_odd_page_in_twenty() -> None:
    assert run(DriftTest(), "." * 30 + "x" + "." * 30) is None
    assert run(DriftTest(), ("." * 19 + "x") * 500) is None


def test_a_full_break_after_forty_good_pages_fires_on_its_seventh_page() -> None:
    # The first mismatch comes at rest (1/42: +3.04) and teaches the baseline (2/43: +2.37
    # for each next one): 3.04 + 5 x 2.37 = 14.9 < 15 <= 3.04 + 6 x 2.37.
    test = DriftTest()
    assert run(test, "." * 40 + "x" * 20) == 47
    assert test.fired_at == 47
    assert run(test, "x" * 20) is None  # fires once


def test_a_parser_broken_from_its_first_page_fires_within_twenty_pages() -> None:
    fired = run(DriftTest(), "x" * 40)
    assert fired is not None
    assert fired <= 20


def test_a_break_of_half_the_pages_fires_within_tens_of_pages() -> None:
    rng = random.Random(7)
    delays = []
    for _ in range(200):
        test = DriftTest()
        run(test, "." * 50)
        fired = run(test, "".join("x" if rng.random() < 0.5 else "." for _ in range(200)))
        assert fired is not None
        delays.append(fired - 50)
    assert max(delays) <= 80


def test_the_baseline_is_learned_at_rest_and_bounded() -> None:
    test = DriftTest()
    run(test, "." * 98)
    assert test.baseline == BASELINE_FLOOR  # 1/100 is below the floor
    busy = DriftTest(threshold=1e9)
    run(busy, ("x" + "." * 5) * 200)  # one in six at rest, often while the statistic climbs
    assert BASELINE_FLOOR < busy.baseline <= BASELINE_CAP


@pytest.mark.parametrize("share", [0.02, 0.05])
def test_a_steady_site_with_odd_pages_rarely_fires(share: float) -> None:
    rng = random.Random(51)
    alarms = 0
    for _ in range(50):
        test = DriftTest()
        pages = "".join("x" if rng.random() < share else "." for _ in range(5000))
        alarms += run(test, pages) is not None
    assert alarms <= 1
    assert THRESHOLD == 15.0  # decision 0051's figure


def test_drift_marks_are_read_from_the_strategy_slot() -> None:
    slot = {"fetcher": "browser", "drift.item": "paused", "drift.list": "seen"}
    assert drifts(slot) == {"item": "paused", "list": "seen"}
