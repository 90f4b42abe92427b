"""``frontier.robots_txt`` beyond Google's cases: our extras and the cost of a match."""

from __future__ import annotations

import time

from crawlfleet.frontier.robots_txt import parse_robots


def test_many_wildcards_match_in_linear_time() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: /*a*a*a*a*b\n", "crawlfleet")
    started = time.perf_counter()
    assert rules.allowed("/" + "a" * 16_000)  # a backtracking regex took seconds at 200
    assert not rules.allowed("/" + "a" * 16_000 + "b")
    assert time.perf_counter() - started < 0.05


def test_wildcards_and_the_end_anchor() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: /*.json$\nDisallow: /a$b\n", "x")
    assert not rules.allowed("/data/x.json")
    assert rules.allowed("/data/x.json?full=1")
    assert not rules.allowed("/a$b/c")  # a "$" inside a pattern is a character
    assert rules.allowed("/a")


def test_our_group_gives_the_crawl_delay_else_the_global_one() -> None:
    body = (
        b"User-agent: *\nCrawl-delay: 9\nDisallow: /x\n\n"
        b"User-agent: crawlfleet\nCrawl-delay: 2\n\n"
        b"User-agent: crawlfleet\nRequest-rate: 1/4s\n"
    )
    ours = parse_robots(body, "crawlfleet")
    assert ours.crawl_delay_s == 4.0  # the largest of the groups that name us
    assert ours.allowed("/x")  # a group names us: the global one does not apply
    other = parse_robots(body, "otherbot")
    assert other.crawl_delay_s == 9.0
    assert not other.allowed("/x")


def test_unreadable_crawl_delays_are_ignored() -> None:
    body = b"User-agent: *\nCrawl-delay: soon\nCrawl-delay: -1\nCrawl-delay: nan\n"
    assert parse_robots(body, "x").crawl_delay_s is None


def test_a_non_utf8_byte_in_a_rule_matches_its_escape() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: /m\xe4rz\n", "x")  # latin-1 "märz"
    assert not rules.allowed("/m%E4rz")
    assert not rules.allowed("/m%e4rz")  # hex digits in either case are one escape
    assert rules.allowed("/m%C3%A4rz")


def test_sitemaps_are_kept_from_anywhere_in_the_file() -> None:
    body = (
        b"Sitemap: https://a.test/1.xml\nUser-agent: *\nDisallow:\nsite-map: https://a.test/2.xml\n"
    )
    assert parse_robots(body, "x").sitemaps == ["https://a.test/1.xml", "https://a.test/2.xml"]
