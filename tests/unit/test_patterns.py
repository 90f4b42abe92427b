"""Scope and parser regexes come from the crawl definition: their matching cost is bounded."""

from __future__ import annotations

import time

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.scope import Scope
from crawlfleet.patterns import compile_any, compile_pattern

# Backtracking ``re`` needs ~1.7 s for this at 24 characters, x4 per 2 more (docs/decisions/0009).
CATASTROPHIC = r"^https?://site\.example/(\w+/?)+$"


def test_a_catastrophic_deny_pattern_stays_fast_on_a_long_url() -> None:
    scope = Scope(allowed_domains=["site.example"], deny=[CATASTROPHIC])
    url = "http://site.example/" + "a" * 2_000 + "!"
    started = time.perf_counter()
    for _ in range(100):
        assert scope.reason_to_skip(url, 0) is None
    assert time.perf_counter() - started < 0.5


def test_patterns_still_match() -> None:
    scope = Scope(allowed_domains=["site.example"], allow=[r"/p/\d+$"], deny=[r"\?sort="])
    assert scope.reason_to_skip("http://site.example/p/12", 0) is None
    assert str(scope.reason_to_skip("http://site.example/p/12?sort=a", 0)) == "denied by pattern"
    assert str(scope.reason_to_skip("http://site.example/about", 0)) == "not allowed by pattern"
    assert compile_any([], "allow") is None


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=x)a", r"(?<!x)a", r"(unclosed"])
def test_a_pattern_re2_refuses_is_a_config_error_naming_the_setting(
    pattern: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=r"^bad setting 'deny': regex") as caught:
        compile_any([r"ok", pattern], "deny")
    assert repr(pattern) in str(caught.value)
    assert capfd.readouterr().err == ""


def test_unicode_patterns() -> None:
    match = compile_pattern(r"caf(é+)", "allow").search("un café")
    assert match is not None
    assert match.group(1) == "é"
