"""A Retry-After over ``max_retry_after_s`` parks the domain for the cap, and says so."""

from __future__ import annotations

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.runtime.step.judge import retry_after_block
from crawlfleet.settings.loading import load_settings


def test_a_delay_within_the_cap_is_honoured() -> None:
    assert retry_after_block(429, "120", 0.0, max_s=3600.0) == (120.0, "HTTP 429 Retry-After")


def test_a_delay_over_the_cap_is_capped_with_a_visible_reason() -> None:
    wait_s, reason = retry_after_block(503, "604800", 0.0, max_s=3600.0)
    assert wait_s == 3600.0
    assert reason == (
        "HTTP 503 Retry-After 604800 s is over max_retry_after_s (3600 s): domain parked for 3600 s"
    )


def test_the_cap_is_a_setting() -> None:
    assert load_settings(None).max_retry_after_s == 3600.0
    assert load_settings(None, max_retry_after_s=60.0).max_retry_after_s == 60.0
    with pytest.raises(ConfigError, match="max_retry_after_s"):
        load_settings(None, max_retry_after_s=float("inf"))
