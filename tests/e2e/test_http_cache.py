"""``--http-cache DIR``: a second identical crawl replays every response and asks the server nothing."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8"]


def crawl(tmp_path: Path, state: str, *args: str) -> str:
    result = runner.invoke(app, ["crawl", "--state", str(tmp_path / state), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_second_crawl_makes_no_request_and_stores_the_same_items(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    seed = site.url("quotes")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    crawl(
        tmp_path,
        "a",
        seed,
        *FAST,
        "--max-pages",
        "15",
        "--http-cache",
        str(cache),
        "-o",
        str(first),
    )
    fetched = len(site.log)
    assert fetched > 10
    site.clear_log()
    crawl(
        tmp_path,
        "b",
        seed,
        *FAST,
        "--max-pages",
        "15",
        "--http-cache",
        str(cache),
        "-o",
        str(second),
    )
    assert site.log == []
    assert second.read_bytes() == first.read_bytes()
    assert first.read_bytes().count(b"\n") > 10
