"""The fast path of ``UrlRules.target`` gives what every step gives, or steps aside."""

from __future__ import annotations

import random
from urllib.parse import urlsplit

import pytest

from crawlfleet.errors import BadUrl
from crawlfleet.urls import UrlRules, already_canonical, host_of, plain_origin

HOSTS = ("a.test", "127.0.0.11", "x-y.example.com", "a..b", "-a.test", "a.test.", "0.0.0.0",
         "xn--bcher-kva.test", "1.2.3", ".", "A.test", "b\u00fccher.test", "0x7f.1", "a.0x1",
         "2130706433", "a.1", "1.2.3.4.", "256.1.1.1", "01.2.3.4", "xn--a.test", "a.b-")  # fmt: skip
PORTS = ("", ":80", ":443", ":8080", ":18411", ":0", ":00080", ":99999", ":65535", ":65536", ":1")
PATH_CHARACTERS = "abcXYZ019._~-/%?#@:;=+ "


def slow(url: str) -> str:
    """The dedup key by every step (the fast path bypassed), "BadUrl" for no URL."""
    try:
        return UrlRules().full_target(url).key
    except BadUrl:
        return "BadUrl"


def slow_url(url: str) -> str:
    """The request URL by every step (the fast path bypassed), "BadUrl" for no URL."""
    try:
        return UrlRules().full_target(url).url
    except BadUrl:
        return "BadUrl"


def random_urls(count: int) -> list[str]:
    rng = random.Random(15)
    urls = []
    for _ in range(count):
        path = "/" + "".join(rng.choice(PATH_CHARACTERS) for _ in range(rng.randrange(20)))
        scheme = rng.choice(("http", "https", "HTTP", "ftp"))
        urls.append(f"{scheme}://{rng.choice(HOSTS)}{rng.choice(PORTS)}{path}")
    return urls


def test_every_url_the_fast_path_takes_is_its_own_request_url_and_key() -> None:
    urls = random_urls(60_000)
    taken = [url for url in urls if already_canonical(url)]
    assert len(taken) > 500  # the generator reaches the fast path
    assert [url for url in taken if slow(url) != url or slow_url(url) != url] == []


@pytest.mark.parametrize(
    "url",
    [
        "http://a.test:80/x",  # default port: dropped
        "https://a.test:443/x",
        "http://a.test:00080/x",  # leading zeros: the port is normalized
        "http://a.test:99999/x",  # out of range: BadUrl
        "http://a.test/./x",  # dot segments: removed
        "http://a.test/a/../x",
        "http://A.test/x",  # upper-case host: lowered
        "http://a.test/x?b=1&a=2",  # query: sorted
        "http://a.test/x#top",  # fragment: dropped
        "http://a.test/%7ex",  # percent-encoding: normalized
        "http://user:pw@a.test/x",  # userinfo: dropped
        "http://a.test",  # no path: "/"
        "http://0x7f.1/x",  # an IPv4 number form: 127.0.0.1
        "http://1.2.3/x",  # 1.2.0.3
        "http://xn--a.test/x",  # punycode: checked by the parser
    ],
)
def test_the_fast_path_steps_aside_for_what_canonicalization_changes(url: str) -> None:
    assert not already_canonical(url)


def test_a_key_is_its_own_key_and_a_request_url_its_own_request_url() -> None:
    """The frontier's memo skips a link written as an offered request URL (decision 0022)."""
    urls = random_urls(30_000)
    keys = [c for c in map(slow, urls) if c != "BadUrl"]
    assert len(keys) > 5_000
    assert [c for c in keys if slow(c) != c] == []
    sent = [c for c in map(slow_url, urls) if c != "BadUrl"]
    assert [c for c in sent if slow_url(c) != c] == []
    assert [c for c in sent if slow(c) != slow(slow_url(c))] == []


def split(url: str) -> tuple[str, str, int | None] | str:
    """What ``urlsplit`` tells of a URL's origin (a ``ValueError`` as its name)."""
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname or "", parts.port
    except ValueError:
        return "ValueError"


def test_the_plain_origin_is_what_urlsplit_tells_or_it_steps_aside() -> None:
    urls = [
        *random_urls(30_000),
        "http://a.test",
        "http://a.test?x",
        "http://a.test#x",
        "http://a.test:/x",
        "http://[::1]:8080/x",
        "http://user@a.test/x",
        " http://a.test/x",
        "http://a.test\t.b/x",
        "http://a.test/x\ty",
        "http://a.test\\x",
    ]
    told = {url: plain_origin(url) for url in urls}
    assert sum(origin is not None for origin in told.values()) > 5_000
    assert {url: o for url, o in told.items() if o is not None and split(url) != o} == {}
    assert plain_origin("http://a.test:65536/x") is None  # urlsplit raises: left to it
    assert host_of("http://a.test:8080/x") == host_of("HTTP://A.TEST:8080/x") == "a.test"
