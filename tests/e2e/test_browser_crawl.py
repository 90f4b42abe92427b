"""Embedded crawls with the browser fetcher, in Debian's real Chromium, against the demo site.

The jsapp example (every page rendered), a Chromium killed mid-crawl, a page that never
loads (retried, then dead-lettered with a screenshot named in the attempt log), the
adaptive fetcher on the mixed host, and the start-up error of a machine without Chromium.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import crawlfleet
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.jsapp import CHALLENGE_QUOTES, JS_ITEMS, item_name, item_price
from crawlfleet.demosite.mixed import MIXED_APP, MIXED_STATIC
from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.browser.memory import tree_pids
from crawlfleet.frontier.learned import SAMPLES, rechecked
from crawlfleet.urls import fingerprint

pytestmark = pytest.mark.browser

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JSAPP_PARSERS = EXAMPLES / "jsapp" / "parsers.py"
MIXED_PARSERS = EXAMPLES / "mixed" / "parsers.py"
FAST: dict[str, Any] = {
    "allow_private_addresses": True,
    "delay_s": 0,
    "per_domain_concurrency": 4,
    "backoff_base_s": 0.05,
    "backoff_max_s": 0.2,
}


def items(state: Path) -> set[tuple[str, str, str]]:
    with sqlite3.connect(state / "items.sqlite") as db:
        rows = db.execute("SELECT item_type, item_key, data FROM items").fetchall()
    return {(str(t), str(k), str(d)) for t, k, d in rows}


def attempts(state: Path) -> list[tuple[str, str, str, str | None, str | None]]:
    """(url, outcome, fetcher, error, screenshot) of every attempt, oldest first."""
    with sqlite3.connect(state / "state.sqlite") as db:
        rows = db.execute(
            "SELECT url, outcome, fetcher, error, screenshot FROM attempts ORDER BY id"
        ).fetchall()
    return [tuple(row) for row in rows]


@pytest.mark.slow
async def test_the_jsapp_example_gets_every_js_item_and_passes_the_challenge(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    settings = crawlfleet.load_settings(
        seeds=[site.url("jsapp", "/"), site.url("jsapp", "/challenge/")],
        parsers=[str(JSAPP_PARSERS)],
        state_dir=state,
        browser_pages=3,
        **FAST,
    )
    result = await crawlfleet.Crawl(settings).run_async()
    assert result.complete
    found = items(state)
    js_items = {(k, d) for t, k, d in found if t == "js_item"}
    assert len(js_items) == JS_ITEMS
    (seventh,) = [data for key, data in js_items if key == "7"]
    assert json.loads(seventh) == {"key": "7", "name": item_name(7), "price": item_price(7)}
    assert len([t for t, _, _ in found if t == "guarded_quote"]) == CHALLENGE_QUOTES
    logged = attempts(state)
    assert {fetcher for _, _, fetcher, _, _ in logged} == {"browser"}
    assert all(outcome == "ok" for _, outcome, _, _, _ in logged)
    page_requests = [r for r in site.log if r.role == "jsapp" and r.path != "/robots.txt"]
    assert all("HeadlessChrome" in r.user_agent for r in page_requests)


@pytest.mark.slow
async def test_a_chromium_killed_mid_crawl_costs_retries_not_pages(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    settings = crawlfleet.load_settings(
        seeds=[site.url("jsapp", "/")],
        parsers=[str(JSAPP_PARSERS)],
        state_dir=state,
        browser_pages=2,
        **FAST,
    )
    crawl = crawlfleet.Crawl(settings)
    running = asyncio.ensure_future(crawl.run_async())
    killed: list[int] = []
    while not running.done() and not killed:
        await asyncio.sleep(0.05)
        fetched = [r for r in site.log if r.path.startswith("/items/")]
        if len(fetched) >= 10:
            killed = [pid for pid in chromium_roots() if pid not in before_crawl]
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
    result = await running
    assert killed, "the crawl ended before Chromium could be killed"
    assert result.complete
    assert len([t for t, _, _ in items(state) if t == "js_item"]) == JS_ITEMS
    retried = [a for a in attempts(state) if a[1] == "retry"]
    assert retried, "no page was in flight when Chromium died"
    assert all("crash" in (a[3] or "") or "closed" in (a[3] or "") for a in retried)
    assert not [a for a in attempts(state) if a[1] == "dead"]


before_crawl: set[int] = set()


def chromium_roots() -> list[int]:
    """The browser processes the browser pools of this test process started."""
    return tree_pids("--crawlfleet-pool=")


@pytest.fixture(autouse=True)
def _browsers_before() -> None:
    before_crawl.clear()
    before_crawl.update(chromium_roots())


async def test_a_page_that_never_loads_is_retried_then_dead_lettered_with_a_screenshot(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    settings = crawlfleet.load_settings(
        seeds=[site.url("jsapp", "/hang")],
        domains={"127.0.0.14": {"fetcher": "browser"}},
        state_dir=state,
        browser_timeout_s=0.5,
        browser_screenshots=True,
        max_retries=1,
        **FAST,
    )
    result = await crawlfleet.Crawl(settings).run_async()
    assert result.complete
    logged = attempts(state)
    assert [(outcome, fetcher) for _, outcome, fetcher, _, _ in logged] == [
        ("retry", "browser"),
        ("dead", "browser"),
    ]
    for _, _, _, error, screenshot in logged:
        assert "timeout rendering" in (error or "")
        assert screenshot is not None
        assert Path(screenshot).parent == state / "screenshots"
        assert (await asyncio.to_thread(Path(screenshot).read_bytes))[:4] == b"\x89PNG"
    assert len({shot for *_, shot in logged}) == 2


@pytest.mark.slow
async def test_the_adaptive_fetcher_learns_per_pattern_and_loses_no_item(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    browser_only = tmp_path / "browser_parsers.py"
    browser_only.write_text(
        MIXED_PARSERS.read_text().replace('fetcher="auto"', 'fetcher="browser"')
    )
    runs = {}
    for name, parsers in (("auto", MIXED_PARSERS), ("browser", browser_only)):
        state = tmp_path / name
        settings = crawlfleet.load_settings(
            seeds=[site.url("mixed", "/")],
            parsers=[str(parsers)],
            state_dir=state,
            browser_pages=4,
            **FAST,
        )
        result = await crawlfleet.Crawl(settings).run_async()
        assert result.complete
        runs[name] = state
    adaptive, reference = items(runs["auto"]), items(runs["browser"])
    assert adaptive == reference
    assert len(adaptive) == MIXED_STATIC + MIXED_APP
    fetched = attempts(runs["auto"])
    by_browser = [a for a in fetched if a[2] == "browser"]
    assert MIXED_APP <= len(by_browser) <= 1.2 * MIXED_APP
    static = [url for url, *_ in by_browser if "/static/" in url]
    rechecks = [url for url in static if rechecked(fingerprint(url))]
    assert len(static) <= SAMPLES + len(rechecks)
    frontier_state = await strategy_of(runs["auto"], "127.0.0.15")
    assert frontier_state["auto:static_product"] == "http"
    assert frontier_state["auto:app_product"] == "browser"


async def strategy_of(state: Path, domain: str) -> dict[str, str]:
    with sqlite3.connect(state / "state.sqlite") as db:
        (raw,) = db.execute("SELECT strategy FROM domains WHERE domain = ?", (domain,)).fetchone()
    return dict(json.loads(raw))


def test_a_crawl_naming_the_browser_on_a_machine_without_chromium_fails_in_one_line(
    tmp_path: Path,
) -> None:
    settings = crawlfleet.load_settings(
        seeds=["http://127.0.0.14:9/"],
        parsers=[str(JSAPP_PARSERS)],
        state_dir=tmp_path / "state",
        browser_executable=tmp_path / "no-chromium",
        allow_private_addresses=True,
    )
    with pytest.raises(ConfigError) as caught:
        crawlfleet.Crawl(settings).run()
    message = str(caught.value)
    assert "parser 'js_list'" in message
    assert f"no Chromium at {tmp_path / 'no-chromium'}" in message
    assert "\n" not in message
