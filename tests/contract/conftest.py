"""The ``store`` fixture: one contract suite over every ``QueueStore`` implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore


async def _redis_store(request: pytest.FixtureRequest) -> QueueStore:
    module = pytest.importorskip("crawlfleet.frontier.redis.store", exc_type=ImportError)
    try:
        redis_url = request.getfixturevalue("redis_url")
    except pytest.FixtureLookupError:
        pytest.skip("no redis_url fixture (tests/fixtures/redis_server.py)")
    store: QueueStore = await module.RedisQueueStore.open(redis_url, prefix=f"test:{uuid4().hex}")
    return store


async def _cluster_store(request: pytest.FixtureRequest) -> QueueStore:
    module = pytest.importorskip("crawlfleet.frontier.redis.crawl_store", exc_type=ImportError)
    url = request.getfixturevalue("redis_cluster_url")
    store: QueueStore = await module.open_crawl_store(
        url, f"test-{uuid4().hex}", partitions=CLUSTER_PARTITIONS
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
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[QueueStore]:
    impl: QueueStore
    if request.param == "memory":
        impl = MemoryQueueStore()
    elif request.param == "sqlite":
        impl = await SqliteQueueStore.open(tmp_path / "state.sqlite")
    elif request.param == "redis":
        impl = await _redis_store(request)
    else:
        impl = await _cluster_store(request)
    yield impl
    await impl.close()
