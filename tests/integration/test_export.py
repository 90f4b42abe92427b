"""Exporting a crawl's items file through ``crawlfleet export`` and ``export_items``."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import orjson
import pytest
import typer
from typer.testing import CliRunner

from crawlfleet.cli.export import register
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.models import Item
from crawlfleet.pipeline.export import export_items
from crawlfleet.pipeline.hashing import content_hash
from crawlfleet.pipeline.rejects import Reject
from crawlfleet.pipeline.sinks.sqlite import SqliteSink

ITEMS = [
    Item("product", {"name": "Café", "price": {"amount": "1.50", "currency": "EUR"}}, key="b"),
    Item("product", {"name": "Tea", "stock": 3}, key="a"),
    Item("quote", {"text": 'He said "hi", then left\nquietly', "tags": ["x", "y"]}),
]


@pytest.fixture
async def state(tmp_path: Path) -> Path:
    state_dir = tmp_path / "state"
    sink = await SqliteSink.open(state_dir / "items.sqlite")
    await sink.write(ITEMS)
    await sink.add([Reject("product", "z", "http://a/", "name: Field required", {}, 1.0)])
    await sink.close()
    return state_dir


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """crawlfleet, for the test."""

    register(app)
    return app


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli(), ["export", *args])
    return result.exit_code, result.output


QUOTE_KEY = content_hash(ITEMS[2].data)


def test_jsonl_round_trip(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "items.jsonl"
    code, output = run("--state", str(state), "-o", str(out))
    assert code == 0, output
    assert "wrote 3 items" in output
    assert [orjson.loads(line) for line in out.read_bytes().splitlines()] == [
        {"type": "product", "key": "a", "name": "Tea", "stock": 3},
        {"type": "product", "key": "b", **ITEMS[0].data},
        {"type": "quote", "key": QUOTE_KEY, **ITEMS[2].data},
    ]


def test_csv_of_all_types_has_a_union_header(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "items.csv"
    code, output = run("--state", str(state), "--format", "csv", "-o", str(out))
    assert code == 0, output
    with out.open(newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert table == [
        ["type", "key", "name", "stock", "price", "text", "tags"],
        ["product", "a", "Tea", "3", "", "", ""],
        ["product", "b", "Café", "", '{"amount":"1.50","currency":"EUR"}', "", ""],
        ["quote", QUOTE_KEY, "", "", "", ITEMS[2].data["text"], '["x","y"]'],
    ]


def test_csv_of_one_type(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "quotes.csv"
    code, output = run("--state", str(state), "--type", "quote", "-o", str(out))
    assert code == 0, output
    assert "wrote 1 items" in output
    with out.open(newline="", encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == ["type", "key", "text", "tags"]


def test_sqlite_copy_of_one_type(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "products.db"
    code, output = run("--state", str(state), "--type", "product", "-o", str(out))
    assert code == 0, output
    db = sqlite3.connect(out)
    try:
        keys = db.execute("SELECT item_type, item_key FROM items ORDER BY 1, 2").fetchall()
        rejects = db.execute("SELECT item_key, reason FROM rejects").fetchall()
    finally:
        db.close()
    assert keys == [("product", "a"), ("product", "b")]
    assert rejects == [("z", "name: Field required")]
    assert not Path(f"{out}-wal").exists()


def test_missing_state_is_a_clear_error(tmp_path: Path) -> None:
    code, output = run("--state", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.jsonl"))
    assert code == 2
    assert "no items database" in output
    assert not (tmp_path / "x.jsonl").exists()


def test_unknown_suffix_is_a_clear_error(state: Path, tmp_path: Path) -> None:
    code, output = run("--state", str(state), "-o", str(tmp_path / "items.xlsx"))
    assert code == 2
    assert "cannot tell the export format" in output


def test_export_items_as_the_crawl_calls_it(state: Path, tmp_path: Path) -> None:
    assert export_items(state / "items.sqlite", tmp_path / "all.sqlite") == 3
    assert export_items(state / "items.sqlite", tmp_path / "p.jsonl", item_type="product") == 2
    assert export_items(state / "items.sqlite", tmp_path / "none.csv", item_type="nope") == 0
    assert (tmp_path / "none.csv").read_text() == "type,key\n"
    with pytest.raises(ConfigError):
        export_items(state / "items.sqlite", state / "items.sqlite", fmt="sqlite")
    with pytest.raises(StateError):
        export_items(tmp_path / "missing.sqlite", tmp_path / "x.jsonl")


def test_a_corrupt_items_file_leaves_no_partial_output(tmp_path: Path) -> None:
    bad = tmp_path / "items.sqlite"
    bad.write_bytes(b"garbage " * 512)
    with pytest.raises(StateError, match=r"items\.sqlite"):
        export_items(bad, tmp_path / "out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.sqlite"]
