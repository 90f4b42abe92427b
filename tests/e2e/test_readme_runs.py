"""Every code block of the README is run and checked, or says why not (issue #37.10).

Each fenced block has one marker on the line just before it:

- ``<!-- readme-run: NAME -->``: commands. Every block of that NAME runs, in document order,
  in one directory where ``examples/`` is the repository's, against the test site (``:8800``
  and ``--port 8800`` become its port; a ``crawlfleet demo-site ... &`` line is that site).
  Each ``crawlfleet`` line must exit 0, or N when its comment says ``exits N``; ``export K=V``
  sets a variable for the next ones, ``cat > FILE <<'TAG'`` writes a file, ``> FILE`` keeps a
  command's output. ``CHECKS[NAME]`` then checks what the commands wrote and printed.
- ``<!-- readme-run: FILE.ext -->``: a file saved under that name before the commands run.
- ``<!-- readme-output: NAME -->``: what the last command of the run NAME prints: each line
  must be in its output (JSON lines are compared without their ``"at"`` time).
- ``<!-- readme-settings -->``: a TOML config: loaded as ``--config`` (every key checked) and
  its selector parsers built.
- ``<!-- readme-module -->``: a parser module: imported by the parser loader.
- ``<!-- readme-checked-by: PATH -->``: the test file PATH reads and runs this block (it holds
  the marker's text to find it).
- ``<!-- readme-not-run: REASON -->``: why it cannot run here (and what tests it instead).

A block without a marker fails ``test_every_readme_block_is_run_or_says_why_not``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawlfleet.demosite import PRODUCTS, ThreadedDemoSite
from crawlfleet.demosite.jsapp import JS_ITEMS as JSAPP_ITEMS
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.settings.loading import load_settings
from tests.fixtures.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^<!-- (readme-[a-z-]+)(?:: (.+?))? -->$")
KINDS = {
    "readme-run",
    "readme-output",
    "readme-settings",
    "readme-module",
    "readme-checked-by",
    "readme-not-run",
}
EXITS = re.compile(r"#.*\bexits (\d+)")
HEREDOC = re.compile(r"^cat > (\S+) <<'(\w+)'$")
Done = subprocess.CompletedProcess[str]


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    text: str
    kind: str
    arg: str

    def __str__(self) -> str:
        first = self.text.splitlines()[0] if self.text else ""
        return f"README.md:{self.line} ({first[:60]!r})"


def blocks() -> list[Block]:
    """Every fenced block, with the marker on the line before it (kind ``""``: none)."""
    lines = README.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, lang = fence.groups()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        text = "\n".join(line[len(indent) :] for line in lines[i + 1 : end])
        marker = MARKER.match(lines[i - 1].strip()) if i else None
        kind, arg = marker.groups() if marker else ("", "")
        found.append(Block(i + 1, lang, text, kind, arg or ""))
        i = end + 1
    return found


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


def shop_parsers(cwd: Path, done: list[Done]) -> None:
    """Run: crawl, parse (fetched), parse (saved), new-parser, check, export."""
    products(cwd / "products.jsonl")
    first = PRODUCTS[0]
    for parsed in (done[1], done[2]):  # the product page, fetched and saved
        (item,) = orjson.loads(parsed.stdout)["items"]
        assert (item["key"], item["name"]) == (str(first.id), first.name)
    assert (cwd / "test_site_127_0_0_2.py").exists()  # new-parser
    products(cwd / "exported.jsonl")


def archived_and_reparsed(cwd: Path, done: list[Done]) -> None:
    products(cwd / "products.jsonl")
    products(cwd / "products-again.jsonl")
    assert "1 capture(s)" in done[1].stderr
    assert (cwd / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert (cwd / "warc" / "shop" / "index.cdxj").read_text().count("\n") > len(PRODUCTS)


def picky_climbs_to_impersonate(cwd: Path, done: list[Done]) -> None:
    assert "crawl default: 31 done, 0 dead-lettered, 0 pending" in done[0].stderr
    (row,) = [line for line in done[1].stdout.splitlines() if "127.0.0.4" in line]
    assert "level 2, challenge page (HTTP 403, 'access denied')" in row
    assert "fetcher=impersonate, rung=impersonate" in row


def jsapp_items_and_quotes(cwd: Path, done: list[Done]) -> None:
    types = [item["type"] for item in read_jsonl(cwd / "js.jsonl")]
    assert types.count("js_item") == JSAPP_ITEMS
    assert types.count("guarded_quote") > 0  # behind the JS cookie challenge


CHECKS: dict[str, Callable[[Path, list[Done]], None]] = {
    "refused": lambda _, done: None,  # its output block is compared line by line
    "shop-example": lambda cwd, _: products(cwd / "products.jsonl"),
    "shop-parsers": shop_parsers,
    "change-feed": lambda _, done: changed_and_gone(done[-1].stdout),
    "aisles": lambda cwd, _: items_with_their_aisle(
        cwd / "aisles.jsonl", lambda item: item["key"].rstrip("/").rsplit("/", 1)[1]
    ),
    "aisles-declarative": lambda cwd, _: items_with_their_aisle(
        cwd / "aisles-toml.jsonl", lambda item: item["key"]
    ),
    "js-items": lambda cwd, _: js_items(cwd / "js-items.jsonl"),
    "jsapp": jsapp_items_and_quotes,
    "archive": archived_and_reparsed,
    "picky": picky_climbs_to_impersonate,
}
SLOW = {"archive", "picky", "jsapp"}  # 10-20 s each
BROWSER = {"js-items", "jsapp"}


def runs() -> list[Any]:
    """``CHECKS``' names, marked ``slow`` and ``browser`` where they are."""
    return [
        pytest.param(
            name,
            id=name,
            marks=[
                *([pytest.mark.slow] if name in SLOW else []),
                *([pytest.mark.browser] if name in BROWSER else []),
            ],
        )
        for name in sorted(CHECKS)
    ]


