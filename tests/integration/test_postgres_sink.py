"""The PostgreSQL sink against a private server: schema, upsert semantics, outages."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal
from typing import Any

import psycopg
import pydantic
import pytest
from psycopg import sql

from crawlfleet.errors import StateError
from crawlfleet.events import EventBus
from crawlfleet.models import Item
from crawlfleet.pipeline.pipeline import Pipeline
from crawlfleet.pipeline.processors import default_processors
from crawlfleet.pipeline.rejects import Reject
from crawlfleet.pipeline.sinks.postgres import PostgresRejects, PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import MIGRATIONS, migrate
from crawlfleet.pipeline.sinks.postgres_writes import WRITE_BATCH, PageWrite, batch_arguments
from crawlfleet.pipeline.sinks.stored import batch_rows
from tests.fixtures.clock import FakeClock

pytestmark = pytest.mark.postgres


def rows(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT item_type, item_key, data, extract(epoch from first_seen), "
            "extract(epoch from last_seen), extract(epoch from last_changed) "
            "FROM items ORDER BY 1, 2"
        ).fetchall()


def test_migrate_is_idempotent(postgres_dsn: str) -> None:
    assert migrate(postgres_dsn) == list(range(1, len(MIGRATIONS) + 1))
    assert migrate(postgres_dsn) == []


FILL = {
    "items": "INSERT INTO items (crawl_id, item_type, item_key, data, content_hash, fetched_at,"
    " first_seen, last_seen, last_changed) SELECT %s, 'product', 'k' || n, '{}', 'h', now(),"
    " now(), now(), now() FROM generate_series(1, 5000) AS n",
    "page_items": "INSERT INTO page_items (crawl_id, page, item_type, item_key)"
    " SELECT %s, 'http://127.0.0.1:18414/p/' || n || '.html', 'product', 'k' || n"
    " FROM generate_series(1, 5000) AS n",
}
BATCH = range(1, 19)  # a write of 18 pages, as the bench's crawl sends them
READ = (
    "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
    " WHERE relname = %s"
)


def batch() -> list[PageWrite]:
    """18 pages of one item each; the first page's item changed (it yields k100, not k1)."""
    now = dt.datetime.now(dt.UTC)
    return [
        PageWrite(
            "c",
            batch_rows([Item("product", {"n": n}, key=f"k{n}")], now.timestamp()),
            f"http://127.0.0.1:18414/p/{n}.html",
            [("product", "k100" if n == 1 else f"k{n}")],
            now,
        )
        for n in BATCH
    ]


def rows_read(conn: psycopg.Connection[tuple[Any, ...]], table: str) -> int:
    """Rows of ``table`` that a write of ``batch()`` reads (rolled back)."""
    with conn.transaction(force_rollback=True):
        conn.execute(WRITE_BATCH, batch_arguments(batch()))
        ((read,),) = conn.execute(READ, [table]).fetchall()
    return int(read)


