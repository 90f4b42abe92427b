"""``parse``, ``new-parser`` and ``check`` on a small Typer app, offline and over loopback."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from crawlfleet.cli.parsers import module_name, register
from crawlfleet.demosite import ThreadedDemoSite

PAGE = """<html><head><title>Saved</title></head><body>
<h1>Book A</h1><a href="/catalogue/b.html">B</a><a href="mailto:x@y.example">mail</a>
</body></html>"""

PLUGIN = """
from crawlfleet.parsing import Contract, parser

@parser("books.example", name="books", sample_url={sample!r},
        contract=Contract(min_items=1, required_fields=["title"]))
def books(response):
    h1 = response.css_first("h1")
    yield {{"key": response.url, "title": h1.text() if h1 else None}}
    yield "/next"

@parser("broken.example", name="broken")
def broken(response):
    raise ValueError("selector drifted")
"""


def app() -> typer.Typer:
    application = typer.Typer(pretty_exceptions_enable=False)
    register(application)
    return application


def run(*args: str) -> Any:
    return CliRunner().invoke(app(), list(args))


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "page.html"
    path.write_text(PAGE)
    return path


def plugin(tmp_path: Path, sample: str | None = None, name: str = "books_plugin.py") -> Path:
    path = tmp_path / name
    path.write_text(PLUGIN.format(sample=sample))
    return path


def test_parse_a_saved_page_with_the_default_parser(saved: Path) -> None:
    result = run("parse", str(saved), "--url", "https://books.example/catalogue/a.html")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["parser"] == "default"
    assert out["items"][0]["title"] == "Saved"
    assert out["links"] == [
        {"url": "https://books.example/catalogue/b.html", "priority": 0, "fetcher": None}
    ]
    assert "default: 1 items, 1 links" in result.stderr


def test_parse_selects_the_plugin_by_url_or_by_name(saved: Path, tmp_path: Path) -> None:
    module = str(plugin(tmp_path))
    result = run("parse", str(saved), "--parsers", module, "--url", "https://books.example/a")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["parser"], out["items"][0]["title"]) == ("books", "Book A")
    assert out["links"][0]["url"] == "https://books.example/next"
    by_name = run("parse", str(saved), "--parsers", module, "--parser", "books")
    assert json.loads(by_name.stdout)["parser"] == "books"


def test_parse_reports_a_raising_parser_and_bad_modules(saved: Path, tmp_path: Path) -> None:
    module = str(plugin(tmp_path))
    result = run("parse", str(saved), "--parsers", module, "--parser", "broken")
    assert result.exit_code == 1
    assert "ValueError: selector drifted" in result.stderr
    bad = tmp_path / "bad_module.py"
    bad.write_text("def (:\n")
    result = run("parse", str(saved), "--parsers", str(bad))
    assert result.exit_code == 2
    assert "bad_module.py" in result.stderr
    assert "SyntaxError" in result.stderr
    assert run("parse", "not-a-file-or-url").exit_code == 2


def test_parse_with_selector_parsers_from_a_config(saved: Path, tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(
        '[[crawl.selector_parsers]]\nname = "h1s"\ndomain = "books.example"\n'
        'fields.heading = { css = "h1" }\n'
    )
    result = run("parse", str(saved), "--config", str(config), "--url", "https://books.example/")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["items"][0]["heading"] == "Book A"


def test_parse_a_live_page_over_loopback(site: ThreadedDemoSite, tmp_path: Path) -> None:
    url = site.url("shop", "/")
    refused = run("parse", url)
    assert refused.exit_code == 2
    saved = tmp_path / "shop.html"
    result = run("parse", url, "--allow-private-addresses", "--save", str(saved))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == 200
    assert out["items"][0]["type"] == "page"
    assert out["links"]
    assert saved.read_bytes().lstrip().lower().startswith(b"<!doctype html")


def load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"generated_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_new_parser_writes_a_module_a_page_and_a_passing_test(tmp_path: Path) -> None:
    result = run("new-parser", "Books.Example", "--dir", str(tmp_path), "--offline")
    assert result.exit_code == 0, result.output
    assert "placeholder" in result.stderr
    assert (tmp_path / "pages" / "books_example.html").is_file()
    generated_test = load_module(tmp_path / "test_books_example.py")
    generated_test.test_parser_on_saved_page()
    again = run("new-parser", "books.example", "--dir", str(tmp_path))
    assert again.exit_code == 1
    assert "not overwriting" in again.stderr
    sys.modules.pop("generated_test_books_example", None)


def test_module_names() -> None:
    assert module_name("books.toscrape.com") == "books_toscrape_com"
    assert module_name("127.0.0.2") == "site_127_0_0_2"
    assert module_name("xn--bcher-kva.example") == "xn_bcher_kva_example"


def test_check_passes_and_fails_on_contracts(saved: Path, tmp_path: Path) -> None:
    good = plugin(tmp_path, sample=saved.resolve().as_uri(), name="good_plugin.py")
    result = run("check", "--parsers", str(good))
    assert result.exit_code == 0, result.output
    assert "ok" in result.stderr
    empty = tmp_path / "empty.html"
    empty.write_text("<p>no heading</p>")
    failing = plugin(tmp_path, sample=empty.resolve().as_uri(), name="failing_plugin.py")
    result = run("check", "--parsers", str(failing))
    assert result.exit_code == 1
    assert "title" in result.stderr


def test_check_against_a_live_page(site: ThreadedDemoSite, tmp_path: Path) -> None:
    module = plugin(tmp_path, sample=site.url("shop", "/"), name="live_plugin.py")
    assert run("check", "--parsers", str(module)).exit_code == 1  # loopback refused
    result = run("check", "--parsers", str(module), "--allow-private-addresses")
    assert result.exit_code == 0, result.output


def test_check_with_nothing_to_check() -> None:
    result = run("check")
    assert result.exit_code == 0
    assert "nothing to check" in result.stderr