def test_every_readme_block_is_run_or_says_why_not() -> None:
    found = blocks()
    unmarked = [str(block) for block in found if block.kind not in KINDS]
    assert not unmarked, "README blocks with no readme-* marker: " + ", ".join(unmarked)
    for block in found:
        if block.kind == "readme-not-run":
            assert len(block.arg.split()) >= 3, f"{block}: say why it cannot run here"
        if block.kind == "readme-checked-by":
            marker = f"<!-- readme-checked-by: {block.arg} -->"
            assert marker in (ROOT / block.arg).read_text(), f"{block}: {block.arg} never reads it"
        if block.kind == "readme-output":
            assert block.arg in CHECKS, f"{block}: no run {block.arg!r}"
    commands = {b.arg for b in found if b.kind == "readme-run" and "." not in b.arg}
    assert commands == set(CHECKS)


@pytest.mark.parametrize("name", runs())
def test_a_readme_snippet_runs_as_written(
    name: str, tmp_path: Path, testsite: ThreadedDemoSite
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    found = blocks()
    env: dict[str, str] = {}
    done: list[Done] = []
    try:
        for block in found:
            if block.kind == "readme-run" and "." in block.arg:
                (tmp_path / block.arg).write_text(block.text + "\n")
        for block in found:
            if block.kind == "readme-run" and block.arg == name:
                done += run_block(block.text, tmp_path, testsite.port, env)
    finally:
        testsite.site.edits.reset()  # the change feed's block edits the shared site
    CHECKS[name](tmp_path, done)
    for block in found:
        if block.kind == "readme-output" and block.arg == name:
            shown_in(block, done[-1].stdout + done[-1].stderr)


def shown_in(block: Block, printed: str) -> None:
    """Each line of ``block`` is a line of ``printed`` (JSON: the same object, ``at`` aside)."""
    if block.lang == "json":
        records = [_timeless(line) for line in printed.splitlines() if line.startswith("{")]
        for line in block.text.splitlines():
            assert _timeless(line) in records, (str(block), line, printed)
        return
    lines = printed.splitlines()
    for line in block.text.splitlines():
        assert line in lines, (str(block), line, printed)


def _timeless(line: str) -> dict[str, Any]:
    record: dict[str, Any] = orjson.loads(line)
    record.pop("at", None)
    return record


def run_block(text: str, cwd: Path, port: int, env: dict[str, str]) -> list[Done]:
    """Run a block's commands; each ``crawlfleet`` command's result, in order."""
    done: list[Done] = []
    lines = iter(text.replace("\\\n", " ").splitlines())
    for line in lines:
        line = line.replace(":8800", f":{port}").replace("--port 8800", f"--port {port}")
        heredoc = HEREDOC.match(line)
        if heredoc is not None:
            path, tag = heredoc.groups()
            body = list(iter(lambda: next(lines), tag))  # up to the closing tag
            (cwd / path).write_text("\n".join(body) + "\n")
            continue
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            for word in words[1:]:
                variable, _, value = word.partition("=")
                env[variable] = value
            continue
        assert words[0] == "crawlfleet", line
        if words[1] == "demo-site" and words[-1] == "&":
            continue  # the test's own demo site serves it
        into = None
        if ">" in words:
            words, into = words[: words.index(">")], words[words.index(">") + 1]
        result = run_cli(*words[1:], cwd=cwd, env=env, timeout_s=120)
        expected = EXITS.search(line)
        assert result.returncode == int(expected[1] if expected else 0), (line, result.stderr)
        if into is not None:
            (cwd / into).write_text(result.stdout)
        done.append(result)
    return done


def test_readme_settings_blocks_load(tmp_path: Path) -> None:
    configs = [block for block in blocks() if block.kind == "readme-settings"]
    assert configs
    for block in configs:
        path = tmp_path / f"readme-{block.line}.toml"
        path.write_text(block.text + "\n")
        settings = load_settings(path)
        load_parsers((), settings.selector_parsers, use_entry_points=False)


def test_readme_parser_modules_load(tmp_path: Path) -> None:
    modules = [block for block in blocks() if block.kind == "readme-module"]
    assert modules
    for block in modules:
        path = tmp_path / f"readme_{block.line}.py"
        path.write_text(block.text + "\n")
        load_parsers([str(path)], use_entry_points=False)
