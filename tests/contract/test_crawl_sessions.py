"""One contract suite over every ``CrawlSessionStore``: memory, SQLite (state file), Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from crawlfleet.sessions.memory import MemorySessionStore
from crawlfleet.sessions.protocols import CrawlSession, CrawlSessionStore


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def sessions(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[CrawlSessionStore]:
    if request.param == "memory":
        yield MemorySessionStore()
        return
    if request.param == "sqlite":
        from crawlfleet.sessions.sqlite import SqliteSessionStore

        store = await SqliteSessionStore.open(tmp_path / "state.sqlite")
        yield store
        await store.close()
        return
    from crawlfleet.sessions.redis import RedisSessionStore

    redis_store = RedisSessionStore.open(
        request.getfixturevalue("redis_url"), f"crawlfleet:{{t{uuid4().hex}}}"
    )
    yield redis_store
    await redis_store.close()


def session(sid: str, domain: str = "shop.example", **cookies: str) -> CrawlSession:
    return CrawlSession(sid, domain, "px-0123456789", 1, "chrome-131-linux", 2, cookies)


async def test_a_domain_without_sessions_has_none(sessions: CrawlSessionStore) -> None:
    assert await sessions.crawl_sessions("shop.example") == []


async def test_put_replaces_by_id_and_keeps_cookies(sessions: CrawlSessionStore) -> None:
    await sessions.put(session("s1"))
    await sessions.put(session("s2"))
    await sessions.put(session("s1", guard_pass="x", other="y"))
    found = {s.id: s for s in await sessions.crawl_sessions("shop.example")}
    assert set(found) == {"s1", "s2"}
    assert found["s1"] == session("s1", guard_pass="x", other="y")
    assert dict(found["s1"].cookies) == {"guard_pass": "x", "other": "y"}


async def test_domains_are_apart_and_retire_forgets_one(sessions: CrawlSessionStore) -> None:
    await sessions.put(session("s1", "a.example"))
    await sessions.put(session("s1", "a.example*"))  # a glob character in a domain is literal
    await sessions.put(session("s2", "b.example"))
    await sessions.retire("a.example", "s1")
    await sessions.retire("a.example", "never")
    assert await sessions.crawl_sessions("a.example") == []
    assert [s.id for s in await sessions.crawl_sessions("a.example*")] == ["s1"]
    assert [s.id for s in await sessions.crawl_sessions("b.example")] == ["s2"]
