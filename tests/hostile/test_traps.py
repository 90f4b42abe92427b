"""Spider traps of the demo site's lab host: a crawl with the default limits ends by itself.

Each crawl runs the CLI as a user would (only ``--delay 0`` and private addresses allowed)
and is checked from the server's side: it stopped, no page was fetched twice, and the trap
was cut where the documented rule says, and counted under the rule's name (``stats.json``).
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.hazards import MANY_LINKS
from crawlfleet.settings import Settings

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8"]


def stats_json(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((tmp_path / "state" / "stats.json").read_bytes())
    return data


def attempted_urls(tmp_path: Path) -> list[str]:
    """The URLs of the attempt log of the last ``crawl``."""
    with sqlite3.connect(tmp_path / "state" / "state.sqlite") as db:
        return [url for (url,) in db.execute("SELECT url FROM attempts")]


def crawl(site: ThreadedDemoSite, tmp_path: Path, path: str, *args: str) -> list[str]:
    """Crawl one lab trap with the default limits; the lab paths fetched, robots.txt aside."""
    state = tmp_path / "state"
    result = runner.invoke(
        app, ["crawl", site.url("lab", path), "--state", str(state), *FAST, *args]
    )
    assert result.exit_code == 0, result.output
    paths = [r.path for r in site.log if r.role == "lab" and r.path != "/robots.txt"]
    assert [p for p, n in Counter(paths).items() if n > 1] == []  # nothing fetched twice
    with sqlite3.connect(state / "state.sqlite") as db:
        (pending,) = db.execute("SELECT COUNT(*) FROM requests WHERE state IN (0, 1)").fetchone()
    assert pending == 0  # nothing left behind: the crawl ended, it did not give up
    return paths


def test_calendar_trap_stops_at_the_default_depth(site: ThreadedDemoSite, tmp_path: Path) -> None:
    # Before the default depth limit: 5,857 pages in 15 s and no end.
    started = time.monotonic()
    paths = crawl(site, tmp_path, "/trap/calendar/2024/01")
    depth = Settings().max_depth
    assert depth is not None
    assert len(paths) == 2 * depth + 1  # depth months either side of the seed
    assert time.monotonic() - started < 60
    assert set(stats_json(tmp_path)["dropped"]) == {"max_depth"}  # the cut, by its name


def test_a_lifted_depth_limit_goes_deeper(site: ThreadedDemoSite, tmp_path: Path) -> None:
    paths = crawl(site, tmp_path, "/trap/calendar/2024/01", "--max-depth", "3")
    assert sorted(paths) == sorted(
        f"/trap/calendar/{y}/{m:02d}" for y, m in [(2023, 10), (2023, 11), (2023, 12)]
    ) + sorted(f"/trap/calendar/2024/{m:02d}" for m in range(1, 5))


def test_relative_link_trap_stops_at_the_repeated_segment(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    paths = crawl(site, tmp_path, "/trap/repeat/")
    assert paths == [
        "/trap/repeat/",
        "/trap/repeat/a/b/",
        "/trap/repeat/a/b/a/b/",
        "/trap/repeat/a/b/a/b/a/b/",
    ]
    assert stats_json(tmp_path)["dropped"] == {"max_path_segment_repeats": 1}


def test_facet_trap_stops_past_16_query_parameters(site: ThreadedDemoSite, tmp_path: Path) -> None:
    paths = crawl(site, tmp_path, "/trap/facets")
    counts = sorted(len(parse_qsl(urlsplit(p).query)) for p in paths)
    assert counts == list(range(17))  # 0 .. 16 parameters, never 17
    assert set(stats_json(tmp_path)["dropped"]) == {"max_query_params"}


def test_a_500000_character_url_is_not_fetched(site: ThreadedDemoSite, tmp_path: Path) -> None:
    assert crawl(site, tmp_path, "/trap/long-url") == ["/trap/long-url"]
    assert max(len(url) for url in attempted_urls(tmp_path)) <= Settings().max_url_chars
    assert stats_json(tmp_path)["dropped"] == {"max_url_chars": 1}


def test_a_page_of_200000_links_gives_its_cap_and_counts_the_rest(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    # Its links lead into /private/, which robots.txt disallows: each is claimed and skipped.
    # With the default cap (100,000) the crawl takes ~45 s here, so this test sets 5,000.
    config = tmp_path / "crawl.toml"
    config.write_text("[crawl]\nmax_links_per_page = 5000\n")
    paths = crawl(site, tmp_path, "/trap/many-links", "--config", str(config))
    assert paths == ["/trap/many-links"]
    skipped = [url for url in attempted_urls(tmp_path) if "/private/many/" in url]
    assert len(skipped) == 5000
    assert stats_json(tmp_path)["dropped"] == {"max_links_per_page": MANY_LINKS - 5000}
