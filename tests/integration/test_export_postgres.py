"""``crawlfleet export --postgres``: a distributed crawl's items, streamed from PostgreSQL."""

from __future__ import annotations

import csv
import datetime as dt
import time
import tracemalloc
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.errors import ConfigError
from crawlfleet.models import Item
from crawlfleet.pipeline.export import export_postgres, since_epoch
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from tests.fixtures.clock import FakeClock

pytestmark = pytest.mark.postgres

T0 = 1_700_000_000.0


async def _write(dsn: str, crawl_id: str, at: float, items: list[Item]) -> None:
    sink = await PostgresSink.open(dsn, crawl_id=crawl_id, clock=FakeClock(at))
    await sink.write(items)
    await sink.close()


@pytest.fixture
async def stored(postgres_dsn: str) -> str:
    """Crawl ``shop``: two products and a quote at T0, one product changed and one seen
    again unchanged an hour later; crawl ``other``: one product."""
    migrate(postgres_dsn)
    await _write(postgres_dsn, "shop", T0, [
        Item("product", {"name": "Tea", "price": "1.50"}, key="tea", fetched_at=T0),
        Item("product", {"name": "Café [/]", "stock": 3}, key="cafe", fetched_at=T0),
        Item("quote", {"text": 'He said "hi",\nthen left'}, key="q1", fetched_at=T0),
    ])  # fmt: skip
    later = T0 + 3600
    await _write(postgres_dsn, "shop", later, [
        Item("product", {"name": "Tea", "price": "1.75"}, key="tea", fetched_at=later),
        Item("quote", {"text": 'He said "hi",\nthen left'}, key="q1", fetched_at=later),
    ])  # fmt: skip
    await _write(postgres_dsn, "other", T0, [Item("product", {"name": "X"}, key="x")])
    return postgres_dsn


def _export(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["export", *args])
    return result.exit_code, result.output


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_jsonl_of_one_crawl_ordered_by_type_and_key(stored: str, tmp_path: Path) -> None:
    out = tmp_path / "items.jsonl"
    code, output = _export("--postgres", stored, "--crawl-id", "shop", "-o", str(out))
    assert code == 0, output
    assert "wrote 3 items" in output
    assert [(r["type"], r["key"]) for r in _jsonl(out)] == [
        ("product", "cafe"), ("product", "tea"), ("quote", "q1"),
    ]  # fmt: skip
    assert _jsonl(out)[1]["price"] == "1.75"


def test_json_array_of_one_type(stored: str, tmp_path: Path) -> None:
    out = tmp_path / "quotes.json"
    code, output = _export(
        "--postgres", stored, "--crawl-id", "shop", "--type", "quote", "-o", str(out)
    )
    assert code == 0, output
    assert orjson.loads(out.read_bytes()) == [
        {"type": "quote", "key": "q1", "text": 'He said "hi",\nthen left'}
    ]


def test_csv_with_type_and_since_keeps_what_changed(stored: str, tmp_path: Path) -> None:
    out = tmp_path / "changed.csv"
    since = dt.datetime.fromtimestamp(T0 + 1800, dt.UTC).isoformat()
    code, output = _export(
        "--postgres", stored, "--crawl-id", "shop", "--format", "csv", "--type", "product",
        "--since", since, "-o", str(out),
    )  # fmt: skip
    assert code == 0, output
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows == [["type", "key", "name", "price"], ["product", "tea", "Tea", "1.75"]]


def test_since_as_an_age_and_the_quote_seen_again_unchanged_is_left_out(
    stored: str, tmp_path: Path
) -> None:
    out = tmp_path / "recent.jsonl"
    age_h = (time.time() - T0) / 3600 - 0.5  # reaches back to 30 min after T0
    code, output = _export(
        "--postgres", stored, "--crawl-id", "shop", "--since", f"{age_h:.4f}h", "-o", str(out)
    )
    assert code == 0, output
    assert [r["key"] for r in _jsonl(out)] == ["tea"]


def test_since_parses_iso_times_and_ages() -> None:
    assert since_epoch("2h", 10_000.0) == 10_000.0 - 7200
    assert since_epoch("90s", 100.0) == 10.0
    assert since_epoch("1w", 0.0) == -7 * 86400
    assert since_epoch("2023-11-14T22:13:20Z", 0.0) == T0
    assert since_epoch("2023-11-14T22:13:20", 0.0) == T0  # no zone: UTC
    assert since_epoch("2023-11-14T23:13:20+01:00", 0.0) == T0
    with pytest.raises(ConfigError, match=r"bad --since 'yesterday'"):
        since_epoch("yesterday", 0.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--crawl-id", "shop", "--format", "sqlite"], "jsonl, json, csv or parquet"),
        ([], "--postgres needs --crawl-id"),
        (["--crawl-id", "shop", "--since", "soon"], "bad --since 'soon'"),
        (["--crawl-id", "shop", "--state", "s"], "not both"),
    ],
)
def test_bad_requests_are_one_line_errors(
    stored: str, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "x.jsonl"
    code, output = _export("--postgres", stored, *args, "-o", str(out))
    assert code == 2
    assert output.startswith("error: "), output
    assert message in output
    assert not out.exists()


def test_an_unreachable_server_is_one_line_without_the_password(tmp_path: Path) -> None:
    dsn = "postgresql://crawler:s3cret-pw@127.0.0.1:1/items"
    code, output = _export("--postgres", dsn, "--crawl-id", "c", "-o", str(tmp_path / "x.jsonl"))
    assert code == 2
    assert output.startswith("error: PostgreSQL at "), output
    assert output.count("\n") == 1
    assert "s3cret-pw" not in output
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.slow
async def test_a_large_export_streams_in_bounded_memory(postgres_dsn: str, tmp_path: Path) -> None:
    migrate(postgres_dsn)
    filler = "x" * 400
    for start in range(0, 20_000, 2_000):
        items = [Item("page", {"n": n, "text": filler}, key=f"{n:06d}") for n in range(start, start + 2_000)]  # fmt: skip
        await _write(postgres_dsn, "big", T0, items)
    out = tmp_path / "big.jsonl"
    tracemalloc.start()
    try:
        count = export_postgres(postgres_dsn, out, crawl_id="big")
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert out.stat().st_size > 8_000_000
    assert peak_bytes < 4_000_000, peak_bytes  # the rows are ~9 MB: never all in memory
