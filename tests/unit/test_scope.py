"""Scope: domains, patterns, depth and the default spider-trap rules."""

from __future__ import annotations

import itertools
from collections import Counter
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlfleet.counters import Limit
from crawlfleet.frontier.scope import Scope, TrapLimits
from crawlfleet.runtime.options import trap_limits
from crawlfleet.settings import Settings

SEED = "http://example.com/"


def scope(**kwargs: object) -> Scope:
    return Scope.for_seeds([SEED], **kwargs)  # type: ignore[arg-type]


def test_a_url_past_2083_characters_is_out_of_scope_by_default() -> None:
    base = "http://example.com/"
    assert scope().reason_to_skip(base + "a" * (2083 - len(base)), 1) is None
    assert str(scope().reason_to_skip(base + "a" * 500_000, 1)) == "URL longer than 2083 characters"


@pytest.mark.parametrize(
    "path",
    ["/a/b/a/b/a/b/a/b/", "/x/x/x/x", "/cal/foo/bar/foo/baz/foo/qux/foo/"],
)
def test_a_path_segment_repeated_more_than_3_times_is_a_trap(path: str) -> None:
    reason = scope().reason_to_skip(f"http://example.com{path}", 1)
    assert reason is not None
    assert "repeated 4 times" in reason.text
    assert reason.reason is Limit.MAX_PATH_SEGMENT_REPEATS


@pytest.mark.parametrize(
    "path", ["/2024/01/01/news/01", "/a/b/a/b/a/b/", "/", "/one/two/three/four/five/six/seven/"]
)
def test_ordinary_paths_pass(path: str) -> None:
    assert scope().reason_to_skip(f"http://example.com{path}", 1) is None


def test_more_than_16_query_parameters_is_a_trap() -> None:
    query = "&".join(f"f{i}=v" for i in range(17))
    assert str(scope().reason_to_skip(f"{SEED}search?{query}", 1)) == (
        "17 query parameters (more than 16)"
    )
    assert scope().reason_to_skip(f"{SEED}search?{query.rpartition('&')[0]}", 1) is None


def test_raised_limits_lift_the_rules() -> None:
    lifted = scope(traps=TrapLimits(1_000_000, 100, 100), max_depth=None)
    assert lifted.reason_to_skip(SEED + "a" * 500_000, 1_000) is None
    assert lifted.reason_to_skip(f"{SEED}{'x/' * 50}", 1) is None
    assert lifted.reason_to_skip(f"{SEED}?{'&'.join(f'a{i}=1' for i in range(50))}", 1) is None


def test_the_trap_defaults_are_the_settings_defaults() -> None:
    assert trap_limits(Settings()) == TrapLimits()
    custom = Settings(max_url_chars=100, max_path_segment_repeats=9, max_query_params=2)
    assert trap_limits(custom) == TrapLimits(100, 9, 2)


def test_depth_is_limited_by_default() -> None:
    depth = Settings().max_depth
    assert depth == 100
    limited = scope(max_depth=depth)
    assert limited.reason_to_skip(SEED, depth) is None
    assert str(limited.reason_to_skip(SEED, depth + 1)) == "max depth"


def test_domains_and_patterns_still_apply() -> None:
    patterned = scope(deny=[r"/private/"], allow=[r"example\.com/(public|private)/"])
    assert str(patterned.reason_to_skip("http://other.org/", 0)) == "off-site"
    assert str(patterned.reason_to_skip(f"{SEED}private/x", 0)) == "denied by pattern"
    assert str(patterned.reason_to_skip(f"{SEED}misc", 0)) == "not allowed by pattern"
    assert patterned.reason_to_skip(f"{SEED}public/x", 0) is None


def test_a_host_is_allowed_when_it_or_a_parent_domain_is_allowed() -> None:
    allowed = ["example.com", ".b.test", "127.0.0.1", "file"]
    sc = Scope(allowed_domains=allowed)
    hosts = ["example.com", "shop.example.com", "a.b.c.example.com", "b.test", "x.b.test"]
    hosts += ["127.0.0.1"]
    assert all(sc.domain_allowed(host) for host in hosts)
    refused = ["notexample.com", "example.com.evil", "com", "test", "ab.test", "0.0.1", "x"]
    assert not any(sc.domain_allowed(host) for host in refused)
    assert sc.domain_allowed("")  # file: URLs, since a seed is one
    assert not Scope(allowed_domains=["example.com"]).domain_allowed("")


def test_domain_matching_is_the_suffix_rule_on_generated_hosts() -> None:
    """Equal to "the host, or it ends with '.' + an allowed domain" on every host of a grid."""
    labels = ["a", "b", "ab", "com", "0", "1"]
    allowed = ["b", "ab.com", "a.b", "1", "0.1"]
    sc = Scope(allowed_domains=allowed)
    hosts = [".".join(p) for n in range(1, 4) for p in itertools.product(labels, repeat=n)]
    for host in hosts:
        expected = any(host == d or host.endswith("." + d) for d in allowed)
        assert sc.domain_allowed(host) is expected, host


def _repeats_by_urlsplit(url: str) -> int:
    """The most any segment occurs in the path ``urlsplit`` gives: the rule's own measure."""
    counts = Counter(s for s in urlsplit(url).path.split("/") if s)
    return max(counts.values(), default=0)


URL_TAIL = st.text(alphabet="/?#ab.\t:", max_size=30)
URL_HEAD = st.sampled_from(["http://h.test", "https://h.test:8080", "file://", "HTTP://h", "x:"])


@given(head=URL_HEAD, tail=URL_TAIL)
def test_the_quick_bound_on_repeated_segments_never_lets_a_trap_through(
    head: str, tail: str
) -> None:
    url = head + tail
    traps = TrapLimits(max_path_segment_repeats=2)
    reason = traps.reason_to_skip(url)
    refused = reason is not None and reason.reason is Limit.MAX_PATH_SEGMENT_REPEATS
    assert refused == (_repeats_by_urlsplit(url) > 2)
