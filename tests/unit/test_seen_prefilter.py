"""The SQLite store's seen-check prefilter: bounded, exact, and it spares the index probes."""

from __future__ import annotations

from pathlib import Path

from crawlfleet.frontier.recent import RecentSet
from crawlfleet.frontier.sqlite import SqliteQueueStore
from tests.contract.test_queue_store import FREE, NO_BUDGET, req


def test_the_prefilter_keeps_the_most_recently_offered_within_its_capacity() -> None:
    known = RecentSet(capacity=3)
    known.add(["a", "b", "c"])
    assert known.seen("a")  # now the most recent
    known.add(["d"])
    assert len(known) == 3
    assert not known.seen("b")  # the least recently offered went
    assert all(known.seen(fp) for fp in "acd")


async def test_links_seen_again_are_answered_without_probing_the_table(tmp_path: Path) -> None:
    store = await SqliteQueueStore.open(tmp_path / "state.sqlite", policy=FREE)
    probes: list[str] = []
    store._db.set_trace_callback(probes.append)  # the statements the store runs
    try:
        nav = [req(f"nav-{n}") for n in range(10)]
        assert await store.add(nav, NO_BUDGET) == 10
        probed = sum("json_each" in sql for sql in probes)
        assert await store.add([*nav, req("new")], NO_BUDGET) == 1
        assert await store.add(nav, NO_BUDGET) == 0
        assert sum("json_each" in sql for sql in probes) == probed + 1  # only for "new"
    finally:
        await store.close()
    reopened = await SqliteQueueStore.open(
        tmp_path / "state.sqlite", policy=FREE
    )  # an empty prefilter
    try:
        assert await reopened.add([*nav, req("new")], NO_BUDGET) == 0  # the table answers
    finally:
        await reopened.close()
