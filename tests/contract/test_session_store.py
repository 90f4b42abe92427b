"""One contract suite over every ``SessionStore``: memory, SQLite (state file), Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.sessions.memory import MemorySessionStore
from crawlfleet.sessions.protocols import SessionStore
from tests.contract.test_queue_store import FREE


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemorySessionStore()
        return
    if request.param == "sqlite":
        from crawlfleet.sessions.sqlite import SqliteSessionStore

        queue = await SqliteQueueStore.open(
            tmp_path / "state.sqlite", policy=FREE
        )  # shares the file
        store = await SqliteSessionStore.open(tmp_path / "state.sqlite")
        yield store
        await store.close()
        await queue.close()
        return
    from crawlfleet.sessions.redis import RedisSessionStore

    redis_store = RedisSessionStore.open(
        request.getfixturevalue("redis_url"), f"crawlfleet:{{t{uuid4().hex}}}"
    )
    yield redis_store
    await redis_store.close()


async def test_no_session_until_saved(sessions: SessionStore) -> None:
    assert await sessions.load("shop.example") is None


async def test_save_replaces_whole_with_a_new_version(sessions: SessionStore) -> None:
    first = await sessions.save("shop.example", {"sessionid": "a", "csrftoken": "t"})
    assert await sessions.load("shop.example") == first
    second = await sessions.save("shop.example", {"sessionid": "b"})
    assert second.version != first.version
    loaded = await sessions.load("shop.example")
    assert loaded is not None
    assert (dict(loaded.cookies), loaded.version) == ({"sessionid": "b"}, second.version)


async def test_domains_are_apart_and_drop_forgets_one(sessions: SessionStore) -> None:
    await sessions.save("a.example", {"s": "1"})
    await sessions.save("b.example", {"s": "2"})
    await sessions.drop("a.example")
    await sessions.drop("never.example")
    assert await sessions.load("a.example") is None
    kept = await sessions.load("b.example")
    assert kept is not None
    assert dict(kept.cookies) == {"s": "2"}


async def test_sqlite_sessions_survive_a_reopen(tmp_path: Path) -> None:
    from crawlfleet.sessions.sqlite import SqliteSessionStore

    store = await SqliteSessionStore.open(tmp_path / "state.sqlite")
    saved = await store.save("shop.example", {"sessionid": "x"})
    await store.close()
    again = await SqliteSessionStore.open(tmp_path / "state.sqlite")
    assert await again.load("shop.example") == saved
    await again.close()
