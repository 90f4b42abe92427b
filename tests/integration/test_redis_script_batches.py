"""Script calls made at once go to Redis together (``scripts.py``), each answered on its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from crawlfleet.frontier.accounting import report_counters
from crawlfleet.frontier.redis import CrawlKeys, RedisQueueStore
from crawlfleet.frontier.redis.scripts import Scripts
from crawlfleet.frontier.redis.views import counters_json, report_args
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome
from tests.fixtures.redis_server import RedisServer

pytestmark = pytest.mark.redis

NOW = 1_000_000.0
WIDE = DomainPolicy(delay_s=0.0, max_in_flight=1000)
HTTP = ("http",)


def req(n: int) -> CrawlRequest:
    return CrawlRequest(
        url=f"http://d{n % 7}.test/{n}", fingerprint=f"f{n}", domain=f"d{n % 7}.test"
    )


def report(lease: Lease, latency_s: float = 0.1) -> Report:
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "w", Outcome.OK, 200, 10, latency_s, 0, NOW)
    return Report(attempt, counters={"items.stored.product": 1})


@pytest.fixture
async def server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    return start_redis()


@pytest.fixture
async def raw(server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis.from_url(server.url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def store(server: RedisServer) -> AsyncIterator[RedisQueueStore]:
    opened = await RedisQueueStore.open(server.url, "batches")
    yield opened
    await opened.close()


async def connections(raw: Redis) -> int:
    return int((await raw.info("stats"))["total_connections_received"])


async def test_lease_ends_made_at_once_share_one_connection_and_each_gets_its_answer(
    store: RedisQueueStore, raw: Redis
) -> None:
    await store.add([req(n) for n in range(200)], Budget())
    leases = await store.claim(200, NOW, 60, WIDE, HTTP)
    stale = leases[0]
    assert await store.complete(stale, report(stale), WIDE)
    before = await connections(raw)
    ended = await asyncio.gather(*(store.complete(x, report(x), WIDE) for x in leases))
    # One call went alone, the other 199 waited for it and went as one pipeline; with a
    # connection per call (before the batches) this opened up to 200 connections.
    assert await connections(raw) - before <= 1
    assert [bool(e) for e in ended] == [False] + [True] * 199
    assert (await store.counts()).done == 200
    assert len(await store.pending_attempts(1000)) == 200


async def test_a_failing_call_fails_alone_in_its_batch(raw: Redis) -> None:
    scripts = Scripts(raw, CrawlKeys("alone"))
    await raw.set(CrawlKeys("alone").key("epoch"), "e1")
    calls = [scripts.run("set_strategy", "e1", "a.test", '{"rung": "x"}') for _ in range(5)]
    calls.insert(2, scripts.run("set_strategy", "another epoch", "a.test", "{}"))
    answers = await asyncio.gather(*calls, return_exceptions=True)
    failed = [a for a in answers if isinstance(a, Exception)]
    assert len(failed) == 1
    assert "FRONTIER_LOST" in str(failed[0])
    assert isinstance(answers[2], Exception)


async def test_a_batch_after_script_flush_loads_the_scripts_again(
    store: RedisQueueStore, raw: Redis
) -> None:
    await store.add([req(n) for n in range(40)], Budget())
    leases = await store.claim(40, NOW, 60, WIDE, HTTP)
    await raw.script_flush()
    ended = await asyncio.gather(*(store.complete(x, report(x), WIDE) for x in leases))
    assert all(ended)
    assert (await store.counts()).done == 40


async def test_a_cancelled_caller_leaves_the_others_answered_and_the_next_calls_sent(
    store: RedisQueueStore,
) -> None:
    await store.add([req(n) for n in range(30)], Budget())
    leases = await store.claim(30, NOW, 60, WIDE, HTTP)
    tasks = [asyncio.ensure_future(store.complete(x, report(x), WIDE)) for x in leases[:20]]
    await asyncio.sleep(0)
    tasks[5].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[5], asyncio.CancelledError)
    assert all(results[:5])
    assert all(results[6:])
    later = await asyncio.gather(*(store.complete(x, report(x), WIDE) for x in leases[20:]))
    assert all(later)
    assert (await store.counts()).done in (29, 30)  # the cancelled one may have been sent


async def evalsha_calls(raw: Redis) -> int:
    stats = await raw.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_lease_ends_sent_together_are_one_script_call_and_count_as_if_alone(
    server: RedisServer, raw: Redis
) -> None:
    """The lease ends a pipeline carries go as one ``finish`` call (decision 0032): the same
    counters, to the last bit of a float sum, as the same ends made one at a time."""
    latencies = [0.1 + n / 7 for n in range(60)]  # sums that round differently by order
    stats = []
    for name, together in (("alone", False), ("together", True)):
        store = await RedisQueueStore.open(server.url, name)
        await store.add([req(n) for n in range(60)], Budget())
        leases = sorted(await store.claim(60, NOW, 60, WIDE, HTTP), key=lambda x: x.token)
        ends = [
            (lease, report(lease, latency))
            for lease, latency in zip(leases, latencies, strict=True)
        ]
        calls_before = await evalsha_calls(raw)
        if together:
            assert all(await asyncio.gather(*(store.complete(x, r, WIDE) for x, r in ends)))
            assert await evalsha_calls(raw) - calls_before <= 2  # 60 lease ends, one or two calls
        else:
            for lease, done in ends:
                assert await store.complete(lease, done, WIDE)
        assert (await store.counts()).done == 60
        stats.append(
            [
                (await store.stats()).counters,
                *[(await store.domain(f"d{n}.test", WIDE)).stats.counters for n in range(7)],
            ]
        )
        await store.close()
    assert stats[0] == stats[1]
    assert stats[1][0]["items.stored.product"] == 60


async def crawl_state(raw: Redis, crawl: str) -> dict[str, object]:
    """Every key of ``crawl`` but its epoch, named without the crawl, with what it holds."""
    prefix = f"{CrawlKeys(crawl).prefix}:"
    state: dict[str, object] = {}
    async for key in raw.scan_iter(match=f"{prefix}*"):
        name = key.removeprefix(prefix)
        kind = await raw.type(key)
        if name == "epoch":
            continue
        if kind == "hash":
            state[name] = await raw.hgetall(key)
        elif kind == "zset":
            state[name] = await raw.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            state[name] = await raw.lrange(key, 0, -1)
        elif kind == "set":
            state[name] = sorted(await raw.smembers(key))
        else:
            state[name] = await raw.get(key)
    return state


async def test_lease_ends_in_one_call_leave_the_store_as_one_at_a_time(
    server: RedisServer, raw: Redis
) -> None:
    """Completions, retries and burials of leases of parked domains (two in flight each),
    ended in one ``finish`` call, leave every key of the crawl as the same ends made one at
    a time: what the call leaves to its end (deletes, ready scores, unparking, counts, the
    attempt rows: decision 0034) comes out the same."""
    narrow = DomainPolicy(delay_s=0.0, max_in_flight=2)
    states = []
    for name, together in (("alone", False), ("together", True)):
        store = await RedisQueueStore.open(server.url, name)
        await store.add([req(n) for n in range(40)], Budget())
        leases = sorted(await store.claim(40, NOW, 60, narrow, HTTP), key=lambda x: x.token)
        assert len(leases) == 14  # seven domains, parked at two each
        first, *rest = leases
        assert await store.complete(first, report(first), narrow)  # Redis has the script now
        ends = []
        for n, lease in enumerate(rest):
            if n % 3 == 0:
                ends.append(store.retry(lease, NOW + n, f"error {n}", report(lease), narrow))
            elif n % 5 == 0:
                ends.append(store.bury(lease, f"gone {n}", NOW, report(lease), narrow))
            else:
                ends.append(store.complete(lease, report(lease), narrow))
        calls_before = await evalsha_calls(raw)
        if together:
            assert all(await asyncio.gather(*ends))
            assert await evalsha_calls(raw) - calls_before == 1
        else:
            for end in ends:
                assert await end
        states.append(await crawl_state(raw, name))
        await store.close()
    assert states[0] == states[1]
    assert states[1]["counts"]["leased"] == "0"


async def test_a_lease_end_that_fails_fails_alone_in_its_script_call(
    store: RedisQueueStore, raw: Redis
) -> None:
    """A lease end whose arguments break ``finish.lua`` gets its error; the others of the same
    call end and count in full."""
    await store.add([req(n) for n in range(12)], Budget())
    first, *leases = await store.claim(12, NOW, 60, WIDE, HTTP)
    assert await store.complete(first, report(first), WIDE)  # Redis has the script now
    bad = leases[5]
    ending = report_args(report(bad), WIDE)
    counters = counters_json(report_counters(report(bad)))
    ending[ending.index(counters)] = "not JSON"  # the counters, wherever finish.lua reads them
    args = [bad.token, "complete", 0.0, "", "", *ending]
    calls = [store.complete(x, report(x), WIDE) for x in leases if x is not bad]
    calls.insert(5, store._run("finish", *args))
    calls_before = await evalsha_calls(raw)
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert await evalsha_calls(raw) - calls_before == 1  # the eleven in one call
    assert [isinstance(a, Exception) for a in answers] == [False] * 5 + [True] + [False] * 5
    assert "invalid token" in str(answers[5])  # cjson, reading the counters
    assert (await store.stats()).counters["attempts"] == 11
    assert len(await store.pending_attempts(100)) == 11


async def test_lease_ends_on_another_epoch_are_not_joined_to_the_current_ones(
    store: RedisQueueStore,
) -> None:
    """A lease end sent with another epoch (a crawl deleted and created again meanwhile)
    fails alone, not with the lease ends of the current epoch around it."""
    await store.add([req(n) for n in range(7)], Budget())
    first, *leases = await store.claim(7, NOW, 60, WIDE, HTTP)
    assert await store.complete(first, report(first), WIDE)  # Redis has the script now

    def end(lease: Lease) -> list[str | int | float]:
        return [lease.token, "complete", 0.0, "", "", *report_args(report(lease), WIDE)]

    epochs = [store.epoch] * 3 + ["an earlier epoch"] + [store.epoch] * 2
    scripts = store._crawl.scripts  # the calls below join one batch, in this order
    calls = [scripts.run("finish", e, *end(x)) for e, x in zip(epochs, leases, strict=True)]
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert [isinstance(a, Exception) for a in answers] == [False] * 3 + [True] + [False] * 2
    assert "FRONTIER_LOST" in str(answers[3])
    assert (await store.counts()).done == 6
