"""URL canonicalization, fingerprints and politeness keys (``crawlfleet.urls``)."""

from __future__ import annotations

import pytest

from crawlfleet.errors import BadUrl
from crawlfleet.settings import DEFAULT_STRIP_PARAMS
from crawlfleet.urls import UrlRules, fingerprint, request_fingerprint

RULES = UrlRules(DEFAULT_STRIP_PARAMS)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("HTTP://Shop.Example/a", "http://shop.example/a"),
        ("http://shop.example:80/a", "http://shop.example/a"),
        ("https://shop.example:443/a", "https://shop.example/a"),
        ("http://shop.example:8080/a", "http://shop.example:8080/a"),
        ("http://shop.example/a#reviews", "http://shop.example/a"),
        ("http://shop.example/a?b=2&a=1", "http://shop.example/a?a=1&b=2"),
        ("http://shop.example/a?utm_source=x&id=3&UTM_medium=y", "http://shop.example/a?id=3"),
        ("http://shop.example/a?sessionid=9&page=2", "http://shop.example/a?page=2"),
        ("http://shop.example/a b", "http://shop.example/a%20b"),
        ("  http://shop.example/a  ", "http://shop.example/a"),
        ("http://user:secret@shop.example/a", "http://shop.example/a"),
    ],
)
def test_canonical_forms(raw: str, canonical: str) -> None:
    assert RULES.canonical(raw) == canonical


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("ftp://shop.example/a", "unsupported scheme"),
        ("mailto:someone@shop.example", "unsupported scheme"),
        ("http:///no-host", "without a host"),
        ("http://shop.example:99999/a", "malformed URL"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(BadUrl, match=reason):
        RULES.canonical(raw)


def test_the_stripped_parameters_are_the_crawls_own() -> None:
    keep_all = UrlRules(())
    assert keep_all.canonical("http://a.example/?utm_source=x") == "http://a.example/?utm_source=x"
    custom = UrlRules(["ref", "trk_*"])
    assert custom.canonical("http://a.example/?ref=1&trk_id=2&q=3") == "http://a.example/?q=3"


def test_equal_canonical_urls_share_one_fingerprint() -> None:
    a = fingerprint(RULES.canonical("http://Shop.Example:80/p?b=2&a=1#x"))
    b = fingerprint(RULES.canonical("http://shop.example/p?a=1&b=2"))
    assert a == b
    assert len(a) == 32
    url = "http://shop.example/p?a=1&b=2"
    assert request_fingerprint(url) == fingerprint(url)  # a plain GET: the URL's own
    assert request_fingerprint(url, "POST", "q=1") != fingerprint(url)


def test_politeness_key_is_the_host_or_the_registrable_domain() -> None:
    by_host = UrlRules((), key="host")
    by_domain = UrlRules((), key="domain")
    url = "http://www.shop.example.co.uk/p"
    assert by_host.politeness_key(url) == "www.shop.example.co.uk"
    assert by_domain.politeness_key(url) == "example.co.uk"
    assert by_host.politeness_key("file:///tmp/page.html") == "file"
