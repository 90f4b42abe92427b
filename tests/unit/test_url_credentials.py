"""Userinfo never survives canonicalization; it becomes a per-origin secret of the fetcher."""

from __future__ import annotations

import pytest

from crawlfleet.errors import BadUrl
from crawlfleet.fetchers.credentials import Credentials, origin_of
from crawlfleet.urls import UrlRules

CANARY = "Canary-7f3e"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://user:{CANARY}@example.com/a", "http://example.com/a"),
        (f"https://user:{CANARY}@Example.com:443/", "https://example.com/"),
        (f"http://{CANARY}@example.com:8080/x?y=1", "http://example.com:8080/x?y=1"),
        (f"http://u:p@{CANARY}@example.com/", "http://example.com/"),
        ("http://example.com/", "http://example.com/"),
    ],
)
def test_request_url_and_key_have_no_userinfo(url: str, expected: str) -> None:
    assert UrlRules().target(url) == (expected, expected)


def test_a_bad_url_error_does_not_echo_the_password() -> None:
    with pytest.raises(BadUrl) as caught:
        UrlRules().target(f"http://user:{CANARY}@example.com:99999/")
    assert CANARY not in str(caught.value)


def test_credentials_belong_to_one_origin() -> None:
    creds = Credentials.from_urls(
        [
            f"http://user:{CANARY}@Example.com/",
            "http://other.example/",
            "https://a%40b:p%3Aw@x.example/",
        ]
    )
    assert creds.for_url("http://example.com:80/page") == ("user", CANARY)
    assert creds.for_url("https://example.com/page") is None
    assert creds.for_url("http://example.com:8080/") is None
    assert creds.for_url("http://sub.example.com/") is None
    assert creds.for_url("http://other.example/") is None
    assert creds.for_url("https://x.example/") == ("a@b", "p:w")
    assert len(creds) == 2
    assert CANARY not in repr(creds)


def test_origin_of() -> None:
    assert origin_of("HTTPS://H.example/x") == ("https", "h.example", 443)
    assert origin_of("file:///tmp/x") is None
    assert origin_of("http://h:99999/") is None
