"""No limit drops silently: an index page of 6,000 links, crawled with and without a cap.

Before decision 0043 a cap of 5,000 links a page cut the lab's API index without a word:
1,000 function pages were never fetched and the crawl ended with exit 0 and "0 pending".
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.docindex import DOC_FUNCTIONS, GUIDES, function_names
from tests.e2e.conftest import FAST as DIST_FAST
from tests.e2e.conftest import Workers, dispatch
from tests.fixtures.cli import CRAWLFLEET, SRC
from tests.fixtures.redis_server import free_port

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "16"]
INDEX = "/docs/genindex.html"
INDEX_LINKS = DOC_FUNCTIONS + len(GUIDES) + 1  # the functions, the sidebar's guides, itself


def crawl(site: ThreadedDemoSite, tmp_path: Path, config: str = "") -> str:
    path = tmp_path / "crawl.toml"
    path.write_text(f"[crawl]\n{config}\n")
    state = tmp_path / "state"
    result = runner.invoke(
        app, ["crawl", site.url("lab", INDEX), "--config", str(path), "--state", str(state), *FAST]
    )
    assert result.exit_code == 0, result.output
    return result.output


def doc_paths() -> list[str]:
    """Every page of the documentation, the index and the guides first."""
    pages = ["/docs/genindex.html", *(f"/docs/guide/{g}.html" for g in GUIDES)]
    return pages + [f"/docs/api/{name}.html" for name in function_names()]


def fetched(site: ThreadedDemoSite) -> list[str]:
    paths = [r.path for r in site.log if r.role == "lab" and r.path != "/robots.txt"]
    assert [p for p, n in Counter(paths).items() if n > 1] == []
    return paths


def dashboard_pages(state: Path, *paths: str) -> list[str]:
    """The pages of ``crawlfleet dashboard --state`` at ``paths``, once it serves them."""
    port = free_port()
    board = subprocess.Popen(
        [CRAWLFLEET, "dashboard", "--state", str(state), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                return [get_text(f"http://127.0.0.1:{port}{path}") for path in paths]
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        board.terminate()
        board.wait(10)


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return str(reply.read().decode())


def stats_json(tmp_path: Path) -> dict[str, object]:
    data: dict[str, object] = orjson.loads((tmp_path / "state" / "stats.json").read_bytes())
    return data


def test_an_index_of_6000_links_is_crawled_whole_by_default(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    output = crawl(site, tmp_path)
    assert sorted(fetched(site)) == sorted(doc_paths())
    assert stats_json(tmp_path)["dropped"] == {}
    assert "dropped by limits" not in output


def test_links_cut_by_max_links_per_page_are_counted_and_said(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    output = crawl(site, tmp_path, "max_links_per_page = 200")
    cut = INDEX_LINKS - 200
    assert len(fetched(site)) == 200  # the index and the 199 other links it kept
    stats = stats_json(tmp_path)
    assert stats["dropped"] == {"max_links_per_page": cut}
    totals = stats["totals"]
    assert isinstance(totals, dict)
    assert totals["dropped.max_links_per_page"] == cut
    last = output.strip().splitlines()[-1]
    assert last == (
        f"dropped by limits: {cut} links (max_links_per_page {cut}); raise the setting to keep them"
    )
    # The attempt log says which page lost links.
    with sqlite3.connect(tmp_path / "state" / "state.sqlite") as db:
        rows = db.execute("SELECT url, detail FROM attempts WHERE detail IS NOT NULL").fetchall()
    assert [(url.endswith(INDEX), detail) for url, detail in rows] == [
        (True, f"dropped by limits from {INDEX_LINKS} links: max_links_per_page: {cut} links")
    ]
    status = runner.invoke(app, ["status", "--state", str(tmp_path / "state")])
    assert status.exit_code == 0, status.output
    assert f"dropped by limits: {cut} links (max_links_per_page {cut})" in status.output
    # The dashboard reads the same counters and attempt.
    pages = dashboard_pages(tmp_path / "state", "/crawl/default", "/crawl/default/attempts")
    assert f"dropped by limits: {cut} links (max_links_per_page {cut})" in pages[0]
    assert f"max_links_per_page: {cut} links" in pages[1]


def test_the_depth_limit_is_counted_by_its_name(site: ThreadedDemoSite, tmp_path: Path) -> None:
    output = crawl(site, tmp_path, "max_depth = 0\nmax_links_per_page = 10")
    assert fetched(site) == [INDEX]
    # 10 links kept, each refused past the depth; the other links were cut before.
    assert stats_json(tmp_path)["dropped"] == {
        "max_links_per_page": INDEX_LINKS - 10,
        "max_depth": 10,
    }
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith(
            f"dropped by limits: {INDEX_LINKS} links (max_links_per_page {INDEX_LINKS - 10}, "
            "max_depth 10)"
        )
    )


def test_a_distributed_crawl_counts_the_cut_links_in_its_store(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("[crawl]\nmax_links_per_page = 50\n")
    workers.start(redis_url, postgres_dsn, concurrency=4)
    backends = ("--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "cut")
    result = dispatch(site.url("lab", INDEX), "--config", str(config), *backends, *DIST_FAST)
    assert result.returncode == 0, result.stdout
    cut = INDEX_LINKS - 50
    said = f"dropped by limits: {cut} links (max_links_per_page {cut})"
    assert result.stdout.strip().splitlines()[-1].startswith(said)
    assert len(fetched(site)) == 50
    status = runner.invoke(app, ["status", "--redis", redis_url, "--crawl-id", "cut"])
    assert status.exit_code == 0, status.output
    assert said in status.output


def test_links_past_max_pages_are_counted(site: ThreadedDemoSite, tmp_path: Path) -> None:
    output = crawl(site, tmp_path, "max_pages = 20")
    assert len(fetched(site)) == 20
    over = INDEX_LINKS - 1 - 19  # its links less itself (seen) and the 19 admitted
    assert stats_json(tmp_path)["dropped"] == {"max_pages": over}
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith(f"dropped by limits: {over} links (max_pages {over})")
    )
