"""The README's runnable snippets run as written against the demo site (issue #37.10).

A fenced block after ``<!-- readme-run: NAME -->`` is either a file the next commands use
(NAME has a suffix: it is saved under that name) or commands (every ``crawlfleet`` line is
run, ``:8800`` and ``--port 8800`` being the test site's port; ``export K=V`` sets a variable for the next ones),
in a directory where ``examples/`` is the repository's. ``EXPECTED`` checks what each
command block wrote and its last command printed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawlfleet.demosite import PRODUCTS, ThreadedDemoSite
from crawlfleet.demosite.jsapp import JS_ITEMS as JSAPP_ITEMS
from tests.fixtures.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKED = re.compile(r"<!-- readme-run: (\S+) -->\n```\w*\n(.*?)\n```", re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    return MARKED.findall(README.read_text())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def products(path: Path) -> None:
    keys = sorted(int(item["key"]) for item in read_jsonl(path) if item["type"] == "product")
    assert keys == [product.id for product in PRODUCTS]


def changed_and_gone(printed: str) -> None:
    records = [orjson.loads(line) for line in printed.splitlines()]
    later = [(record["change"], record["key"]) for record in records[len(PRODUCTS) :]]
    assert [record["change"] for record in records[: len(PRODUCTS)]] == ["new"] * len(PRODUCTS)
    assert sorted(later) == [("changed", "4"), ("gone", "21")]


def items_with_their_aisle(path: Path, key: Callable[[dict[str, Any]], str]) -> None:
    items = read_jsonl(path)
    categories = {key(item): item["category"] for item in items}
    assert len(items) == len(PRODUCTS)
    assert categories == {str(product.id): product.category for product in PRODUCTS}


def js_items(path: Path) -> None:
    items = read_jsonl(path)
    assert {item["type"] for item in items} == {"js_item"}
    assert sorted(int(item["key"]) for item in items) == list(range(1, JSAPP_ITEMS + 1))
    assert all(item["name"] for item in items)


EXPECTED: dict[str, Callable[[Path, str], None]] = {
    "shop-example": lambda cwd, _: products(cwd / "products.jsonl"),
    "change-feed": lambda _, printed: changed_and_gone(printed),
    "aisles": lambda cwd, _: items_with_their_aisle(
        cwd / "aisles.jsonl", lambda item: item["key"].rstrip("/").rsplit("/", 1)[1]
    ),
    "aisles-declarative": lambda cwd, _: items_with_their_aisle(
        cwd / "aisles-toml.jsonl", lambda item: item["key"]
    ),
    "js-items": lambda cwd, _: js_items(cwd / "js-items.jsonl"),
}


def test_every_marked_command_block_has_its_check() -> None:
    commands = {name for name, _ in blocks() if "." not in name}
    assert commands == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_readme_snippet_runs_as_written(
    name: str, tmp_path: Path, testsite: ThreadedDemoSite
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env: dict[str, str] = {}
    printed = ""
    try:
        for block_name, text in blocks():
            if "." in block_name:
                (tmp_path / block_name).write_text(text + "\n")
            elif block_name == name:
                printed = run_block(text, tmp_path, testsite.port, env)
    finally:
        testsite.site.edits.reset()  # the change feed's block edits the shared site
    EXPECTED[name](tmp_path, printed)


def run_block(text: str, cwd: Path, port: int, env: dict[str, str]) -> str:
    """Run a block's commands; the standard output of the last."""
    printed = ""
    for line in text.replace("\\\n", " ").splitlines():
        line = line.replace(":8800", f":{port}").replace("--port 8800", f"--port {port}")
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            for word in words[1:]:
                variable, _, value = word.partition("=")
                env[variable] = value
            continue
        assert words[0] == "crawlfleet", line
        result = run_cli(*words[1:], cwd=cwd, env=env, timeout_s=120)
        assert result.returncode == 0, (line, result.stderr)
        printed = result.stdout
    return printed
