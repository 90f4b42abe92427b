"""Backoff, Retry-After, status classes and the block detector: pure logic, fake clock."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from crawlfleet.clock import FakeClock
from crawlfleet.frontier.politeness import (
    DAY_S,
    BlockDetector,
    StatusClass,
    backoff_s,
    classify,
    parse_retry_after,
)
from crawlfleet.models import FetchResult


def result(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> FetchResult:
    return FetchResult(
        url="http://example.com/",
        final_url="http://example.com/",
        status=status,
        headers={"content-type": "text/html; charset=utf-8", **(headers or {})},
        body=body,
        elapsed_s=0.01,
    )


# backoff_s


def test_backoff_stays_within_the_exponential_ceiling() -> None:
    rng = random.Random(7)
    for attempt in range(12):
        ceiling = min(300.0, 1.0 * 2**attempt)
        samples = [backoff_s(attempt, base_s=1.0, max_s=300.0, rng=rng) for _ in range(200)]
        assert all(0.0 <= s <= ceiling for s in samples)
        # Full jitter: the samples spread over the whole range, not just near the ceiling.
        assert min(samples) < ceiling * 0.1
        assert max(samples) > ceiling * 0.9


def test_backoff_is_deterministic_for_a_seed() -> None:
    first = [backoff_s(a, base_s=0.5, max_s=60, rng=random.Random(1)) for a in range(5)]
    again = [backoff_s(a, base_s=0.5, max_s=60, rng=random.Random(1)) for a in range(5)]
    assert first == again


def test_backoff_survives_huge_attempts_and_rejects_negative() -> None:
    rng = random.Random(0)
    assert 0.0 <= backoff_s(10_000, base_s=1.0, max_s=30.0, rng=rng) <= 30.0
    assert backoff_s(3, base_s=0.0, max_s=30.0, rng=rng) == 0.0
    with pytest.raises(ValueError, match="attempt"):
        backoff_s(-1, base_s=1.0, max_s=30.0, rng=rng)


# parse_retry_after

NOW = 1_700_000_000.0


def http_date(epoch: float) -> str:
    return format_datetime(datetime.fromtimestamp(epoch, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("999999999", DAY_S),
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", 0.0),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
        ("Wed, 99 Foo 2015 07:28:00 GMT", None),
    ],
)
def test_retry_after_values(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_retry_after_http_dates() -> None:
    assert parse_retry_after(http_date(NOW + 90), NOW) == pytest.approx(90.0)
    assert parse_retry_after(http_date(NOW - 90), NOW) == 0.0
    assert parse_retry_after(http_date(NOW + 10 * DAY_S), NOW) == DAY_S
    assert parse_retry_after(http_date(NOW + 10 * DAY_S), NOW, max_s=60.0) == 60.0


# classify


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (200, {}, StatusClass.OK),
        (204, {}, StatusClass.OK),
        (304, {}, StatusClass.OK),
        (301, {"location": "/new"}, StatusClass.REDIRECT),
        (404, {}, StatusClass.FINAL),
        (410, {}, StatusClass.FINAL),
        (403, {}, StatusClass.FINAL),
        (400, {}, StatusClass.FINAL),
        (408, {}, StatusClass.TRANSIENT),
        (425, {}, StatusClass.TRANSIENT),
        (429, {}, StatusClass.TRANSIENT),
        (500, {}, StatusClass.TRANSIENT),
        (502, {}, StatusClass.TRANSIENT),
        (503, {}, StatusClass.TRANSIENT),
        (504, {}, StatusClass.TRANSIENT),
        (520, {}, StatusClass.TRANSIENT),
        (999, {}, StatusClass.TRANSIENT),
        (429, {"retry-after": "30"}, StatusClass.RETRY_AFTER),
        (503, {"retry-after": http_date(NOW + 60)}, StatusClass.RETRY_AFTER),
        (429, {"retry-after": "whenever"}, StatusClass.TRANSIENT),
        (500, {"retry-after": "30"}, StatusClass.TRANSIENT),
    ],
)
def test_classify(status: int, headers: dict[str, str], expected: StatusClass) -> None:
    assert classify(result(status, headers=headers)) is expected


# BlockDetector


def test_plain_success_is_not_remembered() -> None:
    detector = BlockDetector(FakeClock())
    verdict = detector.observe("a.com", result(200, b"<html>hello</html>"))
    assert not verdict.blocked
    assert verdict.delay_multiplier == 1.0
    assert not verdict.changed
    assert verdict.cooldown_s == 0.0


def test_strikes_double_the_multiplier_up_to_16() -> None:
    detector = BlockDetector(FakeClock(), cooldown_base_s=10.0)
    multipliers = []
    for _ in range(6):
        verdict = detector.observe("a.com", result(403))
        assert verdict.blocked
        assert verdict.reason == "403 forbidden"
        assert verdict.cooldown_s == 10.0 * verdict.delay_multiplier
        multipliers.append(verdict.delay_multiplier)
    assert multipliers == [2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    assert detector.multiplier("a.com") == 16.0
    assert detector.multiplier("b.com") == 1.0


def test_429_is_a_strike() -> None:
    detector = BlockDetector(FakeClock())
    verdict = detector.observe("a.com", result(429))
    assert verdict.blocked
    assert verdict.reason == "429 too many requests"
    assert verdict.changed


def test_successes_halve_back() -> None:
    detector = BlockDetector(FakeClock(), successes_per_step=2)
    for _ in range(3):
        detector.observe("a.com", result(403))
    assert detector.multiplier("a.com") == 8.0
    ok = result(200, b"<html>fine</html>")
    seen = [detector.observe("a.com", ok) for _ in range(6)]
    assert [v.delay_multiplier for v in seen] == [8.0, 4.0, 4.0, 2.0, 2.0, 1.0]
    assert [v.changed for v in seen] == [False, True, False, True, False, True]
    assert detector.multiplier("a.com") == 1.0


def test_errors_are_neutral() -> None:
    detector = BlockDetector(FakeClock(), successes_per_step=1)
    detector.observe("a.com", result(403))
    for status in (404, 500, 503, 301):
        verdict = detector.observe("a.com", result(status))
        assert not verdict.blocked
        assert verdict.delay_multiplier == 2.0


def test_a_strike_breaks_the_success_streak() -> None:
    detector = BlockDetector(FakeClock(), successes_per_step=2)
    ok = result(200, b"<html>fine</html>")
    detector.observe("a.com", result(403))
    detector.observe("a.com", result(403))
    detector.observe("a.com", ok)
    detector.observe("a.com", result(403))
    assert detector.observe("a.com", ok).delay_multiplier == 8.0
    assert detector.observe("a.com", ok).delay_multiplier == 4.0


def test_strikes_decay_with_time() -> None:
    clock = FakeClock()
    detector = BlockDetector(clock, decay_s=100.0)
    for _ in range(3):
        detector.observe("a.com", result(403))
    clock.advance(99)
    assert detector.multiplier("a.com") == 8.0
    clock.advance(1)
    assert detector.multiplier("a.com") == 4.0
    clock.advance(250)
    assert detector.multiplier("a.com") == 1.0
    verdict = detector.observe("a.com", result(403))
    assert verdict.delay_multiplier == 2.0


@pytest.mark.parametrize(
    "body",
    [
        b"<html><div class='g-recaptcha'></div></html>",
        b"<html><title>Just a moment...</title><form id='cf-challenge-form'></form></html>",
        b"<html><h1>Access Denied</h1></html>",
        b"<html>Our systems have detected unusual traffic</html>",
    ],
)
def test_ban_pages_on_200_are_blocks(body: bytes) -> None:
    detector = BlockDetector(FakeClock())
    verdict = detector.observe("a.com", result(200, body))
    assert verdict.blocked
    assert verdict.reason is not None
    assert verdict.reason.startswith("ban marker ")
    assert verdict.delay_multiplier == 2.0


def test_markers_are_ignored_in_large_or_non_html_or_other_status_bodies() -> None:
    detector = BlockDetector(FakeClock(), max_marker_bytes=1024)
    big = b"<html>" + b"x" * 2000 + b"captcha</html>"
    assert not detector.observe("a.com", result(200, big)).blocked
    json_page = result(200, b'{"captcha": true}', {"content-type": "application/json"})
    assert not detector.observe("a.com", json_page).blocked
    assert not detector.observe("a.com", result(404, b"<html>captcha</html>")).blocked
    verdict = detector.observe("a.com", result(403, b"<html>captcha</html>"))
    assert verdict.reason == "ban marker 'captcha' in a 403 page"


def test_custom_markers() -> None:
    detector = BlockDetector(FakeClock(), markers=["Go Away"])
    assert not detector.observe("a.com", result(200, b"<html>captcha</html>")).blocked
    assert detector.observe("a.com", result(200, b"<html>GO AWAY</html>")).blocked


def test_domains_are_independent() -> None:
    detector = BlockDetector(FakeClock())
    detector.observe("a.com", result(403))
    assert detector.multiplier("a.com") == 2.0
    assert detector.multiplier("b.com") == 1.0


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="successes_per_step"):
        BlockDetector(FakeClock(), successes_per_step=0)
