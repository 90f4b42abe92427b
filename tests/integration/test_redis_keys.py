"""Every Redis key of a crawl is documented in keys.py and carries the crawl's hash tag."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from crawlfleet.frontier.redis import CrawlKeys, RedisQueueStore
from crawlfleet.frontier.redis.keys import FAMILIES, FIXED_KEYS, hash_tag, tagged
from crawlfleet.frontier.redis.scripts import read_sources
from crawlfleet.frontier.store_types import Budget, DelaySource, DomainPolicy, Report, Signal
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome

NOW = 1_000_000.0
POLICY = DomainPolicy(delay_s=0.0, max_in_flight=1)
LUA = Path(__file__).parents[2] / "src" / "crawlfleet" / "frontier" / "redis" / "lua"


def req(n: int, domain: str, fetcher: str = "http") -> CrawlRequest:
    return CrawlRequest(f"http://{domain}/{n}", f"{domain}-{n}", domain, fetcher=fetcher)


def report(lease: Lease, signal: Signal = Signal.NONE) -> Report:
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "w", Outcome.OK, 200, 5, 0.1, 0, NOW)
    return Report(attempt, signal, "why", {"items.stored.page": 1}, NOW + 5)


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


def documented(keys: CrawlKeys) -> re.Pattern[str]:
    """Any key name keys.py's table describes, for this crawl."""
    prefix = re.escape(keys.prefix)
    fixed = "|".join(FIXED_KEYS)
    families = "|".join(FAMILIES)
    return re.compile(rf"{prefix}:(?:(?:{fixed})|(?:{families}):.+)")


@pytest.mark.redis
@pytest.mark.parametrize("dedup", ["exact", "bloom"])
async def test_a_workout_leaves_only_documented_keys_with_the_crawl_tag(
    redis_url: str, raw: Redis, dedup: str
) -> None:
    prefix = f"crawlfleet:{{keys-{dedup}}}"
    store = await RedisQueueStore.open(
        redis_url, prefix, dedup=dedup, bloom_capacity=1000, policy=POLICY
    )
    batch = [req(1, "a.test"), req(2, "a.test", "browser"), req(3, "b.test:8080"), req(4, "c")]
    await store.add(batch, Budget())
    await store.start(NOW)
    leases = await store.claim(10, NOW, 60, ["http", "browser"])
    await store.retry(leases[0], NOW + 5, "boom", report(leases[0], Signal.BLOCK))
    await store.bury(leases[1], "dead", NOW, report(leases[1]))
    await store.complete(leases[2], report(leases[2], Signal.SUCCESS))
    await store.claim(10, NOW + 10, 60, ["browser", "file"])
    await store.reap(NOW + 100, 0)
    await store.set_delay("a.test", 2.0, DelaySource.ROBOTS)
    await store.set_concurrency("b.test:8080", 3)
    await store.set_strategy("d.test", {"fetcher": "browser"})
    await store.add_counters("e.test", {"items.invalid.page": 1})
    await store.requeue_dead()
    await store.next_ready_at(NOW, ["http", "browser", "file"])
    await store.domains()
    await store.ack_attempts(1)
    await store.close()

    found = [str(key) async for key in raw.scan_iter(match=CrawlKeys(prefix).pattern)]
    assert len(found) > 15
    known = documented(CrawlKeys(prefix))
    assert [key for key in found if not known.fullmatch(key)] == []
    assert {hash_tag(key) for key in found} == {f"keys-{dedup}"}
    assert len({key_slot(key.encode()) for key in found}) == 1  # redis-py's Cluster CRC16


def test_a_prefix_without_a_hash_tag_is_wrapped_in_one() -> None:
    assert tagged("crawlfleet:{abc}") == "crawlfleet:{abc}"
    assert tagged("crawlfleet:abc") == "{crawlfleet:abc}"
    assert tagged("x:{}") == "{x:{}}"  # an empty tag is no tag for Redis Cluster
    assert CrawlKeys("test:123").key("seen") == "{test:123}:seen"
    assert hash_tag(CrawlKeys("test:123").lane("http", "a.test:80")) == "test:123"
    assert CrawlKeys("a*b:{c}").pattern == "a\\*b:{c}:*"


def test_the_loader_refuses_a_header_naming_an_unknown_key(tmp_path: Path) -> None:
    (tmp_path / "_lib.lua").write_text((LUA / "_lib.lua").read_text())
    (tmp_path / "bad.lua").write_text("-- KEYS[1] epoch\n-- KEYS[2] nonsense\nreturn 1\n")
    with pytest.raises(ValueError, match=r"bad.lua: unknown keys \['nonsense'\]"):
        read_sources(tmp_path)


def test_the_loader_refuses_a_script_using_a_key_its_header_omits(tmp_path: Path) -> None:
    (tmp_path / "_lib.lua").write_text((LUA / "_lib.lua").read_text())
    # claim's helpers need more than its header says once a line is removed.
    body = (LUA / "claim.lua").read_text().replace("-- KEYS[13] domain\n", "")
    (tmp_path / "claim.lua").write_text(body)
    with pytest.raises(ValueError, match=r"claim.lua uses keys its header does not name: "):
        read_sources(tmp_path)
    (tmp_path / "claim.lua").write_text("-- KEYS[1] epoch\n-- KEYS[2] req\nreturn K.dead\n")
    with pytest.raises(ValueError, match=r"\['dead'\]"):
        read_sources(tmp_path)


def test_every_script_that_writes_checks_the_epoch_first() -> None:
    read_only = {"dead_letters", "next_ready_at", "open"}
    for name in set(read_sources()) - read_only:
        code = [
            line
            for line in (LUA / f"{name}.lua").read_text().splitlines()
            if line and not line.startswith("--")
        ]
        assert code[0] == "check_epoch()", name


def test_every_script_that_counts_writes_its_counts() -> None:
    """Counts (``count``, by ``end_lease`` and ``set_seen`` too) and counters
    (``add_counters``) are summed in the call, and ended leases deleted at its end: a script
    that makes them writes them before it ends, or they are lost."""
    writers = {
        "write_counts": ("count", "end_lease", "set_seen"),
        "write_counters": ("add_counters",),
        "delete_ended": ("end_lease",),
    }
    for name in set(read_sources()):
        body = "\n".join(
            line
            for line in (LUA / f"{name}.lua").read_text().splitlines()
            if not line.startswith("--")
        )
        for writer, makers in writers.items():
            if any(re.search(rf"\b{maker}\(", body) for maker in makers):
                assert f"\n{writer}()\n" in body, (name, writer)
