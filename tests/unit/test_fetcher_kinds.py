"""Fetcher kinds: a kind no runner of this build serves is a one-line error at start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crawlfleet.clock import SystemClock
from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.runtime.choice.kinds import (
    BASE_KINDS,
    WORKER_KINDS,
    check_kinds,
    check_queues,
    named_kinds,
    queue_kinds,
)
from crawlfleet.runtime.fetcher_wiring import build_fetchers
from crawlfleet.settings import Settings

BROWSER_RULE = {
    "name": "js_pages",
    "domain": "shop.test",
    "fields": {"title": {"css": "h1"}},
    "follow": [{"pattern": "/p/"}, {"pattern": "/app/", "fetcher": "browser"}],
}


def test_a_follow_rule_naming_the_browser_is_refused_naming_parser_and_rule() -> None:
    registry = load_parsers([], [BROWSER_RULE], use_entry_points=False)
    with pytest.raises(ConfigError) as caught:
        check_kinds(named_kinds(registry))
    message = str(caught.value)
    assert "parser 'js_pages'" in message
    assert "follow rule 2 names fetcher 'browser'" in message
    assert "\n" not in message


def test_http_and_file_rules_pass() -> None:
    spec = {**BROWSER_RULE, "follow": [{"pattern": "/p/", "fetcher": "http"}]}
    check_kinds(named_kinds(load_parsers([], [spec], use_entry_points=False)))
    file_spec = {**BROWSER_RULE, "follow": [{"fetcher": "file"}]}
    with pytest.raises(ConfigError, match="'file'"):
        check_kinds(
            named_kinds(load_parsers([], [file_spec], use_entry_points=False)), WORKER_KINDS
        )


def test_impersonate_is_a_kind_served_embedded_and_by_the_http_queue() -> None:
    spec = {**BROWSER_RULE, "follow": [{"pattern": "/p/", "fetcher": "impersonate"}]}
    named = list(named_kinds(load_parsers([], [spec], use_entry_points=False)))
    check_kinds(named)
    check_kinds(named, WORKER_KINDS)
    assert "impersonate" in BASE_KINDS
    assert queue_kinds(("http",)) == {"http", "impersonate"}
    assert queue_kinds(("browser",)) == {"browser"}


def test_worker_queues() -> None:
    check_queues(("http",))
    check_queues(("http", "browser"), Path("/usr/bin/chromium"))
    with pytest.raises(ConfigError, match=r"--queues browser: no Chromium at /nowhere/chromium"):
        check_queues(("browser",), Path("/nowhere/chromium"))
    with pytest.raises(ConfigError, match="unknown queue 'ftp'"):
        check_queues(("ftp",))
    with pytest.raises(ConfigError, match="no queue given"):
        check_queues(())


def test_a_distributed_crawl_refuses_seeds_with_credentials() -> None:
    from crawlfleet.runtime.celery.dispatched import check_servable
    from crawlfleet.settings import Settings

    with pytest.raises(ConfigError, match="embedded crawls only"):
        check_servable(Settings(), ["http://user:secret@shop.test/"])
    check_servable(Settings(), ["http://shop.test/"])


def test_a_broken_stealth_install_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "crawlfleet.fetchers.impersonate", None)  # import fails
    with pytest.raises(ConfigError, match=r"impersonate fetcher cannot be loaded .*\[stealth\]"):
        build_fetchers(Settings(), SystemClock(), Credentials())
