"""The cookie jar's scopes (RFC 6265 sections 5.1-5.4): where each stored cookie is sent."""

from __future__ import annotations

import pytest

from crawlfleet.sessions.cookies import CookieJar, default_path, path_matches

NOW = 1_700_000_000.0


def jar_from(url: str, *set_cookie: str) -> CookieJar:
    jar = CookieJar()
    for header in set_cookie:
        jar.receive(url, header, NOW)
    return jar


def test_set_cookie_headers_joined_by_commas() -> None:
    joined = (
        "sessionid=abc; HttpOnly; Path=/, "
        "old=; expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/, "
        "csrftoken=t1; expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/members/"
    )
    jar = jar_from("https://shop.test/login", "old=x; Path=/", joined)
    assert jar.header("https://shop.test/members/1", NOW) == "csrftoken=t1; sessionid=abc"
    assert jar.header("https://shop.test/", NOW) == "sessionid=abc"  # "old" deleted
    assert not jar.receive("https://shop.test/", None, NOW)


def test_a_host_only_cookie_goes_to_its_host_alone() -> None:
    jar = jar_from("http://a.shop.test/", "sid=1")
    assert jar.header("http://a.shop.test/x", NOW) == "sid=1"
    assert jar.header("http://b.shop.test/x", NOW) is None
    assert jar.header("http://shop.test/x", NOW) is None
    assert jar.header("http://evil.test/", NOW) is None


def test_a_domain_cookie_goes_to_the_domain_and_below() -> None:
    jar = jar_from("http://a.shop.test/", "sid=1; Domain=.shop.test")
    for url in ("http://shop.test/", "http://b.shop.test/", "http://x.y.shop.test/"):
        assert jar.header(url, NOW) == "sid=1", url
    assert jar.header("http://evilshop.test/", NOW) is None


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("http://a.shop.test/", "other.test"),  # not above the host
        ("http://shop.co.uk/", "co.uk"),  # a public suffix
        ("http://a.shop.test/", "b.shop.test"),  # a sibling
    ],
)
def test_a_domain_the_host_is_not_under_is_refused(url: str, domain: str) -> None:
    assert len(jar_from(url, f"sid=1; Domain={domain}")) == 0


def test_ip_hosts_take_no_domain_cookies_of_others() -> None:
    jar = jar_from("http://127.0.0.2/", "sid=1")
    assert jar.header("http://127.0.0.2/a", NOW) == "sid=1"
    assert jar.header("http://127.0.0.3/a", NOW) is None
    assert len(jar_from("http://1.127.0.0.2/", "sid=1; Domain=127.0.0.2")) == 0


def test_paths_match_by_directory() -> None:
    jar = jar_from("http://shop.test/account/login", "a=1; Path=/account", "b=2")
    assert jar.header("http://shop.test/account", NOW) == "a=1; b=2"
    assert jar.header("http://shop.test/account/orders", NOW) == "a=1; b=2"
    assert jar.header("http://shop.test/accountant", NOW) is None
    assert jar.header("http://shop.test/", NOW) is None
    assert default_path("/account/login") == "/account"
    assert default_path("/login") == default_path("") == "/"
    assert path_matches("/docs/", "/docs/")
    assert not path_matches("/doc", "/docs")


def test_secure_cookies_go_over_https_only_and_come_from_https_only() -> None:
    jar = jar_from("https://shop.test/", "s=1; Secure", "p=2")
    assert jar.header("https://shop.test/", NOW) == "s=1; p=2"
    assert jar.header("http://shop.test/", NOW) == "p=2"
    assert len(jar_from("http://shop.test/", "s=1; Secure")) == 0


def test_expiry_max_age_first_and_deletion() -> None:
    jar = jar_from(
        "http://shop.test/", "a=1; Max-Age=60", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT"
    )
    assert jar.header("http://shop.test/", NOW) == "a=1; b=2"
    assert jar.header("http://shop.test/", NOW + 61) == "b=2"
    jar.receive("http://shop.test/", "b=; Max-Age=0", NOW)
    assert jar.header("http://shop.test/", NOW) == "a=1"
    jar.receive("http://shop.test/", "a=9; Max-Age=60; Expires=Thu, 01 Jan 1970 00:00:00 GMT", NOW)
    assert jar.header("http://shop.test/", NOW) == "a=9"  # Max-Age wins over Expires


def test_a_line_without_a_name_value_pair_is_ignored() -> None:
    assert len(jar_from("http://shop.test/", "garbage", "=v", " ; Path=/")) == 0


def test_the_stored_form_keeps_scopes_and_reads_old_bare_names() -> None:
    jar = jar_from("https://a.shop.test/x/y", "h=1", "d=2; Domain=shop.test; Path=/; Secure")
    again = CookieJar.from_stored(jar.stored(), "ignored.test")
    assert again.stored() == jar.stored()
    assert again.header("https://a.shop.test/x/z", NOW) == "h=1; d=2"  # longer path first
    assert again.header("https://b.shop.test/x/z", NOW) == "d=2"
    old = CookieJar.from_stored({"sid": "1"}, "shop.test")  # a jar stored before scopes
    assert old.header("http://shop.test/any/path", NOW) == "sid=1"
    assert old.header("http://www.shop.test/", NOW) == "sid=1"
    assert old.header("http://other.test/", NOW) is None
