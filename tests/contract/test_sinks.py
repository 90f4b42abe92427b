"""One contract for every upserting sink (memory, SQLite, PostgreSQL), then the file sinks.

The upsert rule is written down in crawlfleet.pipeline.sinks.sqlite.
"""

from __future__ import annotations

import asyncio
import csv
import random
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import content_hash
from crawlfleet.pipeline.protocols import Sink
from crawlfleet.pipeline.sinks.csv import CsvSink
from crawlfleet.pipeline.sinks.jsonl import JsonlSink
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from crawlfleet.pipeline.sinks.stored import StoredItem
from tests.fixtures.clock import FakeClock

StoredRow = tuple[str, str, dict[str, Any], float, float, float]
"""(type, key, data, first_seen, last_seen, last_changed)"""

CRAWL = "crawl"
"""The crawl id (item key namespace) of the sinks the tests open unless they name another."""


@dataclass
class Harness:
    """Opens sinks of one kind on one shared store, and reads that store back.

    ``open(clock, crawl_id)``; ``rows()`` lists every crawl's rows, ``scoped()`` says whose
    (crawl id, type, key, data) each is.
    """

    open: Callable[[FakeClock, str], Awaitable[Sink]]
    scoped: Callable[[], Awaitable[list[tuple[str, str, str, dict[str, Any]]]]]
    rows: Callable[[], Awaitable[list[StoredRow]]]
    durable: bool


def memory_harness() -> Harness:
    sinks: dict[str, MemorySink] = {}

    async def open_sink(clock: FakeClock, crawl_id: str = CRAWL) -> Sink:
        return sinks.setdefault(crawl_id, MemorySink(crawl_id=crawl_id, clock=clock))

    async def stored() -> list[StoredItem]:
        return sorted(
            [s for sink in sinks.values() for s in await sink.stored()],
            key=lambda s: (s.item_type, s.item_key, s.crawl_id),
        )

    async def scoped() -> list[tuple[str, str, str, dict[str, Any]]]:
        return [(s.crawl_id, s.item_type, s.item_key, s.data) for s in await stored()]

    async def rows() -> list[StoredRow]:
        return [
            (s.item_type, s.item_key, s.data, s.first_seen, s.last_seen, s.last_changed)
            for s in await stored()
        ]

    return Harness(open_sink, scoped, rows, durable=False)


def sqlite_rows(path: Path) -> list[StoredRow]:
    db = sqlite3.connect(path)
    try:
        found = db.execute(
            "SELECT item_type, item_key, data, first_seen, last_seen, last_changed"
            " FROM items ORDER BY item_type, item_key"
        ).fetchall()
    finally:
        db.close()
    return [(t, k, orjson.loads(d), f, s, c) for t, k, d, f, s, c in found]


def sqlite_harness(path: Path) -> Harness:
    async def open_sink(clock: FakeClock, crawl_id: str = CRAWL) -> Sink:
        return await SqliteSink.open(path, crawl_id=crawl_id, clock=clock)

    async def scoped() -> list[tuple[str, str, str, dict[str, Any]]]:
        db = sqlite3.connect(path)
        try:
            found = db.execute(
                "SELECT crawl_id, item_type, item_key, data FROM items ORDER BY 2, 3, 1"
            ).fetchall()
        finally:
            db.close()
        return [(c, t, k, orjson.loads(d)) for c, t, k, d in found]

    async def rows() -> list[StoredRow]:
        return sqlite_rows(path)

    return Harness(open_sink, scoped, rows, durable=True)


def postgres_harness(request: pytest.FixtureRequest) -> Harness:
    postgres = pytest.importorskip("crawlfleet.pipeline.sinks.postgres")
    schema = pytest.importorskip("crawlfleet.pipeline.sinks.postgres_schema")
    psycopg = pytest.importorskip("psycopg")
    try:
        dsn: str = request.getfixturevalue("postgres_dsn")
    except pytest.FixtureLookupError:
        pytest.skip("no postgres_dsn fixture")
    schema.migrate(dsn)

    async def open_sink(clock: FakeClock, crawl_id: str = CRAWL) -> Sink:
        sink: Sink = await postgres.PostgresSink.open(dsn, crawl_id=crawl_id, clock=clock)
        return sink

    async def query(sql: str) -> list[tuple[Any, ...]]:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cursor = await conn.execute(sql)
            return list(await cursor.fetchall())

    async def scoped() -> list[tuple[str, str, str, dict[str, Any]]]:
        found = await query(
            "SELECT crawl_id, item_type, item_key, data FROM items ORDER BY 2, 3, 1"
        )
        return [(c, t, k, d) for c, t, k, d in found]

    async def rows() -> list[StoredRow]:
        found = await query(
            "SELECT item_type, item_key, data, extract(epoch from first_seen),"
            " extract(epoch from last_seen), extract(epoch from last_changed)"
            " FROM items ORDER BY item_type, item_key"
        )
        return [(t, k, d, float(f), float(s), float(c)) for t, k, d, f, s, c in found]

    return Harness(open_sink, scoped, rows, durable=True)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    if request.param == "memory":
        return memory_harness()
    if request.param == "sqlite":
        return sqlite_harness(tmp_path / "items.sqlite")
    return postgres_harness(request)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
