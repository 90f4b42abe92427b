"""The PostgreSQL sink against a private server: schema, upsert semantics, outages."""

from __future__ import annotations

import psycopg
import pytest

from crawlfleet.clock import FakeClock
from crawlfleet.errors import StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate

pytestmark = pytest.mark.postgres


def rows(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT item_type, item_key, data, extract(epoch from first_seen), "
            "extract(epoch from last_seen), extract(epoch from last_changed) "
            "FROM items ORDER BY 1, 2"
        ).fetchall()


def test_migrate_is_idempotent(postgres_dsn: str) -> None:
    assert migrate(postgres_dsn) == [1, 2]
    assert migrate(postgres_dsn) == []


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
