"""First impressions (issue #37.10): the demo scrapes with the bundled example parsers."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import assert_one_line_error, run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DUE = {"CRAWLFLEET_RECRAWL_AFTER": "0s"}  # every known page due at the next --recrawl


def test_the_demo_writes_products_quotes_and_authors(tmp_path: Path) -> None:
    parsers = f"{EXAMPLES / 'shop' / 'parsers.py'},{EXAMPLES / 'quotes' / 'parsers.py'}"
    result = run_cli("demo", "--parsers", parsers, cwd=tmp_path, timeout_s=120)
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "demo-items.jsonl").read_bytes().splitlines()
    types = Counter(orjson.loads(line)["type"] for line in lines)
    assert types["product"] == 50
    assert types["quote"] == 50
    assert types["author"] == 10


def test_new_parser_saves_the_page_it_names(tmp_path: Path, testsite: ThreadedDemoSite) -> None:
    url = testsite.url("shop", "/catalogue/page-1.html")
    result = run_cli(
        "new-parser", url, "--dir", str(tmp_path), "--allow-private-addresses", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert f"the page fetched from {url}" in result.stderr
    page = (tmp_path / "pages" / "site_127_0_0_2.html").read_bytes()
    assert b"All products" in page
    generated = (tmp_path / "test_site_127_0_0_2.py").read_text()
    assert f'URL = "{url}"' in generated
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout


def test_new_parser_refuses_a_page_it_cannot_fetch(
    tmp_path: Path, testsite: ThreadedDemoSite
) -> None:
    url = testsite.url("shop", "/catalogue/page-1.html")
    refused = run_cli("new-parser", url, "--dir", str(tmp_path), cwd=tmp_path)
    line = assert_one_line_error(refused)
    assert "--allow-private-addresses" in line
    missing = testsite.url("shop", "/no-such-page.html")
    result = run_cli(
        "new-parser", missing, "--dir", str(tmp_path), "--allow-private-addresses", cwd=tmp_path
    )
    assert "HTTP 404" in assert_one_line_error(result)
    assert not list(tmp_path.iterdir())


def test_demo_site_edit_changes_the_shop_so_the_change_feed_can_be_tried(tmp_path: Path) -> None:
    shop_example = EXAMPLES / "shop"
    crawl = [
        "crawl", "--config", str(shop_example / "crawl.toml"), "--parsers",
        str(shop_example / "parsers.py"), "--state", str(tmp_path / "state"),
        "--allow-private-addresses", "--delay", "0", "--concurrency", "8",
    ]  # fmt: skip
    with ThreadedDemoSite() as site:
        first = run_cli(*crawl, site.url("shop"), cwd=tmp_path, env=DUE, timeout_s=120)
        assert first.returncode == 0, first.stderr
        port = str(site.port)
        edited = run_cli(
            "demo-site", "edit", "--port", port, "--reprice", "4:1399", "--remove", "21",
            cwd=tmp_path,
        )  # fmt: skip
        assert edited.returncode == 0, edited.stderr
        assert edited.stdout.splitlines()[0].startswith("repriced 4 (")
        assert edited.stdout.splitlines()[1].startswith("removed 21 (")
        bad = run_cli("demo-site", "edit", "--port", port, "--remove", "99", cwd=tmp_path)
        assert "no product 99" in assert_one_line_error(bad)
        again = run_cli(*crawl, site.url("shop"), "--recrawl", cwd=tmp_path, env=DUE, timeout_s=120)
        assert again.returncode == 0, again.stderr
    feed = run_cli(
        "changes", "--state", str(tmp_path / "state"), "--format", "jsonl", "--since", "1h",
        cwd=tmp_path,
    )  # fmt: skip
    assert feed.returncode == 0, feed.stderr
    records = [orjson.loads(line) for line in feed.stdout.splitlines()]
    later = [(r["change"], r["key"]) for r in records if r["change"] != "new"]
    assert sorted(later) == [("changed", "4"), ("gone", "21")]
    changed = next(r for r in records if r["change"] == "changed")
    assert changed["fields"]["price"]["new"] == {"amount": "13.99", "currency": "GBP"}
