"""The pipeline: processor order, drops, invalid items, events, durability and data quality."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pydantic
import pytest

from crawlfleet.errors import DropItem, StateError
from crawlfleet.events import EventBus, ItemDropped, ItemInvalid, ItemsStored
from crawlfleet.models import Item
from crawlfleet.pipeline.pipeline import Pipeline, PipelineOutcome
from crawlfleet.pipeline.processors import clean_text, dedupe, normalize_price, validate
from crawlfleet.pipeline.rejects import MemoryRejects, Reject
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from tests.fixtures.clock import FakeClock


class Product(pydantic.BaseModel):
    name: str
    price: dict[str, str]


def recorded(bus: EventBus) -> list[object]:
    seen: list[object] = []
    for kind in (ItemsStored, ItemDropped, ItemInvalid):
        bus.subscribe(kind, seen.append)
    return seen


async def test_processors_run_top_to_bottom() -> None:
    calls: list[str] = []

    def step(name: str):  # type: ignore[no-untyped-def]
        def process(item: Item) -> Item:
            calls.append(f"{name}:{item.data['n']}")
            return Item(item.type, {**item.data, "trail": [*item.data.get("trail", []), name]})

        return process

    sink = MemorySink()
    pipeline = Pipeline([step("first"), step("second")], sink, events=EventBus())
    await pipeline.process([Item("t", {"n": 1}, key="1"), Item("t", {"n": 2}, key="2")], "d")
    assert calls == ["first:1", "second:1", "first:2", "second:2"]
    assert [s.data["trail"] for s in await sink.stored()] == [["first", "second"]] * 2


async def test_drops_invalid_and_stored_are_counted_and_evented() -> None:
    bus = EventBus()
    events = recorded(bus)
    sink, rejects = MemorySink(), MemoryRejects()
    clock = FakeClock(500.0)

    def no_drafts(item: Item) -> Item:
        if item.data.get("draft"):
            raise DropItem("draft")
        return item

    pipeline = Pipeline(
        [
            clean_text,
            no_drafts,
            normalize_price(["price"]),
            validate({"product": Product}),
            dedupe(),
        ],
        sink,
        events=bus,
        rejects=rejects,
        clock=clock,
    )
    url = "http://shop.example/p"
    outcome = await pipeline.process(
        [
            Item("product", {"name": " A ", "price": "£1.50"}, key="a", url=url),
            Item("product", {"name": "A", "price": "£1.50"}, key="a", url=url),
            Item("product", {"name": "B", "price": "£2", "draft": True}, key="b", url=url),
            Item("product", {"price": "£3"}, key="c", url=url),
            Item("product", {"name": "D", "price": "ask"}, key="d", url=url),
            Item("note", {"tags": {"a", "b"}}, url=url),
        ],
        "shop.example",
    )
    assert outcome == PipelineOutcome(
        stored=1,
        dropped={"duplicate": 1, "draft": 1},
        invalid=3,
        by_type={
            "product": {"stored": 1, "duplicate": 1, "dropped": 1, "invalid": 2},
            "note": {"invalid": 1},
        },
    )
    assert [(s.item_key, s.data) for s in await sink.stored()] == [
        ("a", {"name": "A", "price": {"amount": "1.50", "currency": "GBP"}})
    ]
    reasons = {r.item_key: r.reason for r in rejects.rejects}
    assert reasons["c"] == "name: Field required"
    assert reasons["d"] == "price: not a price: 'ask'"
    assert reasons[None].startswith("not JSON-serializable")
    assert all(r.url == url and r.at == 500.0 for r in rejects.rejects)
    assert rejects.rejects[0].data == {"price": {"amount": "3", "currency": "GBP"}}
    assert events.count(ItemsStored("product", 1, "shop.example")) == 1
    assert ItemDropped("product", "duplicate", url, "shop.example") in events
    assert ItemDropped("product", "draft", url, "shop.example") in events
    assert sum(isinstance(e, ItemInvalid) for e in events) == 3


async def test_rejected_item_keeps_its_data_as_it_was_when_refused() -> None:
    rejects = MemoryRejects()
    pipeline = Pipeline(
        [clean_text, validate({"product": Product})],
        MemorySink(),
        events=EventBus(),
        rejects=rejects,
    )
    await pipeline.process([Item("product", {"price": " x "}, key="c", url="u")], "d")
    assert rejects.rejects[0].data == {"price": "x"}


async def test_batch_size_splits_sink_writes() -> None:
    batches: list[int] = []

    class CountingSink(MemorySink):
        async def write(self, items: Sequence[Item]) -> None:
            batches.append(len(items))
            await super().write(items)

    sink = CountingSink()
    pipeline = Pipeline([], sink, events=EventBus(), batch_size=4)
    await pipeline.process([Item("t", {"n": n}) for n in range(10)], "d")
    assert batches == [4, 4, 2]
    assert len(await sink.stored()) == 10


class FailingSink(MemorySink):
    """A sink whose storage is down until told otherwise: a fault we cannot produce for real."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def write(self, items: Sequence[Item]) -> None:
        if self.down:
            raise StateError("items database is down")
        await super().write(items)


