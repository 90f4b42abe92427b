"""The partitioned frontier on a real Redis Cluster: keys, slots, budget, partition count,
URLs and safety checks on every node (the contract suite covers the ``QueueStore`` rules)."""

from __future__ import annotations

import asyncio
import fnmatch
import re
from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
import redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from crawlfleet.errors import ConfigError, StateError
from crawlfleet.frontier.redis.crawl_store import open_crawl_store
from crawlfleet.frontier.redis.keys import FAMILIES, FIXED_KEYS, hash_tag
from crawlfleet.frontier.redis.partitioned import PartitionedQueueStore
from crawlfleet.frontier.redis.routing import crawl_prefix, partition_of, partition_prefix
from crawlfleet.frontier.redis.store import RedisQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy
from crawlfleet.models import CrawlRequest
from crawlfleet.redisdb import connect
from crawlfleet.redisurl import check_redis_url
from crawlfleet.runtime.backends import check_redis, frontier_prefix, partition_pattern
from crawlfleet.runtime.celery.app import check_broker
from tests.fixtures.redis_cluster import LocalCluster

pytestmark = pytest.mark.redis
NOW = 1_000_000.0
POLICY = DomainPolicy(delay_s=0.0, max_in_flight=100)


def req(n: int, domain: str) -> CrawlRequest:
    return CrawlRequest(f"http://{domain}/{n}", f"{domain}-{n}", domain)


@pytest.fixture
async def raw(redis_cluster_url: str) -> AsyncIterator[RedisCluster]:
    client = connect(redis_cluster_url, decode_responses=True)
    assert isinstance(client, RedisCluster)
    yield client
    await client.aclose()


async def test_partitions_spread_over_the_nodes_with_documented_single_slot_keys(
    redis_cluster_url: str, raw: RedisCluster
) -> None:
    crawl = f"keys-{uuid4().hex[:8]}"
    store = await open_crawl_store(redis_cluster_url, crawl, partitions=8, dedup="bloom",
                                   bloom_capacity=8000)  # fmt: skip
    assert isinstance(store, PartitionedQueueStore)
    domains = [f"d{i}.test" for i in range(40)]
    assert await store.add([req(1, d) for d in domains], Budget(max_total=30)) == 30
    leases = await store.claim(100, NOW, 60, POLICY, ["http"])
    assert len(leases) == 30
    await store.reap(NOW + 100, 0)
    await store.close()

    found = [str(key) async for key in raw.scan_iter(match=f"crawlfleet:{{{crawl}*")]
    fixed, families = "|".join(FIXED_KEYS), "|".join(FAMILIES)
    known = re.compile(rf"crawlfleet:\{{{crawl}(?::\d+)?\}}:(?:(?:{fixed})|(?:{families}):.+)")
    assert [key for key in found if not known.fullmatch(key)] == []
    tags = {hash_tag(key) for key in found}
    assert tags == {crawl, *(f"{crawl}:{p}" for p in range(8))}
    crawl_wide = {key.rsplit(":", 1)[1] for key in found if hash_tag(key) == crawl}
    assert crawl_wide == {"partitions", "epoch", "budget"}
    nodes = {raw.get_node_from_key(key).name for key in found}
    assert len(nodes) == 3  # one crawl spread over every primary
    for tag in tags:
        assert len({key_slot(k.encode()) for k in found if hash_tag(k) == tag}) == 1


async def test_max_total_holds_across_partitions_under_concurrent_adds(
    redis_cluster_url: str,
) -> None:
    crawl = f"budget-{uuid4().hex[:8]}"
    stores = [await open_crawl_store(redis_cluster_url, crawl, partitions=4) for _ in range(4)]
    batches = [[req(n, f"w{w}-d{n % 9}.test") for n in range(60)] for w in range(4)]
    budget = Budget(max_total=100)
    admitted = await asyncio.gather(
        *(s.add(b, budget) for s, b in zip(stores, batches, strict=True))
    )
    counts = await stores[0].counts()
    assert sum(admitted) == counts.queued == counts.seen == 100
    assert await stores[1].add([req(999, "late.test")], budget) == 0
    for store in stores:
        await store.close()


