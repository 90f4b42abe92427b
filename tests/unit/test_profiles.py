"""Header profiles are coherent by the guarded demo host's own rules, and give their UA."""

from __future__ import annotations

import random

import pytest

from crawlfleet.demosite.guarded import header_problem
from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.profiles import PROFILES, pick_profile, profile, user_agent


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_passes_the_guarded_hosts_coherence_check(name: str) -> None:
    headers = profile(name).as_dict()
    assert header_problem(headers) is None
    assert headers["Accept-Encoding"] == "gzip, deflate, br"  # what decoding.py undoes


def test_incoherent_sets_are_refused_by_the_same_check() -> None:
    chrome = profile("chrome-131-linux").as_dict()
    assert header_problem({k: v for k, v in chrome.items() if k != "sec-ch-ua"}) is not None
    assert header_problem({**chrome, "sec-ch-ua": '"Google Chrome";v="120"'}) is not None
    firefox = profile("firefox-133-linux").as_dict()
    assert header_problem({**firefox, "sec-ch-ua": chrome["sec-ch-ua"]}) is not None
    assert header_problem({"User-Agent": "Python/3.11 aiohttp/3.14.5"}) is not None


def test_the_ua_of_a_profile_for_a_browser_fetcher() -> None:
    assert user_agent("firefox-133-linux").endswith("Firefox/133.0")
    with pytest.raises(ConfigError, match="unknown header profile"):
        user_agent("netscape")


def test_pick_draws_among_the_named_profiles() -> None:
    rng = random.Random(1)
    names = {pick_profile(rng, ("safari-17-macos", "edge-131-windows")).name for _ in range(20)}
    assert names == {"safari-17-macos", "edge-131-windows"}