async def test_failed_write_raises_emits_nothing_and_the_retry_stores_everything() -> None:
    bus = EventBus()
    events = recorded(bus)
    sink = FailingSink()
    pipeline = Pipeline([dedupe()], sink, events=bus)
    page = [Item("t", {"n": 1}, key="1"), Item("t", {"n": 1}, key="1"), Item("t", {"n": 2})]
    with pytest.raises(StateError):
        await pipeline.process(page, "d")
    assert events == []
    assert pipeline.quality.snapshot()["pages"] == 0
    sink.down = False
    outcome = await pipeline.process(page, "d")
    assert outcome == PipelineOutcome(
        stored=2, dropped={"duplicate": 1}, by_type={"t": {"stored": 2, "duplicate": 1}}
    )
    assert len(await sink.stored()) == 2
    assert len(events) == 2


async def test_invalid_items_go_to_the_sqlite_rejects_table(tmp_path: Path) -> None:
    sink = await SqliteSink.open(tmp_path / "items.sqlite")
    pipeline = Pipeline([validate({"product": Product})], sink, events=EventBus(), rejects=sink)
    await pipeline.process([Item("product", {"name": "x"}, key="k", url="http://a/")], "a")
    await pipeline.close()
    db = sqlite3.connect(tmp_path / "items.sqlite")
    rows = db.execute("SELECT item_type, item_key, url, reason, data FROM rejects").fetchall()
    db.close()
    assert rows == [("product", "k", "http://a/", "price: Field required", '{"name":"x"}')]


async def test_quality_snapshot_per_crawl_and_domain() -> None:
    pipeline = Pipeline([validate({"product": Product}), dedupe()], MemorySink(), events=EventBus())
    price = {"amount": "1", "currency": "GBP"}
    await pipeline.process(
        [
            Item("product", {"name": "A", "price": price}, key="a"),
            Item("product", {"name": "", "price": price}, key="b"),
            Item("product", {"name": "A", "price": price}, key="a"),
        ],
        "one.example",
    )
    await pipeline.process([Item("product", {"price": price}, key="z")], "two.example")
    await pipeline.process([], "two.example")
    snapshot = pipeline.quality.snapshot()
    assert snapshot["pages"] == 3
    assert snapshot["items"] == 2
    assert snapshot["invalid"] == 1
    assert snapshot["duplicates"] == 1
    assert snapshot["invalid_rate"] == 0.25
    assert snapshot["items_per_page"] == round(2 / 3, 3)
    assert snapshot["fill_rate"] == {"product": {"name": 0.5, "price": 1.0}}
    assert snapshot["domains"]["one.example"]["items"] == 2
    assert snapshot["domains"]["two.example"] == {
        "pages": 2,
        "items": 0,
        "items_per_page": 0.0,
        "invalid": 1,
        "invalid_rate": 1.0,
        "duplicates": 0,
        "dropped": {},
    }


def test_reject_is_a_plain_record() -> None:
    reject = Reject("t", None, "u", "why", {"a": 1}, 1.0)
    assert reject.reason == "why"


def test_public_api() -> None:
    import crawlfleet.pipeline as pipeline
    import crawlfleet.pipeline.sinks as sinks

    for package in (pipeline, sinks):
        for name in package.__all__:
            assert getattr(package, name) is not None
    assert pipeline.Pipeline is Pipeline
    assert sinks.SqliteSink is SqliteSink


async def test_items_carry_the_fetch_time_of_their_page_unless_they_have_one() -> None:
    sink = MemorySink(clock=FakeClock(900.0))

    def rebuild(item: Item) -> Item:  # a processor that builds a new Item drops the fetch time
        if item.key == "2":
            return item
        return Item(item.type, dict(item.data), key=item.key)

    pipeline = Pipeline([rebuild], sink, events=EventBus())
    await pipeline.process([Item("t", {"n": 1}, key="1", fetched_at=3.0)], "d", fetched_at=50.0)
    await pipeline.process([Item("t", {"n": 2}, key="2", fetched_at=7.0)], "d", fetched_at=50.0)
    await pipeline.process([Item("t", {"n": 3}, key="3")], "d")
    assert [s.fetched_at for s in await sink.stored()] == [50.0, 7.0, 900.0]