async def test_a_crawl_keeps_the_partition_count_it_was_created_with(
    redis_cluster_url: str,
) -> None:
    crawl = f"count-{uuid4().hex[:8]}"
    first = await open_crawl_store(redis_cluster_url, crawl, partitions=3)
    await first.add([req(1, "a.test"), req(1, "b.test")], Budget())
    with pytest.raises(StateError, match=r"has 3 frontier partitions, not 5.*--fresh"):
        await open_crawl_store(redis_cluster_url, crawl, partitions=5)
    reader = await open_crawl_store(redis_cluster_url, crawl)  # status, dlq, workers
    assert isinstance(reader, PartitionedQueueStore)
    assert len(reader.partitions) == 3
    assert (await reader.counts()).queued == 2
    for store in (first, reader):
        await store.close()


async def test_one_partition_is_the_plain_store_under_the_crawl_prefix(
    redis_cluster_url: str, raw: RedisCluster
) -> None:
    crawl = f"one-{uuid4().hex[:8]}"
    store = await open_crawl_store(redis_cluster_url, crawl)
    assert isinstance(store, RedisQueueStore)
    assert store.keys.prefix == f"crawlfleet:{{{crawl}}}"
    assert await raw.get(f"crawlfleet:{{{crawl}}}:partitions") == "1"
    await store.close()


def test_domains_route_to_stable_partitions() -> None:
    assert [partition_of(d, 4) for d in ("a.test", "b.test", "c.test")] == [
        partition_of(d, 4) for d in ("a.test", "b.test", "c.test")
    ]
    spread = {partition_of(f"d{i}.test", 4) for i in range(100)}
    assert spread == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+cluster://", "at least one host:port"),
        ("redis+cluster://a:1,b", "'b' is not host:port"),
        ("redis+cluster://a:1/2", "database 0 only"),
        ("redis+sentinel://a:1", "must start with redis://"),
    ],
)
def test_bad_cluster_urls_are_one_line_config_errors(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        check_redis_url(url)


def test_a_cluster_url_with_credentials_and_several_seeds_is_accepted() -> None:
    url = "rediss+cluster://user:s3cret@10.0.0.1:7000,10.0.0.2:7001"
    assert check_redis_url(url) == url
    client = connect(url)
    assert isinstance(client, RedisCluster)
    seeds = {(n.host, n.port) for n in client.startup_nodes}
    assert seeds == {("10.0.0.1", 7000), ("10.0.0.2", 7001)}  # never connected to
    assert client.connection_kwargs["password"] == "s3cret"


def test_a_cluster_cannot_be_the_celery_broker(redis_cluster_url: str) -> None:
    with pytest.raises(ConfigError, match="cannot use a Redis Cluster"):
        check_broker(redis_cluster_url)


async def test_the_safety_check_runs_on_every_node(redis_cluster: LocalCluster) -> None:
    await check_redis(redis_cluster.url, accept_unsafe=False)
    node = redis_cluster.nodes[2]
    with redis.Redis(port=node.port) as client:
        client.config_set("appendonly", "no")
    try:
        with pytest.raises(StateError, match=rf"127.0.0.1:{node.port}: appendonly is 'no'"):
            await check_redis(redis_cluster.url, accept_unsafe=False)
    finally:
        with redis.Redis(port=node.port) as client:
            client.config_set("appendonly", "yes")


async def test_claims_visit_the_partitions_in_turn(redis_cluster_url: str) -> None:
    crawl = f"fair-{uuid4().hex[:8]}"
    store = await open_crawl_store(redis_cluster_url, crawl, partitions=4)
    assert isinstance(store, PartitionedQueueStore)
    by_partition: dict[int, list[str]] = {p: [] for p in range(4)}
    for n in range(400):
        domain = f"d{n}.test"
        if len(by_partition[partition_of(domain, 4)]) < 5:
            by_partition[partition_of(domain, 4)].append(domain)
    await store.add([req(1, d) for ds in by_partition.values() for d in ds], Budget())
    firsts = []
    for _ in range(8):  # one lease a claim: each partition gives the first pick in turn
        (lease,) = await store.claim(1, NOW, 60, POLICY, ["http"])
        firsts.append(partition_of(lease.request.domain, 4))
    assert sorted(firsts) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert firsts[:4] == firsts[4:]
    await store.close()


def test_the_runtime_and_the_store_agree_on_the_prefixes() -> None:
    assert frontier_prefix("shop") == crawl_prefix("shop") == "crawlfleet:{shop}"
    assert fnmatch.fnmatchcase(partition_prefix("shop", 11) + ":req", partition_pattern("shop"))
    assert not fnmatch.fnmatchcase(crawl_prefix("shop") + ":req", partition_pattern("shop"))
    assert not fnmatch.fnmatchcase(partition_prefix("shop2", 1) + ":req", partition_pattern("shop"))