@pytest.mark.parametrize("table", ["items", "page_items"])
@pytest.mark.parametrize("statistics", ["never analyzed", "analyzed before this crawl"])
@pytest.mark.parametrize("plan", ["made for its arrays", "generic, made before the crawl"])
def test_a_write_reads_its_rows_by_key_whatever_the_statistics_say(
    postgres_dsn: str, table: str, statistics: str, plan: str
) -> None:
    """Without statistics of the crawl's rows (a new table before autovacuum's first ANALYZE,
    or a new crawl id in a table analyzed when it held only other crawls), the planner took
    the crawl's rows for a few and read them all at every write: each write slower as the
    crawl grew, ~0.6 ms a batch by a 19,000-item crawl. A plan cached while the crawl's rows
    were few did the same (decision 0021). Each page and key is now looked up by its index,
    whatever the estimates, in a plan made for the write's arrays or in the generic plan
    PL/pgSQL caches in a session before the crawl had rows (decisions 0031, 0033, 0037)."""
    migrate(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
        if statistics != "never analyzed":
            conn.execute(FILL[table], ["an earlier crawl"])
            conn.execute(f"ANALYZE {table}")
        if plan == "made for its arrays":
            conn.execute("SET plan_cache_mode = force_custom_plan")
        else:
            conn.execute("SET plan_cache_mode = force_generic_plan")
            rows_read(conn, table)  # the plans are made and cached now
        conn.execute(FILL[table], ["c"])
        assert rows_read(conn, table) <= 4 * len(BATCH)  # of the crawl's 5,000: 54 and 36


async def test_upsert_moves_last_seen_and_changes_only_on_new_content(postgres_dsn: str) -> None:
    migrate(postgres_dsn)
    clock = FakeClock(1000.0)
    sink = await PostgresSink.open(postgres_dsn, clock=clock)
    await sink.write([Item("product", {"name": "a", "price": 1}, key="1")])
    clock.advance(10)
    await sink.write([Item("product", {"name": "a", "price": 1}, key="1")])
    assert rows(postgres_dsn) == [("product", "1", {"name": "a", "price": 1}, 1000, 1010, 1000)]
    clock.advance(10)
    await sink.write(
        [
            Item("product", {"name": "a", "price": 2}, key="1"),
            Item("product", {"name": "a", "price": 3}, key="1"),
        ]
    )
    await sink.close()
    assert rows(postgres_dsn) == [("product", "1", {"name": "a", "price": 3}, 1000, 1020, 1020)]


async def test_items_without_key_are_keyed_by_content(postgres_dsn: str) -> None:
    migrate(postgres_dsn)
    sink = await PostgresSink.open(postgres_dsn)
    await sink.write(
        [Item("quote", {"text": "x"}), Item("quote", {"text": "x"}), Item("quote", {"text": "y"})]
    )
    await sink.close()
    assert len(rows(postgres_dsn)) == 2


async def test_write_during_restart_fails_clearly_then_recovers(
    postgres_dsn, postgres_server
) -> None:
    migrate(postgres_dsn)
    sink = await PostgresSink.open(postgres_dsn)
    await sink.write([Item("page", {"n": 1}, key="a")])
    postgres_server.stop("immediate")
    try:
        with pytest.raises(StateError, match="PostgreSQL at"):
            await sink.write([Item("page", {"n": 2}, key="b")])
    finally:
        postgres_server.start()
    await sink.write([Item("page", {"n": 2}, key="b")])
    await sink.close()
    assert [r[1] for r in rows(postgres_dsn)] == ["a", "b"]


async def test_unreachable_server_names_the_url_without_password() -> None:
    with pytest.raises(StateError) as info:
        await PostgresSink.open("postgresql://u:hunter2@127.0.0.1:1/db")
    assert "hunter2" not in str(info.value)
    assert "127.0.0.1:1" in str(info.value)


def test_migration_3_scopes_existing_rows_by_their_crawl(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(MIGRATIONS[0])
        conn.execute(MIGRATIONS[1])
        conn.execute("INSERT INTO schema_migrations (version) VALUES (1), (2)")
        conn.execute(
            "INSERT INTO items (item_type, item_key, data, content_hash, crawl_id, first_seen,"
            " last_seen, last_changed) VALUES ('product', '1', '{\"v\": 1}', 'h', 'monday',"
            " to_timestamp(10), to_timestamp(20), to_timestamp(10))"
        )
    assert migrate(postgres_dsn) == list(range(3, len(MIGRATIONS) + 1))
    with psycopg.connect(postgres_dsn) as conn:
        fetched_at = conn.execute("SELECT extract(epoch from fetched_at) FROM items").fetchone()
        assert fetched_at == (20,)
        conn.execute(
            "INSERT INTO items (crawl_id, item_type, item_key, data, content_hash, fetched_at,"
            " first_seen, last_seen, last_changed) VALUES ('tuesday', 'product', '1', '{}', 'h',"
            " now(), now(), now(), now())"
        )
        found = conn.execute("SELECT crawl_id, data FROM items ORDER BY 1").fetchall()
    assert found == [("monday", {"v": 1}), ("tuesday", {})]


def reject_rows(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT crawl_id, item_type, item_key, url, reason, data, at FROM item_rejects"
            " ORDER BY id"
        ).fetchall()


async def test_rejects_are_kept_with_crawl_reason_and_page(postgres_dsn: str) -> None:
    migrate(postgres_dsn)
    store = await PostgresRejects.open(postgres_dsn, crawl_id="c1")
    await store.add(
        [
            Reject("note", None, "http://a/", "bad", {"d": Decimal("1.5")}, 7.0),
            Reject("no\x00te", "k\x00", "http://a/\x00", "why\x00", {"t\x00": ["\x00x"]}, 8.0),
        ]
    )
    await store.add([])
    other = await PostgresRejects.open(postgres_dsn, crawl_id="c2")
    await other.add([Reject("note", None, "http://b/", "bad", {}, 9.0)])
    assert await store.counts() == {"note": 2}
    assert await other.counts() == {"note": 1}
    await store.close()
    await other.close()
    at = [dt.datetime.fromtimestamp(s, dt.UTC) for s in (7.0, 8.0)]
    assert reject_rows(postgres_dsn)[:2] == [
        ("c1", "note", None, "http://a/", "bad", {"d": "Decimal('1.5')"}, at[0]),
        ("c1", "note", "k", "http://a/", "why", {"t": ["x"]}, at[1]),
    ]


class Quote(pydantic.BaseModel):
    text: str


async def test_a_pipeline_over_postgres_keeps_invalid_items_and_stores_nul_text(
    postgres_dsn: str,
) -> None:
    # What a distributed worker's pipeline does: the invalid item is kept, not dropped, and
    # a NUL in the page's text no longer fails the page's whole batch.
    migrate(postgres_dsn)
    sink = await PostgresSink.open(postgres_dsn, crawl_id="c1")
    rejects = await PostgresRejects.open(postgres_dsn, crawl_id="c1")
    pipeline = Pipeline(
        default_processors({"quote": Quote}), sink, events=EventBus(), rejects=rejects
    )
    outcome = await pipeline.process(
        [Item("quote", {"text": "a\x00b"}, key="1"), Item("quote", {"txt": "x"}, key="2")],
        "example.com",
        fetched_at=50.0,
    )
    await pipeline.close()
    await rejects.close()
    assert (outcome.stored, outcome.invalid) == (1, 1)
    assert [r[1:3] for r in rows(postgres_dsn)] == [("1", {"text": "ab"})]
    assert [(r[0], r[2], r[4]) for r in reject_rows(postgres_dsn)] == [
        ("c1", "2", "text: Field required")
    ]


async def test_concurrent_pages_of_one_process_share_a_sink_and_a_reject_store(
    postgres_dsn: str,
) -> None:
    migrate(postgres_dsn)
    sink = await PostgresSink.open(postgres_dsn, crawl_id="c1")
    rejects = await PostgresRejects.open(postgres_dsn, crawl_id="c1")
    pages = range(20)
    await asyncio.gather(
        *(sink.write([Item("page", {"n": n}, key=str(n))]) for n in pages),
        *(rejects.add([Reject("page", str(n), "http://a/", "bad", {}, 1.0)]) for n in pages),
    )
    assert await rejects.counts() == {"page": 20}
    await sink.close()
    await rejects.close()
    assert len(rows(postgres_dsn)) == 20


async def test_writes_that_wait_for_the_connection_are_committed_together(
    postgres_dsn: str,
) -> None:
    migrate(postgres_dsn)
    sink = await PostgresSink.open(postgres_dsn, crawl_id="c1")
    await asyncio.gather(*(sink.write([Item("page", {"n": n}, key=str(n))]) for n in range(20)))
    await sink.close()
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT xmin::text) FROM items").fetchone()
    assert row == (20, 2)  # the first write alone, then the 19 that queued behind it


async def test_a_group_with_other_work_than_page_writes_is_one_transaction(
    postgres_dsn: str,
) -> None:
    """A group that is one batch of page writes is one statement (decision 0037); one with
    other work too (a page seen again unchanged) runs in a transaction on the same
    autocommit connection, all of it committed together."""
    migrate(postgres_dsn)
    clock = FakeClock(1000.0)
    sink = await PostgresSink.open(postgres_dsn, crawl_id="g", clock=clock)

    async def page(n: int) -> None:
        items = [Item("page", {"n": n}, key=str(n))]
        await sink.write_page(items, f"http://a/{n}", [("page", str(n))])

    await page(0)
    clock.advance(10)
    await asyncio.gather(page(1), sink.page_unchanged("http://a/0"), *map(page, range(2, 6)))
    await sink.close()
    with psycopg.connect(postgres_dsn) as conn:
        got = conn.execute(
            "SELECT item_key, xmin::text, extract(epoch from last_seen) FROM items ORDER BY 1"
        ).fetchall()
    second = {xmin for key, xmin, _ in got if key in "02345"}
    assert len(second) == 1  # page 1 alone first, then the others with the unchanged page
    assert [(key, seen) for key, _, seen in got] == [(str(n), 1010) for n in range(6)]


async def test_a_write_chosen_as_a_deadlock_victim_is_tried_again(postgres_dsn: str) -> None:
    """Another transaction holds key b (inserted, not committed) and then waits for key c,
    which the sink's write has locked while it waits for b: PostgreSQL aborts one of the two
    (``deadlock detected``), here the write. The write is tried again once the other
    commits, instead of failing the page (seen in a run of 8 writers).

    A session looks for a deadlock once, ``deadlock_timeout`` after it began to wait: the
    write's sessions look after 3 s, the other's after 60, so the write is the victim however
    slowly the other comes to wait (with both at the default 1 s, a CI run whose other
    session waited over a second later had that one aborted instead)."""
    migrate(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        name = admin.execute("SELECT current_database()").fetchone()
        assert name is not None
        statement = sql.SQL("ALTER DATABASE {} SET deadlock_timeout = '3s'")
        admin.execute(statement.format(sql.Identifier(name[0])))
    sink = await PostgresSink.open(postgres_dsn, crawl_id="dl", clock=FakeClock(1000.0))
    await sink.write([Item("page", {"v": 0}, key="c", fetched_at=100.0)])
    other = await psycopg.AsyncConnection.connect(postgres_dsn)
    try:
        await other.execute("SET deadlock_timeout = '60s'")
        await other.execute(
            "INSERT INTO items (crawl_id, item_type, item_key, data, content_hash, fetched_at,"
            " first_seen, last_seen, last_changed)"
            " VALUES ('dl', 'page', 'b', '{}', 'h', to_timestamp(0), now(), now(), now())"
        )
        write = asyncio.create_task(
            sink.write(
                [Item("page", {"v": n}, key=k, fetched_at=200.0) for n, k in enumerate("bc")]
            )
        )
        await _waiting_for_a_lock(postgres_dsn)  # the write has locked c and waits for b
        await other.execute(
            "UPDATE items SET last_seen = now() WHERE crawl_id = 'dl' AND item_key = 'c'"
        )
        await other.commit()
        await asyncio.wait_for(write, timeout=10)
    finally:
        await other.close()
        await sink.close()
    assert [(key, data) for _, key, data, *_ in rows(postgres_dsn) if key in "bc"] == [
        ("b", {"v": 0}),
        ("c", {"v": 1}),
    ]


async def _waiting_for_a_lock(dsn: str) -> None:
    """Until a session of the database waits for a row lock (the sink's write waiting for
    key b), so the test's next statement closes the deadlock whatever the machine's load."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
        for _ in range(200):
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = await cursor.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the sink's write never waited for the other transaction's row")
