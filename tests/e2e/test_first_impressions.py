"""First impressions (issue #37.10): the demo scrapes with the bundled example parsers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson

from tests.fixtures.cli import run_cli

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
