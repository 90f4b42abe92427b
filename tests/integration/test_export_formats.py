"""The JSON and Parquet exports, from ``crawlfleet export`` and from a crawl's ``-o``."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.models import Item
from crawlfleet.pipeline.export import export_items
from crawlfleet.pipeline.hashing import content_hash
from crawlfleet.pipeline.parquet import column_kinds, write_parquet
from crawlfleet.pipeline.sinks.sqlite import SqliteSink

ITEMS = [
    Item("product", {"name": "Café", "price": {"amount": "1.50", "currency": "EUR"}}, key="b"),
    Item("product", {"name": "Tea", "stock": 3, "rating": 4.5}, key="a"),
    Item("quote", {"text": "hi", "tags": ["x", "y"], "rating": 5}),
]
QUOTE_KEY = content_hash(ITEMS[2].data)
runner = CliRunner(env={"COLUMNS": "300"})


@pytest.fixture
async def state(tmp_path: Path) -> Path:
    sink = await SqliteSink.open(tmp_path / "state" / "items.sqlite")
    await sink.write(ITEMS)
    await sink.close()
    return tmp_path / "state"


def export(state: Path, *args: str) -> str:
    result = runner.invoke(app, ["export", "--state", str(state), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_json_is_one_array_of_records_in_type_and_key_order(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "items.json"
    assert "wrote 3 items" in export(state, "-o", str(out))
    records = orjson.loads(out.read_bytes())
    assert [(r["type"], r["key"]) for r in records] == [
        ("product", "a"),
        ("product", "b"),
        ("quote", QUOTE_KEY),
    ]
    assert records[1]["price"] == {"amount": "1.50", "currency": "EUR"}


def test_json_of_no_items_is_an_empty_array(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "none.json"
    assert export_items(state / "items.sqlite", out, item_type="nothing") == 0
    assert orjson.loads(out.read_bytes()) == []


def test_parquet_types_columns_and_keeps_nested_values_as_json(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "items.data"
    export(state, "-o", str(out), "--format", "parquet")
    table = pq.read_table(out)
    assert table.column_names == ["type", "key", "name", "stock", "rating", "price", "text", "tags"]
    types = {field.name: str(field.type) for field in table.schema}
    assert types["stock"] == "int64"
    assert types["rating"] == "double"  # 4.5 and 5
    assert types["price"] == "string"
    rows = table.to_pylist()
    assert rows[1]["price"] == '{"amount":"1.50","currency":"EUR"}'
    assert rows[2]["tags"] == '["x","y"]'
    assert rows[2]["rating"] == 5.0
    assert rows[0]["text"] is None


def test_parquet_is_written_in_row_groups_of_the_batch_size(tmp_path: Path) -> None:
    records = [{"type": "n", "key": str(i), "value": i} for i in range(25)]
    out = tmp_path / "n.parquet"
    assert write_parquet(lambda: iter(records), out, batch_rows=10) == 25
    assert pq.ParquetFile(out).num_row_groups == 3
    assert pq.read_table(out).column("value").to_pylist() == list(range(25))


def test_column_kinds_fall_back_to_json_for_mixed_values() -> None:
    kinds = column_kinds([{"a": 1, "b": True, "c": "x"}, {"a": "1", "b": None, "c": None}])
    assert kinds == {"type": "str", "key": "str", "a": "json", "b": "bool", "c": "str"}


def test_crawl_writes_parquet_with_dash_o(site: ThreadedDemoSite, tmp_path: Path) -> None:
    out = tmp_path / "items.parquet"
    result = runner.invoke(
        app,
        [
            "crawl",
            site.url("quotes"),
            "--state",
            str(tmp_path / "s"),
            "--allow-private-addresses",
            "--delay",
            "0",
            "--max-pages",
            "3",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.num_rows == 3
    assert set(table.column("type").to_pylist()) == {"page"}
