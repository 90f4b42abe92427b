"""``crawlfleet shell``, driven non-interactively: commands piped on stdin."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import CRAWLFLEET, SRC

PARSER = """
from crawlfleet.parsing.plugins import parser


@parser(domain="127.0.0.3", pattern="/page/*")
def quotes(response):
    for quote in response.css("div.quote"):
        yield {"text": quote.css_first("span.text").text()}
    yield "/page/99/"
"""


def shell(*args: str, stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    env["PYTHONPATH"] = SRC
    return subprocess.run(
        [CRAWLFLEET, "shell", *args],
        input=stdin,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_response_parse_fetch_and_view(site: ThreadedDemoSite, tmp_path: Path) -> None:
    (tmp_path / "quotes_parser.py").write_text(PARSER)
    commands = "\n".join(
        [
            "print('title:', response.css_first('title').text())",
            "parsed = parse()",
            "print('items:', len(parsed.items))",
            f"fetch({site.url('quotes', '/page/2/')!r})",
            "print('now:', response.url)",
            "print('page:', open(str(view())).read() == response.text)",
            "",
        ]
    )
    result = shell(
        site.url("quotes", "/page/1/"),
        "--parsers",
        "quotes_parser.py",
        "--allow-private-addresses",
        stdin=commands,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "title: Quotes, page 1 | Quotes" in out
    assert '"parser": "quotes"' in out
    assert "quotes: 10 items, 1 links" in out
    assert "items: 10" in out
    assert f"HTTP 200 {site.url('quotes', '/page/2/')}" in out
    assert f"now: {site.url('quotes', '/page/2/')}" in out
    assert "page: True" in out
    assert "parser 'quotes'" in result.stderr  # the banner
    assert [r.path for r in site.log if r.path != "/robots.txt"] == ["/page/1/", "/page/2/"]


def test_a_saved_page_and_a_bad_target(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><head><title>Saved</title></head><body><a href='/x'>x</a></body></html>")
    result = shell(
        str(page), stdin="print(response.css_first('title').text())\nparse()\n", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "Saved" in result.stdout
    assert "default: 1 items, 1 links" in result.stdout
    bad = shell("http://127.0.0.1:1/", stdin="", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ")
    assert len(bad.stderr.splitlines()) == 1