async def sink(harness: Harness, clock: FakeClock) -> AsyncIterator[Sink]:
    opened = await harness.open(clock, CRAWL)
    yield opened
    await opened.close()


async def test_new_items_are_inserted_with_all_times_now(
    harness: Harness, sink: Sink, clock: FakeClock
) -> None:
    await sink.write([Item("product", {"name": "a"}, key="1"), Item("review", {"stars": 5})])
    assert await harness.rows() == [
        ("product", "1", {"name": "a"}, 1000.0, 1000.0, 1000.0),
        ("review", content_hash({"stars": 5}), {"stars": 5}, 1000.0, 1000.0, 1000.0),
    ]


async def test_same_content_moves_only_last_seen(
    harness: Harness, sink: Sink, clock: FakeClock
) -> None:
    await sink.write([Item("product", {"name": "a", "fetched_at": 1.0}, key="1")])
    clock.advance(10)
    await sink.write([Item("product", {"name": "a", "fetched_at": 2.0}, key="1")])
    assert await harness.rows() == [
        ("product", "1", {"name": "a", "fetched_at": 1.0}, 1000.0, 1010.0, 1000.0)
    ]


async def test_changed_content_moves_data_and_last_changed(
    harness: Harness, sink: Sink, clock: FakeClock
) -> None:
    await sink.write([Item("product", {"name": "a"}, key="1")])
    clock.advance(10)
    await sink.write([Item("product", {"name": "b"}, key="1")])
    clock.advance(10)
    await sink.write([Item("product", {"name": "b"}, key="1")])
    assert await harness.rows() == [("product", "1", {"name": "b"}, 1000.0, 1020.0, 1010.0)]


async def test_duplicate_keys_in_a_batch_last_one_wins(
    harness: Harness, sink: Sink, clock: FakeClock
) -> None:
    await sink.write(
        [
            Item("product", {"name": "a"}, key="1"),
            Item("product", {"name": "b"}, key="2"),
            Item("product", {"name": "c"}, key="1"),
            Item("quote", {"text": "x"}),
            Item("quote", {"text": "x"}),
        ]
    )
    rows = await harness.rows()
    assert [(t, k, d) for t, k, d, *_ in rows] == [
        ("product", "1", {"name": "c"}),
        ("product", "2", {"name": "b"}),
        ("quote", content_hash({"text": "x"}), {"text": "x"}),
    ]


async def test_empty_batch_is_a_no_op(harness: Harness, sink: Sink) -> None:
    await sink.write([])
    assert await harness.rows() == []


async def test_unicode_and_nested_data_round_trip(harness: Harness, sink: Sink) -> None:
    data = {
        "name": "Café ☕ 日本",
        "price": {"amount": "1.50", "currency": "EUR"},
        "tags": [1, None],
    }
    await sink.write([Item("product", data, key="ü")])
    assert [(k, d) for _, k, d, *_ in await harness.rows()] == [("ü", data)]


async def test_reopening_keeps_the_items(harness: Harness, clock: FakeClock) -> None:
    if not harness.durable:
        pytest.skip("an in-memory sink keeps nothing across instances")
    first = await harness.open(clock, CRAWL)
    await first.write([Item("product", {"name": "a"}, key="1")])
    await first.close()
    clock.advance(5)
    second = await harness.open(clock, CRAWL)
    await second.write([Item("product", {"name": "a"}, key="1")])
    assert await harness.rows() == [("product", "1", {"name": "a"}, 1000.0, 1005.0, 1000.0)]
    await second.close()


async def test_each_crawl_keeps_its_own_row_for_the_same_key(
    harness: Harness, clock: FakeClock
) -> None:
    first = await harness.open(clock, "shop-monday")
    await first.write([Item("product", {"name": "a"}, key="1")])
    second = await harness.open(clock, "shop-tuesday")
    await second.write([Item("product", {"name": "b"}, key="1")])
    await first.close()
    await second.close()
    assert await harness.scoped() == [
        ("shop-monday", "product", "1", {"name": "a"}),
        ("shop-tuesday", "product", "1", {"name": "b"}),
    ]


