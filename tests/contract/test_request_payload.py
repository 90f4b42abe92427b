"""A request's payload (context, method, body, headers) survives every store, through every
state change: add -> claim, retry, an expired lease, death and requeue."""

from __future__ import annotations

from dataclasses import replace

from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.models import CrawlRequest
from tests.contract.test_queue_store import (
    LEASE_S,
    MAX_RETRIES,
    NO_BUDGET,
    T0,
    bury,
    claim,
    req,
    retry,
)

# Values a JSON round trip through Lua's cjson would change: an empty list (becomes an
# object), a float of 17 digits (rounded to 14), a nested empty object, text outside ASCII.
CONTEXT = {
    "category": "Poetry & Prose — ünïcode",
    "tags": [],
    "ratio": 0.1234567890123456,
    "big": 2**53 + 1,
    "nested": {"empty": {}, "list": [1, "two", None, True]},
}
HEADERS = {"Content-Type": "application/x-www-form-urlencoded", "X-Token": "abc"}


def post(name: str = "search") -> CrawlRequest:
    return replace(
        req(name),
        data=CONTEXT,
        method="POST",
        body="q=garden&csrf_token=t%C3%B6k&page=2",
        headers=HEADERS,
    )


async def test_payload_survives_add_and_claim(store: QueueStore) -> None:
    original = post()
    plain = req("plain")
    await store.add([original, plain], NO_BUDGET)
    by_url = {lease.request.url: lease.request for lease in await claim(store)}
    assert by_url == {original.url: original, plain.url: plain}
    assert by_url[plain.url].data == {}
    assert by_url[plain.url].method == "GET"


async def test_payload_survives_a_retry(store: QueueStore) -> None:
    await store.add([post()], NO_BUDGET)
    (lease,) = await claim(store)
    assert await retry(store, lease, T0 + 5, "HTTP 503")
    (again,) = await claim(store, now=T0 + 10)
    assert again.request == replace(post(), attempt=1)


async def test_payload_survives_an_expired_lease(store: QueueStore) -> None:
    await store.add([post()], NO_BUDGET)
    await claim(store)
    assert await store.reap(T0 + LEASE_S + 1, MAX_RETRIES) == 1
    (again,) = await claim(store, now=T0 + LEASE_S + 2)
    assert again.request == replace(post(), attempt=1)


async def test_payload_survives_death_and_requeue(store: QueueStore) -> None:
    await store.add([post()], NO_BUDGET)
    (lease,) = await claim(store)
    assert await bury(store, lease, "HTTP 500", T0)
    (letter,) = await store.dead_letters()
    assert letter.request == post()
    assert await store.requeue_dead() == 1
    (again,) = await claim(store, now=T0 + 1)
    assert again.request == post()
