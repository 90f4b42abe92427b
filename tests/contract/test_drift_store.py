"""The ``QueueStore`` contract for drift tests (``observe_drift``): every backend steps the
test as ``frontier/drift.py`` does, writes the mark in the step that fires, and keeps the
test in the domain's record."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawlfleet.frontier.drift import DriftPage, DriftRule, DriftTest
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.sqlite.schema import SCHEMA, SCHEMA_VERSION
from tests.contract.test_queue_store import FREE

PAUSE = DriftRule("paused")
GOOD = DriftPage(False, 1, {"name": 1, "price": 1})
BROKEN = DriftPage(True, 1, {"name": 0, "price": 0})


async def feed(store: QueueStore, pages: list[DriftPage], parser: str = "item") -> list[DriftTest]:
    return [await store.observe_drift("a.test", parser, page, PAUSE) for page in pages]


async def test_every_store_steps_the_test_as_the_reference_does(store: QueueStore) -> None:
    pages = [GOOD] * 30 + [BROKEN] * 10
    reference = DriftTest()
    for page, got in zip(pages, await feed(store, pages), strict=True):
        reference.take(page)
        assert got.to_json() == reference.to_json()
    assert reference.fired_at == 37  # 30 good pages, then the 7th broken one fires


async def test_the_firing_step_writes_the_mark_beside_the_other_strategy_keys(
    store: QueueStore,
) -> None:
    await store.set_strategy("a.test", {"fetcher": "browser"})
    tests = await feed(store, [GOOD] * 30 + [BROKEN] * 6)
    assert not any(test.just_fired for test in tests)
    assert (await store.domain("a.test")).strategy == {"fetcher": "browser"}
    (fired,) = await feed(store, [BROKEN])
    assert fired.just_fired
    assert fired.fired_at == 37
    view = await store.domain("a.test")
    assert view.strategy == {"fetcher": "browser", "drift.item": "paused"}
    assert view.drift["item"].to_json() == fired.to_json()
    (later,) = await feed(store, [BROKEN])
    assert not later.just_fired  # fires once


async def test_a_test_whose_mark_was_cleared_starts_over_keeping_its_baseline(
    store: QueueStore,
) -> None:
    await feed(store, [GOOD] * 30 + [BROKEN] * 7)
    await store.set_strategy("a.test", {})  # resume-parser clears the mark
    (again,) = await feed(store, [GOOD])
    assert (again.fired_at, again.statistic) == (None, 0.0)
    assert (again.rest_pages, again.rest_mismatches) == (32, 1)  # the break's pages not in it
    # 2/35 then 3/36 (the first taught it): 2.17 + 7 x 1.79 = 14.7 < 15
    tests = await feed(store, [BROKEN] * 9)
    assert [test.just_fired for test in tests] == [False] * 8 + [True]
    assert (await store.domain("a.test")).strategy == {"drift.item": "paused"}


async def test_the_field_diff_sets_the_baseline_against_the_run_that_fired(
    store: QueueStore,
) -> None:
    (fired,) = (await feed(store, [GOOD] * 30 + [BROKEN] * 7))[-1:]
    assert fired.field_diff() == {"name": (1.0, 0.0), "price": (1.0, 0.0)}
    assert (fired.rest_items, fired.run_pages, fired.run_items) == (30, 7, 7)


async def test_tests_are_per_parser_and_domain(store: QueueStore) -> None:
    await feed(store, [BROKEN] * 20, parser="list")
    (other,) = await feed(store, [GOOD])
    assert other.pages == 1
    assert await store.observe_drift("b.test", "list", GOOD, PAUSE) == DriftTest(
        pages=1, rest_pages=1, rest_items=1, rest_filled={"name": 1, "price": 1}
    )  # fmt: skip
    assert set((await store.domain("a.test")).drift) == {"list", "item"}


async def test_a_sqlite_file_keeps_its_tests_across_opens(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        await feed(store, [GOOD] * 30)
    finally:
        await store.close()
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        tests = await feed(store, [BROKEN] * 7)
    finally:
        await store.close()
    assert tests[-1].just_fired
    assert tests[-1].fired_at == 37


async def test_a_version_4_file_gains_the_drift_column(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as db:
        for statement in SCHEMA:
            db.execute(statement.replace(",\n    drift TEXT NOT NULL DEFAULT '{}'", ""))
        db.execute("INSERT INTO domains (domain, strategy) VALUES ('a.test', '{\"tier\": \"1\"}')")
        db.execute("PRAGMA user_version = 4")
    store = await SqliteQueueStore.open(path, policy=FREE)
    try:
        (test,) = await feed(store, [GOOD])
        assert (await store.domain("a.test")).strategy == {"tier": "1"}
    finally:
        await store.close()
    assert test.pages == 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (5,)
