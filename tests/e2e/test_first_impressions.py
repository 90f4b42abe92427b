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
