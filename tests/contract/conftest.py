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
    module = pytest.importorskip("crawlfleet.frontier.redis.queue", exc_type=ImportError)
    try:
        redis_url = request.getfixturevalue("redis_url")
    except pytest.FixtureLookupError:
        pytest.skip("no redis_url fixture (tests/fixtures/redis_server.py)")
    store: QueueStore = await module.RedisQueueStore.open(redis_url, prefix=f"test:{uuid4().hex}")
    return store


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[QueueStore]:
    impl: QueueStore
    if request.param == "memory":
        impl = MemoryQueueStore()
    elif request.param == "sqlite":
        impl = await SqliteQueueStore.open(tmp_path / "state.sqlite")
    else:
        impl = await _redis_store(request)
    yield impl
    await impl.close()
