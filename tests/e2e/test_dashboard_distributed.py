"""The distributed dashboard in a real browser (Debian's Chromium, Playwright) during a real
distributed crawl: a dispatcher and two ``crawlfleet worker`` processes crawl the demo site
(shop, quotes, the slow-robots host with its Crawl-delay, two lab URLs that always fail);
``crawlfleet dashboard --redis --postgres`` serves every crawl of that Redis.

While the crawl runs the page shows the progress advancing, the ETA with the slow host as its
bottleneck, and both workers with their pages/s; an action without the token is refused.
After it, the domain table matches the store, the attempts filter and the items' data
quality read PostgreSQL, ``/metrics`` serves the crawl, and requeue by error class moves the
dead letters back to the queue. Screenshots go to the test's tmp dir (and to
``CRAWLFLEET_SCREENSHOT_DISTRIBUTED`` when set, e.g. ``docs/img/dashboard-distributed.png``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.runtime.celery.crawls import open_crawl_frontier
from tests.e2e.conftest import CRAWLFLEET, Workers, start_dispatch
from tests.e2e.test_dashboard_browser import (
    CHROMIUM,
    SLOW_HOST,
    TOKEN,
    env,
    get_json,
    get_text,
    wait_for,
)
from tests.fixtures.redis_server import free_port

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

CRAWL = "dash-fleet"
BROWSER_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


async def store_view(redis_url: str) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Per domain (queued, dead), and the crawl's queued and dead counts, from the store."""
    async with AsyncExitStack() as stack:
        frontier = await open_crawl_frontier(redis_url, CRAWL, stack)
        views = await frontier.domains(100)
        counts = await frontier.counts()
    per_domain = {v.domain: (v.queued, v.stats.get("outcome.dead")) for v in views}
    return per_domain, counts.queued, counts.dead


def read_store(redis_url: str) -> tuple[dict[str, tuple[int, int]], int, int]:
    """``store_view`` from a thread of its own (Playwright's sync API runs a loop here)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, store_view(redis_url)).result()


@pytest.fixture
def slow_site() -> Iterator[ThreadedDemoSite]:
    with ThreadedDemoSite(crawl_delay_s=1.0) as demo:
        yield demo


def test_the_distributed_dashboard_follows_a_fleet_and_requeues_a_class_in_a_browser(
    slow_site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers,
    tmp_path: Path,
) -> None:  # fmt: skip
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/bootstrap.sh --all installs it")
    fleet_env = env()
    pair = [workers.start(redis_url, postgres_dsn, concurrency=2, env=fleet_env) for _ in "ab"]
    names = {f"{socket.gethostname()}:{w.process.pid}" for w in pair if w.process is not None}
    seeds = [
        slow_site.url("shop"),
        slow_site.url("quotes"),
        *(slow_site.url("slow-robots", f"/page/{n}") for n in range(1, 13)),
        slow_site.url("slow-robots"),
        slow_site.url("lab", "/status/500"),
        slow_site.url("lab", "/status/502"),
    ]
    target = ["--redis", redis_url, "--postgres", postgres_dsn]
    dispatcher = start_dispatch(
        *seeds, *target, "--crawl-id", CRAWL, "--fresh", "--allow-private-addresses",
        "--delay", "0.02", log_path=tmp_path / "dispatch.log", env=fleet_env,
    )  # fmt: skip
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    board = subprocess.Popen(
        [CRAWLFLEET, "dashboard", *target, "--port", str(port), "--token", TOKEN],
        env=fleet_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: CRAWL in get_json(f"{base}/api/crawls"), timeout_s=30)
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{base}/crawl/{CRAWL}")
            first = page.locator("#progress").inner_text()

            def reloaded(selector: str) -> str:
                page.reload()
                return page.locator(selector).inner_text()

            def worker_rates() -> dict[str, float]:
                rows = [r.split("\t") for r in page.locator("#workers tbody tr").all_inner_texts()]
                return {r[0]: float(r[7]) for r in rows if r[0] in names and r[7] != "-"}

            wait_for(lambda: reloaded("#progress") != first)  # the progress advances
            wait_for(lambda: SLOW_HOST in reloaded("#eta"))
            assert "ETA" in page.locator("#eta").inner_text()
            # Both workers, live, with their pages/s (from successive heartbeats).
            wait_for(lambda: reloaded("#workers") and len(worker_rates()) == 2)
            wait_for(lambda: reloaded("#workers") and any(worker_rates().values()))
            page.screenshot(path=str(tmp_path / "dashboard-fleet-running.png"), full_page=True)

            refused = page.request.post(
                f"{base}/crawl/{CRAWL}/dead/requeue", form={"error_class": "HTTP 500"}
            )
            assert refused.status == 403
            wrong = page.request.post(
                f"{base}/crawl/{CRAWL}/pause", form={"token": "not-the-token-at-all"}
            )
            assert wrong.status == 403

            # 5: the crawl ends with dead letters (the lab's failing URLs), decision 0050
            assert dispatcher.wait(timeout=90) == 5, (tmp_path / "dispatch.log").read_text()
            per_domain, _queued, dead = read_store(redis_url)
            assert dead == 2
            page.reload()
            rows = page.locator("#domains tbody tr").all_inner_texts()
            shown = {r.split("\t")[0]: r.split("\t") for r in rows}
            assert set(shown) == set(per_domain)
            for domain, (queued, dead_n) in per_domain.items():
                assert (int(shown[domain][1]), int(shown[domain][4])) == (queued, dead_n)
            assert "fill rate over the latest" in page.content()  # items from PostgreSQL

            page.goto(f"{base}/crawl/{CRAWL}/attempts?domain={SLOW_HOST}&status=404")
            found = [r.split("\t") for r in page.locator("#attempts tbody tr").all_inner_texts()]
            assert found
            assert all(r[1] == SLOW_HOST and r[3] == "404" for r in found)

            wait_for(
                lambda: (
                    f'crawlfleet_dead_letters{{crawl="{CRAWL}"}} 2.0' in get_text(f"{base}/metrics")
                )
            )
            assert f'crawlfleet_pages_fetched_total{{crawl="{CRAWL}"' in get_text(f"{base}/metrics")

            # The fleet goes before the requeue: a worker's task that began while the crawl ran
            # polls for work up to 1 s past its end (IDLE_WAIT_S) and could fetch the requeued
            # letter again (it did once in CI: (0, 2) below).
            workers.stop_all()
            page.goto(f"{base}/crawl/{CRAWL}")
            dead_rows = page.locator("#dead tbody tr")
            assert dead_rows.count() == 2  # HTTP 500 and HTTP 502
            row = dead_rows.filter(has_text="HTTP 500")
            row.locator("form[action$='dead/requeue'] input[name=token]").fill(TOKEN)
            row.locator("form[action$='dead/requeue'] button").click()
            page.wait_for_load_state()
            assert "requeued 1 dead letters (HTTP 500)" in page.locator("#flash").inner_text()
            page.screenshot(path=str(tmp_path / "dashboard-fleet.png"), full_page=True)
            browser.close()
        _per_domain, queued, dead = read_store(redis_url)
        assert (queued, dead) == (1, 1)
        copy_to = os.environ.get("CRAWLFLEET_SCREENSHOT_DISTRIBUTED")
        if copy_to:
            shutil.copy(tmp_path / "dashboard-fleet-running.png", copy_to)
    finally:
        for process in (dispatcher, board):
            if process.poll() is None:
                process.terminate()
            process.communicate(timeout=10)
