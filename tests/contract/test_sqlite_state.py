"""What only the SQLite ``QueueStore`` promises: a resumable, locked, checked state file."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from crawlfleet.errors import StateError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Budget, DelaySource, DomainPolicy, Signal
from crawlfleet.records import QueueCounts
from tests.contract.test_queue_store import (
    FREE,
    KINDS,
    LEASE_S,
    MAX_RETRIES,
    NO_BUDGET,
    T0,
    bury,
    claim,
    complete,
    names,
    req,
    retry,
)
from tests.contract.test_strategy_ladder import EAGER, block


async def test_reopened_file_has_the_same_queue_seen_and_dead_letters(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    await store.add([req(str(i), priority=i % 3) for i in range(8)], Budget(max_total=9))
    await store.set_concurrency("a.test", 3)
    await store.set_delay("a.test", 0.0, DelaySource.OVERRIDE)
    await store.set_strategy("a.test", {"fetcher": "http"})
    done, retried, dead = await claim(store, limit=3)
    await complete(store, done, signal=Signal.BLOCK, reason="captcha")
    await retry(store, retried, T0 + 40, "timeout")
    await bury(store, dead, "HTTP 500", T0)
    await store.add([req("b", "b.test")], NO_BUDGET)
    (blocked,) = await claim(store, limit=1)
    await retry(store, blocked, 0.0, "HTTP 429", block_until=T0 + 100, reason="Retry-After")
    (leased,) = await claim(store, limit=1)
    await store.start(T0)
    views = await store.domains(FREE)
    stats = await store.stats()
    before = await store.counts()
    letters = await store.dead_letters()
    await store.close()

    store = await SqliteQueueStore.open(path)
    try:
        assert await store.counts() == before == QueueCounts(6, 1, 1, 1, 9)
        assert await store.domains(FREE) == views
        assert await store.stats() == stats
        assert stats.started_at == T0
        assert (stats.get("blocks"), stats.get("attempts")) == (1, 4)
        assert await store.dead_letters() == letters
        assert await store.add([req(str(i)) for i in range(8)], Budget(max_total=10)) == 0
        assert await store.add([req("new"), req("newer")], Budget(max_total=10)) == 1
        assert await store.reap(float("inf"), MAX_RETRIES) == 1
        assert not await complete(store, leased)
        assert await store.next_ready_at(T0, KINDS) == T0
        # The policy overrides (3 in flight, no delay) and the block on b.test survived.
        got = await claim(store, now=T0 + 1, policy=DomainPolicy(1.0, 1))
        assert len(got) == 3
        assert {x.request.domain for x in got} == {"a.test"}
        assert await store.next_ready_at(T0 + 1, KINDS) == T0 + 100
    finally:
        await store.close()


async def test_reopen_keeps_lease_tokens_current(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await store.close()
    store = await SqliteQueueStore.open(path)
    try:
        assert await complete(store, lease)
        assert (await store.counts()).done == 1
    finally:
        await store.close()


async def test_reopen_with_only_waiting_retries(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await retry(store, lease, T0 + 50, "e")
    await store.close()
    store = await SqliteQueueStore.open(path)
    try:
        assert await store.next_ready_at(T0, KINDS) == T0 + 50
        assert await claim(store, now=T0 + 49) == []
        assert names(await claim(store, now=T0 + 50)) == ["1"]
    finally:
        await store.close()


async def test_a_second_open_of_one_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path)
    await store.close()
    again = await SqliteQueueStore.open(path)
    await again.close()


async def test_other_connections_of_the_process_may_share_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    try:
        await store.add([req("1")], NO_BUDGET)
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE IF NOT EXISTS side (x)")
            assert other.execute("SELECT count(*) FROM requests").fetchone() == (1,)
        assert len(await claim(store)) == 1
    finally:
        await store.close()


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"this is not an SQLite file at all" * 200)
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path)
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path)


async def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE requests (id INTEGER PRIMARY KEY, body TEXT)")
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path)
    path.unlink()
    with sqlite3.connect(path) as other:
        other.execute("PRAGMA user_version = 99")
    with pytest.raises(StateError, match="schema version 99"):
        await SqliteQueueStore.open(path)


KILLED_CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from crawlfleet.frontier.sqlite import SqliteQueueStore
from tests.contract.test_queue_store import NO_BUDGET, T0, bury, claim, complete, req, retry

async def main() -> None:
    store = await SqliteQueueStore.open(Path(sys.argv[1]))
    await store.add([req(str(i)) for i in range(5)], NO_BUDGET)
    first, second, third = await claim(store, 3)
    await complete(store, first)
    await retry(store, second, T0 + 1, "e")
    await bury(store, third, "e", T0)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


async def test_a_killed_process_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(KILLED_CHILD),
        str(path),
        cwd=Path(__file__).parents[2],
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(child.communicate(), timeout=60)
    assert child.returncode == -9, err.decode()
    store = await SqliteQueueStore.open(path)
    try:
        assert await store.counts() == QueueCounts(queued=3, leased=0, done=1, dead=1, seen=5)
        assert len(await store.claim(10, T0 + 1, LEASE_S, FREE, KINDS)) == 3
        assert (await store.stats()).get("attempts") == 3
        with sqlite3.connect(path) as db:  # written with each lease end, not buffered
            assert db.execute("SELECT count(*) FROM attempts").fetchone() == (3,)
    finally:
        await store.close()


async def test_a_strategy_moved_by_a_lease_end_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path)
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    await block(store, T0)
    _level, _rung, strategy = await block(store, T0 + 1)
    await store.close()
    store = await SqliteQueueStore.open(path)
    try:
        view = await store.domain("a.test", EAGER)
        assert (view.level, dict(view.strategy)) == (2, strategy)
        assert strategy == {"rung": "session", "session_epoch": "1"}
    finally:
        await store.close()
