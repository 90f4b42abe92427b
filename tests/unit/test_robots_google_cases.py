"""Google's robots.txt expectations (``robots_google_cases``) against ``frontier.robots_txt``."""

from __future__ import annotations

import pytest

from crawlfleet.frontier.robots_txt import (
    escape_pattern,
    parse_robots,
    path_and_query,
    valid_token,
)
from tests.unit.robots_google_cases import (
    CASES,
    DIFFERS,
    ESCAPES,
    SITEMAP_FILES,
    TARGETS,
    TOKENS,
    Case,
)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_google_expectation(case: Case) -> None:
    allowed = parse_robots(case.body, case.agent).allowed(path_and_query(case.url))
    expected = case.allowed if case.name not in DIFFERS else not case.allowed
    assert allowed is expected, DIFFERS.get(case.name, "as Google answers")


def test_every_difference_names_a_case() -> None:
    assert set(DIFFERS) <= {case.name for case in CASES}


@pytest.mark.parametrize(("name", "body", "sitemaps"), SITEMAP_FILES)
def test_sitemap_lines_anywhere(name: str, body: bytes, sitemaps: list[str]) -> None:
    assert parse_robots(body, "foo").sitemaps == sitemaps


@pytest.mark.parametrize(("name", "url", "target"), TARGETS)
def test_request_target(name: str, url: str, target: str) -> None:
    assert path_and_query(url) == target


@pytest.mark.parametrize(("name", "pattern", "escaped"), ESCAPES)
def test_pattern_escaping(name: str, pattern: str, escaped: str) -> None:
    assert escape_pattern(pattern.encode()) == escaped


@pytest.mark.parametrize(("name", "token", "valid"), TOKENS)
def test_valid_robots_token(name: str, token: str, valid: bool) -> None:
    assert valid_token(token) is valid
