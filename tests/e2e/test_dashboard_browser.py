"""The dashboard in a real browser (Debian's Chromium driven by Playwright) during a real crawl.

A crawl of the demo site (shop, quotes, the slow-robots host with its Crawl-delay, and two
lab URLs that always fail) runs as a ``crawlfleet crawl`` process; ``crawlfleet dashboard``
serves its state directory. The page shows the progress advancing, the ETA with the
slow host as its bottleneck and the crawl process as its one worker; after the crawl, its
domain table matches the store, ``/metrics`` serves it, an action without the token is
refused, and requeue by error class moves the dead letters back to the queue. Screenshots go to the test's tmp dir (set ``CRAWLFLEET_SCREENSHOT`` to
a path to also copy one there, e.g. ``docs/img/dashboard.png``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path

import orjson
import pytest

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.runtime.wiring import open_frontier
from crawlfleet.settings import Settings
from tests.fixtures.cli import CRAWLFLEET, SRC
from tests.fixtures.redis_server import free_port

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
TOKEN = "a-token-for-the-test"
DELAY = ["--delay", "0.02"]
SLOW_HOST = "127.0.0.7"


def env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")},
        "PYTHONPATH": SRC,
        "CRAWLFLEET_MAX_RETRIES": "1",
        "CRAWLFLEET_BACKOFF_BASE_S": "0.01",
        "CRAWLFLEET_BACKOFF_MAX_S": "0.05",
    }


def get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        data: dict[str, object] = orjson.loads(reply.read())
        return data


def wait_for(check: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {check}")


async def store_view(state: Path) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Per domain (queued, dead), and the crawl's queued and dead counts, from the store."""
    async with AsyncExitStack() as stack:
        frontier = await open_frontier(Settings(state_dir=state), stack)
        views = await frontier.domains(100)
        counts = await frontier.counts()
    per_domain = {v.domain: (v.queued, v.stats.get("outcome.dead")) for v in views}
    return per_domain, counts.queued, counts.dead


def read_store(state: Path) -> tuple[dict[str, tuple[int, int]], int, int]:
    """``store_view`` from a thread of its own (Playwright's sync API runs a loop here)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, store_view(state)).result()


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return str(reply.read().decode())


@pytest.fixture
def slow_site() -> Iterator[ThreadedDemoSite]:
    with ThreadedDemoSite(crawl_delay_s=1.0) as demo:
        yield demo


def test_the_dashboard_follows_a_crawl_and_requeues_a_class_in_a_browser(
    slow_site: ThreadedDemoSite, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/bootstrap.sh --all installs it")
    state = tmp_path / "state"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    seeds = [
        slow_site.url("shop"),
        slow_site.url("quotes"),
        # 13 URLs of the slow host queued at once (/page/4 and on answer 404)
        *(slow_site.url("slow-robots", f"/page/{n}") for n in range(1, 13)),
        slow_site.url("slow-robots"),
        slow_site.url("lab", "/status/500"),
        slow_site.url("lab", "/status/502"),
    ]
    crawl = subprocess.Popen(
        [CRAWLFLEET, "crawl", *seeds, "--state", str(state), "--allow-private-addresses",
         *DELAY, "--progress-every", "0.5"],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for(lambda: (state / "state.sqlite").exists())
    board = subprocess.Popen(
        [CRAWLFLEET, "dashboard", "--state", str(state), *DELAY, "--port", str(port),
         "--token", TOKEN],
        env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: "default" in get_json(f"{base}/api/crawls"))
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            # The test reloads the page itself. The page's own reload every 5 s is held by a
            # paused clock: a reload racing it fails ("Not attached to an active page").
            page.clock.install()
            page.clock.pause_at(int(time.time() * 1000) + 1000)
            page.goto(f"{base}/crawl/default")
            first = page.locator("#progress").inner_text()

            def reloaded(selector: str) -> str:
                page.reload()
                return page.locator(selector).inner_text()

            wait_for(lambda: reloaded("#progress") != first)  # the progress advances
            wait_for(lambda: SLOW_HOST in reloaded("#eta"))
            assert "ETA" in page.locator("#eta").inner_text()
            # One worker row, the crawl process, live, with its pages/s.
            [process] = [r.split("\t") for r in page.locator("#workers tbody tr").all_inner_texts()]
            assert (process[1], process[3]) == ("yes", "default")
            wait_for(lambda: reloaded("#workers").split("\t")[-1] not in ("-", "0.00"))
            page.screenshot(path=str(tmp_path / "dashboard-running.png"), full_page=True)

            # Without the token an action is refused, even while the crawl runs.
            refused = page.request.post(
                f"{base}/crawl/default/dead/requeue", form={"error_class": "HTTP 500"}
            )
            assert refused.status == 403

            _stdout, stderr = crawl.communicate(timeout=60)
            assert crawl.returncode == 5, stderr  # dead letters left (the failing lab URLs)
            assert f"(bottleneck: {SLOW_HOST})" in stderr  # the log line names it too

            per_domain, _queued, dead = read_store(state)
            assert dead == 2
            wait_for(
                lambda: (
                    'crawlfleet_dead_letters{crawl="default"} 2.0' in get_text(f"{base}/metrics")
                )
            )
            page.reload()
            rows = page.locator("#domains tbody tr").all_inner_texts()
            shown = {r.split("\t")[0]: r.split("\t") for r in rows}
            assert set(shown) == set(per_domain)
            for domain, (queued, dead_n) in per_domain.items():
                assert (int(shown[domain][1]), int(shown[domain][4])) == (queued, dead_n)

            dead_rows = page.locator("#dead tbody tr")
            assert dead_rows.count() == 2  # HTTP 500 and HTTP 502
            row = dead_rows.filter(has_text="HTTP 500")
            row.locator("form[action$='dead/requeue'] input[name=token]").fill(TOKEN)
            row.locator("form[action$='dead/requeue'] button").click()
            page.wait_for_load_state()
            assert "requeued 1 dead letters (HTTP 500)" in page.locator("#flash").inner_text()
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            browser.close()
        _per_domain, queued, dead = read_store(state)
        assert (queued, dead) == (1, 1)
        copy_to = os.environ.get("CRAWLFLEET_SCREENSHOT")
        if copy_to:
            shutil.copy(tmp_path / "dashboard-running.png", copy_to)
    finally:
        for process in (crawl, board):
            if process.poll() is None:
                process.terminate()
            process.communicate(timeout=10)