async def test_an_older_fetch_never_replaces_a_newer_one(
    harness: Harness, sink: Sink, clock: FakeClock
) -> None:
    await sink.write([Item("product", {"v": 2}, key="1", fetched_at=20.0)])
    clock.advance(10)
    await sink.write([Item("product", {"v": 1}, key="1", fetched_at=10.0)])
    await sink.write([Item("product", {"v": 3}, key="2", fetched_at=30.0)])
    await sink.write([Item("product", {"v": 2}, key="2", fetched_at=20.0)])
    assert await harness.rows() == [
        ("product", "1", {"v": 2}, 1000.0, 1000.0, 1000.0),
        ("product", "2", {"v": 3}, 1010.0, 1010.0, 1010.0),
    ]


async def test_in_a_batch_the_newest_fetch_wins_then_the_last_item(
    harness: Harness, sink: Sink
) -> None:
    await sink.write(
        [
            Item("product", {"v": 2}, key="1", fetched_at=20.0),
            Item("product", {"v": 1}, key="1", fetched_at=10.0),
            Item("product", {"v": "a"}, key="2", fetched_at=10.0),
            Item("product", {"v": "b"}, key="2", fetched_at=10.0),
        ]
    )
    assert [d for _, _, d, *_ in await harness.rows()] == [{"v": 2}, {"v": "b"}]


async def test_equal_fetch_times_keep_one_winner_whatever_the_order(
    harness: Harness, sink: Sink
) -> None:
    versions = [{"v": "left"}, {"v": "right"}]
    await sink.write([Item("product", versions[0], key="1", fetched_at=5.0)])
    await sink.write([Item("product", versions[1], key="1", fetched_at=5.0)])
    await sink.write([Item("product", versions[1], key="2", fetched_at=5.0)])
    await sink.write([Item("product", versions[0], key="2", fetched_at=5.0)])
    winner = max(versions, key=content_hash)
    assert [d for _, _, d, *_ in await harness.rows()] == [winner, winner]


async def test_nul_characters_are_removed_from_every_string(harness: Harness, sink: Sink) -> None:
    # The rule of crawlfleet.pipeline.text.strip_nul: PostgreSQL cannot store U+0000 at all.
    data = {"na\x00me": "a\x00b", "nested": [{"x": "\x00"}, "c\x00"], "n": 1}
    await sink.write([Item("pro\x00duct", data, key="k\x00ey"), Item("note", {"t": "\x00"})])
    assert [(t, k, d) for t, k, d, *_ in await harness.rows()] == [
        ("note", content_hash({"t": ""}), {"t": ""}),
        ("product", "key", {"name": "ab", "nested": [{"x": ""}, "c"], "n": 1}),
    ]


async def test_concurrent_writers_end_at_the_newest_version_of_every_key(
    harness: Harness, clock: FakeClock
) -> None:
    # 8 writers upsert 1,000 keys x 5 versions in random order (before the guard on
    # fetched_at, about a fifth of the keys ended at their newest version).
    keys, versions, writers, batch = 1000, 5, 8, 10
    writes = [(key, v) for key in range(keys) for v in range(versions)]
    random.Random(8).shuffle(writes)
    sinks = [await harness.open(clock, CRAWL) for _ in range(writers)]

    async def writer(sink: Sink, mine: list[tuple[int, int]]) -> None:
        for start in range(0, len(mine), batch):
            await sink.write(
                [
                    Item("page", {"v": v}, key=f"{key:04d}", fetched_at=100.0 + v)
                    for key, v in mine[start : start + batch]
                ]
            )

    await asyncio.gather(*(writer(s, writes[n::writers]) for n, s in enumerate(sinks)))
    for opened in sinks:
        await opened.close()
    newest = [d["v"] for _, _, d, *_ in await harness.rows()]
    assert (len(newest), newest.count(versions - 1)) == (keys, keys)


# SQLite: failures of the file itself.


async def test_sqlite_full_disk_is_a_state_error_and_nothing_is_half_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "items.sqlite"
    sink = await SqliteSink.open(path, max_size_bytes=64 * 1024)
    await sink.write([Item("product", {"name": "kept"}, key="0")])
    big = "x" * 2000
    with pytest.raises(StateError, match=r"items\.sqlite.*disk full"):
        await sink.write(
            [Item("product", {"blob": big, "n": n}, key=str(n)) for n in range(1, 200)]
        )
    await sink.write([Item("product", {"name": "after"}, key="after")])
    await sink.close()
    assert [k for _, k, *_ in sqlite_rows(path)] == ["0", "after"]


