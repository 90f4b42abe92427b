"""Fingerprints cover a request's method and body; a GET keeps the fingerprint it always had."""

from __future__ import annotations

import orjson
import pytest

from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.redis.views import loads
from crawlfleet.models import Link
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Settings
from crawlfleet.urls import fingerprint, request_fingerprint

URL = "https://shop.test/catalogue/page-1.html"
# What the releases before request methods stored for URL: a resumed crawl must match it.
URL_FINGERPRINT = "03ae2895229236b6f6d2f88b82520514"


def test_a_get_keeps_the_fingerprint_of_its_url() -> None:
    assert fingerprint(URL) == URL_FINGERPRINT
    assert request_fingerprint(URL) == request_fingerprint(URL, "GET", "") == URL_FINGERPRINT


def test_method_and_body_make_different_fingerprints() -> None:
    prints = {
        request_fingerprint(URL),
        request_fingerprint(URL, "POST"),
        request_fingerprint(URL, "POST", "q=a"),
        request_fingerprint(URL, "POST", "q=b"),
        request_fingerprint(URL, "PUT", "q=a"),
        request_fingerprint(URL, "GET", "q=a"),
    }
    assert len(prints) == 6
    assert all(len(p) == 32 for p in prints)


async def test_two_posts_to_one_url_with_different_bodies_are_two_requests() -> None:
    frontier = build_frontier(Settings(), MemoryQueueStore(policy=domain_policy(Settings())), [URL])
    links = [
        Link.post(URL, form={"q": "a"}),
        Link.post(URL, form={"q": "b"}),
        Link.post(URL, form={"q": "a"}),
        Link(URL),
        URL,
    ]
    requests, rejected = frontier.requests_for(links, None)
    assert rejected == []
    assert [r.method for r in requests] == ["POST", "POST", "POST", "GET", "GET"]
    assert requests[3].fingerprint == requests[4].fingerprint == URL_FINGERPRINT
    assert await frontier.add(requests) == 3


def test_the_frontier_keeps_a_links_payload() -> None:
    frontier = build_frontier(Settings(), MemoryQueueStore(policy=domain_policy(Settings())), [URL])
    link = Link.post(
        URL + "#top", json={"b": 1, "a": [2]}, data={"category": "Poetry"}, headers={"X-A": "1"}
    )
    (request,), _ = frontier.requests_for([link], None)
    assert request.url == URL
    assert request.data == {"category": "Poetry"}
    assert (request.method, request.body) == ("POST", '{"a":[2],"b":1}')
    assert request.headers == {"X-A": "1", "Content-Type": "application/json"}
    assert request.fingerprint == request_fingerprint(URL, "POST", request.body)


def test_a_redirect_keeps_the_context_and_becomes_a_get() -> None:
    frontier = build_frontier(Settings(), MemoryQueueStore(policy=domain_policy(Settings())), [URL])
    (posted,), _ = frontier.requests_for([Link.post(URL, form={"q": "a"}, data={"k": 1})], None)
    target = frontier.redirect(posted, "https://shop.test/results?q=a")
    assert not isinstance(target, str)
    assert (target.method, target.body, target.data) == ("GET", "", {"k": 1})
    assert target.fingerprint == fingerprint("https://shop.test/results?q=a")


def test_link_methods_are_checked_and_upper_cased() -> None:
    assert Link(URL, method="post").method == "POST"
    with pytest.raises(ValueError, match="unsupported HTTP method 'BREW'"):
        Link(URL, method="BREW")
    with pytest.raises(ValueError, match="not both"):
        Link.post(URL, form={"a": "1"}, json={"a": 1})


def test_a_form_post_repeats_list_values() -> None:
    link = Link.post(URL, form={"q": "a b", "tag": ["x", "y"]})
    assert link.body == "q=a+b&tag=x&tag=y"
    assert link.headers == {"Content-Type": "application/x-www-form-urlencoded"}


def test_a_redis_entry_stored_before_payloads_reads_as_a_plain_get() -> None:
    old = {
        "url": URL,
        "fingerprint": URL_FINGERPRINT,
        "domain": "shop.test",
        "depth": 2,
        "priority": 1,
        "attempt": 0,
        "fetcher": "http",
        "parent": None,
        "hops": 0,
    }
    request = loads(orjson.dumps(old))
    assert (request.url, request.depth, request.data, request.method) == (URL, 2, {}, "GET")
    assert (request.body, request.headers) == ("", {})
