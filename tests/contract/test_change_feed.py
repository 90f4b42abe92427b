"""The change feed of every upserting sink (memory, SQLite, PostgreSQL): new, changed with a
field-level diff, gone; unchanged pages seen again; an older fetch changes nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.models import Item
from crawlfleet.pipeline.changes import CHANGED, GONE, NEW, Change, sqlite_changes
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from tests.contract.test_sinks import CRAWL, Harness, memory_harness, postgres_harness, sqlite_rows
from tests.fixtures.clock import FakeClock

PAGE = "https://shop.test/p/1"


@dataclass
class Feed:
    sink: Any
    changes: Callable[[], Awaitable[list[Change]]]
    last_seen: Callable[[], Awaitable[list[float]]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def feed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Feed]:
    clock = FakeClock(1000.0)
    request.node.clock = clock
    harness: Harness
    if request.param == "memory":
        harness = memory_harness()
        sink: Any = await harness.open(clock, CRAWL)

        async def changes() -> list[Change]:
            assert isinstance(sink, MemorySink)
            return list(sink.changes)

    elif request.param == "sqlite":
        path = tmp_path / "items.sqlite"
        sink = await SqliteSink.open(path, crawl_id=CRAWL, clock=clock)

        async def changes() -> list[Change]:
            return list(sqlite_changes(path, crawl_id=CRAWL, since=0.0, item_type=None))

        async def sqlite_seen() -> list[float]:
            return [row[4] for row in sqlite_rows(path)]

        yield Feed(sink, changes, sqlite_seen)
        await sink.close()
        return
    else:
        harness = postgres_harness(request)
        sink = await harness.open(clock, CRAWL)
        reader = pytest.importorskip("crawlfleet.pipeline.sinks.postgres_changes")
        dsn = request.getfixturevalue("postgres_dsn")

        async def changes() -> list[Change]:
            return list(reader.postgres_changes(dsn, crawl_id=CRAWL, since=0.0, item_type=None))

    async def seen() -> list[float]:
        return [row[4] for row in await harness.rows()]

    yield Feed(sink, changes, seen)
    await sink.close()


def product(key: str, price: str, at: float, **more: Any) -> Item:
    return Item("product", {"price": price, **more}, key=key, url=PAGE, fetched_at=at)


async def test_new_changed_and_unchanged(feed: Feed, request: pytest.FixtureRequest) -> None:
    clock: FakeClock = request.node.clock
    await feed.sink.write([product("1", "£1", 1000.0), product("2", "£2", 1000.0)])
    clock.advance(10)
    await feed.sink.write([product("1", "£1", 1010.0), product("2", "£3", 1010.0, fetched_at=5)])
    got = await feed.changes()
    assert [(c.item_key, c.change, c.at) for c in got] == [
        ("1", NEW, 1000.0),
        ("2", NEW, 1000.0),
        ("2", CHANGED, 1010.0),
    ]
    assert got[2].diff == {"price": {"old": "£2", "new": "£3"}}  # fetched_at is volatile


async def test_a_page_of_one_item_records_its_change(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    """One item a write (most pages): its stored version is read and compared as in a batch."""
    clock: FakeClock = request.node.clock
    await feed.sink.write([product("1", "£1", 1000.0)])
    clock.advance(10)
    await feed.sink.write([product("1", "£2", 1010.0)])
    got = await feed.changes()
    assert [(c.item_key, c.change, c.at) for c in got] == [
        ("1", NEW, 1000.0),
        ("1", CHANGED, 1010.0),
    ]
    assert got[1].diff == {"price": {"old": "£1", "new": "£2"}}


async def test_a_diff_names_each_top_level_field_that_differs(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    """A field added or removed is ``null`` on its missing side; an explicit ``null`` equals a
    missing field; numbers compare by value; nested values compare whole; volatile fields are
    left out (the PostgreSQL sink computes the diff in SQL: decision 0037)."""
    clock: FakeClock = request.node.clock
    old = {"tags": ["a"], "stock": 1, "removed": "x", "note": None, "scraped_at": "t1"}
    await feed.sink.write([product("1", "£1", 1000.0, **old)])
    clock.advance(10)
    new = {"tags": ["a", "b"], "stock": 1.0, "added": {"n": 2}, "scraped_at": "t2"}
    await feed.sink.write([product("1", "£1", 1010.0, **new)])
    got = await feed.changes()
    assert [c.change for c in got] == [NEW, CHANGED]
    assert got[1].diff == {
        "added": {"old": None, "new": {"n": 2}},
        "removed": {"old": "x", "new": None},
        "tags": {"old": ["a"], "new": ["a", "b"]},
    }


async def test_an_older_fetch_records_no_change(feed: Feed, request: pytest.FixtureRequest) -> None:
    clock: FakeClock = request.node.clock
    await feed.sink.write([product("1", "£1", 1000.0)])
    clock.advance(10)
    await feed.sink.write([product("1", "£9", 900.0)])  # a late write of an older fetch
    assert [c.change for c in await feed.changes()] == [NEW]


async def test_items_a_page_no_longer_yields_are_gone(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    clock: FakeClock = request.node.clock
    await feed.sink.write([product("1", "£1", 1000.0), product("2", "£2", 1000.0)])
    await feed.sink.page_items(PAGE, [("product", "1"), ("product", "2")])
    await feed.sink.page_items("https://shop.test/list", [("product", "2")])
    clock.advance(10)
    await feed.sink.page_items(PAGE, [("product", "2")])  # 1 gone; 2 still yielded
    clock.advance(10)
    await feed.sink.page_items("https://shop.test/list", [])  # 2 still on PAGE
    clock.advance(10)
    await feed.sink.page_items(PAGE, [])  # a 404: 2 is yielded nowhere now
    gone = [(c.item_key, c.at) for c in await feed.changes() if c.change == GONE]
    assert gone == [("1", 1010.0), ("2", 1030.0)]


async def test_a_page_that_yields_more_then_nothing_has_all_of_them_gone(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    """What a page yields is kept as a set: keys added on a revisit count as much as the first."""
    clock: FakeClock = request.node.clock
    await feed.sink.write([product("1", "£1", 1000.0), product("3", "£3", 1000.0)])
    await feed.sink.page_items(PAGE, [("product", "1")])
    clock.advance(10)
    await feed.sink.page_items(PAGE, [("product", "1"), ("product", "3")])
    await feed.sink.page_items(PAGE, [("product", "3"), ("product", "1")])  # the same set
    clock.advance(10)
    await feed.sink.page_items(PAGE, [])
    gone = [(c.item_key, c.at) for c in await feed.changes() if c.change == GONE]
    assert gone == [("1", 1020.0), ("3", 1020.0)]


async def test_an_unchanged_page_moves_last_seen(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    clock: FakeClock = request.node.clock
    await feed.sink.write([product("1", "£1", 1000.0)])
    await feed.sink.page_items(PAGE, [("product", "1")])
    clock.advance(60)
    await feed.sink.page_unchanged(PAGE)
    assert await feed.last_seen() == [pytest.approx(1060.0)]
    assert [c.change for c in await feed.changes()] == [NEW]


async def test_write_page_stores_the_items_and_what_the_page_yields(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    """``write_page`` (one transaction a page) is ``write`` then ``page_items``."""
    clock: FakeClock = request.node.clock
    both = [("product", "1"), ("product", "2")]
    await feed.sink.write_page([product("1", "£1", 1000.0), product("2", "£2", 1000.0)], PAGE, both)
    clock.advance(10)
    await feed.sink.write_page([product("2", "£3", 1010.0)], PAGE, [("product", "2")])
    clock.advance(10)
    await feed.sink.write_page([], PAGE, [])  # a page of no items: 2 is gone too
    got = [(c.item_key, c.change, c.at) for c in await feed.changes()]
    assert got == [
        ("1", NEW, 1000.0),
        ("2", NEW, 1000.0),
        ("2", CHANGED, 1010.0),
        ("1", GONE, 1010.0),
        ("2", GONE, 1020.0),
    ]


async def test_pages_written_at_once_record_what_they_record_one_by_one(
    feed: Feed, request: pytest.FixtureRequest
) -> None:
    """Concurrent pages (the PostgreSQL sink sends a group commit's pages together, cut where
    an item or a page comes back) store and record what the same calls made one at a time
    do: keys and pages repeat, prices change, some fetches are older, pages drop items."""
    clock: FakeClock = request.node.clock
    calls = []
    for n in range(60):
        key = str(n % 10)
        at = 1000.0 + (n if n % 4 else n - 30)  # every fourth fetch older than the last
        page = f"https://shop.test/p/{n % 10 % 5}"  # keys k and k + 5 take turns on a page
        calls.append(([product(key, f"£{n % 3}", at)], page, [("product", key)]))
    reference = MemorySink(clock=clock, crawl_id=CRAWL)
    for items, page, keys in calls:
        await reference.write_page(items, page, keys)
    await asyncio.gather(*(feed.sink.write_page(*call) for call in calls))

    def summary(changes: list[Change]) -> list[tuple[str, str, str]]:
        return sorted((c.item_key, c.change, json.dumps(c.diff, sort_keys=True)) for c in changes)

    assert summary(await feed.changes()) == summary(list(reference.changes))
