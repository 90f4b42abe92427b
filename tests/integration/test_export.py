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


VERSION_1_ITEMS = """
CREATE TABLE items (
    item_type TEXT NOT NULL, item_key TEXT NOT NULL, data TEXT NOT NULL,
    content_hash TEXT NOT NULL, first_seen REAL NOT NULL, last_seen REAL NOT NULL,
    last_changed REAL NOT NULL, PRIMARY KEY (item_type, item_key)
);
CREATE TABLE rejects (
    id INTEGER PRIMARY KEY, item_type TEXT NOT NULL, item_key TEXT, url TEXT NOT NULL,
    reason TEXT NOT NULL, data TEXT NOT NULL, at REAL NOT NULL
);
INSERT INTO items VALUES ('product', 'a', '{"name": "Tea"}', 'h', 1.0, 2.0, 1.0);
INSERT INTO rejects VALUES (1, 'product', 'z', 'http://a/', 'bad', '{}', 1.0);
"""


def version_1_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(VERSION_1_ITEMS)
    db.close()
    return path


def test_a_file_from_before_crawl_ids_still_exports(tmp_path: Path) -> None:
    items = version_1_file(tmp_path / "state" / "items.sqlite")
    code, output = run("--state", str(items.parent), "-o", str(tmp_path / "old.jsonl"))
    assert code == 0, output
    assert orjson.loads((tmp_path / "old.jsonl").read_bytes()) == {
        "type": "product",
        "key": "a",
        "name": "Tea",
    }
    code, output = run(
        "--state", str(items.parent), "--crawl-id", "x", "-o", str(tmp_path / "x.jsonl")
    )
    assert code == 2
    assert "from before crawl ids" in output


async def test_opening_a_file_from_before_crawl_ids_gives_its_rows_to_that_crawl(
    tmp_path: Path,
) -> None:
    items = version_1_file(tmp_path / "items.sqlite")
    sink = await SqliteSink.open(items, crawl_id="resumed")
    await sink.write([Item("product", {"name": "Tea"}, key="a"), Item("product", {}, key="b")])
    stored = await sink.stored()
    await sink.close()
    assert [(s.crawl_id, s.item_key, s.first_seen) for s in stored] == [
        ("resumed", "a", 1.0),
        ("resumed", "b", stored[1].last_seen),
    ]
    db = sqlite3.connect(items)
    assert db.execute("SELECT crawl_id, reason FROM rejects").fetchall() == [("resumed", "bad")]
    db.close()


async def test_a_file_of_several_crawls_exports_the_one_asked_for(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    for crawl, name in (("monday", "Tea"), ("tuesday", "Coffee")):
        sink = await SqliteSink.open(state_dir / "items.sqlite", crawl_id=crawl)
        await sink.write([Item("product", {"name": name}, key="a")])
        await sink.add([Reject("product", "z", "http://a/", f"bad on {crawl}", {}, 1.0)])
        await sink.close()
    code, output = run("--state", str(state_dir), "-o", str(tmp_path / "all.jsonl"))
    assert code == 2
    assert "several crawls (monday, tuesday): choose one with --crawl-id" in output
    assert len(output.strip().splitlines()) == 1
    assert not (tmp_path / "all.jsonl").exists()
    code, output = run(
        "--state", str(state_dir), "--crawl-id", "tuesday", "-o", str(tmp_path / "t.jsonl")
    )
    assert code == 0, output
    assert orjson.loads((tmp_path / "t.jsonl").read_bytes())["name"] == "Coffee"
    code, output = run(
        "--state", str(state_dir), "--crawl-id", "monday", "-o", str(tmp_path / "m.sqlite")
    )
    assert code == 0, output
    db = sqlite3.connect(tmp_path / "m.sqlite")
    assert db.execute("SELECT crawl_id, data FROM items").fetchall() == [
        ("monday", '{"name":"Tea"}')
    ]
    assert db.execute("SELECT reason FROM rejects").fetchall() == [("bad on monday",)]
    db.close()
