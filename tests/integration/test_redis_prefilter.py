"""The Redis store's seen prefilter: links it saw seen are not sent again, and it stays exact."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from uuid import uuid4

import pytest
from redis.asyncio import Redis

from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.frontier.store_types import Budget
from crawlfleet.redisdb import open_client
from tests.contract.test_queue_store import NO_BUDGET, req

pytestmark = pytest.mark.redis

Open = Callable[..., Awaitable[RedisQueueStore]]


@pytest.fixture
async def open_store(redis_url: str) -> AsyncIterator[Open]:
    """``await open_store(prefix=None, capacity=None)``: a store of one crawl on the test's
    Redis (a new crawl unless ``prefix`` names one), closed when the test ends."""
    stores: list[RedisQueueStore] = []

    async def opener(prefix: str | None = None, capacity: int | None = None) -> RedisQueueStore:
        name = prefix or f"prefilter:{{{uuid4().hex}}}"
        if capacity is None:
            store = await RedisQueueStore.open(redis_url, name)
        else:
            client = await open_client(redis_url)
            store = await RedisQueueStore.attach(client, name, "test", prefilter_capacity=capacity)
        stores.append(store)
        return store

    yield opener
    for store in stores:
        await store.close()


@pytest.fixture
async def scripts_run(redis_url: str) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """``await scripts_run()``: how many scripts the test's Redis has run (every store call
    that sends requests is one script)."""
    client = Redis.from_url(redis_url, decode_responses=True)

    async def count() -> int:
        stats = await client.info("commandstats")
        return sum(
            int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval")
        )

    yield count
    await client.aclose()


async def test_links_seen_before_are_answered_without_a_script(
    open_store: Open, scripts_run: Callable[[], Awaitable[int]]
) -> None:
    store = await open_store()
    nav = [req(f"nav-{n}") for n in range(10)]
    assert await store.add(nav, NO_BUDGET) == 10
    before = await scripts_run()
    assert await store.add(nav, NO_BUDGET) == 0
    assert await scripts_run() == before  # all ten known: nothing sent
    assert await store.add([*nav, req("new")], NO_BUDGET) == 1
    assert await scripts_run() == before + 1  # one script, for "new" alone
    assert (await store.counts()).queued == 11


async def test_links_another_worker_admitted_are_learnt_from_the_script_s_answer(
    open_store: Open, scripts_run: Callable[[], Awaitable[int]]
) -> None:
    one = await open_store()
    two = await open_store(one.keys.prefix)  # a second worker of the same crawl
    links = [req(f"p-{n}") for n in range(5)]
    assert await one.add(links, NO_BUDGET) == 5
    assert await two.add(links, NO_BUDGET) == 0  # Redis answers: seen
    before = await scripts_run()
    assert await two.add(links, NO_BUDGET) == 0
    assert await scripts_run() == before


async def test_a_request_the_budget_refused_is_not_taken_for_seen(open_store: Open) -> None:
    store = await open_store()
    first, second = req("first"), req("second")
    assert await store.add([first, second], Budget(max_total=1)) == 1
    assert await store.add([second], NO_BUDGET) == 1  # refused, so never seen: admitted now

    other = req("x", domain="b.test")
    one_a_domain = Budget(max_per_domain=1)
    assert await store.add([req("y", domain="b.test"), other], one_a_domain) == 1
    assert await store.add([other], NO_BUDGET) == 1
    assert (await store.counts()).seen == 4


async def test_the_prefilter_is_bounded_and_a_forgotten_link_is_asked_again(
    open_store: Open, scripts_run: Callable[[], Awaitable[int]]
) -> None:
    store = await open_store(capacity=2)
    a, b, c = req("a"), req("b"), req("c")
    assert await store.add([a, b, c], NO_BUDGET) == 3  # "a" is the least recent: dropped
    before = await scripts_run()
    assert await store.add([b, c], NO_BUDGET) == 0
    assert await scripts_run() == before
    assert await store.add([a], NO_BUDGET) == 0  # asked again, and Redis says seen
    assert await scripts_run() == before + 1


async def test_a_crawl_started_afresh_under_its_prefix_admits_its_links_again(
    open_store: Open, redis_url: str
) -> None:
    old = await open_store()
    links = [req(f"p-{n}") for n in range(3)]
    assert await old.add(links, NO_BUDGET) == 3
    client = Redis.from_url(redis_url)
    await client.delete(*[key async for key in client.scan_iter(match=old.keys.pattern)])
    await client.aclose()
    new = await open_store(old.keys.prefix)  # ``--fresh``: the next run's workers open anew
    assert new.epoch != old.epoch
    assert await new.add(links, NO_BUDGET) == 3
