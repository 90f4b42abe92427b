"""Schema drift at the sink: each change reported once, with the first items that showed it."""

from __future__ import annotations

from typing import Any

from crawlfleet.models import Item
from crawlfleet.pipeline.schema_watch import SchemaWatch


def items(count: int, start: int = 0, **data: Any) -> list[Item]:
    return [
        Item("product", dict(data), url=f"https://a.test/{n}") for n in range(start, start + count)
    ]


def test_a_steady_schema_reports_nothing() -> None:
    watch = SchemaWatch(learn_items=10, gone_after=5)
    assert watch.observe(items(100, name="x", price=1.5, tags=["a"])) == []
    assert watch.observe(items(10, name="x", price=None, tags=[])) == []  # null is no change


def test_a_new_field_and_a_type_change_are_reported_once_with_the_first_item() -> None:
    watch = SchemaWatch(learn_items=10, gone_after=5)
    watch.observe(items(10, name="x", price=1.5))
    changes = watch.observe(items(3, start=10, name="x", price="1.50", currency="EUR"))
    assert [(c.change, c.field, c.detail, c.urls) for c in changes] == [
        ("type change", "price", "number -> string", ("https://a.test/10",)),
        ("new field", "currency", "a string", ("https://a.test/10",)),
    ]
    assert watch.observe(items(20, start=13, name="x", price="2", currency="EUR")) == []


def test_a_field_that_stopped_appearing_is_reported_after_a_run_of_items_without_it() -> None:
    watch = SchemaWatch(learn_items=10, gone_after=5)
    watch.observe(items(10, name="x", price=1.5))
    assert watch.observe(items(4, start=10, name="x")) == []
    assert watch.observe(items(1, start=14, name="x", price=2)) == []  # the run starts over
    (change,) = watch.observe(items(5, start=15, name="x"))
    assert (change.change, change.field) == ("field gone", "price")
    assert change.urls == ("https://a.test/15", "https://a.test/16", "https://a.test/17")
    assert watch.observe(items(50, start=20, name="x")) == []


def test_past_the_field_cap_the_rest_is_not_watched_and_that_is_said_once() -> None:
    watch = SchemaWatch(learn_items=2, max_fields=3)
    wide = {f"f{n}": n for n in range(5)}
    (change,) = watch.observe(items(2, **wide))
    assert (change.change, change.field) == ("too many fields", "*")
    assert watch.observe(items(5, start=2, **wide)) == []
