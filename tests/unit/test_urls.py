"""Request URLs, dedup keys, fingerprints and politeness keys (``crawlfleet.urls``)."""

from __future__ import annotations

import pytest

from crawlfleet.errors import BadUrl
from crawlfleet.fetchers.target import target_of
from crawlfleet.settings import DEFAULT_STRIP_PARAMS
from crawlfleet.urls import (
    UrlRules,
    fingerprint,
    host_of,
    join,
    registrable_domain,
    request_fingerprint,
)

RULES = UrlRules(DEFAULT_STRIP_PARAMS)


@pytest.mark.parametrize(
    ("raw", "sent", "key"),
    [
        ("HTTP://Shop.Example/a", "http://shop.example/a", "http://shop.example/a"),
        ("http://shop.example:80/a", "http://shop.example/a", "http://shop.example/a"),
        ("https://shop.example:443/a", "https://shop.example/a", "https://shop.example/a"),
        ("http://shop.example:8080/a", "http://shop.example:8080/a", "http://shop.example:8080/a"),
        ("http://shop.example/a#reviews", "http://shop.example/a", "http://shop.example/a"),
        ("http://shop.example/a?b=2&a=1", "http://shop.example/a?b=2&a=1", "http://shop.example/a?a=1&b=2"),
        ("http://shop.example/a?utm_source=x&id=3&UTM_medium=y",
         "http://shop.example/a?utm_source=x&id=3&UTM_medium=y", "http://shop.example/a?id=3"),
        ("http://shop.example/a?sessionid=9&page=2", "http://shop.example/a?sessionid=9&page=2",
         "http://shop.example/a?page=2"),
        ("http://shop.example/a b", "http://shop.example/a%20b", "http://shop.example/a%20b"),
        ("  http://shop.example/a  ", "http://shop.example/a", "http://shop.example/a"),
        ("http://user:secret@shop.example/a", "http://shop.example/a", "http://shop.example/a"),
        ("http://shop.example/%7e%41/%2f", "http://shop.example/%7e%41/%2f", "http://shop.example/~A/%2F"),
        ("http://shop.example/a/./b/../c", "http://shop.example/a/c", "http://shop.example/a/c"),
        ("http://shop.example/a?", "http://shop.example/a?", "http://shop.example/a"),
        ("http:///no-host", "http://no-host/", "http://no-host/"),  # as WHATWG reads it
    ],
)  # fmt: skip
def test_request_urls_and_keys(raw: str, sent: str, key: str) -> None:
    assert RULES.target(raw) == (sent, key)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("ftp://shop.example/a", "unsupported scheme"),
        ("mailto:someone@shop.example", "unsupported scheme"),
        ("http://shop.example:99999/a", "malformed URL"),
        ("http://[::1/a", "malformed URL"),
        ("/relative", "malformed URL"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(BadUrl, match=reason):
        RULES.target(raw)


def test_the_stripped_parameters_are_the_crawls_own() -> None:
    keep_all = UrlRules(())
    assert keep_all.target("http://a.example/?utm_source=x").key == "http://a.example/?utm_source=x"
    custom = UrlRules(["ref", "trk_*"])
    assert custom.target("http://a.example/?ref=1&trk_id=2&q=3").key == "http://a.example/?q=3"


def test_equal_keys_share_one_fingerprint() -> None:
    a = fingerprint(RULES.target("http://Shop.Example:80/p?b=2&a=1#x").key)
    b = fingerprint(RULES.target("http://shop.example/p?a=1&b=2").key)
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


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.21",
        "10.0.0.255",
        "::1",
        "2001:db8::1",
        "::ffff:1.2.3.4",
        "localhost",
        "intranet",
        "com",
        "xn--p1ai",
        "1.2.3",
        "999.1.1.1",
        "shop.example.co.uk",
        "example\u3002co\u3002uk",
        "example\uff0ecom",
    ],
)
def test_registrable_domains_without_the_suffix_list_are_tldextract_s(host: str) -> None:
    # Addresses and single labels are answered without loading tldextract (decision 0058).
    import tldextract

    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    assert registrable_domain(host) == (extract(host).top_domain_under_public_suffix or host)


# Defects of issue #33 (URLs), each failing before the request URL and the key were split.


def test_a_backslash_before_an_at_sign_ends_the_host() -> None:
    """``https://good.test\\@evil.test/`` goes to good.test, as browsers, w3lib, Scrapy go."""
    target = RULES.target("https://good.test\\@evil.test/")
    assert target.url == "https://good.test/@evil.test/"
    assert host_of(target.url) == "good.test"
    assert RULES.politeness_key(target.url) == "good.test"


def test_non_utf8_escapes_in_a_query_are_sent_and_keyed_as_they_are() -> None:
    e_acute = RULES.target("http://a.test/s?q=caf%E9")
    e_grave = RULES.target("http://a.test/s?q=caf%E8")
    assert e_acute.url == "http://a.test/s?q=caf%E9"
    assert e_grave.url == "http://a.test/s?q=caf%E8"
    assert e_acute.key != e_grave.key
    assert "\ufffd" not in e_acute.key
    assert target_of(e_acute.url).path_qs == "/s?q=caf%E9"