async def test_sqlite_locked_file_is_a_state_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "items.sqlite"
    await (await SqliteSink.open(path)).close()  # creates the file and tables
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    sink = await SqliteSink.open(path, busy_timeout_s=0.05)
    try:
        with pytest.raises(StateError, match=r"items\.sqlite is locked"):
            await sink.write([Item("product", {"name": "a"}, key="1")])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await sink.write([Item("product", {"name": "a"}, key="1")])
    await sink.close()


async def test_sqlite_corrupt_file_is_a_state_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "items.sqlite"
    path.write_bytes(b"this is not a database, just some bytes " * 100)
    with pytest.raises(StateError, match=r"items\.sqlite is corrupt"):
        await SqliteSink.open(path)


async def test_sqlite_rejects_table_keeps_unserializable_values_as_repr(tmp_path: Path) -> None:
    from crawlfleet.pipeline.rejects import Reject

    sink = await SqliteSink.open(tmp_path / "items.sqlite")
    await sink.add([Reject("note", None, "http://a/", "bad", {"d": Decimal("1.5")}, 7.0)])
    await sink.close()
    db = sqlite3.connect(tmp_path / "items.sqlite")
    found = db.execute("SELECT item_type, item_key, url, reason, data, at FROM rejects").fetchall()
    db.close()
    assert found == [("note", None, "http://a/", "bad", '{"d":"Decimal(\'1.5\')"}', 7.0)]


# The live-file sinks: append, whole batches only.


async def test_jsonl_sink_appends_records_with_type_and_key(tmp_path: Path) -> None:
    path = tmp_path / "out" / "items.jsonl"
    sink = JsonlSink(path)
    await sink.write([Item("product", {"name": "a"}, key="1"), Item("quote", {"text": "q"})])
    await sink.close()
    sink = JsonlSink(path)
    await sink.write([Item("product", {"name": "b"}, key="1")])
    await sink.close()
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert lines == [
        {"type": "product", "key": "1", "name": "a"},
        {"type": "quote", "key": content_hash({"text": "q"}), "text": "q"},
        {"type": "product", "key": "1", "name": "b"},
    ]


async def test_csv_sink_header_from_first_batch_and_extra_column(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    sink = CsvSink(path)
    await sink.write(
        [
            Item("product", {"name": "a", "price": {"amount": "1", "currency": "GBP"}}, key="1"),
            Item("product", {"name": 'b, "quoted"', "stock": 3}, key="2"),
        ]
    )
    await sink.write([Item("product", {"name": "c", "colour": "red"}, key="3")])
    await sink.close()
    reopened = CsvSink(path)  # an existing file keeps its header
    await reopened.write([Item("product", {"name": "d", "stock": None}, key="4")])
    await reopened.close()
    with path.open(newline="") as handle:
        table = list(csv.reader(handle))
    assert table == [
        ["type", "key", "name", "price", "stock", "_extra"],
        ["product", "1", "a", '{"amount":"1","currency":"GBP"}', "", ""],
        ["product", "2", 'b, "quoted"', "", "3", ""],
        ["product", "3", "c", "", "", '{"colour":"red"}'],
        ["product", "4", "d", "", "", ""],
    ]


def test_csv_sink_refuses_a_foreign_csv(tmp_path: Path) -> None:
    path = tmp_path / "theirs.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(StateError, match="not a crawlfleet CSV"):
        CsvSink(path)


FULL_DISK_SCRIPT = """
import asyncio, resource, signal, sys
from pathlib import Path
from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.sinks.csv import CsvSink
from crawlfleet.pipeline.sinks.jsonl import JsonlSink

async def main(kind, path):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    sink = (JsonlSink if kind == "jsonl" else CsvSink)(Path(path))
    await sink.write([Item("t", {"n": 0}, key="0")])
    try:
        await sink.write([Item("t", {"n": n, "pad": "x" * 100}, key=str(n)) for n in range(99)])
    except StateError as exc:
        print("StateError", exc)
    await sink.write([Item("t", {"n": 1}, key="1")])
    await sink.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_file_sink_full_disk_cuts_the_failed_batch_off(kind: str, tmp_path: Path) -> None:
    # The file size limit (RLIMIT_FSIZE) is per process: a child process plays the full disk.
    path = tmp_path / f"items.{kind}"
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_SCRIPT, kind, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith("StateError cannot write to"), done.stderr
    assert str(path) in done.stdout
    lines = path.read_text().splitlines()
    if kind == "jsonl":
        assert [orjson.loads(line)["key"] for line in lines] == ["0", "1"]
    else:
        assert [row[1] for row in csv.reader(lines)] == ["key", "0", "1"]
