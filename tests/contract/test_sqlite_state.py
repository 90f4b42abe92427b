"""What only the SQLite ``QueueStore`` promises: a resumable, locked, checked state file."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crawlfleet.errors import StateError
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Budget, DelaySource, DomainPolicy, Signal
from crawlfleet.records import QueueCounts
from crawlfleet.sqlite_turns import COMMIT_EVERY_S, writing_beside
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
    store = await SqliteQueueStore.open(path, policy=FREE)
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
    views = await store.domains()
    stats = await store.stats()
    before = await store.counts()
    letters = await store.dead_letters()
    await store.close()

    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        assert await store.counts() == before == QueueCounts(6, 1, 1, 1, 9)
        assert await store.domains() == views
        assert await store.stats() == stats
        assert stats.started_at == T0
        assert (stats.get("blocks"), stats.get("attempts")) == (1, 4)
        assert await store.dead_letters() == letters
        assert await store.add([req(str(i)) for i in range(8)], Budget(max_total=10)) == 0
        assert await store.add([req("new"), req("newer")], Budget(max_total=10)) == 1
        assert await store.reap(float("inf"), MAX_RETRIES) == 1
        assert not await complete(store, leased)
        assert await store.next_ready_at(T0, KINDS) == T0
        await store.close()
        store = await SqliteQueueStore.open(path, policy=DomainPolicy(1.0, 1))  # a 1 s crawl
        # The policy overrides (3 in flight, no delay) and the block on b.test survived.
        got = await claim(store, now=T0 + 1)
        assert len(got) == 3
        assert {x.request.domain for x in got} == {"a.test"}
        assert await store.next_ready_at(T0 + 1, KINDS) == T0 + 100
    finally:
        await store.close()


async def test_reopen_keeps_lease_tokens_current(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await store.close()
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        assert await complete(store, lease)
        assert (await store.counts()).done == 1
    finally:
        await store.close()


async def test_reopen_with_only_waiting_retries(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    await store.add([req("1")], NO_BUDGET)
    (lease,) = await claim(store)
    await retry(store, lease, T0 + 50, "e")
    await store.close()
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        assert await store.next_ready_at(T0, KINDS) == T0 + 50
        assert await claim(store, now=T0 + 49) == []
        assert names(await claim(store, now=T0 + 50)) == ["1"]
    finally:
        await store.close()


async def test_a_second_open_of_one_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path, policy=FREE)
    await store.close()
    again = await SqliteQueueStore.open(path, policy=FREE)
    await again.close()


async def test_other_connections_of_the_process_may_share_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        await store.add([req("1")], NO_BUDGET)
        await asyncio.sleep(0)  # the store commits when the event loop's turn ends
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
        await SqliteQueueStore.open(path, policy=FREE)
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path, policy=FREE)


async def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE requests (id INTEGER PRIMARY KEY, body TEXT)")
    with pytest.raises(StateError, match=str(path)):
        await SqliteQueueStore.open(path, policy=FREE)
    path.unlink()
    with sqlite3.connect(path) as other:
        other.execute("PRAGMA user_version = 99")
    with pytest.raises(StateError, match="schema version 99"):
        await SqliteQueueStore.open(path, policy=FREE)


KILLED_CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from crawlfleet.frontier.sqlite import SqliteQueueStore
from tests.contract.test_queue_store import FREE, NO_BUDGET, T0, bury, claim, complete, req, retry

async def main() -> None:
    store = await SqliteQueueStore.open(Path(sys.argv[1]), policy=FREE)
    await store.add([req(str(i)) for i in range(5)], NO_BUDGET)
    first, second, third, fourth = await claim(store, 4)
    await complete(store, first)
    await retry(store, second, T0 + 1, "e")
    await bury(store, third, "e", T0)
    await asyncio.sleep(0)  # the turn ends: its writes are committed
    await complete(store, fourth)  # in the next turn, never committed
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


async def test_a_killed_process_loses_only_the_writes_of_its_last_turn(tmp_path: Path) -> None:
    """The fourth lease's end was not committed: it is still leased, so it expires and its
    request is fetched again; every earlier turn's write is in the file."""
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
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        assert await store.counts() == QueueCounts(queued=2, leased=1, done=1, dead=1, seen=5)
        assert len(await store.claim(10, T0 + 1, LEASE_S, KINDS)) == 2
        assert (await store.stats()).get("attempts") == 3
        with sqlite3.connect(path) as db:  # in the turn of their lease ends, not kept apart
            assert db.execute("SELECT count(*) FROM attempts").fetchone() == (3,)
    finally:
        await store.close()


async def test_a_strategy_moved_by_a_lease_end_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=EAGER)
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    await block(store, T0)
    _level, _rung, strategy = await block(store, T0 + 1)
    await store.close()
    store = await SqliteQueueStore.open(path, policy=EAGER)
    try:
        view = await store.domain("a.test")
        assert (view.level, dict(view.strategy)) == (2, strategy)
        assert strategy == {"rung": "session", "session_epoch": "1"}
    finally:
        await store.close()


async def test_the_writes_of_one_event_loop_turn_are_committed_together_when_it_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        await store.add([req("1")], NO_BUDGET)
        await store.add([req("2")], NO_BUDGET)
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT count(*) FROM requests").fetchone() == (0,)
            await asyncio.sleep(0)
            assert other.execute("SELECT count(*) FROM requests").fetchone() == (2,)
    finally:
        await store.close()


