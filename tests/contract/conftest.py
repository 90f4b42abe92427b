"""The ``store`` fixture: one contract suite over every ``QueueStore`` implementation.

A store holds its crawl's default domain policy: ``store`` holds ``FREE``; a test of another
policy opens its store with ``store_for(policy)`` (a new, empty store of the same backend).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import DomainPolicy
from tests.contract.test_queue_store import FREE, StoreFor


async def _redis_store(request: pytest.FixtureRequest, policy: DomainPolicy) -> QueueStore:
    module = pytest.importorskip("crawlfleet.frontier.redis.store", exc_type=ImportError)
    try:
        redis_url = request.getfixturevalue("redis_url")
    except pytest.FixtureLookupError:
        pytest.skip("no redis_url fixture (tests/fixtures/redis_server.py)")
    store: QueueStore = await module.RedisQueueStore.open(
        redis_url, prefix=f"test:{uuid4().hex}", policy=policy
    )
    return store


async def _cluster_store(request: pytest.FixtureRequest, policy: DomainPolicy) -> QueueStore:
    module = pytest.importorskip("crawlfleet.frontier.redis.crawl_store", exc_type=ImportError)
    url = request.getfixturevalue("redis_cluster_url")
    store: QueueStore = await module.open_crawl_store(
        url, f"test-{uuid4().hex}", policy=policy, partitions=CLUSTER_PARTITIONS
    )
    return store


CLUSTER_PARTITIONS = 4
"""Partitions of the Redis Cluster store under test: more than the cluster's 3 primaries."""


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=pytest.mark.redis),
    ]
)
async def store_for(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFor]:
    opened: list[QueueStore] = []

    async def open_store(policy: DomainPolicy) -> QueueStore:
        impl: QueueStore
        if request.param == "memory":
            impl = MemoryQueueStore(policy=policy)
        elif request.param == "sqlite":
            name = f"state-{len(opened)}.sqlite" if opened else "state.sqlite"
            impl = await SqliteQueueStore.open(tmp_path / name, policy=policy)
        elif request.param == "redis":
            impl = await _redis_store(request, policy)
        else:
            impl = await _cluster_store(request, policy)
        opened.append(impl)
        return impl

    yield open_store
    for impl in opened:
        await impl.close()


@pytest.fixture
async def store(store_for: StoreFor) -> QueueStore:
    return await store_for(FREE)