def test_an_escaped_semicolon_and_escapes_stay_on_the_wire() -> None:
    url = RULES.target("http://a.test/x%3By?q=%41&r=%2F%26&s=%zz").url
    assert url == "http://a.test/x%3By?q=%41&r=%2F%26&s=%zz"
    assert target_of(url).path_qs == "/x%3By?q=%41&r=%2F%26&s=%zz"
    assert RULES.target("http://a.test/x%3By").key != RULES.target("http://a.test/x;y").key


def test_hosts_go_through_uts46_nontransitional() -> None:
    assert RULES.target("http://faß.de/").url == "http://xn--fa-hia.de/"
    assert RULES.target("http://Bücher.test/").url == "http://xn--bcher-kva.test/"


@pytest.mark.parametrize(
    "raw", ["http://0x7f.1/", "http://2130706433/", "http://0177.0.0.1/", "http://127.1/"]
)
def test_ipv4_number_forms_are_read_as_whatwg_reads_them(raw: str) -> None:
    assert RULES.target(raw).url == "http://127.0.0.1/"
    assert target_of(raw).host == "127.0.0.1"


def test_sid_is_not_stripped_by_default_and_jsessionid_is_stripped_from_the_path() -> None:
    assert "sid" not in DEFAULT_STRIP_PARAMS
    assert RULES.target("http://a.test/article?sid=12").key == "http://a.test/article?sid=12"
    one = RULES.target("http://a.test/cart;jsessionid=A1B2?x=1")
    two = RULES.target("http://a.test/cart;JSESSIONID=ZZ9?x=1")
    assert one.url == "http://a.test/cart;jsessionid=A1B2?x=1"  # sent as written
    assert one.key == two.key == "http://a.test/cart?x=1"
    assert RULES.target("http://a.test/a;v=2").key == "http://a.test/a;v=2"


def test_repeated_query_names_keep_their_order_on_the_wire_and_in_the_key() -> None:
    target = RULES.target("http://a.test/s?tag=b&page=2&tag=a")
    assert target.url == "http://a.test/s?tag=b&page=2&tag=a"
    assert target.key == "http://a.test/s?page=2&tag=b&tag=a"
    assert RULES.target("http://a.test/s?tag=a&tag=b").key != target.key


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("  /x\n", "http://a.test/x"),
        ("\t/x\ty\n", "http://a.test/xy"),
        ("\x00/x\x1f", "http://a.test/x"),
        ("\u00a0/x", "http://a.test/dir/%C2%A0/x"),  # NO-BREAK SPACE is kept
        ("/x\u3000", "http://a.test/x%E3%80%80"),  # IDEOGRAPHIC SPACE too
        ("\\\\other.test\\p", "http://other.test/p"),
    ],
)
def test_only_c0_controls_and_space_are_stripped_from_an_href(href: str, expected: str) -> None:
    assert join("http://a.test/dir/page", href) == expected


def test_a_query_is_encoded_in_the_pages_encoding_and_the_path_in_utf8() -> None:
    assert join("http://a.test/", "/caf\u00e9?q=caf\u00e9", "cp1252") == (
        "http://a.test/caf%C3%A9?q=caf%E9"
    )
    assert join("http://a.test/", "/?q=caf\u00e9", "utf-8") == "http://a.test/?q=caf%C3%A9"
    assert join("http://a.test/", "/?q=caf\u00e9", "utf-16-le") == "http://a.test/?q=caf%C3%A9"
    # A character the encoding lacks becomes an escaped numeric reference, as browsers send.
    assert join("http://a.test/", "/?q=\u4e00#\u00e9", "cp1252") == (
        "http://a.test/?q=%26%2319968%3B#%C3%A9"
    )


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        ("http://shop.example/a?b=2&a=1", "http://shop.example/a?a=1&b=2"),
        ("HTTP://Shop.Example:80/p/./q?utm_source=x&id=3#top", "http://shop.example/p/q?id=3"),
        ("http://shop.example/a b?q=caf%C3%A9", "http://shop.example/a%20b?q=caf%C3%A9"),
        ("http://127.0.0.1:8080/list?page=2&cat=a", "http://127.0.0.1:8080/list?cat=a&page=2"),
        ("https://docs.example/3/library/stdtypes.html", "https://docs.example/3/library/stdtypes.html"),
        ("http://shop.example/%7euser/?q=%c3%a9", "http://shop.example/~user/?q=%C3%A9"),
    ],
)  # fmt: skip
def test_a_state_written_before_keeps_its_fingerprints(url: str, stored: str) -> None:
    """A crawl stored before request URLs and keys were split resumes without fetching these
    again: its rows hold the canonical form (``stored``, as c15e104 wrote it), whose
    fingerprint the key still gives, and a stored URL requested again keys the same."""
    assert fingerprint(RULES.target(url).key) == fingerprint(stored)
    assert RULES.target(stored).key == stored