async def test_a_failed_write_rolls_its_turn_back_and_stops_the_store(tmp_path: Path) -> None:
    """A full file (here its page limit) fails the write, undoes the turn's other writes
    (they are in one transaction) and every later call: the store's memory is ahead of the
    file, so the crawl stops, and a reopen resumes from the last committed turn."""
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    await store.add([req("kept")], NO_BUDGET)
    await asyncio.sleep(0)
    await store.add([req("undone")], NO_BUDGET)
    store._db.execute("PRAGMA max_page_count = 1")  # the file is full, for real
    with pytest.raises(StateError, match="full"):
        await store.add([req(str(i) * 300) for i in range(200)], NO_BUDGET)
    with pytest.raises(StateError, match="run again to resume"):
        await store.add([req("later")], NO_BUDGET)
    await store.close()
    reopened = await SqliteQueueStore.open(path, policy=FREE)
    try:
        assert [lease.request.url for lease in await claim(reopened, 10)] == [req("kept").url]
    finally:
        await reopened.close()


async def test_a_session_store_on_the_same_file_writes_while_the_queue_store_is_busy(
    tmp_path: Path,
) -> None:
    """The queue store holds its write transaction for a whole turn; a connection writing
    beside it (sessions, proxy states: a thread each) makes it commit write by write."""
    from crawlfleet.sessions.sqlite import SqliteSessionStore

    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    sessions = await SqliteSessionStore.open(path)
    busy = True

    async def keep_writing() -> None:
        n = 0
        while busy:
            await store.add([req(f"busy-{n}")], NO_BUDGET)
            n += 1
            time.sleep(0.005)  # noqa: ASYNC251 - the rest of a busy turn (parsing pages)
            await asyncio.sleep(0)

    writer = asyncio.create_task(keep_writing())
    try:
        for n in range(20):
            await sessions.save(f"{n}.example", {"id": str(n)})
    finally:
        busy = False
        await writer
        await sessions.close()
        await store.close()


async def test_a_lease_end_is_not_committed_when_the_items_of_its_turn_fail(
    tmp_path: Path,
) -> None:
    """The embedded crawl's state file commits each turn after its items file, and not at
    all when the items file's turn failed: a lease end is never in the file without its
    page's items (page 1 stored its item and ended its lease; page 2's write filled the items
    file, which undid page 1's item too)."""
    from crawlfleet.models import Item
    from crawlfleet.pipeline.sinks.sqlite import SqliteSink

    store = await SqliteQueueStore.open(tmp_path / "state.sqlite", policy=FREE)
    sink = await SqliteSink.open(tmp_path / "items.sqlite", max_size_bytes=64 * 1024)
    store.commit_after(sink.write_in_turns())
    await store.add([req("1"), req("2")], NO_BUDGET)
    first, _second = await claim(store, 2)
    await asyncio.sleep(COMMIT_EVERY_S)  # committed; the next turn commits when it ends
    await sink.write_page([Item("product", {"n": 1}, key="1")], first.request.url, [])
    assert await complete(store, first)
    with pytest.raises(StateError, match="disk full"):
        await sink.write([Item("product", {"blob": "x" * 2000}, key=str(n)) for n in range(200)])
    await asyncio.sleep(0)
    with pytest.raises(StateError, match="disk full"):
        await store.add([req("3")], NO_BUDGET)
    await sink.close()
    await store.close()

    reopened = await SqliteQueueStore.open(tmp_path / "state.sqlite", policy=FREE)
    try:
        assert (await reopened.counts()).leased == 2  # page 1's lease end was undone
    finally:
        await reopened.close()
    with sqlite3.connect(tmp_path / "items.sqlite") as db:
        assert db.execute("SELECT count(*) FROM items").fetchone() == (0,)


def domain_row(path: Path, domain: str = "a.test") -> tuple[float, int, dict[str, float]]:
    """``ready_at``, ``admitted`` and the counters of a domain's row, as committed."""
    with sqlite3.connect(path) as other:
        ready_at, admitted, counters = other.execute(
            "SELECT ready_at, admitted, counters FROM domains WHERE domain = ?", (domain,)
        ).fetchone()
    return ready_at, admitted, json.loads(counters)


async def test_a_domain_s_row_is_written_once_a_turn_as_its_memory_has_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=DomainPolicy(delay_s=2.0, max_in_flight=3))
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    try:
        await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
        for lease in await claim(store, 3):
            await complete(store, lease)
        await asyncio.sleep(0)  # the turn ends: one COMMIT
        writes = [s for s in statements if "INTO domains" in s or "UPDATE domains" in s]
        assert len(writes) == 1  # an admission, a claim and three lease ends: one row write
        ready_at, admitted, counters = domain_row(path)
        view = await store.domain("a.test")
        assert (ready_at, admitted) == (view.ready_at, 3)
        assert counters == dict(view.stats.counters)
        assert counters
    finally:
        await store.close()


async def test_a_lease_end_committed_at_once_beside_another_writer_carries_its_row(
    tmp_path: Path,
) -> None:
    """While another connection writes the file (``writing_beside``), each write commits at
    its end: the domain row it changed is in that commit, not left for a later one."""
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        await store.add([req("1")], NO_BUDGET)
        [lease] = await claim(store, 1)
        with writing_beside(path):
            await complete(store, lease)
            _, admitted, counters = domain_row(path)
        assert admitted == 1
        assert counters == dict((await store.domain("a.test")).stats.counters)
        assert counters  # the lease end's counters, committed with it
    finally:
        await store.close()
